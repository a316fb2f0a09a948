"""What a decode takes and gives back: the request, samples, counters and the result.

A neutral module: the prefix tree, the decoders, the service and evaluation all use
these types, and it imports none of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


class DecodeCancelled(Exception):
    """The request was cancelled (raised between LM calls)."""


class BudgetExceeded(Exception):
    """The request's wall-clock budget ran out (decoders turn this into a partial result)."""


@dataclass
class Counters:
    """What one decode cost."""

    lm_calls: int = 0  # node evaluations (a node whose pruned tail is later needed counts twice)
    tokens_fed: int = 0  # tokens pushed through the model, prompt included
    prompt_tokens_fed: int = 0  # the part of tokens_fed that was prompt (not reused from a cache)
    constraint_checks: int = 0  # token validity decisions
    backtracks: int = 0  # AdapTrack rejections / sampler restarts
    tail_evaluations: int = 0  # nodes asked again for the tokens pruned at first evaluation
    tail_draws: int = 0  # tokens drawn out of a top-K node's tail (one LM call each, in lm_calls)
    server_calls: int = 0  # requests sent to a remote engine (lookahead fills several nodes per call)
    lm_ahead: int = 0  # distributions computed ahead in sibling batches (each in lm_calls once used)
    lm_seconds: float = 0.0
    constraint_seconds: float = 0.0
    other_seconds: float = 0.0
    wall_seconds: float = 0.0
    #: before the decode (set by the completion pipeline): building the prompt plan
    #: (tokenizing the window), and building the constraint (each part's per-request setup,
    #: e.g. the syntax skeleton parse)
    plan_seconds: float = 0.0
    constraint_setup_seconds: float = 0.0
    # where the time goes (`split`): the parts below are measured where they happen and
    # never overlap; what is left of the wall is bookkeeping ("other")
    prompt_seconds: float = 0.0  # inside `set_prompt` (forward of the prompt tokens not reused, root distribution)
    prompt_forward_seconds: float = 0.0  # the network's part of prompt_seconds
    forward_seconds: float = 0.0  # the network's time on the tree's nodes (a backend's `forward_seconds`)
    kv_seconds: float = 0.0  # KV cache work on the tree's nodes: branch copies, truncations, stored key/values
    distribution_seconds: float = 0.0  # per-node work over the distribution: log-softmax, copies, the tree's storage, proposals
    refed_tokens: int = 0  # node tokens fed again (beyond one per node evaluated): branch switches that re-feed
    branch_switches: int = 0  # node evaluations that left the branch the KV cache held (a backend's `branch_switches`)

    def split(self) -> dict[str, float]:
        """Seconds per part of the decode's wall: prompt, forward (the tree's nodes), KV
        (branch switches), distribution (log-softmax, copies, storage per node; the
        backend's part is the LM time outside its forward and KV work), constraint, and
        other (the rest: decoder and tree bookkeeping)."""
        backend = max(0.0, self.lm_seconds - self.forward_seconds - self.kv_seconds)
        parts = {
            "prompt": self.prompt_seconds,
            "forward": self.forward_seconds,
            "kv": self.kv_seconds,
            "distribution": backend + self.distribution_seconds,
            "constraint": self.constraint_seconds,
        }
        parts["other"] = max(0.0, self.wall_seconds - sum(parts.values()))
        return parts

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
    #: stop(generated text, checked) -> True when the sequence must end here (e.g. end
    #: of line); `checked` is the length of a prefix already found not to stop (the
    #: parent's text), so a rule need only look at what the new token added
    stop: Callable[[str, int], bool] | None = None
    #: polled between LM calls; True raises DecodeCancelled
    cancelled: Callable[[], bool] | None = None
    #: per-request decoder options, checked against the decoder's option dataclass
    #: (e.g. {"max_backtrack_distance": 2}); they override the decoder's own
    options: dict[str, Any] = field(default_factory=dict)
    #: the model's prompt cache slot (e.g. the document URI), for backends that keep
    #: one per key (`set_prompt(..., cache_key=...)`); ignored by the others
    cache_key: str | None = None
    #: where a node's parent already had another child evaluated, evaluate the parent's
    #: next most probable valid children in the same forward pass (models whose
    #: `batched_nodes` is true; see `PrefixTree`): the same distributions, fewer passes
    #: when a search goes wide; their tokens count in `tokens_fed`
    batch_siblings: bool = False


@dataclass
class Sample:
    token_ids: list[int]
    text: str
    #: log P(s) under the model at temperature 1 (sum of token log-probabilities)
    logprob: float
    #: ended by EOS or a stop rule (False: cut by max_new_tokens or the time budget;
    #: such a prefix is never a sample of P(s | c))
    complete: bool
    #: every token was checked valid by the constraint
    valid: bool


#: result statuses, from best to worst
STATUSES = ("ok", "partial", "failed", "no_valid_completion")


@dataclass
class DecodeResult:
    samples: list[Sample]
    counters: Counters
    #: "ok"; "no_valid_completion" (Q[root] = 0); "partial" (max_new_tokens or time
    #: budget hit: some samples are incomplete); "failed" (some samples could not be
    #: produced, e.g. an unconstrained/greedy path hit an invalid token)
    status: str = "ok"
    message: str = ""
    #: prompt tokens whose model state was reused from an earlier request
    prompt_reused: int = 0
    failures: int = 0
    #: the wall-clock budget ran out (the one place that decides it: the prefix tree's poll)
    timed_out: bool = False


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
