"""TabularLM: exact, hand-set conditionals over a small vocabulary.

The reference for exactness tests and DSL experiments: P(u | path) is whatever the
table says, so P(s) and P(s | c) can be enumerated exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from adaptrack_lsp.completion.lm.base import LanguageModel, ModelError, PromptInfo
from adaptrack_lsp.completion.vocab import Vocabulary

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
