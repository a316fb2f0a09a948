"""AdapTrack (adaptrack.txt §4, Algorithm 2): exact sampling from P(s | c) by adaptive
backtracking over the shared prefix tree.

Per sample, N[x] is the current next token at prefix x, distributed as
P_Q(u|x) ∝ P(u|x)·Q[x+u].  Each round follows N from the root to a leaf s; a complete
leaf is returned; otherwise s is evaluated (LM + validity), N[s] is drawn, Q is updated
along the path, and at each ancestor the old N[x] is kept with probability
P_Q'(n|x) / P_Q(n|x), else redrawn from P_Q'(.|x) without n — the backtrack.

Options: `temperature` (on each conditional; ≤ 0 = greedy: N[x] = argmax P(u|x)·Q[x+u],
re-taken after every update), `max_backtrack_distance` (rejection only within d levels
of the leaf, paper §7.2; dead ends still backtrack; with d = 0 and
`share_estimates=False` this is exactly GCD), `top_p_validity` (paper RQ3),
`share_estimates` (default on: the k samples of one request share Q, log-probabilities
and validity; each sample draws its own N, so later samples start from what earlier
ones learned — still exact, since any Q meeting eq. 2 keeps the sampler exact).
"""

from __future__ import annotations

import numpy as np

from adaptrack_lsp.completion.decoders.base import Decoder, DecodeRequest, DecodeResult
from adaptrack_lsp.completion.decoders.sampling import run_samples
from adaptrack_lsp.completion.tree import Node, PrefixTree


class AdapTrackDecoder(Decoder):
    name = "adaptrack"

    def decode(self, lm, constraint, request: DecodeRequest) -> DecodeResult:
        max_distance = self.option(request, "max_backtrack_distance", None)
        max_distance = None if max_distance is None or max_distance < 0 else int(max_distance)
        top_p = float(self.option(request, "top_p_validity", 1.0))
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p_validity must be in (0, 1], got {top_p}")
        share = bool(self.option(request, "share_estimates", True))

        def sample_one(tree: PrefixTree, rng: np.random.Generator) -> Node | None:
            return backtrack_sample(tree, rng, max_distance, top_p)

        return run_samples(lm, constraint, request, sample_one, share_tree=share, exact=True)


def _choose(tree: PrefixTree, node: Node, rng: np.random.Generator, exclude: int | None = None) -> int | None:
    weights = tree.weights(node)
    if exclude is not None:
        weights = weights.copy()
        weights[exclude] = 0.0
    return tree.draw(weights, rng)


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
            node = child
        if node.leaf:
            return node
        # evaluate s, draw N[s], update Q along the path
        tree.check_top_p(node, top_p_validity)
        changes = tree.propagate(node)
        if node.q > 0.0:
            index = _choose(tree, node, rng)
            if index is not None:
                next_index[node] = index
        # rejection step at each ancestor, nearest first
        for change in changes:
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
