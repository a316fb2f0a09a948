"""Grammar tasks: a task file's tabular LM with a grammar as the whole constraint, and
the exact P(s | c) by enumeration under the grammar up to a stated length cap.

`bind_grammar(task, spec, max_length)` returns a `GrammarTask`: the same LM, its
`constraint()` a fresh `GrammarConstraint` (llguidance), and `valid` the sequences the
grammar accepts with P(s) > 0 and at most `max_length` tokens (EOS included), found by
walking the grammar's masks depth first (`enumerate_language`).  Its exact distribution
is P(s | c, |s| <= max_length); samplers run with ``max_new_tokens = max_length`` cut
longer paths (those samples are partial, never counted as samples of P(s | c)), so the
reference and the samples condition on the same event.  `cut_mass` is the LM mass of
valid prefixes that reach the cap without ending (how much the cap truncates).

`ngram_task` builds the seeded n-gram LMs of the grammar experiments
(`benchmarks/grammar_experiments.py`, `tests/data/grammars/`): hand-set successor
weights per previous token, each row perturbed by a Dirichlet draw around them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from adaptrack_lsp.evaluation.tasks import Task, TaskError, TokenPath

#: enumeration stops with an error past this many prefixes (lower the cap)
MAX_ENUMERATED_PREFIXES = 300_000
#: the default length cap of `sample --grammar` and `eval dsl --grammar` (tokens, EOS included)
DEFAULT_GRAMMAR_CAP = 16


@dataclass
class Enumeration:
    """Valid complete sequences (P > 0, length <= cap), the LM mass cut by the cap, and
    the number of prefixes visited."""

    valid: list[TokenPath]
    cut_mass: float
    prefixes: int


def enumerate_language(task: Task, constraint, max_length: int, max_prefixes: int = MAX_ENUMERATED_PREFIXES) -> Enumeration:
    """Every token sequence of at most `max_length` tokens (EOS included) that
    `constraint` accepts and `task`'s LM gives positive probability, depth first."""
    if max_length < 1:
        raise TaskError(f"the length cap must be at least 1, got {max_length}")
    valid: list[TokenPath] = []
    cut = 0.0
    root = constraint.initial_state()
    if root is None:
        return Enumeration([], 0.0, 0)
    eos = task.eos_id
    stack: list[tuple[TokenPath, object, float]] = [((), root, 1.0)]
    prefixes = 0
    while stack:
        path, state, mass = stack.pop()
        prefixes += 1
        if prefixes > max_prefixes:
            raise TaskError(
                f"the grammar allows more than {max_prefixes:,} prefixes of up to {max_length} tokens under "
                f"{task.name}'s LM; lower the length cap (--max-new-tokens)"
            )
        probabilities = task.probs(path)
        allowed = np.flatnonzero(np.asarray(constraint.mask(state), dtype=bool)[: probabilities.shape[0]] & (probabilities > 0))
        for token_id in allowed.tolist():
            if token_id == eos:
                valid.append(path + (eos,))
            elif len(path) + 1 >= max_length:
                cut += mass * float(probabilities[token_id])
            else:
                stack.append((path + (token_id,), constraint.advance(state, token_id), mass * float(probabilities[token_id])))
    valid.sort()
    return Enumeration(valid, cut, prefixes)


class GrammarTask(Task):
    """A task whose constraint is a grammar (see the module docstring)."""

    grammar = None
    cap = 0
    cut_mass = 0.0

    def constraint(self):
        from adaptrack_lsp.constrainers.grammar import grammar_constraint

        return grammar_constraint(self.vocab, self.grammar)

    @property
    def max_length(self) -> int:
        return self.cap

    def gcd_distribution(self, temperature: float = 1.0, max_length: int | None = None):
        return super().gcd_distribution(temperature, max_length=self.cap if max_length is None else max_length)


def bind_grammar(task: Task, spec, max_length: int = DEFAULT_GRAMMAR_CAP) -> GrammarTask:
    """`task`'s LM with the grammar `spec` as the whole constraint (its `valid` list, if
    any, is ignored); raises `GrammarError` for an unusable grammar, `TaskError` when the
    enumeration is too large."""
    from adaptrack_lsp.constrainers.grammar import grammar_constraint

    enumeration = enumerate_language(task, grammar_constraint(task.vocab, spec), max_length)
    bound = GrammarTask(
        tokens=list(task.tokens),
        eos=task.eos,
        default=task.default,
        table=task.table,
        valid=enumeration.valid,
        name=task.name,
        context=task.context,
    )
    bound.grammar = spec
    bound.cap = int(max_length)
    bound.cut_mass = enumeration.cut_mass
    return bound


def ngram_task(
    tokens: list[str],
    eos: str,
    successors: Mapping[str, Mapping[str, float]],
    seed: int,
    concentration: float = 30.0,
    name: str = "task",
) -> Task:
    """A bigram LM (``context`` 1): for each previous token (``""``: the start) the
    next-token distribution is a Dirichlet draw with mean `successors[previous]`
    (normalised) and total concentration `concentration` (larger: closer to the hand-set
    weights); tokens a row does not list have probability 0.  Unlisted previous tokens
    end the sequence (P(eos) = 1).  Deterministic per seed (rows drawn in sorted order)."""
    rng = np.random.default_rng(seed)
    index = {token: i for i, token in enumerate(tokens)}
    if eos not in index:
        raise TaskError(f"eos {eos!r} is not among the tokens")
    default = np.zeros(len(tokens))
    default[index[eos]] = 1.0
    table: dict[TokenPath, np.ndarray] = {}
    for previous in sorted(successors):
        row = successors[previous]
        unknown = [t for t in list(row) + ([previous] if previous else []) if t not in index]
        if unknown:
            raise TaskError(f"successors of {previous!r}: unknown token(s) {unknown}")
        names = sorted(row)
        weights = np.array([float(row[t]) for t in names])
        if (weights <= 0).any() or not math.isfinite(weights.sum()):
            raise TaskError(f"successors of {previous!r}: weights must be positive")
        drawn = rng.dirichlet(concentration * weights / weights.sum()) if len(names) > 1 else np.ones(1)
        values = np.zeros(len(tokens))
        for token, value in zip(names, drawn):
            values[index[token]] = value
        values = np.round(values, 6)
        values[int(np.argmax(values))] += 1.0 - values.sum()  # sums to 1 as written
        key = (index[previous],) if previous else ()
        table[key] = values
    return Task(tokens=list(tokens), eos=eos, default=default, table=table, valid=[], name=name, context=1)
