"""ASAp (adaptive sampling with approximate expected futures; adaptrack.txt §6.4).

Each step draws the next token from P_Q(u|x) ∝ P(u|x)·Q[x+u] with the validity of every
candidate checked (so invalid tokens are masked, as in constrained decoding), and the Q
learned along the way is pushed up the shared tree.  Unlike AdapTrack, a sample never
revisits a choice it has made: what it learns only steers *later* samples of the same
request, so early samples are distorted like GCD and the distribution approaches P(s|c)
as Q converges.  A sample that walks into a dead end (a valid prefix with no valid
continuation of positive probability) fails; the dead end is then known to every later
sample.

Options: `temperature` (≤ 0: greedy, the argmax of P(u|x)·Q[x+u] at each step) and
`share_estimates` (default True: the k samples of one request share one tree; False
makes every sample plain GCD).
"""

from __future__ import annotations

import numpy as np

from adaptrack_lsp.completion.decoders.base import Decoder, DecodeRequest, DecodeResult, SharedOptions
from adaptrack_lsp.completion.decoders.sampling import run_samples
from adaptrack_lsp.completion.tree import Node, PrefixTree


def asap_sample(tree: PrefixTree, rng: np.random.Generator) -> Node | None:
    """One forward pass from the root; None on a dead end (Q learned there is kept)."""
    node = tree.root
    while not node.leaf:
        tree.check_all(node)
        index = tree.choose(node, rng, "q")
        tree.propagate(node)  # Q learned here (invalid tail tokens included) steers later samples
        if index is None:
            return None
        child = tree.child(node, index)
        if child is None:  # cannot happen: check_all gave invalid candidates weight 0
            raise RuntimeError("ASAp drew an invalid token")
        node = child
    return node


class ASApDecoder(Decoder):
    name = "asap"
    Options = SharedOptions
    exactness = "converges"

    def decode(self, lm, constraint, request: DecodeRequest) -> DecodeResult:
        options = self.options_for(request)
        return run_samples(lm, constraint, request, asap_sample, share_tree=options.share_estimates)
