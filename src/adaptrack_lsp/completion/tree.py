"""The prefix tree every decoder runs on.

Owns, per node (a token path after the prompt):

- the model's next-token distribution, asked of the LM once (`evaluate`) and stored
  compactly: the candidates within `prune_logprob` nats of the best token, plus every
  token the constraint allows when validity is checked at evaluation; the rest is one
  *tail* bucket holding its total probability.  No valid token is ever lost: a tail
  whose validity is unknown keeps Q = 1, and drawing from it asks the LM again for the
  node and turns the tail into ordinary candidates (`expand_tail`, counted in
  `lm_calls` and `tail_evaluations`);
- the validity of each candidate, from a `TokenConstraint`, checked three ways:
  `check_all` (every token, applied at once), `check_top_p` (the paper's RQ3 rule:
  most probable first, stop after the first token at which the known-valid share of
  the valid + unchecked mass reaches p; the rest count as invalid) and deferred
  verdicts (`evaluate(node, "defer")`: every token checked but Q left untouched until
  `apply_verdicts`, which is what CARS needs to draw before it learns);
- Q[x], the running estimate of P(constraint satisfied | x) (AdapTrack eq. 2): 0 for
  invalid, 1 for never-evaluated (or ended) valid nodes, otherwise
  sum_u P(u|x) Q[x+u] over the candidates plus the tail's mass times its Q;
- `propagate(node)`: pushes a changed Q[node] up to the root and returns the changes
  bottom-up, so AdapTrack can run its rejection step at each ancestor;
- counters, cancellation and the wall-clock budget (`poll`, called before LM work).

**Partial nodes** (a `PartialLanguageModel`: a remote engine).  The LM gives the top-K
tokens and the tail's total mass; the tail cannot be enumerated.  Such a node is
`partial`: its candidates are the top-K (special and padding ids among them stay as
candidates of probability 0, known invalid, so that draws exclude them), its tail keeps
Q = 1 (unknown validity: an upper bound, so AdapTrack's Q stays an envelope) and
`tail_best`, an upper bound on any single tail token's probability.  Drawing from the
tail (`draw_from_tail`) asks the LM for ONE token with every candidate excluded, an exact
draw from P restricted to the tail (or its argmax when greedy); the token moves from the
tail into the candidates with its exact probability and the tail's mass shrinks by it.
A checked partial node whose constraint allows no token outside its candidates has a
tail known invalid (Q = 0): no draw is made from it.  `choose` is the one draw every
decoder uses on any node: P(u|x)·w(u) over the whole
vocabulary (w = Q, validity, or 1), the tail drawn lazily, an invalid tail token
redrawn when the draw must be masked, and the argmax taken exactly when greedy (the tail
is drawn while its best possible token could beat the best candidate).  A node whose
tail needs more than `TAIL_DRAWS_BEFORE_ENUMERATION` draws is enumerated once through
the LM's full distribution where the engine gives one.  At a temperature other than 1
(and where the engine cannot exclude tokens) a partial node is the top-K truncation:
the tail is dropped and the listed tokens renormalised (`truncated`).

**Sibling batches** (`DecodeRequest.batch_siblings`, models whose `batched_nodes` is
true).  A search that goes wide evaluates many children of one node: when a node's
parent already has an evaluated child, the node is evaluated in one forward pass with
the parent's next most probable valid children not evaluated yet (as many as the parent
has evaluated children, at most `MAX_SIBLING_BATCH`: the batch doubles while the search
stays wide).  Their distributions wait in the tree until the decoder evaluates them
(then they count in `lm_calls`, and as `lm_ahead` when computed); nothing a decoder sees
changes but the time.

Probabilities are float64 from the LM's log-probabilities (float32 from neural models,
float64 from exact tabular ones, so that near ties are decided in float64).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

try:  # numpy >= 2
    from numpy._core.multiarray import c_einsum as _einsum
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.multiarray import c_einsum as _einsum

from adaptrack_lsp.completion.decoding import (
    BudgetExceeded,
    Counters,
    DecodeCancelled,
    DecodeRequest,
    DecodeResult,
    Sample,
)

__all__ = ["BudgetExceeded", "Node", "PrefixTree", "QChange", "TAIL", "decide_status"]

UNCHECKED, INVALID, VALID = -1, 0, 1
#: `draw` returns this when the tail bucket was drawn (see `PrefixTree.expand_tail`)
TAIL = -1
#: below this log-probability float32 exp loses precision (denormals) and then underflows
FLOAT32_EXP_FLOOR = -80.0
#: a tail mass below this is summed token by token (see `PrefixTree._kept_and_tail`)
EXACT_TAIL_BELOW = 1e-6
#: most siblings evaluated ahead in one forward pass (see the module docstring)
MAX_SIBLING_BATCH = 32
#: most distributions computed ahead and not used yet, per tree
MAX_AHEAD = 4 * MAX_SIBLING_BATCH
#: tokens per block when drawing from a large distribution in two levels
DRAW_BLOCK = 1024
#: validity checks per constraint call in `check_top_p`
TOP_P_CHUNK = 16
#: tail draws at one partial node before its tail is enumerated through the LM's full
#: distribution (where the engine gives one)
TAIL_DRAWS_BEFORE_ENUMERATION = 12
#: tail draws at one partial node when the engine cannot enumerate: past this the
#: decode stops with a message (one position needing hundreds of server calls)
MAX_TAIL_DRAWS = 256

NO_VALID_COMPLETION = "no valid completion: every continuation violates the constraint"
ZERO_PROBABILITY = "no valid completion has positive probability: the model gives probability 0 to every valid continuation"


class Node:
    """One token path after the prompt."""

    __slots__ = (
        "parent",
        "token",
        "index_in_parent",
        "depth",
        "state",
        "valid",
        "terminal",
        "cut",
        "text",
        "logprob",
        "children",
        "evaluated",
        "candidates",
        "raw_logprobs",
        "probs",
        "validity",
        "child_q",
        "tail_mass",
        "tail_q",
        "tail_invalid",
        "pending",
        "q",
        "checked",
        "partial",
        "tail_best",
        "tail_draws",
        "greedy_choice",
    )

    def __init__(self, parent: Node | None, token: int | None, index_in_parent: int, state, valid: bool):
        self.parent = parent
        self.token = token
        self.index_in_parent = index_in_parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.state = state
        self.valid = valid
        self.terminal = False  # ends with EOS or a stop rule fired
        self.cut = False  # ended by max_new_tokens (a partial sequence)
        self.text = ""
        self.logprob = 0.0  # log P(path) at temperature 1
        self.children: dict[int, Node] = {}  # candidate index -> child
        self.evaluated = False
        self.candidates: np.ndarray | None = None  # int32 token ids (ascending, then tail tokens appended)
        self.raw_logprobs: np.ndarray | None = None  # log P(u|x) at temperature 1
        self.probs: np.ndarray | None = None  # float64 P(u|x) at the request temperature
        self.validity: np.ndarray | None = None  # int8: UNCHECKED / INVALID / VALID
        self.child_q: np.ndarray | None = None  # float64 Q[x+u] per candidate
        self.tail_mass = 0.0  # P(tail) at the request temperature: tokens not among the candidates
        self.tail_q = 0.0  # Q of the tail: 1 while its validity is unknown (or its verdict deferred)
        self.tail_invalid = False  # every tail token is known to be invalid
        self.pending = False  # verdicts computed, not yet applied to Q (`apply_verdicts`)
        self.q = 1.0 if valid else 0.0
        self.checked = False  # every candidate's validity is known (or assumed invalid)
        self.partial = False  # the tail is a bucket of a top-K distribution: never enumerated
        self.tail_best = 0.0  # partial nodes: no tail token is more probable than this
        self.tail_draws = 0  # partial nodes: tokens drawn out of the tail
        #: the last greedy choice by Q (`PrefixTree.choose`): (probs, child_q, index, the best
        #: weight of the other candidates); holds while those arrays are the node's
        self.greedy_choice: tuple | None = None

    @property
    def leaf(self) -> bool:
        return self.terminal or self.cut

    def index_of(self, token_id: int) -> int | None:
        """Candidate index of `token_id`, None if it is not a candidate."""
        if self.candidates is None:
            return None
        found = np.flatnonzero(self.candidates == token_id)
        return int(found[0]) if found.size else None

    def path(self) -> list[int]:
        tokens: list[int] = []
        node = self
        while node.parent is not None:
            tokens.append(node.token)
            node = node.parent
        tokens.reverse()
        return tokens

    def ancestors(self) -> Iterator[Node]:
        """Strict ancestors, nearest first."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def __repr__(self) -> str:
        return f"Node(depth={self.depth}, text={self.text!r}, q={self.q:.4g})"


@dataclass
class QChange:
    """Q at `node` changed because Q of its candidate `index` changed (bottom-up order)."""

    node: Node
    index: int
    child_old: float
    child_new: float
    q_old: float
    q_new: float

    def proposal_ratio(self) -> float:
        """P_Q'(n|x) / P_Q(n|x) for n = the changed candidate (AdapTrack acceptance rate)."""
        if self.q_new <= 0.0 or self.child_new <= 0.0:
            return 0.0
        if self.child_old <= 0.0:
            return 1.0
        return min(1.0, (self.child_new / self.child_old) * (self.q_old / self.q_new))


class PrefixTree:
    """Prefix tree over one prompt, one LM and one token constraint."""

    def __init__(
        self,
        lm,
        constraint,
        request: DecodeRequest,
        counters: Counters | None = None,
        *,
        prune_logprob: float = 30.0,
        temperature: float | None = None,
    ):
        self.lm = lm
        self.vocab = lm.vocab
        self.constraint = constraint
        self.request = request
        self.counters = counters if counters is not None else Counters()
        self.prune_logprob = float(prune_logprob)
        temperature = request.temperature if temperature is None else temperature
        if not math.isfinite(temperature):
            raise ValueError(f"temperature must be a finite number, got {temperature}")
        self.greedy = temperature <= 0.0
        self.temperature = 1.0 if self.greedy else float(temperature)
        self.max_new_tokens = max(1, int(request.max_new_tokens))
        self.started = time.perf_counter()
        self.deadline = None if request.timeout_s is None else self.started + float(request.timeout_s)
        self._special_or_padding = self._excluded_ids()
        self._excluded_list = np.flatnonzero(self._special_or_padding)
        self._eligible_count = self.vocab.size - int(self._excluded_list.size)
        #: the LM gives top-K + tail distributions (see the module docstring)
        self.partial = bool(getattr(lm, "partial", False))
        #: partial distributions are the top-K truncation (temperature other than 1 when
        #: sampling, or an engine that cannot exclude tokens)
        self.truncated = self.partial and (
            not getattr(lm, "can_exclude", True) or (not self.greedy and self.temperature != 1.0)
        )
        #: when a list, every change `propagate` makes is appended to it (AdapTrack runs
        #: its rejection step on changes made inside a draw over a top-K tail too)
        self.change_log: list[QChange] | None = None
        #: seeds of the paths an engine computes ahead (`PartialLanguageModel.next_top`)
        self._lookahead_seeds = np.random.default_rng(request.seed)
        if hasattr(lm, "deadline"):
            lm.deadline = self.deadline
        #: nodes where a token the constraint allows had probability 0 under the model
        self.zero_probability_valid = 0
        #: evaluate siblings ahead in one forward pass (see the module docstring)
        self.batch_siblings = bool(request.batch_siblings) and not self.partial and bool(getattr(lm, "batched_nodes", False))
        #: (parent node, token) -> log P(.|parent + token) computed ahead, not used yet
        self._ahead: dict[tuple[Node, int], np.ndarray] = {}

        fed_before = lm.tokens_fed
        calls_before = getattr(lm, "server_calls", 0)
        forward_before = getattr(lm, "forward_seconds", 0.0)
        start = time.perf_counter()
        info = lm.set_prompt(list(request.prompt_ids), max_new_tokens=self.max_new_tokens, cache_key=request.cache_key)
        self.counters.prompt_seconds += time.perf_counter() - start
        self.counters.prompt_forward_seconds += getattr(lm, "forward_seconds", 0.0) - forward_before
        self.prompt_info = info
        self.counters.server_calls += getattr(lm, "server_calls", 0) - calls_before
        fed = lm.tokens_fed - fed_before
        self.counters.tokens_fed += fed
        self.counters.prompt_tokens_fed += fed
        start = time.perf_counter()
        root_state = constraint.initial_state()
        self.counters.constraint_seconds += time.perf_counter() - start
        self.root = Node(None, None, -1, root_state, valid=root_state is not None)
        self.nodes = 1

    # -- budgets ------------------------------------------------------------------
    def poll(self) -> None:
        """Raise DecodeCancelled / BudgetExceeded; call before any LM work."""
        cancelled = self.request.cancelled
        if cancelled is not None and cancelled():
            raise DecodeCancelled()
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise BudgetExceeded()

    # -- evaluation ---------------------------------------------------------------
    def _excluded_ids(self) -> np.ndarray:
        mask = np.zeros(self.vocab.size, dtype=bool)
        mask[self.vocab.num_defined :] = True
        for token_id in self.vocab.special_ids:
            mask[token_id] = True
        for token_id in self.vocab.eos_ids:
            mask[token_id] = False
        return mask

    def _ask_lm(self, node: Node) -> np.ndarray:
        """log P(.|node) over the vocabulary, counted; raises ModelError on unusable output."""
        self.poll()
        with self._lm_call():
            logprobs = self.lm.next_logprobs(node.path())
        return self._checked_logprobs(logprobs)

    def _first_distribution(self, node: Node) -> np.ndarray:
        """log P(.|node) for the node's first evaluation: computed ahead with a sibling
        (counted now), or asked of the LM, with the parent's next siblings in the same
        forward pass where the search goes wide (see the module docstring)."""
        if self._ahead:
            ahead = self._ahead.pop((node.parent, node.token), None)
            if ahead is not None:
                self.counters.lm_calls += 1
                return self._checked_logprobs(ahead)
        siblings = self._siblings_ahead(node) if self.batch_siblings else []
        if not siblings:
            return self._ask_lm(node)
        self.poll()
        path = node.path()
        parent_path = path[:-1]
        with self._lm_call():
            results = self.lm.next_logprobs_batch([path] + [parent_path + [token] for token in siblings])
        if len(results) != len(siblings) + 1:
            raise ValueError(f"the LM returned {len(results)} distributions for {len(siblings) + 1} paths")
        self.counters.lm_ahead += len(siblings)
        for token, logprobs in zip(siblings, results[1:]):
            self._ahead[(node.parent, token)] = logprobs
        return self._checked_logprobs(results[0])

    def _siblings_ahead(self, node: Node) -> list[int]:
        """The tokens of the parent's next most probable valid children to evaluate with
        `node`: none unless the parent already has an evaluated child; then as many as
        it has (at most `MAX_SIBLING_BATCH`), skipping children that are evaluated,
        computed ahead, or leaves (EOS, a stop rule, `max_new_tokens`)."""
        parent = node.parent
        if parent is None or not parent.evaluated or not parent.valid or node.depth >= self.max_new_tokens:
            return []
        if len(self._ahead) >= MAX_AHEAD:
            return []
        done = sum(1 for child in parent.children.values() if child.evaluated)
        if not done:
            return []
        want = min(MAX_SIBLING_BATCH, done)
        weights = parent.probs * ((parent.validity == VALID) & (parent.child_q > 0.0))
        reach = min(weights.size, want + len(parent.children) + 1)
        if reach <= 0:
            return []
        top = np.argpartition(-weights, reach - 1)[:reach] if reach < weights.size else np.arange(weights.size)
        top = top[np.argsort(-weights[top], kind="stable")]
        stop = self.request.stop
        eos = self.vocab.eos_ids
        chosen: list[int] = []
        for index in top.tolist():
            if len(chosen) >= want or weights[index] <= 0.0:
                break
            if index == node.index_in_parent:
                continue
            child = parent.children.get(index)
            if child is not None and (child.evaluated or child.leaf):
                continue
            token = int(parent.candidates[index])
            if token in eos or (parent, token) in self._ahead:
                continue
            text = self.vocab.text(token)
            if stop is not None and text and stop(parent.text + text, len(parent.text)):
                continue
            chosen.append(token)
        return chosen

    def _checked_logprobs(self, logprobs) -> np.ndarray:
        """The LM's log-probabilities as float32/float64 over the vocabulary; raises
        ModelError on NaN, +inf or all -inf."""
        logprobs = np.asarray(logprobs)
        if logprobs.dtype != np.float64:
            logprobs = logprobs.astype(np.float32, copy=False)
        if logprobs.shape[0] < self.vocab.size:
            raise ValueError(f"the LM returned {logprobs.shape[0]} log-probabilities for a vocabulary of {self.vocab.size}")
        logprobs = logprobs[: self.vocab.size]
        top = float(logprobs.max())
        if not top < np.inf:  # NaN or +inf anywhere makes the maximum NaN or +inf
            from adaptrack_lsp.completion.lm.base import ModelError

            raise ModelError("the model produced NaN or +inf log-probabilities")
        if top == -np.inf:
            from adaptrack_lsp.completion.lm.base import ModelError

            raise ModelError("the model gave every token zero probability")
        return logprobs

    @contextlib.contextmanager
    def _lm_call(self):
        """Count one LM call: `lm_calls`, `lm_seconds`, `tokens_fed`, `server_calls`, and
        the backend's parts of it (`forward_seconds`, `kv_seconds`, `refed_tokens`,
        `branch_switches`; an engine that does not time its forward counts the whole
        call as forward)."""
        lm = self.lm
        fed_before = lm.tokens_fed
        calls_before = getattr(lm, "server_calls", 0)
        forward_before = getattr(lm, "forward_seconds", None)
        kv_before = getattr(lm, "kv_seconds", 0.0)
        switches_before = getattr(lm, "branch_switches", 0)
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            counters = self.counters
            counters.lm_seconds += elapsed
            counters.lm_calls += 1
            fed = lm.tokens_fed - fed_before
            counters.tokens_fed += fed
            counters.refed_tokens += max(0, fed - 1)
            counters.server_calls += getattr(lm, "server_calls", 0) - calls_before
            counters.forward_seconds += elapsed if forward_before is None else lm.forward_seconds - forward_before
            counters.kv_seconds += getattr(lm, "kv_seconds", 0.0) - kv_before
            counters.branch_switches += getattr(lm, "branch_switches", 0) - switches_before

    @contextlib.contextmanager
    def _distribution_work(self):
        """Count the time inside as `distribution_seconds`, less the LM calls and the
        constraint work made inside (counted as theirs)."""
        counters = self.counters
        lm_before, constraint_before = counters.lm_seconds, counters.constraint_seconds
        start = time.perf_counter()
        try:
            yield
        finally:
            inner = (counters.lm_seconds - lm_before) + (counters.constraint_seconds - constraint_before)
            counters.distribution_seconds += max(0.0, time.perf_counter() - start - inner)

    def _scaled(self, logprobs: np.ndarray) -> np.ndarray:
        """log P(u|x) at the request temperature, normalised over the whole vocabulary
        (special and padding ids keep their share: that mass is lost, i.e. invalid)."""
        if self.temperature == 1.0:
            return logprobs  # the LM's log-probabilities are normalised already
        # float64: a temperature like 1e-300 must not turn every log-probability into -inf
        scaled = logprobs.astype(np.float64) / self.temperature
        top = float(scaled.max())
        return scaled - (top + math.log(float(np.exp(scaled - top).sum())))

    def _eligible(self, scaled: np.ndarray) -> np.ndarray:
        """A copy of `scaled` with special and padding ids at -inf (a copy and a few
        assignments: `np.where` over the vocabulary costs ten times more)."""
        eligible = scaled.copy()
        eligible[self._excluded_list] = -np.inf
        return eligible

    @staticmethod
    def _probabilities(values: np.ndarray) -> np.ndarray:
        """exp of log-probabilities as float64; float32 inputs use a float32 exp (float64
        exp over a 150k vocabulary costs ms) except where float32 would underflow: a valid
        token of probability 1e-50 is rare, but zero would make a dead end of it."""
        if values.dtype == np.float64:
            return np.exp(values)
        probs = np.exp(values).astype(np.float64)
        tiny = values < FLOAT32_EXP_FLOOR
        if tiny.any():
            probs[tiny] = np.exp(values[tiny].astype(np.float64))
        return probs

    def _kept_and_tail(self, eligible: np.ndarray, candidates: np.ndarray, kept: np.ndarray, tail: Callable[[], np.ndarray] | None) -> tuple[np.ndarray, float]:
        """(P of the kept ids as float64, the tail's mass): one exp over the vocabulary,
        the tail's mass as the total less the kept ids' (both sums of the same values,
        so exact but for float64 rounding, ~1e-16 of the total).  Below `EXACT_TAIL_BELOW`
        that rounding would matter, and float32 underflow (ids under
        `FLOAT32_EXP_FLOOR` count 0 here) too: the tail (`tail()`, its mask; None when
        it is empty) is then summed id by id."""
        if tail is None:
            return self._probabilities(kept), 0.0
        everything = np.exp(eligible)  # float32 stays float32: float64 exp over 150k ids costs ms
        kept_values = everything.take(candidates)  # by index: a boolean gather costs several times more
        probs = kept_values.astype(np.float64)
        if kept.dtype != np.float64:
            tiny = kept < FLOAT32_EXP_FLOOR
            if tiny.any():
                probs[tiny] = np.exp(kept[tiny].astype(np.float64))
        tail_mass = float(everything.sum(dtype=np.float64)) - float(kept_values.sum(dtype=np.float64))
        if tail_mass < EXACT_TAIL_BELOW:
            tail_mass = float(self._probabilities(eligible[tail()]).sum())
        return probs, tail_mass

    def evaluate(self, node: Node, validity: str = "none") -> None:
        """Ask the LM for P(.|node) once; store the candidates compactly.

        `validity`: "none" (candidates are the tokens within `prune_logprob` nats of the
        best one, validity unchecked, the tail's Q is 1); "apply" (every token is checked
        at once and exactly the valid ones are kept, whatever their probability; Q is
        updated); "defer" (every token is checked, the valid ones and the likely ones are
        kept, but Q is left as if nothing were known until `apply_verdicts`).
        """
        if node.evaluated:
            return
        with self._distribution_work():
            self._evaluate_node(node, validity)

    def _evaluate_node(self, node: Node, validity: str) -> None:
        if node.leaf:
            raise ValueError("a complete or cut node has no next-token distribution")
        if self.partial:
            self._evaluate_partial(node, validity)
            return
        logprobs = self._first_distribution(node)
        scaled = self._scaled(logprobs)
        eligible = self._eligible(scaled)
        best = float(eligible.max())
        possible = eligible > -np.inf
        possible_count = np.count_nonzero(possible)
        likely = eligible >= best - self.prune_logprob
        valid_mask = None
        if node.valid and validity != "none" and best > -np.inf:
            start = time.perf_counter()
            valid_mask = np.asarray(self.constraint.mask(node.state), dtype=bool)[: self.vocab.size]
            self.counters.constraint_seconds += time.perf_counter() - start
            self.counters.constraint_checks += int(np.count_nonzero(likely))
            # a valid token of probability 0 needs an impossible token besides the excluded
            if possible_count < self._eligible_count and (valid_mask & ~possible & ~self._special_or_padding).any():
                self.zero_probability_valid += 1
        if best == -np.inf:
            keep = np.zeros(self.vocab.size, dtype=bool)
        elif valid_mask is not None and validity == "apply":
            keep = valid_mask & possible
        elif valid_mask is not None:  # defer: what may be drawn before the verdicts apply
            keep = (valid_mask & possible) | likely
        else:
            keep = likely
        ids = np.flatnonzero(keep)
        # gathered by index: a boolean mask's gather costs several times more (branchy, per
        # id; benchmarks/node_work.py)
        kept = eligible.take(ids)
        node.candidates = candidates = ids.astype(np.int32)
        # kept ids are possible, hence not excluded: at temperature 1 `eligible` holds
        # the LM's own values there
        node.raw_logprobs = kept if scaled is logprobs else logprobs.take(ids)
        # keep holds possible ids only: the tail (possible, not kept) is empty when it holds all
        tail = None if possible_count == ids.size else (lambda: possible & ~keep)
        node.probs, node.tail_mass = self._kept_and_tail(eligible, ids, kept, tail)
        if not node.valid:
            node.validity = np.full(candidates.size, INVALID, dtype=np.int8)
            node.child_q = np.zeros(candidates.size)
            node.tail_q, node.tail_invalid, node.checked = 0.0, True, True
        elif valid_mask is None:
            node.validity = np.full(candidates.size, UNCHECKED, dtype=np.int8)
            node.child_q = np.ones(candidates.size)
            node.tail_q = 1.0
        else:
            node.tail_invalid = True  # every valid token is a candidate
            node.checked = True
            if validity == "apply":
                # exactly the valid ids were kept
                node.validity = np.full(candidates.size, VALID, dtype=np.int8)
                node.child_q = np.ones(candidates.size)
                node.tail_q = 0.0
            else:
                node.validity = valid_mask.take(ids).view(np.int8)  # True/False are VALID/INVALID
                node.child_q = np.ones(candidates.size)
                node.tail_q = 1.0
                node.pending = True
        node.evaluated = True
        self._recompute_q(node)

    # -- partial nodes ----------------------------------------------------------------
    def _ineligible(self, ids: np.ndarray) -> np.ndarray:
        """bool per id: special, padding, or beyond the vocabulary (never generated)."""
        outside = ids >= self.vocab.size
        flags = np.ones(ids.size, dtype=bool)
        flags[~outside] = self._special_or_padding[ids[~outside]]
        return flags

    def _evaluate_partial(self, node: Node, validity: str) -> None:
        """Store a top-K distribution: candidates = the listed ids (ineligible ones with
        probability 0, known invalid), the tail = the rest (see the module docstring)."""
        self.poll()
        greedy = self.greedy
        seed = int(self._lookahead_seeds.integers(2**31 - 1))
        with self._lm_call():
            top = self.lm.next_top(node.path(), greedy=greedy, seed=seed)
        ids = np.asarray(top.ids, dtype=np.int64)
        raw = np.asarray(top.logprobs, dtype=np.float64)
        ineligible = self._ineligible(ids) | ~np.isfinite(raw)
        if self.truncated and not top.truncated:
            # the top-K truncation at the request temperature: renormalise over the list
            finite = np.isfinite(raw)
            scaled = np.full(raw.size, -np.inf)
            scaled[finite] = raw[finite] / self.temperature
            if finite.any():
                high = float(scaled[finite].max())
                scaled = scaled - (high + math.log(float(np.exp(scaled[finite] - high).sum())))
            truncated_raw = np.full(raw.size, -np.inf)
            if finite.any():
                high = float(raw[finite].max())
                truncated_raw = raw - (high + math.log(float(np.exp(raw[finite] - high).sum())))
            probs, raw, tail = np.exp(scaled), truncated_raw, 0.0
        else:
            probs, tail = np.exp(raw), float(top.tail_mass)
        probs = np.where(ineligible, 0.0, probs)
        node.candidates = ids.astype(np.int32)
        node.raw_logprobs = raw
        node.probs = probs
        node.tail_mass = tail
        node.partial = tail > 0.0
        node.tail_best = min(top.smallest, tail) if node.partial else 0.0
        if not node.valid:
            node.validity = np.full(ids.size, INVALID, dtype=np.int8)
            node.child_q = np.zeros(ids.size)
            node.tail_q, node.tail_invalid, node.checked = 0.0, True, True
        else:
            node.validity = np.where(ineligible, INVALID, UNCHECKED).astype(np.int8)
            node.child_q = np.where(ineligible, 0.0, 1.0)
            node.tail_q = 1.0 if node.partial else 0.0
            node.tail_invalid = not node.partial
            if validity != "none":
                unknown = np.flatnonzero(node.validity == UNCHECKED)
                self._check_candidates(node, unknown, apply=validity == "apply")
                node.checked = True
                node.pending = validity == "defer"
                self._settle_partial_tail(node)
        node.evaluated = True
        self._recompute_q(node)

    def _settle_partial_tail(self, node: Node) -> None:
        """A checked partial node whose constraint allows no token outside its candidates
        has a tail known to be invalid: its Q is 0 (at once, or when deferred verdicts
        apply), and no draw is ever made from it."""
        if not node.partial or not node.valid or node.tail_invalid:
            return
        start = time.perf_counter()
        allowed = np.array(self.constraint.mask(node.state), dtype=bool)[: self.vocab.size]
        self.counters.constraint_seconds += time.perf_counter() - start
        listed = node.candidates[node.candidates < self.vocab.size]
        allowed[listed] = False
        allowed &= ~self._special_or_padding
        if not allowed.any():
            node.tail_invalid = True
            if not node.pending:
                node.tail_q = 0.0

    def _check_candidates(self, node: Node, indices: np.ndarray, apply: bool = True) -> None:
        """Decide the validity of candidates `indices` (one constraint call); `apply`
        also sets their Q (0 for the invalid ones), else the verdicts wait for
        `apply_verdicts`."""
        if not indices.size:
            return
        start = time.perf_counter()
        verdicts = np.asarray(self.constraint.allowed(node.state, node.candidates[indices]), dtype=bool)
        self.counters.constraint_seconds += time.perf_counter() - start
        self.counters.constraint_checks += int(indices.size)
        if apply:
            self._set_validity(node, indices, verdicts)
        else:
            node.validity[indices] = np.where(verdicts, VALID, INVALID)

    def _draw_partial_tail(self, node: Node, rng: np.random.Generator, check: bool, greedy: bool | None) -> int | None:
        """Take one token out of a partial node's tail: P(u|x) restricted to the tail
        (its argmax when `greedy`), from the LM with every candidate excluded.  The token
        becomes a candidate with its exact probability (0 for an ineligible id, which is
        then known invalid); `check` decides its validity at once.  None when the tail
        turned out empty.  A change of Q[node] is propagated."""
        greedy = self.greedy if greedy is None else greedy
        q_before = node.q
        index = self._take_from_tail(node, rng, check, greedy)
        if node.q != q_before:  # invalid tokens found: ancestors must see it before their next draw
            self.propagate(node)
        return index

    def _take_from_tail(self, node: Node, rng: np.random.Generator | None, check: bool, greedy: bool) -> int | None:
        enumerable = getattr(self.lm, "can_enumerate", False)
        if enumerable and (node.tail_draws >= TAIL_DRAWS_BEFORE_ENUMERATION or self.lm.knows_full(node.path())):
            new = self.expand_tail(node)
            if not new.size:
                return None
            if check:
                self._check_candidates(node, new[node.validity[new] == UNCHECKED])
            # every tail token had the same Q when the tail was drawn: P alone decides
            weights = node.probs[new]
            if greedy:
                local = int(np.argmax(weights)) if weights.size and weights.max() > 0.0 else None
            else:
                local = self.draw(weights, rng)
            return None if local is None else int(new[local])
        if node.tail_draws >= MAX_TAIL_DRAWS:
            from adaptrack_lsp.completion.lm.base import ModelError

            raise ModelError(
                f"one position needed more than {MAX_TAIL_DRAWS} tail draws from {getattr(self.lm, 'name', 'the engine')} "
                "and the engine gives no full distribution to enumerate it (vLLM: start it with --max-logprobs -1)"
            )
        self.poll()
        seed = 0 if greedy else int(rng.integers(2**31 - 1))
        excluded = node.candidates.astype(np.int64)
        with self._lm_call():
            drawn = self.lm.draw_excluding(node.path(), excluded, greedy=greedy, seed=seed)
        self.counters.tail_draws += 1
        node.tail_draws += 1
        if drawn is None:
            node.tail_mass, node.tail_best, node.partial = 0.0, 0.0, False
            self._recompute_q(node)
            return None
        token, logprob = int(drawn[0]), float(drawn[1])
        if np.any(excluded == token):
            from adaptrack_lsp.completion.lm.base import ModelError

            raise ModelError(f"{getattr(self.lm, 'name', 'the engine')} returned token {token}, which was excluded")
        probability = math.exp(logprob) if math.isfinite(logprob) else 0.0
        node.tail_mass = max(0.0, node.tail_mass - probability)
        node.tail_best = min(probability if greedy else node.tail_best, node.tail_mass)
        if node.tail_mass <= 0.0:
            node.partial = False
        ineligible = bool(self._ineligible(np.array([token]))[0]) or probability <= 0.0
        verdict = INVALID if (ineligible or not node.valid or node.tail_invalid) else UNCHECKED
        index = node.candidates.size
        node.candidates = np.append(node.candidates, np.int32(token))
        node.raw_logprobs = np.append(node.raw_logprobs, logprob)
        node.probs = np.append(node.probs, 0.0 if ineligible else probability)
        node.validity = np.append(node.validity, np.int8(verdict))
        node.child_q = np.append(node.child_q, 0.0 if verdict == INVALID else node.tail_q)
        if check and verdict == UNCHECKED:
            self._check_candidates(node, np.array([index]), apply=not node.pending)
        if not node.partial:
            node.tail_q, node.tail_invalid = 0.0, True
        elif node.checked and verdict != INVALID:
            self._settle_partial_tail(node)  # was it the last valid token of the tail?
        self._recompute_q(node)
        return index

    def tail_best_weight(self, node: Node, weighting: str = "q") -> float | None:
        """Upper bound on the weight of any single tail token (None: not a partial node;
        its argmax never needs the tail)."""
        if not node.partial:
            return None
        return node.tail_best * (1.0 if self.tail_weight(node, weighting) > 0.0 else 0.0)

    def choose(
        self,
        node: Node,
        rng: np.random.Generator,
        weighting: str = "q",
        *,
        check: bool = True,
        exclude: int | None = None,
    ) -> int | None:
        """A candidate index drawn in proportion to P(u|x)·w(u) over the whole vocabulary
        (the argmax when greedy); None when every weight is 0.

        `weighting`: "q" (w = Q[x+u]), "valid" (w = 1 for tokens known valid) or "model"
        (w = 1).  The tail is drawn lazily (partial nodes: one LM draw per token taken
        out of it); with `check` a drawn tail token is checked at once and an invalid one
        redrawn, so the draw is exactly masked.  `exclude`: a candidate index given
        weight 0 (AdapTrack's redraw without the rejected token).  Q[node] may drop
        (invalid tail tokens found); that is propagated at once (see `change_log`).

        Greedy by Q over a node with no tail bucket to draw from: Q only falls, so once the
        argmax was taken the other candidates' weights stay at or below the best of them
        then; while the chosen one's weight is still above it (and the candidates are the
        same arrays: `expand_tail` and `_compact` make new ones), it is still the argmax
        and nothing is computed again (the search asks again at every ancestor whose Q
        changed, after every node)."""
        greedy_q = self.greedy and weighting == "q" and exclude is None and not node.partial
        if greedy_q:
            last = node.greedy_choice
            if last is not None and last[0] is node.probs and last[1] is node.child_q:
                index = last[2]
                if node.probs[index] * node.child_q[index] > last[3]:
                    return index
        while True:
            weights = self.weights(node, weighting)
            if exclude is not None:
                weights = weights.copy()
                weights[exclude] = 0.0
            tail = self.tail_weight(node, weighting)
            index = self.draw(weights, rng, tail, self.tail_best_weight(node, weighting))
            if index != TAIL:
                if greedy_q and index is not None:
                    weights[index] = 0.0  # a fresh array (`weights` by Q); every weight is >= 0
                    node.greedy_choice = (node.probs, node.child_q, index, float(weights.max()))
                return index
            new = self.draw_from_tail(node, rng, use_q=weighting == "q", check=check)
            if new is None or self.greedy:
                continue  # an empty tail has weight 0 now; greedy: take the argmax again
            if node.probs[new] <= 0.0 or (check and node.validity[new] == INVALID):
                continue  # masked: an invalid (or ineligible) token is drawn again
            return new

    def apply_verdicts(self, node: Node) -> list[QChange]:
        """Apply a node's deferred verdicts (invalid candidates and tail get Q = 0) and
        propagate; returns the changes of the ancestors."""
        if not node.pending:
            return []
        node.pending = False
        invalid = node.validity == INVALID
        node.child_q[invalid] = 0.0
        if not node.partial or node.tail_invalid:
            node.tail_q = 0.0  # a partial node's tail stays unknown (Q = 1) unless known invalid
        self._compact(node)
        self._recompute_q(node)
        return self.propagate(node)

    def expand_tail(self, node: Node) -> np.ndarray:
        """Turn the tail bucket into ordinary candidates (appended after the existing
        ones, whose indices do not change); returns the new candidate indices.

        The tail was pruned at the first evaluation, so the LM is asked again for this
        node (counted in `lm_calls` and `tail_evaluations`)."""
        with self._distribution_work():
            return self._expand_tail(node)

    def _expand_tail(self, node: Node) -> np.ndarray:
        if node.tail_mass <= 0.0:
            return np.zeros(0, dtype=np.int64)
        if node.partial and not getattr(self.lm, "can_enumerate", False):
            from adaptrack_lsp.completion.lm.base import ModelError

            raise ModelError(f"{getattr(self.lm, 'name', 'the engine')} gives top-K distributions only: a tail cannot be enumerated")
        logprobs = self._ask_lm(node)
        self.counters.tail_evaluations += 1
        was_checked = node.partial and node.valid and (node.checked or node.pending)
        node.partial = False
        eligible = self._eligible(self._scaled(logprobs))
        outside = np.ones(self.vocab.size, dtype=bool)
        outside[node.candidates] = False
        new_ids = np.flatnonzero(outside & (eligible > -np.inf)).astype(np.int32)
        first = node.candidates.size
        node.candidates = np.concatenate([node.candidates, new_ids])
        node.raw_logprobs = np.concatenate([node.raw_logprobs, logprobs[new_ids]])
        node.probs = np.concatenate([node.probs, self._probabilities(eligible[new_ids])])
        if not node.valid or node.tail_invalid:
            verdict = INVALID
        else:
            verdict = UNCHECKED
        node.validity = np.concatenate([node.validity, np.full(new_ids.size, verdict, dtype=np.int8)])
        node.child_q = np.concatenate([node.child_q, np.full(new_ids.size, node.tail_q)])
        node.tail_mass, node.tail_q = 0.0, 0.0
        added = np.arange(first, node.candidates.size)
        if was_checked and verdict == UNCHECKED:
            # a checked top-K node keeps every verdict known: the enumerated tail is
            # checked at once (applied, or held back with the node's deferred verdicts)
            start = time.perf_counter()
            allowed = np.asarray(self.constraint.mask(node.state), dtype=bool)[new_ids]
            self.counters.constraint_seconds += time.perf_counter() - start
            self.counters.constraint_checks += int(new_ids.size)
            node.validity[added] = np.where(allowed, VALID, INVALID)
            if not node.pending:
                node.child_q[added[~allowed]] = 0.0
        elif verdict == UNCHECKED:
            node.checked = False
        self._recompute_q(node)
        self.propagate(node)  # the tail's mass moved into candidates (and its invalid tokens are known)
        return added

    def _compact(self, node: Node) -> None:
        """Drop invalid candidates of a fully checked node that has no children yet."""
        if node.children or node.pending or node.partial or node.candidates.size < 256:
            return
        keep = node.validity != INVALID
        if keep.all():
            return
        node.candidates = node.candidates[keep]
        node.probs = node.probs[keep]
        node.raw_logprobs = node.raw_logprobs[keep]
        node.validity = node.validity[keep]
        node.child_q = node.child_q[keep]

    # -- validity -----------------------------------------------------------------
    def _set_validity(self, node: Node, indices: np.ndarray, verdicts: np.ndarray) -> None:
        node.validity[indices] = np.where(verdicts, VALID, INVALID)
        invalid = indices[~verdicts]
        node.child_q[invalid] = 0.0

    def check_all(self, node: Node) -> None:
        """Decide the validity of every token (evaluating the node if needed) and apply it."""
        self.evaluate(node, "apply")
        if node.pending:
            self.apply_verdicts(node)
            return
        if node.checked:
            return
        if node.partial:  # the candidates are checked; the tail stays unknown (Q = 1) unless nothing in it is valid
            self._check_candidates(node, np.flatnonzero(node.validity == UNCHECKED))
            node.checked = True
            self._settle_partial_tail(node)
            self._recompute_q(node)
            return
        if node.tail_mass > 0.0 and node.tail_q > 0.0:
            self.expand_tail(node)  # the pruned tokens must be checked too
        unknown = np.flatnonzero(node.validity == UNCHECKED)
        if unknown.size:
            start = time.perf_counter()
            ids = node.candidates[unknown]
            if unknown.size <= 64:
                verdicts = np.asarray(self.constraint.allowed(node.state, ids), dtype=bool)
            else:
                verdicts = np.asarray(self.constraint.mask(node.state), dtype=bool)[ids]
            self.counters.constraint_seconds += time.perf_counter() - start
            self.counters.constraint_checks += int(unknown.size)
            self._set_validity(node, unknown, verdicts)
        node.tail_q = 0.0
        node.checked = True
        self._compact(node)
        self._recompute_q(node)

    def check_top_p(self, node: Node, p: float) -> None:
        """The paper's RQ3 rule: check tokens from the most to the least probable; after
        each one, once the known-valid mass is at least `p` of the known-valid + unchecked
        mass (the pruned tail counts as unchecked), every unchecked token counts as
        invalid.  p = 1 checks every token (`check_all`)."""
        if p >= 1.0:
            self.check_all(node)
            return
        self.evaluate(node)
        if node.checked:
            return
        valid_mass = math.fsum(node.probs[node.validity == VALID])
        checked_until = 0  # candidates before this index were looked at
        start = time.perf_counter()
        while True:
            unchecked = np.flatnonzero(node.validity[checked_until:] == UNCHECKED) + checked_until
            order = unchecked[np.argsort(-node.probs[unchecked], kind="stable")]  # most probable first
            unchecked_mass = math.fsum(node.probs[order]) + node.tail_mass * node.tail_q
            position = 0
            while position < order.size and valid_mass < p * (valid_mass + unchecked_mass):
                # a chunk is checked in one constraint call; its verdicts are applied one
                # token at a time, up to the token after which the rule stops
                batch = order[position : position + TOP_P_CHUNK]
                verdicts = np.asarray(self.constraint.allowed(node.state, node.candidates[batch]), dtype=bool)
                masses = node.probs[batch]
                valid_after = valid_mass + np.cumsum(np.where(verdicts, masses, 0.0))
                unchecked_after = unchecked_mass - np.cumsum(masses)
                reached = np.flatnonzero(valid_after >= p * (valid_after + unchecked_after))
                used = int(reached[0]) + 1 if reached.size else batch.size
                self.counters.constraint_checks += used
                self._set_validity(node, batch[:used], verdicts[:used])
                valid_mass = float(valid_after[used - 1])
                unchecked_mass = float(unchecked_after[used - 1])
                position += used
            if position < order.size or node.tail_mass * node.tail_q <= 0.0 or valid_mass >= p * (valid_mass + unchecked_mass):
                break
            # every candidate checked and the rule still wants more: the pruned tail
            checked_until = node.candidates.size
            if node.partial:  # the next most probable tail token, checked by the rule
                if node.tail_draws >= TAIL_DRAWS_BEFORE_ENUMERATION or self._draw_partial_tail(node, None, False, True) is None:
                    break
                continue
            self.expand_tail(node)
        self.counters.constraint_seconds += time.perf_counter() - start
        rest = np.flatnonzero(node.validity == UNCHECKED)
        if rest.size:
            node.validity[rest] = INVALID
            node.child_q[rest] = 0.0
        node.tail_q = 0.0
        node.tail_invalid = True
        node.checked = True
        self._compact(node)
        self._recompute_q(node)

    # -- children -----------------------------------------------------------------
    def child(self, node: Node, index: int, require_valid: bool = True) -> Node | None:
        """The child for candidate `index`, created on first use.

        With `require_valid`, an invalid token returns None and is recorded (its Q is 0,
        pushed into the node but not further: call `propagate`); without it
        (unconstrained sampling) an invalid child is created with `valid=False`.
        """
        existing = node.children.get(index)
        if existing is not None:
            return existing if (existing.valid or not require_valid) else None
        token = int(node.candidates[index])
        state = None
        valid = False
        if node.valid and node.validity[index] != INVALID:
            start = time.perf_counter()
            state = self.constraint.advance(node.state, token)
            self.counters.constraint_seconds += time.perf_counter() - start
            if node.validity[index] == UNCHECKED:
                self.counters.constraint_checks += 1
            valid = state is not None
            node.validity[index] = VALID if valid else INVALID
        if not valid and node.child_q[index] != 0.0:
            node.child_q[index] = 0.0
            self._recompute_q(node)
        if not valid and require_valid:
            return None
        child = Node(node, token, index, state, valid)
        child.text = node.text + self.vocab.text(token)
        child.logprob = node.logprob + float(node.raw_logprobs[index])
        if token in self.vocab.eos_ids:
            child.terminal = True
        elif self.request.stop is not None and self.vocab.text(token) and self.request.stop(child.text, len(node.text)):
            child.terminal = True
        elif child.depth >= self.max_new_tokens:
            child.cut = True
        node.children[index] = child
        self.nodes += 1
        return child

    # -- Q --------------------------------------------------------------------------
    def _recompute_q(self, node: Node) -> None:
        if not node.valid:
            node.q = 0.0
        elif node.evaluated:
            # einsum, not BLAS dot: BLAS threads fight the model's threads for the cores; its
            # C routine, which `np.einsum` calls without `optimize` (the same sum, without
            # the wrapper's argument handling: this runs at every ancestor of every node)
            inside = float(_einsum("i,i->", node.probs, node.child_q)) if node.probs.size else 0.0
            node.q = inside + node.tail_mass * node.tail_q
        else:
            node.q = 1.0

    def propagate(self, node: Node) -> list[QChange]:
        """Push Q[node] into its ancestors; returns the changes, nearest ancestor first.

        Stops early where an ancestor's Q does not change.
        """
        changes: list[QChange] = []
        child = node
        while child.parent is not None:
            parent = child.parent
            index = child.index_in_parent
            old_child = float(parent.child_q[index])
            new_child = child.q
            if old_child == new_child:
                break
            q_old = parent.q
            parent.child_q[index] = new_child
            self._recompute_q(parent)
            changes.append(QChange(parent, index, old_child, new_child, q_old, parent.q))
            child = parent
        if self.change_log is not None:
            self.change_log.extend(changes)
        return changes

    # -- sampling helpers -------------------------------------------------------------
    @staticmethod
    def _weighting(use_q: bool | str) -> str:
        if isinstance(use_q, str):
            if use_q not in ("q", "valid", "model"):
                raise ValueError(f"unknown weighting {use_q!r}")
            return use_q
        return "q" if use_q else "valid"

    def weights(self, node: Node, use_q: bool | str = True) -> np.ndarray:
        """Unnormalised next-token weights: P(u|x)·Q[x+u] (`use_q` True or "q"),
        P(u|x)·valid(u) (False or "valid") or P(u|x) ("model")."""
        weighting = self._weighting(use_q)
        if weighting == "q":
            return node.probs * node.child_q
        if weighting == "model":
            return node.probs
        return node.probs * (node.validity == VALID)

    def tail_weight(self, node: Node, use_q: bool | str = True) -> float:
        """The tail bucket's weight beside `weights(node, use_q)`: its mass times its Q;
        for "valid", a partial node's tail (validity unknown until drawn) or nothing; for
        "model", its mass."""
        weighting = self._weighting(use_q)
        if weighting == "q":
            return node.tail_mass * node.tail_q
        if weighting == "model":
            return node.tail_mass
        return node.tail_mass if node.partial and node.valid and not node.tail_invalid else 0.0

    def draw(
        self, weights: np.ndarray, rng: np.random.Generator, tail: float = 0.0, tail_best: float | None = None
    ) -> int | None:
        """Candidate index drawn in proportion to `weights` (argmax when greedy), `TAIL`
        when the tail bucket of weight `tail` was drawn, None when every weight is 0.

        Greedy: `tail_best` bounds the weight of any single tail token (partial nodes);
        the tail is chosen when that bound beats the best candidate (the caller draws
        the tail's best token and asks again).  Without it the tail is chosen only when
        no candidate has weight."""
        if self.greedy:
            best = -1.0
            if weights.size:
                index = int(np.argmax(weights))
                best = float(weights[index])
            if tail > 0.0 and tail_best is not None and tail_best > best:
                return TAIL
            if best > 0.0:
                return index
            return TAIL if tail > 0.0 else None
        total = float(weights.sum()) if weights.size else 0.0
        if tail > 0.0 and rng.random() * (total + tail) >= total:
            return TAIL
        if not total > 0.0:
            return None
        if weights.size > DRAW_BLOCK * 4:  # two levels: pick a block, then a token in it
            block_sums = np.add.reduceat(weights, np.arange(0, weights.size, DRAW_BLOCK))
            block_cumulative = np.cumsum(block_sums)
            target = rng.random() * block_cumulative[-1]
            block = min(int(np.searchsorted(block_cumulative, target, side="right")), block_sums.size - 1)
            while block_sums[block] <= 0.0:
                block -= 1
            offset = block * DRAW_BLOCK
            inside = np.cumsum(weights[offset : offset + DRAW_BLOCK])
            before = block_cumulative[block - 1] if block else 0.0
            local = int(np.searchsorted(inside, (target - before), side="right"))
            index = offset + min(local, inside.size - 1)
        else:
            cumulative = np.cumsum(weights)
            index = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
            index = min(index, weights.size - 1)
        if weights[index] <= 0.0:  # rounding landed on a zero-width bucket: nearest real one
            nonzero = np.flatnonzero(weights > 0.0)
            index = int(nonzero[min(np.searchsorted(nonzero, index), nonzero.size - 1)])
        return index

    def draw_from_tail(
        self, node: Node, rng: np.random.Generator | None, use_q: bool = True, *, check: bool = False, greedy: bool | None = None
    ) -> int | None:
        """Draw one of the tail's tokens in proportion to P(u|x)·Q[x+u] (or P(u|x)
        without `use_q`); None when the tail is empty.

        A partial node takes one token out of its tail (every tail token has the same
        Q, so P alone decides; `greedy` overrides the tree's mode, `check` decides the
        token's validity at once; see `_draw_partial_tail`); a pruned full node is
        expanded first."""
        if node.partial:
            return self._draw_partial_tail(node, rng, check, greedy)
        new = self.expand_tail(node)
        if not new.size:
            return None
        weights = node.probs[new] * node.child_q[new] if use_q else node.probs[new]
        local = self.draw(weights, rng)
        return None if local is None else int(new[local])

    def sample_of(self, node: Node, complete: bool | None = None) -> Sample:
        """The sample for `node`'s path; `complete` defaults to whether it ended (EOS or a
        stop rule); pass False for a path cut short by the time budget."""
        tokens = node.path()
        return Sample(
            token_ids=tokens,
            text=self.vocab.decode(t for t in tokens if t not in self.vocab.eos_ids),
            logprob=node.logprob,
            complete=node.terminal if complete is None else complete,
            valid=node.valid,
        )

    def no_valid_message(self) -> str:
        """Why Q[root] is 0: nothing valid, or nothing valid the model allows."""
        return ZERO_PROBABILITY if self.zero_probability_valid else NO_VALID_COMPLETION

    def close(self) -> None:
        """Break the tree's reference cycles (a node and its children refer to each other)
        so that its nodes and their vocabulary-sized arrays are freed as soon as the tree
        is dropped, not at the next full garbage collection (a few MB per request pile up
        in between).  The tree is not used afterwards; `result` closes it."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
                node.children = {}
        self._ahead.clear()
        self.change_log = None

    def result(
        self,
        samples: list[Sample],
        counters: Counters,
        failures: int = 0,
        *,
        timed_out: bool = False,
        stopped: str = "",
        gave_up: str = "",
        exhausted: bool = False,
        prompt_info=None,
    ) -> DecodeResult:
        """The decode's result, its status decided by `decide_status` from what the
        decoder reports; `prompt_info` defaults to this tree's (a decode that built
        several trees passes the first one's)."""
        info = prompt_info if prompt_info is not None else self.prompt_info
        if getattr(self.lm, "deadline", None) is not None:
            self.lm.deadline = None  # the decode is over: its budget no longer bounds the LM
        status, message = decide_status(
            samples, failures, self.root.q, timed_out=timed_out, stopped=stopped, gave_up=gave_up, exhausted=exhausted
        )
        self.close()
        if status == "no_valid_completion":
            message = self.no_valid_message()
        return DecodeResult(
            samples=samples,
            counters=counters,
            status=status,
            message=message,
            prompt_reused=getattr(info, "reused", 0),
            failures=failures,
            timed_out=timed_out,
        )


#: why a result is partial when a sample was cut by max_new_tokens
MAX_NEW_TOKENS_MESSAGE = "max_new_tokens reached before the sequence ended"


def decide_status(
    samples: Sequence[Sample],
    failures: int,
    root_q: float,
    *,
    timed_out: bool = False,
    stopped: str = "",
    gave_up: str = "",
    exhausted: bool = False,
) -> tuple[str, str]:
    """(status, message) of a decode: the one place that decides them.

    Most decisive first: a decoder that gave up (`gave_up`, its reason) is "failed"; a
    time budget that ran out (`timed_out`) or a search budget (`stopped`, its reason) is
    "partial"; nothing valid (Q[root] = 0, or a search that `exhausted` every valid
    path) is "no_valid_completion" without samples and "failed" with some samples
    missing; a sample cut by max_new_tokens is "partial"; samples that could not be
    drawn (`failures`) are "failed"; else "ok".
    """
    if gave_up:
        return "failed", gave_up
    if timed_out or stopped:
        return "partial", stopped
    if root_q <= 0.0 or exhausted:
        if not samples:
            return "no_valid_completion", ""
        if failures:
            return "failed", ""
    if any(not s.complete for s in samples):
        return "partial", MAX_NEW_TOKENS_MESSAGE
    if failures:
        return "failed", ""
    return "ok", ""
