"""Task files: exact tabular LMs with sequence constraints, and their exact distributions.

A task is JSON::

    {"vocab": ["0", "1", "$"], "eos": "$",
     "default": {"0": 0.5, "1": 0.5},
     "next": [{"prefix": ["0", "0", "0", "0", "0"], "probs": {"$": 1.0}}, ...],
     "valid": [["0", "0", "0", "0", "0", "$"], ["1", "0", "1", "1", "0", "$"], ...]}

- P(. | path) is the `probs` of the `next` entry whose `prefix` equals the path exactly,
  else `default`; tokens missing from a `probs` object have probability 0; every
  distribution sums to 1.  With ``"context": k`` (an n-gram LM of order k + 1) an
  entry's `prefix` is matched against the last k tokens of the path (the whole path
  while it is shorter), and no `prefix` is longer than k.
- The constraint is prefix-closed: a sequence is allowed iff it is a prefix of some
  `valid` sequence.  Every valid sequence ends with `eos` (and has no other `eos`), so
  EOS is allowed exactly where a valid sequence ends.  A task used with a grammar
  (`evaluation/grammar_tasks.py`: the grammar is then the whole constraint) may leave
  `valid` out (`load_task(..., require_valid=False)`).

This module owns loading and checking task files (`TaskError` names the bad field),
building the `TabularLM` and the `SequenceConstraint`, the exact enumerations used as
references (P(s|c), and the distorted distribution greedy constrained decoding
produces), the binary task of the AdapTrack paper (§6.4), a seeded random task
generator, and the chi-square comparison of sample counts with an exact distribution.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adaptrack_lsp.completion.lm.tabular import TabularLM
from adaptrack_lsp.constrainers.base import State, TokenConstraint
from adaptrack_lsp.vocab import Vocabulary

#: probabilities in a task file must sum to 1 within this tolerance
SUM_TOLERANCE = 1e-6

TokenPath = tuple[int, ...]


class TaskError(ValueError):
    """A task file or task dictionary is malformed; the message names the field."""


# --------------------------------------------------------------------------------------
# the constraint
# --------------------------------------------------------------------------------------
class SequenceConstraint(TokenConstraint):
    """Prefix-closed constraint: a token sequence is allowed iff it prefixes a valid one.

    States are node ids of a trie over the valid sequences (0 is the root).
    """

    def __init__(self, vocab: Vocabulary, valid: Iterable[Sequence[int]], source: str = "task"):
        self.vocab = vocab
        self.source = source
        self._children: list[dict[int, int]] = [{}]
        for sequence in valid:
            node = 0
            for token_id in sequence:
                child = self._children[node].get(int(token_id))
                if child is None:
                    child = len(self._children)
                    self._children.append({})
                    self._children[node][int(token_id)] = child
                node = child
        self._masks: dict[int, np.ndarray] = {}

    @property
    def num_nodes(self) -> int:
        return len(self._children)

    def initial_state(self) -> State:
        return 0

    def advance(self, state: State, token_id: int) -> State | None:
        return self._children[state].get(int(token_id))

    def allowed(self, state: State, token_ids: Sequence[int]) -> np.ndarray:
        children = self._children[state]
        return np.fromiter((int(t) in children for t in token_ids), dtype=bool, count=len(token_ids))

    def mask(self, state: State) -> np.ndarray:
        cached = self._masks.get(state)
        if cached is None:
            cached = np.zeros(self.vocab.size, dtype=bool)
            cached[list(self._children[state])] = True
            self._masks[state] = cached
        return cached.copy()

    def allowed_ids(self, state: State) -> list[int]:
        """The ids valid after `state`, in vocabulary order."""
        return sorted(self._children[state])


# --------------------------------------------------------------------------------------
# the task
# --------------------------------------------------------------------------------------
@dataclass
class Task:
    """A tabular LM plus a finite set of valid sequences over one small vocabulary."""

    tokens: list[str]
    eos: str
    default: np.ndarray
    table: dict[TokenPath, np.ndarray]
    valid: list[TokenPath]
    name: str = "task"
    #: 0: `table` keys are whole paths; k > 0: the last k tokens of the path (n-gram)
    context: int = 0
    vocab: Vocabulary = field(init=False)

    def __post_init__(self) -> None:
        self.vocab = Vocabulary.from_strings(self.tokens, self.eos)
        self.eos_id = self.tokens.index(self.eos)
        self._index = {token: i for i, token in enumerate(self.tokens)}

    # -- building blocks ---------------------------------------------------------------
    def language_model(self) -> TabularLM:
        """A fresh `TabularLM` (its own `tokens_fed` counter)."""
        if self.context:
            return TabularLM(self.vocab, conditional=self.probs)
        return TabularLM(self.vocab, default=self.default, table=self.table)

    def constraint(self) -> SequenceConstraint:
        return SequenceConstraint(self.vocab, self.valid, source=self.name)

    def decode(
        self,
        decoder: str,
        num_samples: int = 1,
        *,
        seed: int = 1,
        temperature: float = 1.0,
        max_new_tokens: int | None = None,
        **options,
    ):
        """`num_samples` samples of decoder `decoder` on this task, on a fresh model and
        constraint (no prompt; up to the longest valid sequence unless `max_new_tokens`)."""
        from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder

        request = DecodeRequest(
            prompt_ids=[],
            num_samples=num_samples,
            seed=seed,
            temperature=temperature,
            max_new_tokens=max_new_tokens or self.max_length,
            options=options,
        )
        return get_decoder(decoder).decode(self.language_model(), self.constraint(), request)

    def probs(self, path: Sequence[int]) -> np.ndarray:
        """Exact P(. | path) (float64)."""
        key = tuple(path)
        if self.context:
            key = key[-self.context :]
        return self.table.get(key, self.default)

    # -- token names -------------------------------------------------------------------
    def ids(self, names: Sequence[str]) -> TokenPath:
        try:
            return tuple(self._index[name] for name in names)
        except KeyError as error:
            raise TaskError(f"unknown token {error.args[0]!r}") from None

    def names(self, ids: Sequence[int]) -> list[str]:
        return [self.tokens[i] for i in ids]

    def format(self, ids: Sequence[int]) -> str:
        """Tokens joined by single spaces (the `sample` command's count keys)."""
        return " ".join(self.names(ids))

    def parse(self, text: str) -> TokenPath:
        return self.ids(text.split(" ")) if text else ()

    # -- exact references --------------------------------------------------------------
    def sequence_probability(self, ids: Sequence[int], temperature: float = 1.0) -> float:
        """P(s) as the product of (tempered) conditionals."""
        probability = 1.0
        for position, token_id in enumerate(ids):
            probability *= _tempered(self.probs(ids[:position]), temperature)[token_id]
        return probability

    def exact_distribution(self, temperature: float = 1.0) -> dict[TokenPath, float]:
        """P(s | c) over every valid complete sequence: P(s) / sum of P(s') over valid s'.

        Sequences with P(s) = 0 are left out.  An empty dict means no valid complete
        sequence has positive probability.
        """
        weights = {sequence: self.sequence_probability(sequence, temperature) for sequence in dict.fromkeys(self.valid)}
        total = math.fsum(weights.values())
        if total <= 0.0:
            return {}
        return {sequence: weight / total for sequence, weight in weights.items() if weight > 0.0}

    def gcd_distribution(self, temperature: float = 1.0, max_length: int | None = None) -> GCDDistribution:
        """The distribution greedy constrained decoding samples from.

        At every prefix the (tempered) conditional is restricted to the allowed tokens and
        renormalised; a sequence's probability is the product of those local
        probabilities.  Where no allowed token has positive probability GCD is stuck: that
        mass is reported as `dead_end`, as is the mass of paths that reach `max_length`
        tokens without EOS (when given).  Works with any `TokenConstraint` `constraint()`
        returns (a task's valid sequences, a grammar).
        """
        constraint = self.constraint()
        result: dict[TokenPath, float] = {}
        dead_end = 0.0
        root = constraint.initial_state()
        if root is None:
            return GCDDistribution({}, 1.0)
        stack: list[tuple[TokenPath, State, float]] = [((), root, 1.0)]
        while stack:
            path, state, mass = stack.pop()
            if path and path[-1] == self.eos_id:
                result[path] = result.get(path, 0.0) + mass
                continue
            if max_length is not None and len(path) >= max_length:
                dead_end += mass
                continue
            if isinstance(constraint, SequenceConstraint):
                allowed = constraint.allowed_ids(state)
            else:
                allowed = np.flatnonzero(constraint.mask(state)).tolist()
            probabilities = _tempered(self.probs(path), temperature)
            allowed_mass = math.fsum(probabilities[i] for i in allowed)
            if allowed_mass <= 0.0:
                dead_end += mass
                continue
            for token_id in allowed:
                if probabilities[token_id] > 0.0:
                    stack.append(
                        (path + (token_id,), constraint.advance(state, token_id), mass * probabilities[token_id] / allowed_mass)
                    )
        return GCDDistribution(result, dead_end)

    def argmax(self) -> TokenPath | None:
        """The most probable valid complete sequence (ties: the first in `valid` order)."""
        distribution = self.exact_distribution()
        if not distribution:
            return None
        return max(distribution, key=lambda s: distribution[s])

    @property
    def max_length(self) -> int:
        """Tokens in the longest valid sequence (EOS included)."""
        return max((len(s) for s in self.valid), default=0)

    # -- serialisation -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        def probs_object(values: np.ndarray) -> dict[str, float]:
            return {self.tokens[i]: float(p) for i, p in enumerate(values) if p > 0.0}

        data: dict[str, Any] = {"vocab": list(self.tokens), "eos": self.eos}
        if self.context:
            data["context"] = self.context
        data["default"] = probs_object(self.default)
        data["next"] = [{"prefix": self.names(prefix), "probs": probs_object(values)} for prefix, values in self.table.items()]
        if self.valid:
            data["valid"] = [self.names(sequence) for sequence in self.valid]
        return data


@dataclass
class GCDDistribution:
    """What greedy constrained decoding produces: complete sequences and stuck mass."""

    probabilities: dict[TokenPath, float]
    dead_end: float = 0.0


def _tempered(probabilities: np.ndarray, temperature: float) -> np.ndarray:
    """P^(1/T) renormalised; T <= 0 puts all mass on the most probable tokens (split evenly)."""
    if temperature == 1.0:
        return probabilities
    if temperature <= 0.0:
        top = probabilities.max()
        peak = (probabilities == top) & (probabilities > 0)
        return peak / peak.sum()
    with np.errstate(divide="ignore"):
        logs = np.log(probabilities) / temperature
    logs = logs - logs.max()
    values = np.exp(logs)
    return values / values.sum()


# --------------------------------------------------------------------------------------
# loading and checking
# --------------------------------------------------------------------------------------
def load_task(path: str | Path, require_valid: bool = True) -> Task:
    """Read and check a task file; malformed content raises `TaskError` naming the field.
    `require_valid=False`: `valid` may be absent (a grammar is the constraint)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise TaskError(f"{path}: cannot read the task file ({error.strerror or error})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise TaskError(f"{path}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})") from None
    try:
        return task_from_dict(data, name=path.name.removesuffix(".json").removesuffix(".task"), require_valid=require_valid)
    except TaskError as error:
        raise TaskError(f"{path}: {error}") from None


def task_from_dict(data: Any, name: str = "task", require_valid: bool = True) -> Task:
    """Check a decoded task object and build the `Task` (`valid` may be absent when
    not `require_valid`)."""
    if not isinstance(data, Mapping):
        raise TaskError("the task must be a JSON object")
    unknown = sorted(set(data) - {"vocab", "eos", "default", "next", "valid", "name", "description", "context"})
    if unknown:
        raise TaskError(f"unknown field(s): {', '.join(unknown)}")
    for required in ("vocab", "eos", "default") + (("valid",) if require_valid else ()):
        if required not in data:
            raise TaskError(f"{required}: missing")
    context = data.get("context", 0)
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise TaskError(f"context: must be a non-negative integer, got {json.dumps(context)}")

    tokens = data["vocab"]
    if not isinstance(tokens, list) or not tokens:
        raise TaskError("vocab: must be a non-empty list of strings")
    index: dict[str, int] = {}
    for position, token in enumerate(tokens):
        if not isinstance(token, str) or not token:
            raise TaskError(f"vocab[{position}]: must be a non-empty string")
        if token in index:
            raise TaskError(f"vocab[{position}]: duplicate token {token!r}")
        index[token] = position

    eos = data["eos"]
    if not isinstance(eos, str):
        raise TaskError("eos: must be a string")
    if eos not in index:
        raise TaskError(f"eos: {eos!r} is not in vocab")
    eos_id = index[eos]

    def token_id(value: Any, where: str) -> int:
        if not isinstance(value, str):
            raise TaskError(f"{where}: must be a token string, got {json.dumps(value)}")
        if value not in index:
            raise TaskError(f"{where}: unknown token {json.dumps(value)}")
        return index[value]

    def probabilities(value: Any, where: str) -> np.ndarray:
        if not isinstance(value, Mapping):
            raise TaskError(f"{where}: must be an object mapping tokens to probabilities")
        values = np.zeros(len(tokens), dtype=np.float64)
        for key, probability in value.items():
            where_key = f"{where}[{json.dumps(key)}]"
            token = token_id(key, where_key)
            if isinstance(probability, bool) or not isinstance(probability, (int, float)):
                raise TaskError(f"{where_key}: must be a number, got {json.dumps(probability)}")
            if not math.isfinite(probability) or probability < 0:
                raise TaskError(f"{where_key}: must be a finite non-negative number, got {probability}")
            values[token] = float(probability)
        total = math.fsum(values)
        if abs(total - 1.0) > SUM_TOLERANCE:
            raise TaskError(f"{where}: sums to {total:.6g}, not 1")
        return values / total

    default = probabilities(data["default"], "default")

    table: dict[TokenPath, np.ndarray] = {}
    first_entry: dict[TokenPath, int] = {}
    entries = data.get("next", [])
    if not isinstance(entries, list):
        raise TaskError("next: must be a list of {prefix, probs} objects")
    for position, entry in enumerate(entries):
        where = f"next[{position}]"
        if not isinstance(entry, Mapping):
            raise TaskError(f"{where}: must be an object with prefix and probs")
        extra = sorted(set(entry) - {"prefix", "probs"})
        if extra:
            raise TaskError(f"{where}: unknown field(s): {', '.join(extra)}")
        if "prefix" not in entry:
            raise TaskError(f"{where}.prefix: missing")
        if "probs" not in entry:
            raise TaskError(f"{where}.probs: missing")
        if not isinstance(entry["prefix"], list):
            raise TaskError(f"{where}.prefix: must be a list of tokens")
        prefix = tuple(token_id(t, f"{where}.prefix[{i}]") for i, t in enumerate(entry["prefix"]))
        if eos_id in prefix:
            raise TaskError(f"{where}.prefix: contains the eos token {eos!r} (nothing follows EOS)")
        if context and len(prefix) > context:
            raise TaskError(f"{where}.prefix: {len(prefix)} tokens, longer than the context ({context})")
        if prefix in first_entry:
            raise TaskError(f"{where}.prefix: same prefix as next[{first_entry[prefix]}]")
        first_entry[prefix] = position
        table[prefix] = probabilities(entry["probs"], f"{where}.probs")

    valid_data = data.get("valid", [])
    if not isinstance(valid_data, list):
        raise TaskError("valid: must be a list of token lists")
    valid: list[TokenPath] = []
    for position, sequence in enumerate(valid_data):
        where = f"valid[{position}]"
        if not isinstance(sequence, list) or not sequence:
            raise TaskError(f"{where}: must be a non-empty list of tokens")
        ids = tuple(token_id(t, f"{where}[{i}]") for i, t in enumerate(sequence))
        if ids[-1] != eos_id:
            raise TaskError(f"{where}: must end with the eos token {eos!r}")
        if eos_id in ids[:-1]:
            raise TaskError(f"{where}[{ids.index(eos_id)}]: eos {eos!r} before the end of the sequence")
        valid.append(ids)

    task_name = data.get("name", name)
    if not isinstance(task_name, str):
        raise TaskError("name: must be a string")
    return Task(tokens=list(tokens), eos=eos, default=default, table=table, valid=valid, name=task_name, context=context)


# --------------------------------------------------------------------------------------
# built-in tasks
# --------------------------------------------------------------------------------------
def binary_task(bits: int = 5) -> Task:
    """Paper §6.4: `bits` uniform random bits then EOS; valid = all zeros, or a leading 1.

    With 5 bits there are 17 valid sequences of equal probability: P(00000$ | c) = 1/17,
    while greedy constrained decoding gives it 1/2.
    """
    tokens = ["0", "1", "$"]
    uniform = np.array([0.5, 0.5, 0.0])
    stop = np.array([0.0, 0.0, 1.0])
    table: dict[TokenPath, np.ndarray] = {}
    for value in range(2**bits):
        table[tuple((value >> (bits - 1 - i)) & 1 for i in range(bits))] = stop
    valid: list[TokenPath] = [(0,) * bits + (2,)]
    for value in range(2 ** (bits - 1)):
        rest = tuple((value >> (bits - 2 - i)) & 1 for i in range(bits - 1))
        valid.append((1,) + rest + (2,))
    return Task(tokens=tokens, eos="$", default=uniform, table=table, valid=valid, name=f"binary{bits}")


def random_task(
    seed: int,
    vocab_size: int = 4,
    max_length: int = 4,
    num_valid: int = 12,
    concentration: float = 1.0,
    zero_probability: float = 0.05,
) -> Task:
    """A random tabular LM × a random prefix-closed constraint (deterministic per seed).

    `vocab_size` ordinary tokens plus EOS ``$``; `num_valid` distinct valid sequences of
    1..`max_length` ordinary tokens then EOS.  Every prefix on the way to a valid
    sequence gets its own conditional drawn from a Dirichlet(`concentration`) (small
    values give peaked, strongly distorting conditionals); each token of a conditional is
    zeroed with probability `zero_probability` (the conditional is redrawn when that
    leaves nothing).  At least one valid sequence has positive probability.
    """
    if vocab_size < 1 or max_length < 1 or num_valid < 1:
        raise ValueError("vocab_size, max_length and num_valid must be at least 1")
    rng = np.random.default_rng(seed)
    tokens = [chr(ord("a") + i) if i < 26 else f"t{i}" for i in range(vocab_size)] + ["$"]
    eos_id = vocab_size
    size = vocab_size + 1

    capacity = sum(vocab_size**length for length in range(1, max_length + 1))
    num_valid = min(num_valid, capacity)
    valid_set: dict[TokenPath, None] = {}
    while len(valid_set) < num_valid:
        length = int(rng.integers(1, max_length + 1))
        body = tuple(int(t) for t in rng.integers(0, vocab_size, size=length))
        valid_set[body + (eos_id,)] = None
    valid = list(valid_set)

    def conditional() -> np.ndarray:
        while True:
            values = rng.dirichlet(np.full(size, concentration))
            values[rng.random(size) < zero_probability] = 0.0
            if values.sum() > 0:
                return values / values.sum()

    default = conditional()
    table: dict[TokenPath, np.ndarray] = {}
    for sequence in valid:
        for cut in range(len(sequence)):
            prefix = sequence[:cut]
            if prefix not in table:
                table[prefix] = conditional()
    task = Task(tokens=tokens, eos="$", default=default, table=table, valid=valid, name=f"random{seed}")
    if not task.exact_distribution():
        # every valid sequence got probability 0: give the first one's path positive mass
        for cut in range(len(valid[0])):
            probabilities = table[valid[0][:cut]].copy()
            probabilities[valid[0][cut]] += 0.1
            table[valid[0][:cut]] = probabilities / probabilities.sum()
    return task


# --------------------------------------------------------------------------------------
# comparing samples with an exact distribution
# --------------------------------------------------------------------------------------
@dataclass
class ChiSquareResult:
    statistic: float
    degrees_of_freedom: int
    p_value: float
    #: samples of sequences the reference gives probability 0 (any makes p = 0)
    impossible: int = 0


def chi_square(
    counts: Mapping[Any, int], reference: Mapping[Any, float], min_expected: float = 5.0
) -> ChiSquareResult:
    """Pearson's chi-square goodness of fit of `counts` to the `reference` distribution.

    Categories with an expected count below `min_expected` are pooled into one bin (and
    that bin into the smallest remaining one if it is still below `min_expected`).
    Samples outside the reference's support make the p-value 0.
    """
    from scipy import stats

    total = sum(counts.values())
    if total <= 0:
        raise ValueError("no samples to test")
    impossible = sum(n for key, n in counts.items() if reference.get(key, 0.0) <= 0.0)
    if impossible:
        return ChiSquareResult(math.inf, 0, 0.0, impossible)
    keys = sorted(reference, key=lambda k: reference[k], reverse=True)
    observed = [counts.get(k, 0) for k in keys]
    expected = [reference[k] * total for k in keys]
    big_observed, big_expected, pool_observed, pool_expected = [], [], 0, 0.0
    for o, e in zip(observed, expected):
        if e >= min_expected:
            big_observed.append(o)
            big_expected.append(e)
        else:
            pool_observed += o
            pool_expected += e
    if pool_expected > 0:
        if pool_expected >= min_expected or not big_expected:
            big_observed.append(pool_observed)
            big_expected.append(pool_expected)
        else:
            big_observed[-1] += pool_observed
            big_expected[-1] += pool_expected
    if len(big_expected) < 2:
        return ChiSquareResult(0.0, 0, 1.0)
    expected_array = np.asarray(big_expected) * (total / sum(big_expected))
    statistic, p_value = stats.chisquare(np.asarray(big_observed, dtype=np.float64), expected_array)
    return ChiSquareResult(float(statistic), len(big_expected) - 1, float(p_value))


def counts_of(samples: Iterable[Sequence[int]]) -> dict[TokenPath, int]:
    """Histogram of token sequences."""
    histogram: dict[TokenPath, int] = {}
    for sample in samples:
        key = tuple(sample)
        histogram[key] = histogram.get(key, 0) + 1
    return histogram
