"""The decoder interface: `decode(lm, constraint, request) -> DecodeResult`.

Every decoder runs on the shared prefix tree (`completion/tree.py`); none calls the
model directly or keeps its own copy of the sampling mechanics.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


class DecodeCancelled(Exception):
    """The request was cancelled (raised between LM calls)."""


@dataclass
class Counters:
    """What one decode cost."""

    lm_calls: int = 0  # distinct node evaluations
    tokens_fed: int = 0  # tokens pushed through the model, prompt included
    prompt_tokens_fed: int = 0  # the part of tokens_fed that was prompt (not reused from a cache)
    constraint_checks: int = 0  # token validity decisions
    backtracks: int = 0  # AdapTrack rejections / sampler restarts
    lm_seconds: float = 0.0
    constraint_seconds: float = 0.0
    other_seconds: float = 0.0
    wall_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DecodeRequest:
    """One decoding job after the prompt has been tokenized."""

    prompt_ids: Sequence[int]
    num_samples: int = 1
    #: temperature applied to each conditional; <= 0 means greedy (deterministic)
    temperature: float = 1.0
    max_new_tokens: int = 64
    #: wall-clock budget in seconds (None: unbounded); exceeding it gives a partial result
    timeout_s: float | None = None
    seed: int | None = None
    #: generated text -> True when the sequence must end here (e.g. end of line)
    stop: Callable[[str], bool] | None = None
    #: polled between LM calls; True raises DecodeCancelled
    cancelled: Callable[[], bool] | None = None
    #: decoder options: max_backtrack_distance, top_p_validity, share_estimates,
    #: beam_width, node_budget, ...
    options: dict[str, Any] = field(default_factory=dict)
    #: the model's prompt cache slot (e.g. the document URI), for backends that keep
    #: one per key (`set_prompt(..., cache_key=...)`); ignored by the others
    cache_key: str | None = None


@dataclass
class Sample:
    token_ids: list[int]
    text: str
    #: log P(s) under the model at temperature 1 (sum of token log-probabilities)
    logprob: float
    #: ended by EOS or a stop rule (False: cut by max_new_tokens or the time budget)
    complete: bool
    #: every token was checked valid by the constraint
    valid: bool


@dataclass
class DecodeResult:
    samples: list[Sample]
    counters: Counters
    #: "ok"; "no_valid_completion" (Q[root] = 0); "partial" (max_new_tokens or time
    #: budget hit: some samples are incomplete); "failed" (some samples could not be
    #: produced, e.g. an unconstrained/greedy path hit an invalid token)
    status: str = "ok"
    message: str = ""
    prompt_truncated: int = 0
    #: prompt tokens whose model state was reused from an earlier request
    prompt_reused: int = 0
    failures: int = 0

    @property
    def partial(self) -> bool:
        return self.status == "partial"


class Decoder(ABC):
    """A decoding method; options come from the factory and may be overridden per request."""

    name: str = ""

    def __init__(self, **options: Any):
        self.options = options

    def option(self, request: DecodeRequest, key: str, default: Any) -> Any:
        if key in request.options:
            return request.options[key]
        return self.options.get(key, default)

    @abstractmethod
    def decode(self, lm, constraint, request: DecodeRequest) -> DecodeResult: ...


class Stopwatch:
    """Accumulates wall time of named phases into a Counters."""

    def __init__(self, counters: Counters):
        self.counters = counters
        self.start = time.perf_counter()

    def finish(self) -> Counters:
        c = self.counters
        c.wall_seconds = time.perf_counter() - self.start
        c.other_seconds = max(0.0, c.wall_seconds - c.lm_seconds - c.constraint_seconds)
        return c
