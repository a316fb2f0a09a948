"""Model providers for the evaluation runner: a real LM, or the simulated-intent LM.

- ``--model simulated``: `SimulatedProvider` builds one `SimulatedIntentLM` per item
  (the item's intended API chains) over the tiny model's real byte-level BPE tokenizer;
  reports label the results a simulation.
- ``--model tiny`` or any Hugging Face path/id: `LMProvider` wraps the one
  `LanguageModel` from `completion.lm.loading.load_model` and tokenizes prompts with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from adaptrack_lsp.evaluation.items import EvalItem
from adaptrack_lsp.evaluation.simulated import (
    SIMULATION_LABEL,
    Candidate,
    SimulatedIntentLM,
    candidates_for_oracle,
    tfv1_intent_candidates,
)

SIMULATED = "simulated"


class LMProvider:
    """One language model for every item."""

    simulated = False

    def __init__(self, lm, label: str | None = None):
        self.lm = lm
        self.vocab = lm.vocab
        self.label = label or getattr(lm, "name", "model")
        self._prompt_cache: dict[str, list[int]] = {}

    def lm_for(self, item: EvalItem):
        return self.lm

    def prompt_ids(self, item: EvalItem) -> list[int]:
        ids = self._prompt_cache.get(item.item_id)
        if ids is None:
            ids = self._prompt_cache[item.item_id] = list(self.lm.encode(item.prompt))
        return ids

    def count_tokens(self, text: str) -> int:
        return len(self.lm.encode(text))


class SimulatedProvider:
    """A `SimulatedIntentLM` per item, over a real tokenizer's vocabulary."""

    simulated = True
    label = SIMULATION_LABEL

    def __init__(
        self,
        vocab,
        encode: Callable[[str], list[int]],
        smoothing: float = 0.05,
        candidates_for: Callable[[EvalItem], list[Candidate]] | None = None,
    ):
        self.vocab = vocab
        self._encode = encode
        self.smoothing = smoothing
        self._candidates_for = candidates_for or default_candidates
        self._prompt_cache: dict[str, list[int]] = {}

    def lm_for(self, item: EvalItem) -> SimulatedIntentLM:
        return SimulatedIntentLM(self.vocab, self._encode, self._candidates_for(item), smoothing=self.smoothing)

    def prompt_ids(self, item: EvalItem) -> list[int]:
        ids = self._prompt_cache.get(item.item_id)
        if ids is None:
            ids = self._prompt_cache[item.item_id] = list(self._encode(item.prompt))
        return ids

    def count_tokens(self, text: str) -> int:
        return len(self._encode(text))


def default_candidates(item: EvalItem) -> list[Candidate]:
    """TFv1 items carry their API (``meta["api"]``); other items use the oracle chain."""
    api = item.meta.get("api")
    if isinstance(api, str) and api.startswith("tf.compat.v1."):
        return tfv1_intent_candidates(api[len("tf.compat.v1.") :])
    return candidates_for_oracle(item.oracle)


def tiny_tokenizer():
    """(tokenizer, logits size) of the built-in tiny model (built and cached on first use)."""
    from transformers import PreTrainedTokenizerFast

    from adaptrack_lsp.completion.lm.tiny import tiny_model_path

    folder = tiny_model_path()
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(folder))
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return tokenizer, int(config["vocab_size"])


def simulated_provider(smoothing: float = 0.05) -> SimulatedProvider:
    """The simulated-intent provider over the tiny model's tokenizer."""
    from adaptrack_lsp.completion.tokenizer_bytes import vocabulary_from_tokenizer

    tokenizer, logits_size = tiny_tokenizer()
    vocab = vocabulary_from_tokenizer(tokenizer, logits_size=logits_size)

    def encode(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    return SimulatedProvider(vocab, encode, smoothing=smoothing)


def load_provider(model: str, device: str | None = None, dtype: str | None = None, **options: Any):
    """``simulated`` or a model for `completion.lm.loading.load_model` (``tiny``, a path, a hub id)."""
    if model == SIMULATED:
        return simulated_provider()
    from adaptrack_lsp.completion.lm import loading

    kwargs: dict[str, Any] = {}
    if device is not None:
        kwargs["device"] = device
    if dtype is not None:
        kwargs["dtype"] = dtype
    kwargs.update(options)
    lm = loading.load_model(model, **kwargs)
    return LMProvider(lm, label=model)
