"""TabularLM: exact, hand-set conditionals over a small vocabulary.

The reference for exactness tests and DSL experiments: P(u | path) is whatever the
table says, so P(s) and P(s | c) can be enumerated exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from adaptrack_lsp.completion.lm.base import LanguageModel, ModelError, PartialLanguageModel, PromptInfo, TopK
from adaptrack_lsp.vocab import Vocabulary

Conditional = Callable[[tuple[int, ...]], Sequence[float]]


class TabularLM(LanguageModel):
    """An LM given by `conditional(path) -> probabilities over vocab` or a lookup table.

    `table` maps exact token-id paths to probability vectors; paths not in the table use
    `default`.  Probabilities must be non-negative and sum to 1 (within 1e-6).
    """

    name = "tabular"

    def __init__(
        self,
        vocab: Vocabulary,
        default: Sequence[float] | None = None,
        table: Mapping[tuple[int, ...], Sequence[float]] | None = None,
        conditional: Conditional | None = None,
    ):
        if conditional is None and default is None:
            raise ValueError("TabularLM needs a default distribution or a conditional function")
        self.vocab = vocab
        self._default = None if default is None else self._check(default, "default")
        self._table = {tuple(k): self._check(v, f"next[{list(k)}]") for k, v in (table or {}).items()}
        self._conditional = conditional
        self.tokens_fed = 0
        self.prompt: tuple[int, ...] = ()

    def _check(self, probs: Sequence[float], where: str) -> np.ndarray:
        values = np.asarray(probs, dtype=np.float64)
        if values.shape != (self.vocab.size,):
            raise ValueError(f"{where}: expected {self.vocab.size} probabilities, got {values.shape}")
        if (values < 0).any() or not np.isfinite(values).all():
            raise ValueError(f"{where}: probabilities must be finite and non-negative")
        if abs(values.sum() - 1.0) > 1e-6:
            raise ValueError(f"{where}: probabilities sum to {values.sum():.6g}, not 1")
        return values

    def probs(self, path: Sequence[int]) -> np.ndarray:
        """Exact P(. | path) as float64."""
        key = tuple(path)
        if self._conditional is not None:
            values = np.asarray(self._conditional(key), dtype=np.float64)
            if np.isnan(values).any():
                raise ModelError(f"the tabular conditional gave NaN at {list(key)}")
            return values
        return self._table.get(key, self._default)

    def set_prompt(self, prompt_ids: Sequence[int], max_new_tokens: int = 0, cache_key=None) -> PromptInfo:
        self.prompt = tuple(prompt_ids)
        self.tokens_fed += len(self.prompt)
        return PromptInfo(length=len(self.prompt))

    def next_logprobs(self, path: Sequence[int]) -> np.ndarray:
        # the root's distribution comes from the prompt; every other node feeds its token
        self.tokens_fed += 1 if len(path) else 0
        with np.errstate(divide="ignore"):
            return np.log(self.probs(path))  # float64: exact tables keep their precision

    def encode(self, text: str) -> list[int]:
        """Greedy longest-match tokenization over the literal token strings."""
        names = getattr(self.vocab, "names", None) or self.vocab.texts
        by_text = sorted(((t, i) for i, t in enumerate(names) if t), key=lambda x: -len(x[0]))
        ids, position = [], 0
        while position < len(text):
            for token, token_id in by_text:
                if text.startswith(token, position):
                    ids.append(token_id)
                    position += len(token)
                    break
            else:
                raise ValueError(f"cannot tokenize {text[position:]!r} with this vocabulary")
        return ids


class TopKTabularLM(PartialLanguageModel):
    """An exact `TabularLM` seen the way a remote engine shows a model: per node only the
    `k` most probable tokens with their log-probabilities and the tail's mass, plus
    draws of one token with some ids excluded (`draw_excluding`).  The reference for the
    exactness of the decoders on top-K nodes: the samples must follow the same P(s | c)
    as on the full table.

    `can_exclude=False` makes it an engine that cannot exclude tokens (its model is the
    top-K truncation); `can_enumerate=True` also gives full distributions.
    """

    name = "tabular-top-k"

    def __init__(self, inner: TabularLM, k: int, *, can_exclude: bool = True, can_enumerate: bool = False):
        if k < 1:
            raise ValueError("k must be at least 1")
        self.inner = inner
        self.vocab = inner.vocab
        self.k = int(k)
        self.can_exclude = can_exclude
        self.can_enumerate = can_enumerate
        self.tokens_fed = 0
        self.top_calls = 0
        self.draw_calls = 0

    def set_prompt(self, prompt_ids: Sequence[int], max_new_tokens: int = 0, cache_key=None) -> PromptInfo:
        info = self.inner.set_prompt(prompt_ids, max_new_tokens, cache_key)
        self.tokens_fed = self.inner.tokens_fed
        return info

    def _probs(self, path: Sequence[int]) -> np.ndarray:
        self.tokens_fed += 1 if len(path) else 0
        return self.inner.probs(path)

    def next_top(self, path: Sequence[int], *, greedy: bool = True, seed: int | None = None) -> TopK:
        self.top_calls += 1
        probs = self._probs(path)
        positive = np.flatnonzero(probs > 0.0)
        order = positive[np.argsort(-probs[positive], kind="stable")][: self.k]
        exhaustive = order.size == positive.size
        return TopK.of(order, np.log(probs[order]), exhaustive=exhaustive, truncate=not self.can_exclude)

    def draw_excluding(self, path: Sequence[int], excluded: Sequence[int], *, greedy: bool, seed: int):
        if not self.can_exclude:
            raise ModelError("this engine cannot exclude tokens")
        self.draw_calls += 1
        probs = self._probs(path).copy()
        probs[np.asarray(excluded, dtype=np.int64)] = 0.0
        if not probs.sum() > 0.0:
            return None
        if greedy:
            token = int(np.argmax(probs))
        else:
            token = int(np.random.default_rng(seed).choice(probs.size, p=probs / probs.sum()))
        return token, float(np.log(self.inner.probs(path)[token]))

    def next_logprobs(self, path: Sequence[int]) -> np.ndarray:
        if not self.can_enumerate:
            raise ModelError("this engine gives top-K distributions only")
        with np.errstate(divide="ignore"):
            return np.log(self._probs(path))
