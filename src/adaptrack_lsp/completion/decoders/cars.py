"""Exact rejection samplers over the shared prefix tree (cars.txt §3, Algorithm 1).

All four draw a sequence from R^W(w) = P(w) / p_ε token by token, with
R^W(a | u) = P(a | u) · p_ua / p_u, and restart from the root when they reach an invalid
token or a dead end.  The set W of known-invalid prefixes lives in the tree: an invalid
candidate has Q = 0 and Q of every node is p_u (candidates not known to be invalid
count as 1).  Because every restart rejects a whole sequence and a returned sequence
was drawn with probability ∝ P(w), samples follow P(s | c) exactly.  What differs is
what a rejection teaches W (the update strategy):

- `rs` (rejection sampling): nothing; the proposal is always P.
- `ars` (adaptive rejection sampling): the shortest invalid prefix of the rejected
  sequence.
- `rsft` (rejection sampling with constrained first token): only invalid first tokens
  (the first step is masked like GCD; every later step samples from P).
- `cars` (constrained adaptive rejection sampling): every invalid one-token extension
  of every prefix it visits (each visited node's candidates are all checked).

Q is also propagated for `rs` and `rsft` (without steering their proposal), so that
Q[root] = 0 proves "no valid completion" and sampling stops instead of looping.

Options: `temperature` (≤ 0: greedy; `ars` and `cars` then return the first valid
sequence of the argmax walk under the learned Q, `rs` and `rsft` fail when their single
deterministic path is invalid), `share_estimates` (default True: the k samples of one
request share the tree and W), `max_attempts` (restarts allowed per sample before it
counts as a failure; default 100000).
"""

from __future__ import annotations

import bisect

import numpy as np

from adaptrack_lsp.completion.decoders.base import Decoder, DecodeRequest, DecodeResult
from adaptrack_lsp.completion.decoders.sampling import run_samples
from adaptrack_lsp.completion.tree import Node, PrefixTree

STRATEGIES = ("rs", "ars", "rsft", "cars")
DEFAULT_MAX_ATTEMPTS = 100_000
#: uniforms drawn from the generator at a time (one numpy call instead of one per token)
UNIFORM_BATCH = 4096


class _Proposal:
    """Draws candidate indices from a node's proposal weights, caching their cumulative sums.

    The weights of a node only change when its Q does (W only grows, so Q only
    decreases), so Q is the cache key (with the identity of the node's probability
    array, which the tree may compact); `rs` (and `rsft` below the root) never reweight.
    """

    def __init__(self, tree: PrefixTree, strategy: str):
        self.tree = tree
        self.strategy = strategy
        self._cache: dict[Node, tuple[float, np.ndarray, list[float], list[float]]] = {}
        self._uniforms: list[float] = []

    def weights(self, node: Node) -> np.ndarray:
        if self.strategy == "rs":
            return node.probs
        if self.strategy == "rsft":
            return self.tree.weights(node, use_q=False) if node.parent is None else node.probs
        return self.tree.weights(node)  # ars, cars: P(u|x) · Q[x+u]

    def _uniform(self, rng: np.random.Generator) -> float:
        if not self._uniforms:
            self._uniforms = rng.random(UNIFORM_BATCH).tolist()
            self._uniforms.reverse()
        return self._uniforms.pop()

    def draw(self, node: Node, rng: np.random.Generator) -> int | None:
        if self.tree.greedy:
            return self.tree.draw(self.weights(node), rng)
        version = node.q if self.strategy in ("ars", "cars") else 0.0
        cached = self._cache.get(node)
        if cached is None or cached[0] != version or cached[1] is not node.probs:
            weights = self.weights(node)
            cached = (version, node.probs, np.cumsum(weights).tolist(), weights.tolist())
            self._cache[node] = cached
        _, _, cumulative, weights = cached
        if not cumulative or cumulative[-1] <= 0.0:
            return None
        index = bisect.bisect_right(cumulative, self._uniform(rng) * cumulative[-1])
        if index >= len(cumulative):
            index = len(cumulative) - 1
        while weights[index] <= 0.0:  # rounding at the top end: step back to a real bucket
            index -= 1
        return index


def rejection_sample(
    tree: PrefixTree,
    rng: np.random.Generator,
    strategy: str,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    proposal: _Proposal | None = None,
) -> Node | None:
    """One exact sample; None when Q[root] = 0 (no valid completion) or the attempts ran out.

    Pass the same `proposal` for every sample drawn on one tree (it caches per node).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown rejection strategy {strategy!r}; choose one of: {', '.join(STRATEGIES)}")
    if proposal is None:
        proposal = _Proposal(tree, strategy)
    counters = tree.counters
    attempts = 0
    while tree.root.q > 0.0:
        if attempts >= max_attempts:
            return None
        if attempts:
            counters.backtracks += 1
            tree.poll()
        attempts += 1
        node = tree.root
        while True:
            if node.leaf:
                return node
            # learn what the strategy adds to W here; Q only changes when something is learnt
            if strategy == "cars" or (strategy == "rsft" and node.parent is None):
                if not node.checked:
                    tree.check_all(node)
                    tree.propagate(node)
            elif not node.evaluated:
                tree.evaluate(node)
                tree.propagate(node)
            index = proposal.draw(node, rng)
            if index is None:  # dead end: no candidate with weight left (Q[node] = 0 now)
                break
            child = tree.child(node, index)
            if child is None:  # invalid token: the tree recorded it at `node`
                tree.propagate(node)
                break
            node = child
        if tree.greedy and strategy in ("rs", "rsft"):
            return None  # the argmax walk is deterministic: retrying cannot help
    return None


class _RejectionDecoder(Decoder):
    strategy = "cars"

    def decode(self, lm, constraint, request: DecodeRequest) -> DecodeResult:
        share = bool(self.option(request, "share_estimates", True))
        max_attempts = int(self.option(request, "max_attempts", DEFAULT_MAX_ATTEMPTS))
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        strategy = self.strategy
        proposals: dict[PrefixTree, _Proposal] = {}

        def sample_one(tree: PrefixTree, rng: np.random.Generator) -> Node | None:
            proposal = proposals.get(tree)
            if proposal is None:
                proposals.clear()  # a fresh tree (share_estimates=False) drops the old cache
                proposal = proposals[tree] = _Proposal(tree, strategy)
            return rejection_sample(tree, rng, strategy, max_attempts, proposal)

        return run_samples(lm, constraint, request, sample_one, share_tree=share, exact=True)


class CARSDecoder(_RejectionDecoder):
    """Constrained adaptive rejection sampling: learns every invalid extension it sees."""

    name = "cars"
    strategy = "cars"


class RejectionSamplingDecoder(_RejectionDecoder):
    """Plain rejection sampling: sample from P, restart on the first invalid token."""

    name = "rs"
    strategy = "rs"


class AdaptiveRejectionSamplingDecoder(_RejectionDecoder):
    """Adaptive rejection sampling: learns the shortest invalid prefix of each rejection."""

    name = "ars"
    strategy = "ars"


class RejectionSamplingFirstTokenDecoder(_RejectionDecoder):
    """Rejection sampling whose first token is drawn among valid first tokens only."""

    name = "rsft"
    strategy = "rsft"
