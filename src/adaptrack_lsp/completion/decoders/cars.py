"""Exact rejection samplers over the shared prefix tree (cars.txt §3, Algorithm 1), and
the restart loop they share with the `exact` decoder.

Every attempt walks from the root drawing each next token from a proposal that is
fixed for the whole attempt, and restarts from the root when the walk reaches an
invalid token or a dead end.  The set W of known-invalid prefixes lives in the tree: an
invalid candidate has Q = 0, and Q of every node is p_u of cars.txt (candidates not
known to be invalid, and the tail of pruned tokens, count as 1).  Within an attempt W
is fixed, so a complete valid sequence w is returned with probability P(w) / p_ε: given
any history, each attempt yields w in proportion to P(w), hence samples follow P(s | c)
exactly, per sample, on a fresh tree or a shared one.  What differs is what an attempt
teaches W afterwards (the update strategy):

- `rs` (rejection sampling): nothing; the proposal is always P.
- `ars` (adaptive rejection sampling): the shortest invalid prefix of the rejected
  sequence (the invalid token the walk drew).
- `rsft` (rejection sampling with constrained first token): only invalid first tokens
  (the first step is masked like GCD; every later step samples from P).
- `cars` (constrained adaptive rejection sampling): the drawn invalid token, and every
  invalid one-token extension of every prefix the attempt visited.  Each new node's
  tokens are all checked when it is first evaluated, but the verdicts are applied only
  after the attempt (`PrefixTree.apply_verdicts`): checking before drawing would turn
  the walk into greedy masking (GCD) with restarts, which is distorted.

No valid token is ever dropped: the tokens pruned at a node's first evaluation form a
tail bucket with Q = 1, and drawing it asks the model for that node again.  On a top-K
node (a remote engine) drawing the tail asks the engine for one token with the known
ones excluded (an exact draw from the tail); an invalid one restarts the attempt like
any invalid draw, so the samplers stay exact against the engine's distribution.

Q is also propagated for `rs` and `rsft` (without steering their proposal), so that
Q[root] = 0 proves "no valid completion" and sampling stops instead of looping.

Options: `temperature` (≤ 0: greedy; `ars` and `cars` then return the first valid
sequence of the argmax walk under the learned Q, `rs` and `rsft` fail when their single
deterministic path is invalid), `share_estimates` (default True: the k samples of one
request share the tree and W), `max_attempts` (restarts allowed per sample before the
request gives up and says so; default 100000).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from adaptrack_lsp.completion.decoders.base import Decoder, DecodeRequest, DecodeResult, SharedOptions, at_least, option
from adaptrack_lsp.completion.decoders.sampling import GiveUp, run_samples
from adaptrack_lsp.completion.tree import TAIL, Node, PrefixTree

DEFAULT_MAX_ATTEMPTS = 100_000
#: uniforms drawn from the generator at a time (one numpy call instead of one per
#: token): the first batch is small (a fresh tree for one sample needs few), later ones grow
UNIFORM_BATCH = (16, 4096)


@dataclass(frozen=True)
class RejectionOptions(SharedOptions):
    #: restarts allowed for one sample before the request gives up
    max_attempts: int = option(DEFAULT_MAX_ATTEMPTS, "int", at_least(1))


class Strategy:
    """What one rejection sampler does at each node of an attempt and after it."""

    name = ""
    #: the proposal is P(u|x)·Q[x+u] (False: P(u|x); Q then only proves dead ends)
    steer = True
    #: a greedy (argmax) walk is deterministic: once it fails, retrying cannot help
    greedy_retries = True

    def prepare(self, tree: PrefixTree, node: Node, rng: np.random.Generator) -> bool:
        """Make `node` ready to draw from; False rejects the attempt here."""
        if not node.evaluated:
            tree.evaluate(node)
            tree.propagate(node)
        return True

    def weighting(self, node: Node) -> str:
        """The proposal at `node` as a `PrefixTree.weights` weighting: "q" (steered),
        "model" (P), "valid" (P masked by validity)."""
        return "q" if self.steer else "model"

    def weights(self, tree: PrefixTree, node: Node) -> tuple[np.ndarray, float]:
        """The proposal at `node`: weights of its candidates and of its tail."""
        weighting = self.weighting(node)
        return tree.weights(node, weighting), tree.tail_weight(node, weighting)

    def after_attempt(self, tree: PrefixTree, visited: list[Node]) -> None:
        """What the attempt teaches W, once it is over."""


class RejectionSampling(Strategy):
    name = "rs"
    steer = False
    greedy_retries = False


class AdaptiveRejectionSampling(Strategy):
    name = "ars"


class FirstTokenRejectionSampling(Strategy):
    name = "rsft"
    steer = False
    greedy_retries = False

    def prepare(self, tree, node, rng):
        if node.parent is None:
            if not node.checked:
                tree.check_all(node)
            return True
        return super().prepare(tree, node, rng)

    def weighting(self, node):
        # valid first tokens only (a top-K root's tail, validity unknown, is drawn and
        # an invalid first token restarts the attempt: still exact)
        return "valid" if node.parent is None else super().weighting(node)


class ConstrainedAdaptiveRejectionSampling(Strategy):
    name = "cars"

    def prepare(self, tree, node, rng):
        if not node.evaluated:
            tree.evaluate(node, "defer")  # checked now, learned after the attempt
        return True

    def after_attempt(self, tree, visited):
        for node in reversed(visited):
            tree.apply_verdicts(node)


STRATEGIES: dict[str, type[Strategy]] = {
    s.name: s for s in (RejectionSampling, AdaptiveRejectionSampling, FirstTokenRejectionSampling, ConstrainedAdaptiveRejectionSampling)
}


class Proposal:
    """Draws candidate indices from a node's proposal weights, caching their cumulative sums.

    The weights of a node only change when its Q does (W only grows, so Q only
    decreases) or when its arrays are replaced (tail expansion, compaction), so the cache
    key is Q with the identity of the probability array.  The cumulative sums stay a
    numpy array searched with `searchsorted`: turning a 152k-entry vocabulary's sums into
    Python lists cost ~12 ms per rebuild, more than half an LM call of a small model.
    """

    def __init__(self, tree: PrefixTree, strategy: Strategy):
        self.tree = tree
        self.strategy = strategy
        self._cache: dict[Node, tuple[float, np.ndarray, np.ndarray, np.ndarray, float]] = {}
        self._uniforms: list[float] = []
        self._batch = UNIFORM_BATCH[0]

    def _uniform(self, rng: np.random.Generator) -> float:
        if not self._uniforms:
            self._uniforms = rng.random(self._batch).tolist()
            self._uniforms.reverse()
            self._batch = min(self._batch * 4, UNIFORM_BATCH[1])
        return self._uniforms.pop()

    def draw(self, node: Node, rng: np.random.Generator) -> int | None:
        """A candidate index, `TAIL`, or None when every weight is 0."""
        if self.tree.greedy:  # the argmax over the whole vocabulary (a top-K tail included)
            return self.tree.choose(node, rng, self.strategy.weighting(node), check=False)
        cached = self._cache.get(node)
        if cached is None or cached[0] != node.q or cached[1] is not node.probs:
            started = time.perf_counter()
            weights, tail = self.strategy.weights(self.tree, node)
            cached = (node.q, node.probs, np.cumsum(weights), weights, tail)
            self._cache[node] = cached
            self.tree.counters.distribution_seconds += time.perf_counter() - started
        _, _, cumulative, weights, tail = cached
        total = float(cumulative[-1]) if cumulative.size else 0.0
        if total + tail <= 0.0:
            return None
        target = self._uniform(rng) * (total + tail)
        if target >= total:
            return TAIL
        index = min(int(np.searchsorted(cumulative, target, side="right")), cumulative.size - 1)
        while weights[index] <= 0.0:  # rounding at the top end: step back to a real bucket
            index -= 1
        return index


def rejection_sample(
    tree: PrefixTree,
    rng: np.random.Generator,
    strategy: Strategy,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    proposal: Proposal | None = None,
) -> Node | None:
    """One exact sample (a leaf); None when Q[root] = 0 (no valid completion) or a
    greedy walk failed; raises `GiveUp` after `max_attempts` attempts.

    Pass the same `proposal` for every sample drawn on one tree (it caches per node).
    """
    if proposal is None:
        proposal = Proposal(tree, strategy)
    counters = tree.counters
    attempts = 0
    while tree.root.q > 0.0:
        if attempts >= max_attempts:
            raise GiveUp(f"{strategy.name}: no valid sample after {max_attempts} attempts (option max_attempts)")
        if attempts:
            counters.backtracks += 1
            tree.poll()
        attempts += 1
        node = tree.root
        visited: list[Node] = []
        found = None
        while True:
            if node.leaf:
                found = node
                break
            if not strategy.prepare(tree, node, rng):
                break
            visited.append(node)
            index = proposal.draw(node, rng)
            if index == TAIL:
                if node.tail_invalid:  # a token known to be invalid (deferred verdicts)
                    break
                index = tree.draw_from_tail(node, rng, use_q=strategy.steer)
            if index is None:  # dead end: no candidate with weight left (Q[node] = 0 now)
                break
            child = tree.child(node, index)
            if child is None:  # invalid token: recorded at `node`
                tree.propagate(node)
                break
            node = child
        strategy.after_attempt(tree, visited)
        if found is not None:
            return found
        if tree.greedy and not strategy.greedy_retries:
            return None  # the argmax walk is deterministic: retrying cannot help
    return None


class RejectionDecoder(Decoder):
    """A restart-from-the-root sampler; subclasses name their `Strategy`."""

    Options = RejectionOptions
    exactness = "exact"
    strategy: type[Strategy] = ConstrainedAdaptiveRejectionSampling

    def decode(self, lm, constraint, request: DecodeRequest) -> DecodeResult:
        options = self.options_for(request)
        strategy = self.strategy()
        proposals: dict[PrefixTree, Proposal] = {}

        def sample_one(tree: PrefixTree, rng: np.random.Generator) -> Node | None:
            proposal = proposals.get(tree)
            if proposal is None:
                proposals.clear()  # a fresh tree (share_estimates=False) drops the old cache
                proposal = proposals[tree] = Proposal(tree, strategy)
            return rejection_sample(tree, rng, strategy, options.max_attempts, proposal)

        return run_samples(lm, constraint, request, sample_one, share_tree=options.share_estimates)


class CARSDecoder(RejectionDecoder):
    """Constrained adaptive rejection sampling: learns every invalid extension it sees."""

    name = "cars"
    strategy = ConstrainedAdaptiveRejectionSampling


class RejectionSamplingDecoder(RejectionDecoder):
    """Plain rejection sampling: sample from P, restart on the first invalid token."""

    name = "rs"
    strategy = RejectionSampling


class AdaptiveRejectionSamplingDecoder(RejectionDecoder):
    """Adaptive rejection sampling: learns the shortest invalid prefix of each rejection."""

    name = "ars"
    strategy = AdaptiveRejectionSampling


class RejectionSamplingFirstTokenDecoder(RejectionDecoder):
    """Rejection sampling whose first token is drawn among valid first tokens only."""

    name = "rsft"
    strategy = FirstTokenRejectionSampling
