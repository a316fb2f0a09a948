"""The LanguageModel protocol: next-token log-probabilities for a token path after a prompt.

A decoder never calls a model directly; the prefix tree (`completion/tree.py`) asks the
model for a node's distribution exactly once.  A backend keeps whatever state makes
moving between paths cheap (the HF backend keeps one KV cache that follows the current
path), and counts `tokens_fed`: every token pushed through the network, prompt included.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from adaptrack_lsp.completion.vocab import Vocabulary


class ModelError(RuntimeError):
    """A model could not be loaded or produced unusable output (NaN/inf logits)."""


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
