"""The prefix tree every decoder runs on.

Owns, per node (a token path after the prompt):

- the model's next-token distribution, asked of the LM exactly once (`evaluate`) and
  stored compactly: only candidates within `prune_logprob` nats of the best token are
  kept (sparse ids + float32 log-probabilities; dropped mass counts as invalid);
- the validity of each candidate (`check_all`, `check_top_p`, `check_one`), from a
  `TokenConstraint`;
- Q[x], the running estimate of P(constraint satisfied | x) (AdapTrack eq. 2):
  0 for invalid, 1 for never-evaluated (or complete) valid nodes, otherwise
  sum_u P(u|x) Q[x+u] over the candidates (unchecked candidates count as 1 until
  checked, which is what the rejection samplers of cars.txt need);
- `propagate(node)`: pushes a changed Q[node] up to the root and returns the changes
  bottom-up, so AdapTrack can run its rejection step at each ancestor;
- counters, cancellation and the wall-clock budget (`poll`, called before LM work).

The LM keeps its own cache following the path it was last asked about; the tree asks
about each node once, so `lm_calls` counts distinct node evaluations.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from adaptrack_lsp.completion.decoders.base import Counters, DecodeCancelled, DecodeRequest, DecodeResult, Sample

UNCHECKED, INVALID, VALID = -1, 0, 1
#: below this log-probability float32 exp loses precision (denormals) and then underflows
FLOAT32_EXP_FLOOR = -80.0
#: tokens per block when drawing from a large distribution in two levels
DRAW_BLOCK = 1024


class BudgetExceeded(Exception):
    """The request's wall-clock budget ran out (decoders turn this into a partial result)."""


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
        "q",
        "checked",
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
        self.candidates: np.ndarray | None = None  # int32 token ids, ascending
        self.raw_logprobs: np.ndarray | None = None  # float32 log P(u|x) at temperature 1
        self.probs: np.ndarray | None = None  # float64 P(u|x) at the request temperature
        self.validity: np.ndarray | None = None  # int8: UNCHECKED / INVALID / VALID
        self.child_q: np.ndarray | None = None  # float64 Q[x+u] per candidate
        self.q = 1.0 if valid else 0.0
        self.checked = False  # every candidate's validity is known (or assumed invalid)

    @property
    def leaf(self) -> bool:
        return self.terminal or self.cut

    def index_of(self, token_id: int) -> int | None:
        """Candidate index of `token_id`, None if it is not a (kept) candidate."""
        if self.candidates is None:
            return None
        index = int(np.searchsorted(self.candidates, token_id))
        if index < self.candidates.size and self.candidates[index] == token_id:
            return index
        return None

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
        self.greedy = temperature <= 0.0
        self.temperature = 1.0 if self.greedy else float(temperature)
        self.max_new_tokens = max(1, int(request.max_new_tokens))
        self.started = time.perf_counter()
        self.deadline = None if request.timeout_s is None else self.started + float(request.timeout_s)
        self._eos = np.fromiter(sorted(self.vocab.eos_ids), dtype=np.int64)
        self._special_or_padding = self._excluded_ids()

        fed_before = lm.tokens_fed
        info = lm.set_prompt(list(request.prompt_ids), max_new_tokens=self.max_new_tokens, cache_key=request.cache_key)
        self.prompt_info = info
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

    def evaluate(self, node: Node, with_validity: bool = False) -> None:
        """Ask the LM for P(.|node) once; store the candidates compactly.

        Candidates are the tokens within `prune_logprob` nats of the best one.  With
        `with_validity` the whole vocabulary is checked at once and every *valid* token
        is kept whatever its probability, so pruning never turns a valid (if unlikely)
        continuation into a dead end; invalid tokens are then dropped.
        """
        if node.evaluated:
            return
        if node.leaf:
            raise ValueError("a complete or cut node has no next-token distribution")
        self.poll()
        fed_before = self.lm.tokens_fed
        start = time.perf_counter()
        logprobs = self.lm.next_logprobs(node.path())
        self.counters.lm_seconds += time.perf_counter() - start
        self.counters.lm_calls += 1
        self.counters.tokens_fed += self.lm.tokens_fed - fed_before

        logprobs = np.asarray(logprobs, dtype=np.float32)
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
        if self.temperature == 1.0:
            scaled = logprobs  # the LM's log-probabilities are normalised already
            log_normaliser = 0.0
        else:
            scaled = logprobs / np.float32(self.temperature)
            # normaliser over the whole vocabulary: special/padding mass is lost (invalid) mass
            shifted_top = top / self.temperature
            log_normaliser = shifted_top + math.log(float(np.exp(scaled.astype(np.float64) - shifted_top).sum()))
        eligible = np.where(self._special_or_padding, -np.inf, scaled)
        best = float(eligible.max())
        if best == -np.inf:
            candidates = np.zeros(0, dtype=np.int32)
            checked_valid = False
        elif with_validity and node.valid:
            # every token is checked at once: keep exactly the valid ones, whatever their
            # probability (invalid tokens carry no Q and are never drawn)
            start = time.perf_counter()
            valid_mask = np.asarray(self.constraint.mask(node.state), dtype=bool)[: self.vocab.size]
            self.counters.constraint_seconds += time.perf_counter() - start
            candidates = np.flatnonzero(valid_mask & (eligible > -np.inf)).astype(np.int32)
            self.counters.constraint_checks += int(np.count_nonzero(eligible >= best - self.prune_logprob))
            checked_valid = True
        else:
            candidates = np.flatnonzero(eligible >= best - self.prune_logprob).astype(np.int32)
            checked_valid = False
        node.candidates = candidates  # ascending token ids
        node.raw_logprobs = logprobs[candidates]
        # exp in float32 (the LM's precision; float64 exp over a 150k vocabulary costs
        # ms), except where float32 would underflow: a valid token of probability 1e-50
        # is rare, but zero would make a dead end of it
        values = scaled[candidates] - np.float32(log_normaliser)
        node.probs = np.exp(values).astype(np.float64)
        tiny = values < FLOAT32_EXP_FLOOR
        if tiny.any():
            node.probs[tiny] = np.exp(values[tiny].astype(np.float64))
        if checked_valid:
            node.validity = np.full(candidates.size, VALID, dtype=np.int8)
        else:
            node.validity = np.full(candidates.size, UNCHECKED if node.valid else INVALID, dtype=np.int8)
        node.child_q = np.ones(candidates.size, dtype=np.float64) if node.valid else np.zeros(candidates.size)
        node.evaluated = True
        node.checked = checked_valid or not node.valid
        self._recompute_q(node)

    def _compact(self, node: Node) -> None:
        """Drop invalid candidates of a fully checked node that has no children yet."""
        if node.children or node.candidates.size < 256:
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
        """Decide the validity of every candidate (evaluating the node if needed)."""
        self.evaluate(node, with_validity=True)
        if node.checked:
            return
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
        node.checked = True
        self._compact(node)
        self._recompute_q(node)

    def check_top_p(self, node: Node, p: float, chunk: int = 16) -> None:
        """Check candidates from most to least probable until the known-valid mass over
        valid + unchecked mass reaches `p` (paper RQ3); the rest count as invalid."""
        if p >= 1.0:
            self.check_all(node)
            return
        self.evaluate(node)
        if node.checked:
            return
        unchecked = np.flatnonzero(node.validity == UNCHECKED)
        order = unchecked[np.argsort(-node.probs[unchecked], kind="stable")]  # most probable first
        valid_mass = float(node.probs[node.validity == VALID].sum())
        unchecked_mass = float(node.probs[order].sum())
        position = 0
        start = time.perf_counter()
        while position < order.size:
            total = valid_mass + unchecked_mass
            if total <= 0.0 or valid_mass / total >= p:
                break
            batch = order[position : position + chunk]
            verdicts = np.asarray(self.constraint.allowed(node.state, node.candidates[batch]), dtype=bool)
            self.counters.constraint_checks += int(batch.size)
            self._set_validity(node, batch, verdicts)
            batch_mass = node.probs[batch]
            valid_mass += float(batch_mass[verdicts].sum())
            unchecked_mass -= float(batch_mass.sum())
            position += batch.size
        self.counters.constraint_seconds += time.perf_counter() - start
        rest = order[position:]
        if rest.size:
            node.validity[rest] = INVALID
            node.child_q[rest] = 0.0
        node.checked = True
        self._compact(node)
        self._recompute_q(node)

    def check_one(self, node: Node, index: int) -> bool:
        """Validity of one candidate (lazy samplers); creates the child when valid."""
        verdict = node.validity[index]
        if verdict != UNCHECKED:
            return verdict == VALID
        return self.child(node, index) is not None

    # -- children -----------------------------------------------------------------
    def child(self, node: Node, index: int, require_valid: bool = True) -> Node | None:
        """The child for candidate `index`, created on first use.

        With `require_valid`, an invalid token returns None (and is recorded); without
        it (unconstrained sampling) an invalid child is created with `valid=False`.
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
            if not valid:
                node.child_q[index] = 0.0
                self._recompute_q(node)
        if not valid and require_valid:
            return None
        child = Node(node, token, index, state, valid)
        child.text = node.text + self.vocab.text(token)
        child.logprob = node.logprob + float(node.raw_logprobs[index])
        if token in self.vocab.eos_ids:
            child.terminal = True
        elif self.request.stop is not None and self.vocab.text(token) and self.request.stop(child.text):
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
            # einsum, not BLAS dot: BLAS threads fight the model's threads for the cores
            node.q = float(np.einsum("i,i->", node.probs, node.child_q)) if node.probs.size else 0.0
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
        return changes

    def record_invalid(self, node: Node, index: int) -> list[QChange]:
        """Mark candidate `index` of `node` invalid and propagate (rejection samplers)."""
        node.validity[index] = INVALID
        node.child_q[index] = 0.0
        q_before = node.q
        self._recompute_q(node)
        if node.q == q_before:
            return []
        return self.propagate(node)

    # -- sampling helpers -------------------------------------------------------------
    def weights(self, node: Node, use_q: bool = True) -> np.ndarray:
        """Unnormalised next-token weights: P(u|x)·Q[x+u] (or P(u|x)·valid(u))."""
        if use_q:
            return node.probs * node.child_q
        return node.probs * (node.validity == VALID)

    def draw(self, weights: np.ndarray, rng: np.random.Generator) -> int | None:
        """Candidate index drawn in proportion to `weights` (argmax when greedy)."""
        if weights.size == 0:
            return None
        if self.greedy:
            index = int(np.argmax(weights))
            return index if weights[index] > 0.0 else None
        if weights.size > DRAW_BLOCK * 4:  # two levels: pick a block, then a token in it
            block_sums = np.add.reduceat(weights, np.arange(0, weights.size, DRAW_BLOCK))
            block_cumulative = np.cumsum(block_sums)
            if not block_cumulative[-1] > 0.0:
                return None
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
            total = float(weights.sum())
            if total <= 0.0:
                return None
            cumulative = np.cumsum(weights)
            index = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
            index = min(index, weights.size - 1)
        if weights[index] <= 0.0:  # rounding landed on a zero-width bucket: nearest real one
            nonzero = np.flatnonzero(weights > 0.0)
            index = int(nonzero[min(np.searchsorted(nonzero, index), nonzero.size - 1)])
        return index

    def sample_of(self, node: Node) -> Sample:
        tokens = node.path()
        return Sample(
            token_ids=tokens,
            text=self.vocab.decode(t for t in tokens if t not in self.vocab.eos_ids),
            logprob=node.logprob,
            complete=node.terminal,
            valid=node.valid,
        )
    def partial_sample(self, node: Node) -> Sample:
        """A sample for a path that did not end (cut by max_new_tokens or the budget)."""
        sample = self.sample_of(node)
        sample.complete = False
        return sample

    def result(self, samples: list[Sample], counters: Counters, status: str, message: str = "", failures: int = 0, prompt_info=None) -> DecodeResult:
        """The decode's result; `prompt_info` defaults to this tree's (a decode that built
        several trees passes the first one's)."""
        info = prompt_info if prompt_info is not None else self.prompt_info
        return DecodeResult(
            samples=samples,
            counters=counters,
            status=status,
            message=message,
            prompt_truncated=getattr(info, "truncated", 0),
            prompt_reused=getattr(info, "reused", 0),
            failures=failures,
        )


def finish_status(samples: Sequence[Sample], failures: int, root_q: float) -> str:
    if not samples and root_q <= 0.0:
        return "no_valid_completion"
    if any(not s.complete for s in samples):
        return "partial"
    if failures:
        return "failed"
    return "ok"


Factory = Callable[[], PrefixTree]
