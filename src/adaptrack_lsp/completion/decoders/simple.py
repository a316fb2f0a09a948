"""Unconstrained sampling and greedy constrained decoding (GCD).

GCD masks invalid tokens and renormalises at each step; it cannot backtrack, so a dead
end (a valid prefix with no valid continuation the model gives mass to) fails the
sample, and its samples follow a distorted P(s|c) (adaptrack.txt §3.2).  On a top-K node
(a remote engine) the mask is still exact: tail tokens are drawn one at a time and an
invalid one is drawn again (`PrefixTree.choose`).
"""

from __future__ import annotations

from adaptrack_lsp.completion.decoders.base import Decoder, DecodeRequest, DecodeResult, SharedOptions
from adaptrack_lsp.completion.decoders.sampling import run_samples


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
                index = tree.choose(node, rng, "model", check=False)
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
                index = tree.choose(node, rng, "valid")  # a top-K node's tail: drawn until valid
                if index is None:
                    return None  # dead end: GCD cannot backtrack
                node = tree.child(node, index)
            return node

        return run_samples(lm, constraint, request, sample_one, share_tree=self.options_for(request).share_estimates)
