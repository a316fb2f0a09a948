"""AdapTrack (adaptrack.txt §4, Algorithm 2): adaptive backtracking over the shared
prefix tree, as published.

Per sample, N[x] is the current next token at prefix x, distributed as
P_Q(u|x) ∝ P(u|x)·Q[x+u].  Each round follows N from the root to a leaf s; a complete
leaf is returned; otherwise s is evaluated (LM + validity), N[s] is drawn, Q is updated
along the path, and at each ancestor the old N[x] is kept with probability
P_Q'(n|x) / P_Q(n|x), else redrawn from P_Q'(.|x) without n — the backtrack.

**Not exact per sample.**  The paper's proof (§5) treats the update Q -> Q' as if it
did not depend on the prefix that was collected, but Q' is learned along the path N
itself leads to, and the algorithm returns the first complete sequence it reaches.
Smallest case: every conditional is a 0.4 / b 0.4 / $ 0.2, valid sequences `a $`,
`a a $`, `b $`.  P(s|c) is 5/12, 2/12, 5/12; enumerating every random choice of
Algorithm 2 on a fresh tree gives 17/36, 6/36, 13/36, and this implementation matches
the enumeration (tests/unit/test_exactness.py).  With `share_estimates` the k samples of
a request reuse Q, so later samples are closer to P(s|c); the bias vanishes only as the
shared estimates become exact.  The `exact` decoder keeps AdapTrack's estimates and is
exact per sample.

Options: `temperature` (on each conditional; ≤ 0 = greedy: N[x] = argmax P(u|x)·Q[x+u],
re-taken after every update — deterministic, but neither the argmax of P(s|c) (see
`map`) nor token-by-token greedy decoding), `max_backtrack_distance` (rejection only
within d levels of the leaf, paper §7.2; dead ends still backtrack; with d = 0 and
`share_estimates=False` this is exactly GCD), `top_p_validity` (paper RQ3; < 1 treats
the unchecked tail as invalid: approximate), `share_estimates` (default on: the k
samples of one request share Q, log-probabilities and validity; each sample draws its
own N).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adaptrack_lsp.completion.decoders.base import (
    Decoder,
    DecodeRequest,
    DecodeResult,
    SharedOptions,
    at_least,
    in_unit_interval,
    option,
)
from adaptrack_lsp.completion.decoders.sampling import run_samples
from adaptrack_lsp.completion.tree import Node, PrefixTree


@dataclass(frozen=True)
class AdapTrackOptions(SharedOptions):
    #: rejection only within this many levels of the leaf (None: unbounded)
    max_backtrack_distance: int | None = option(None, "int", at_least(0), nullable=True)
    #: check validity of the most probable tokens covering this share (paper RQ3)
    top_p_validity: float = option(1.0, "float", in_unit_interval)


class AdapTrackDecoder(Decoder):
    name = "adaptrack"
    Options = AdapTrackOptions
    exactness = "converges"

    def decode(self, lm, constraint, request: DecodeRequest) -> DecodeResult:
        options = self.options_for(request)

        def sample_one(tree: PrefixTree, rng: np.random.Generator) -> Node | None:
            return backtrack_sample(tree, rng, options.max_backtrack_distance, options.top_p_validity)

        return run_samples(lm, constraint, request, sample_one, share_tree=options.share_estimates)


def _choose(tree: PrefixTree, node: Node, rng: np.random.Generator, exclude: int | None = None) -> int | None:
    """N[x] ~ P_Q(.|x) (argmax when greedy), over a top-K node's tail too (tail tokens
    are checked when drawn, an invalid one drawn again)."""
    return tree.choose(node, rng, "q", exclude=exclude)


def backtrack_sample(
    tree: PrefixTree,
    rng: np.random.Generator,
    max_distance: int | None = None,
    top_p_validity: float = 1.0,
) -> Node | None:
    """One AdapTrack sample (Algorithm 2); None iff no valid completion exists."""
    next_index: dict[Node, int] = {}  # N: node -> candidate index
    counters = tree.counters
    while True:
        if tree.root.q <= 0.0:
            return None
        # COLLECTSEQUENCE(N)
        node = tree.root
        while node in next_index:
            child = tree.child(node, next_index[node])
            if child is None:  # cannot happen: N only holds valid candidates
                raise RuntimeError("AdapTrack followed an invalid token")
            if child.q <= 0.0:  # its subtree turned out dead since N was drawn: draw N here again
                del next_index[node]
                break
            node = child
        if node.leaf:
            return node
        # evaluate s, draw N[s], update Q along the path; every change of Q made on the
        # way (a draw over a top-K tail may find invalid tokens) gets its rejection step
        changes = tree.change_log = []
        tree.check_top_p(node, top_p_validity)
        if node.q > 0.0:
            index = _choose(tree, node, rng)
            if index is not None:
                next_index[node] = index
        tree.propagate(node)
        # rejection step at each ancestor, nearest first
        position = 0
        while position < len(changes):
            change = changes[position]
            position += 1
            ancestor = change.node
            if next_index.get(ancestor) != change.index:
                continue
            if ancestor.q <= 0.0:
                del next_index[ancestor]  # dead: a higher ancestor must move away from it
                continue
            ratio = change.proposal_ratio()
            dead_end = change.child_new <= 0.0
            if not dead_end and max_distance is not None and node.depth - ancestor.depth > max_distance:
                continue  # outside the backtracking window: keep N[x]
            if tree.greedy:
                best = _choose(tree, ancestor, rng)
                if best is not None and best != change.index:
                    counters.backtracks += 1
                    next_index[ancestor] = best
                continue
            if ratio >= 1.0 or (ratio > 0.0 and rng.random() < ratio):
                continue
            counters.backtracks += 1
            replacement = _choose(tree, ancestor, rng, exclude=change.index)
            if replacement is None:
                del next_index[ancestor]
            else:
                next_index[ancestor] = replacement
