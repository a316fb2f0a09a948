"""Unconstrained sampling and greedy constrained decoding (GCD).

GCD masks invalid tokens and renormalises at each step; it cannot backtrack, so a dead
end (a valid prefix with no valid continuation the model gives mass to) fails the
sample, and its samples follow a distorted P(s|c) (adaptrack.txt §3.2).
"""

from __future__ import annotations

from adaptrack_lsp.completion.decoders.base import Decoder, DecodeRequest, DecodeResult, SharedOptions
from adaptrack_lsp.completion.decoders.sampling import run_samples
from adaptrack_lsp.completion.tree import TAIL


class UnconstrainedDecoder(Decoder):
    """Sample (or argmax) from the model; validity is recorded, never enforced."""

    name = "unconstrained"
    Options = SharedOptions
    exactness = "model"

    def decode(self, lm, constraint, request: DecodeRequest) -> DecodeResult:
        def sample_one(tree, rng):
            node = tree.root
            while not node.leaf:
                tree.evaluate(node)
                index = tree.draw(node.probs, rng, tail=node.tail_mass)
                if index == TAIL:
                    index = tree.draw_from_tail(node, rng, use_q=False)
                if index is None:
                    return None
                node = tree.child(node, index, require_valid=False)
            return node

        return run_samples(lm, constraint, request, sample_one, share_tree=self.options_for(request).share_estimates)


class ConstrainedDecoder(Decoder):
    """Greedy constrained decoding: mask invalid tokens, renormalise, sample/argmax."""

    name = "constrained"
    Options = SharedOptions
    exactness = "distorted"

    def decode(self, lm, constraint, request: DecodeRequest) -> DecodeResult:
        def sample_one(tree, rng):
            node = tree.root
            while not node.leaf:
                tree.check_all(node)
                index = tree.draw(tree.weights(node, use_q=False), rng)
                if index is None:
                    return None  # dead end: GCD cannot backtrack
                node = tree.child(node, index)
            return node

        return run_samples(lm, constraint, request, sample_one, share_tree=self.options_for(request).share_estimates)
