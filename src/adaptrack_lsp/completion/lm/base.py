"""The LanguageModel protocol: next-token log-probabilities for a token path after a prompt.

A decoder never calls a model directly; the prefix tree (`completion/tree.py`) asks the
model for a node's distribution exactly once.  A backend keeps whatever state makes
moving between paths cheap (the HF backend keeps one KV cache that follows the current
path), and counts `tokens_fed`: every token pushed through the network, prompt included.

Two shapes of distribution:

- **full** (`LanguageModel.next_logprobs`): log P(u | x) for every id; in-process engines.
- **partial** (`PartialLanguageModel`, `partial = True`): the top-K ids with their
  log-probabilities plus the tail's total mass 1 - sum(top-K) (`TopK`), which is what a
  remote engine returns.  The tail is never enumerated: `draw_excluding` asks the engine
  for ONE token with the known ids excluded, an exact draw from P(u | x) restricted to
  the rest, with its log-probability under the unrestricted P.  The prefix tree keeps
  such a node as candidates + tail bucket and moves each drawn token out of the tail.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from adaptrack_lsp.vocab import Vocabulary


class ModelError(RuntimeError):
    """A model could not be loaded or produced unusable output (NaN/inf logits)."""


class EngineUnavailable(ModelError):
    """A remote engine did not answer usably (down, slow, HTTP error, malformed reply, a
    mismatch found at connect).  The message names the fix; the server reports it as
    status ``degraded`` and tries again on the next request (recovery when it returns)."""


@dataclass
class PromptInfo:
    """What `set_prompt` did with the prompt."""

    length: int  # prompt tokens the model conditions on (after truncation)
    truncated: int = 0  # tokens dropped from the left to fit the context window
    reused: int = 0  # prompt tokens whose KV state was reused from the previous prompt


class LanguageModel(ABC):
    """Next-token distributions over `vocab` for paths after the current prompt."""

    vocab: Vocabulary
    tokens_fed: int = 0
    #: maximum tokens of context (prompt + path); None when unbounded
    max_context: int | None = None
    #: a short name for reports
    name: str = "model"
    #: next-token distributions are `TopK` (see `PartialLanguageModel`), not full arrays
    partial: bool = False
    #: requests sent to a remote engine (0 for in-process engines); the tree counts the
    #: difference per decode as `server_calls`
    server_calls: int = 0
    #: `next_logprobs_batch` of sibling paths costs about one forward pass (the prefix
    #: tree then evaluates a node's next siblings with it, ahead of need; see
    #: `PrefixTree`); False: a batch is as dear as its paths one by one
    batched_nodes: bool = False
    #: `time.perf_counter()` by which the current decode must end (set by the prefix
    #: tree; None: unbounded).  Backends that wait on I/O stop waiting there and raise
    #: `BudgetExceeded`; in-process backends ignore it.
    deadline: float | None = None

    @abstractmethod
    def set_prompt(
        self, prompt_ids: Sequence[int], max_new_tokens: int = 0, cache_key: Hashable | None = None
    ) -> PromptInfo:
        """Condition every following `next_logprobs` on `prompt_ids`.

        `cache_key` names a prompt-cache slot (e.g. a document URI) for backends that
        keep several; the others ignore it.

        Left-truncates the prompt so that prompt + `max_new_tokens` fits `max_context`
        (the result says how much was dropped).  Backends that cache may reuse the
        longest common prefix with the previous prompt.
        """

    @abstractmethod
    def next_logprobs(self, path: Sequence[int]) -> np.ndarray:
        """log P(. | prompt + path) as float32[vocab.size] (float64 for exact tables);
        -inf for impossible ids.

        Raises `ModelError` on NaN logits.  Ids beyond the tokenizer are -inf.
        """

    def next_logprobs_batch(self, paths: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """`next_logprobs` of several paths after the current prompt, in input order.

        Backends may evaluate them in one forward pass (the static-cache HF backend
        does, for paths whose ancestors were evaluated before); each path still counts
        one token in `tokens_fed`.  Worth calling wherever several nodes are known
        before any of their distributions is needed: the first steps of k samples, a
        beam's or MAP frontier, CARS/RS restarts.  AdapTrack's rejection within one
        sample is sequential (the next node depends on the last draw) and gains nothing.
        """
        return [self.next_logprobs(p) for p in paths]

    def warm_up(self, max_prompt_tokens: int, max_new_tokens: int) -> None:
        """Prepare for requests of up to these sizes (the static-cache backend captures its
        CUDA graphs here); the default does nothing."""
        return None

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (no special tokens added)."""
        raise NotImplementedError(f"{type(self).__name__} has no tokenizer")


def normalize_logprobs(logits: np.ndarray) -> np.ndarray:
    """log-softmax in float64 then float32; raises ModelError on NaN or all -inf."""
    values = np.asarray(logits, dtype=np.float64)
    if np.isnan(values).any() or np.isposinf(values).any():
        raise ModelError("the model produced NaN or +inf logits")
    top = values.max()
    if not np.isfinite(top):
        raise ModelError("the model gave every token zero probability")
    shifted = values - top
    return (shifted - np.log(np.exp(shifted).sum())).astype(np.float32)


@dataclass
class TopK:
    """A partial next-token distribution: `ids` (most probable first) with their
    log-probabilities, and the total probability of every other id (`tail_mass`).

    `exhaustive`: the ids are the whole support (the tail is empty by construction, not
    by rounding).  `truncated`: the engine cannot exclude tokens, so the model is the
    top-K truncation: the probabilities were renormalised over `ids` and the tail is 0.
    """

    ids: np.ndarray  # int64
    logprobs: np.ndarray  # float64, log P(u | x) under the engine's own distribution
    tail_mass: float
    exhaustive: bool = False
    truncated: bool = False

    @classmethod
    def of(cls, ids: Sequence[int], logprobs: Sequence[float], *, exhaustive: bool = False, truncate: bool = False) -> TopK:
        """From an engine's top list: sorted most probable first; the tail's mass is
        1 - sum(exp(logprobs)) clamped at 0 (float32 rounding can push the sum past 1);
        `truncate` renormalises over the list (the top-K truncation)."""
        ids_array = np.asarray(ids, dtype=np.int64)
        values = np.asarray(logprobs, dtype=np.float64)
        if ids_array.shape != values.shape or ids_array.ndim != 1:
            raise ModelError("a top-K list needs one log-probability per id")
        if np.isnan(values).any() or np.isposinf(values).any():
            raise ModelError("the engine returned NaN or +inf log-probabilities")
        order = np.argsort(-values, kind="stable")
        ids_array, values = ids_array[order], values[order]
        if ids_array.size and np.unique(ids_array).size != ids_array.size:
            raise ModelError("the engine listed a token twice in one top-K list")
        finite = values[np.isfinite(values)]
        if truncate and finite.size:
            top = float(finite.max())
            values = values - (top + math.log(float(np.exp(finite - top).sum())))
            return cls(ids_array, values, 0.0, exhaustive, True)
        total = math.fsum(np.exp(finite).tolist())
        tail = 0.0 if exhaustive else max(0.0, 1.0 - total)
        return cls(ids_array, values, tail, exhaustive, False)

    @property
    def smallest(self) -> float:
        """P of the least probable listed id (0 when the list is empty): no tail token
        is more probable than this."""
        return float(math.exp(self.logprobs[-1])) if self.logprobs.size else 0.0


class PartialLanguageModel(LanguageModel):
    """A model whose node distributions are top-K + tail (a remote engine).

    The prefix tree calls `next_top` once per node and `draw_excluding` to take a token
    out of a node's tail; `next_logprobs` (the full distribution) may be unavailable or
    expensive (a remote engine sends the whole vocabulary), and the tree asks for it
    only when a node's tail needs more than a few draws.
    """

    partial = True
    #: whether `draw_excluding` can exclude tokens; False: every `TopK` is `truncated`
    can_exclude: bool = True
    #: whether `next_logprobs` (every id) is available
    can_enumerate: bool = False

    @abstractmethod
    def next_top(self, path: Sequence[int], *, greedy: bool = True, seed: int | None = None) -> TopK:
        """The top-K distribution after prompt + `path`.  `greedy`/`seed` say how an
        engine that computes ahead should continue past `path` (its own argmax path, or
        a sample from P with `seed`); they never change the returned distribution."""

    @abstractmethod
    def draw_excluding(
        self, path: Sequence[int], excluded: Sequence[int], *, greedy: bool, seed: int
    ) -> tuple[int, float] | None:
        """One token of P(. | prompt + path) restricted to the ids not in `excluded`
        (the most probable one when `greedy`, else a draw seeded by `seed`), with its
        log-probability under the UNRESTRICTED P.  None when no such token has positive
        probability."""

    def knows_full(self, path: Sequence[int]) -> bool:
        """Whether the full distribution after `path` is at hand without asking the
        engine (then the tree enumerates a tail instead of drawing from it)."""
        return False

    def next_logprobs(self, path: Sequence[int]) -> np.ndarray:
        raise ModelError(f"{self.name} gives top-K distributions only")
