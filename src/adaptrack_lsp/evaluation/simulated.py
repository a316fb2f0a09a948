"""The simulated-intent LM: an exact language model over whole strings, for machines without weights.

`SimulatedIntentLM` is a mixture over complete strings,

    P(s) = (1 - smoothing) * sum_i w_i [s = tokens(c_i) + EOS] + smoothing * S(s),

where the candidates c_i are weighted completions tokenized by a real tokenizer and S is
a token-level smoothing distribution (EOS gets `smoothing_eos`, every ordinary token an
equal share of the rest), so every valid string keeps some probability.  Its next-token
conditionals are computed by marginalising the mixture over the strings consistent with
the path, so P(s) is exactly the product of what `next_logprobs` returns: decoders see a
proper LanguageModel whose P(s|c) is known in closed form.

`tfv1_intent_candidates(path)` gives the prior of a model that does not know the
TensorFlow version (paper §6.1): it prefers the v1 spelling ``.losses.log_loss`` over
``.compat.v1.losses.log_loss`` and keeps some mass on a flat ``.log_loss`` and on a
module-less guess.  Per-item weights are jittered reproducibly from the API path.
Results obtained with it are a simulation and are labelled so in every report.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from adaptrack_lsp.completion.lm.base import LanguageModel, PromptInfo
from adaptrack_lsp.vocab import Vocabulary

SIMULATION_LABEL = "simulated-intent LM (SIMULATION: weighted candidate strings, not a neural model)"


@dataclass(frozen=True)
class Candidate:
    """One whole completion the simulated model intends, with its weight."""

    text: str
    weight: float


class SimulatedIntentLM(LanguageModel):
    """Exact next-token conditionals of a weighted-candidates + smoothing string mixture."""

    name = "simulated"

    def __init__(
        self,
        vocab: Vocabulary,
        encode: Callable[[str], list[int]],
        candidates: Sequence[Candidate],
        smoothing: float = 0.05,
        smoothing_eos: float = 0.25,
    ):
        if not 0.0 < smoothing < 1.0:
            raise ValueError(f"smoothing must be in (0, 1), got {smoothing}")
        if not 0.0 < smoothing_eos < 1.0:
            raise ValueError(f"smoothing_eos must be in (0, 1), got {smoothing_eos}")
        if not candidates:
            raise ValueError("the simulated LM needs at least one candidate")
        total = float(sum(c.weight for c in candidates))
        if total <= 0 or any(c.weight < 0 for c in candidates):
            raise ValueError("candidate weights must be non-negative with a positive sum")
        self.vocab = vocab
        self._encode = encode
        self.smoothing = float(smoothing)
        self.eos_id = min(vocab.eos_ids)
        # smoothing conditional S(u): EOS gets smoothing_eos, ordinary tokens share the rest
        ordinary = np.zeros(vocab.size, dtype=bool)
        ordinary[: vocab.num_defined] = True
        for i in vocab.special_ids:
            ordinary[i] = False
        for i, data in enumerate(vocab.token_bytes):
            if not data:
                ordinary[i] = False
        if not ordinary.any():
            raise ValueError("the vocabulary has no ordinary tokens")
        self._smooth = np.zeros(vocab.size, dtype=np.float64)
        self._smooth[ordinary] = (1.0 - smoothing_eos) / ordinary.sum()
        self._smooth[self.eos_id] = smoothing_eos
        with np.errstate(divide="ignore"):
            self._log_smooth = np.log(self._smooth)
        # candidates as token sequences ending in EOS; weights merged per sequence
        merged: dict[tuple[int, ...], float] = {}
        self.candidates: list[Candidate] = []
        for c in candidates:
            if c.weight == 0:
                continue
            ids = tuple(encode(c.text)) + (self.eos_id,)
            merged[ids] = merged.get(ids, 0.0) + c.weight / total
            self.candidates.append(Candidate(c.text, c.weight / total))
        self.sequences = merged
        # prefix -> {next token: candidate mass}
        self._next: dict[tuple[int, ...], dict[int, float]] = {}
        for ids, weight in merged.items():
            for length in range(len(ids)):
                bucket = self._next.setdefault(ids[:length], {})
                bucket[ids[length]] = bucket.get(ids[length], 0.0) + weight
        self.tokens_fed = 0
        self.prompt: tuple[int, ...] = ()

    # -- LanguageModel --------------------------------------------------------------
    def set_prompt(self, prompt_ids: Sequence[int], max_new_tokens: int = 0, cache_key=None) -> PromptInfo:
        self.prompt = tuple(prompt_ids)
        self.tokens_fed += len(self.prompt)
        return PromptInfo(length=len(self.prompt))

    def encode(self, text: str) -> list[int]:
        return list(self._encode(text))

    def log_smoothing_prefix(self, path: Sequence[int]) -> float:
        return float(sum(self._log_smooth[t] for t in path))

    def next_probs(self, path: Sequence[int]) -> np.ndarray:
        """Exact P(. | path) as float64."""
        path = tuple(int(t) for t in path)
        candidate_next = self._next.get(path, {})
        log_candidate = math.log1p(-self.smoothing) + math.log(sum(candidate_next.values())) if candidate_next else -math.inf
        log_smooth = math.log(self.smoothing) + self.log_smoothing_prefix(path)
        top = max(log_candidate, log_smooth)
        if top == -math.inf:
            raise ValueError(f"the simulated LM gives the path {list(path)} probability 0")
        probs = math.exp(log_smooth - top) * self._smooth
        if candidate_next:
            scale = math.exp(math.log1p(-self.smoothing) - top)
            for token, mass in candidate_next.items():
                probs[token] += scale * mass
        return probs / probs.sum()

    def next_logprobs(self, path: Sequence[int]) -> np.ndarray:
        self.tokens_fed += 1 if len(path) else 0
        with np.errstate(divide="ignore"):
            return np.log(self.next_probs(path)).astype(np.float32)

    # -- exact sequence probabilities -------------------------------------------------
    def sequence_logprob(self, token_ids: Sequence[int]) -> float:
        """log P(token_ids) in closed form (token_ids ends with EOS for a whole string)."""
        ids = tuple(int(t) for t in token_ids)
        candidate = self.sequences.get(ids, 0.0) if ids and ids[-1] in self.vocab.eos_ids else 0.0
        terms = [math.log(self.smoothing) + self.log_smoothing_prefix(ids)]
        if candidate > 0:
            terms.append(math.log1p(-self.smoothing) + math.log(candidate))
        top = max(terms)
        return top + math.log(sum(math.exp(t - top) for t in terms))


def _jitter(key: str, index: int) -> float:
    """A reproducible number in [0, 1) from `key` (stable across processes)."""
    digest = hashlib.sha256(f"{key}#{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


CALL_SUFFIX = "(*args, **kwargs)\n"


def tfv1_intent_candidates(path: str, suffix: str = CALL_SUFFIX) -> list[Candidate]:
    """The version-unaware intent for TFv1 API path ``x.y`` (text after ``return tf``).

    v1 spelling ``.x.y`` 0.45-0.75; ``.compat.v1.x.y`` 0.10-0.30 (always below the v1
    spelling); flat ``.y`` 0.03-0.10; ``.x_y``-style module-less guess 0.02-0.06.
    """
    last = path.rsplit(".", 1)[-1]
    v1 = 0.45 + 0.30 * _jitter(path, 0)
    compat = 0.10 + 0.20 * _jitter(path, 1)
    flat = 0.03 + 0.07 * _jitter(path, 2)
    guess = 0.02 + 0.04 * _jitter(path, 3)
    candidates = [
        Candidate("." + path + suffix, v1),
        Candidate(".compat.v1." + path + suffix, compat),
    ]
    if "." in path:
        candidates.append(Candidate("." + last + suffix, flat))
        candidates.append(Candidate("." + path.replace(".", "_") + suffix, guess))
    else:
        candidates.append(Candidate(".compat.v2." + path + suffix, flat))
    return candidates


def candidates_for_oracle(oracle_text: str, suffix: str = CALL_SUFFIX) -> list[Candidate]:
    """Intent for an arbitrary oracle chain ``.compat.v1.x.y`` or ``.x.y`` (TFv1Real items)."""
    chain = oracle_text[len(".compat.v1.") :] if oracle_text.startswith(".compat.v1.") else oracle_text.lstrip(".")
    return tfv1_intent_candidates(chain, suffix)
