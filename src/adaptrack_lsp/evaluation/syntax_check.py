"""The Python syntax constraint checked against CPython on real files.

- **Completeness**: every prefix of a file CPython parses is accepted, cut at every
  token boundary: Python's `tokenize` boundaries and a BPE tokenizer's, fed one piece
  at a time as decoding feeds tokens (`feed_pieces`); and at sampled cursors the
  per-request setup (`PythonSyntax.prepare`, the skeleton of the enclosing blocks)
  gives a state from which the rest of the file is accepted and the whole is complete
  (`setup_positions`).
- **Soundness**: files mutated by one token (deleted, inserted, swapped) that CPython
  rejects (`compile`) are rejected by the constraint, at or before the error CPython
  reports (`mutant_verdict`), or later (at the latest: the file cannot end there).

Files come from the standard library and installed packages (`corpus`): code not
written for this project.  `benchmarks/syntax_constraint.py` runs this on >= 200 files;
the unit tests on a few.
"""

from __future__ import annotations

import ast
import io
import random
import sysconfig
import time
import tokenize
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from adaptrack_lsp.constrainers.python_syntax import PythonSyntax, SyntaxCheckOff

#: files larger than this are left out (the benchmark's time)
MAX_FILE_CHARS = 200_000
#: token types a mutation may delete, copy or swap
_MUTABLE = {tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING}


def parses(text: str) -> bool:
    """Whether CPython parses `text` (as `ast.parse`; warnings silenced)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def compiles(text: str) -> SyntaxError | None:
    """None when CPython compiles `text`, else its SyntaxError."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<mutant>", "exec", dont_inherit=True)
    except SyntaxError as error:
        return error
    except (ValueError, MemoryError, RecursionError) as error:  # null bytes, nesting limits
        return SyntaxError(str(error))
    return None


def corpus(count: int, seed: int = 0, roots: Sequence[Path] | None = None) -> list[tuple[Path, str]]:
    """`count` (path, text) of .py files CPython parses, drawn (seeded) half from the
    standard library and half from installed packages (`roots` overrides both)."""
    if roots is None:
        paths = sysconfig.get_paths()
        stdlib = Path(paths["stdlib"])
        site = Path(paths["purelib"])
        pools = [
            sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts and "dist-packages" not in p.parts),
            sorted(site.rglob("*.py")),
        ]
    else:
        pools = [sorted(p for root in roots for p in Path(root).rglob("*.py"))]
    rng = random.Random(seed)
    for pool in pools:
        rng.shuffle(pool)
    chosen: list[tuple[Path, str]] = []
    quotas = [count - count // len(pools) * (len(pools) - 1)] + [count // len(pools)] * (len(pools) - 1)
    for pool, quota in zip(pools, quotas):
        taken = 0
        for path in pool:
            if taken >= quota:
                break
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if not text.strip() or len(text) > MAX_FILE_CHARS or not parses(text):
                continue
            chosen.append((path, text))
            taken += 1
    return chosen


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def tokenize_boundaries(text: str) -> list[int]:
    """Character offsets where Python's tokens start or end (sorted, without 0)."""
    starts = _line_starts(text)
    found = {len(text)}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            for row, col in (token.start, token.end):
                if row - 1 < len(starts):
                    found.add(min(len(text), starts[row - 1] + col))
    except (tokenize.TokenError, SyntaxError):
        pass
    return sorted(offset for offset in found if offset > 0)


def pieces_at(text: str, boundaries: Sequence[int]) -> list[str]:
    pieces, previous = [], 0
    for offset in boundaries:
        if offset > previous:
            pieces.append(text[previous:offset])
            previous = offset
    if previous < len(text):
        pieces.append(text[previous:])
    return pieces


@dataclass
class FeedResult:
    """Feeding a text to the constraint one piece at a time."""

    #: character offset of the first rejected character (None: every piece accepted)
    rejected_at: int | None
    reason: str
    complete: bool
    #: seconds per checked piece
    seconds: list[float] = field(default_factory=list)


def feed_pieces(pieces: Sequence[str], syntax: PythonSyntax | None = None, prefix: str = "") -> FeedResult:
    """Feed `pieces` after `prefix`; on a rejection, find the first rejected character."""
    syntax = syntax or PythonSyntax()
    state = syntax.prepare(prefix)
    offset = 0
    seconds: list[float] = []
    clock = time.perf_counter
    for piece in pieces:
        began = clock()
        following = syntax.check(state, piece)
        seconds.append(clock() - began)
        if following is None:
            for index, char in enumerate(piece):
                after = syntax.check(state, char)
                if after is None:
                    return FeedResult(offset + index, syntax.rejection(state, char), False, seconds)
                state = after
            return FeedResult(offset + len(piece), "a piece is rejected whose characters are accepted", False, seconds)
        state = following
        offset += len(piece)
    complete = syntax.is_complete(state)
    return FeedResult(None, "" if complete else "not complete at the end", complete, seconds)


def setup_positions(text: str, positions: Sequence[int]) -> list[tuple[int, str]]:
    """Cursors (offsets) where the per-request setup fails the file: the setup turns
    the check off, or the rest of the file is rejected after it, or the whole is not
    complete; [] when every cursor is fine."""
    failures = []
    for position in positions:
        syntax = PythonSyntax()
        try:
            state = syntax.prepare(text[:position])
        except SyntaxCheckOff as error:
            failures.append((position, f"setup: {error}"))
            continue
        rest = syntax.check(state, text[position:])
        if rest is None:
            verdict = feed_pieces([text[position:]], PythonSyntax(), text[:position])
            failures.append((position, f"rest rejected at {verdict.rejected_at}: {verdict.reason}"))
        elif not syntax.is_complete(rest):
            failures.append((position, "not complete at the end"))
    return failures


# -- mutants ---------------------------------------------------------------------------------
def _tokens(text: str) -> list[tuple[int, int]]:
    starts = _line_starts(text)
    spans = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in _MUTABLE and token.string:
                begin = starts[token.start[0] - 1] + token.start[1]
                end = starts[token.end[0] - 1] + token.end[1]
                spans.append((begin, end))
    except (tokenize.TokenError, SyntaxError):
        pass
    return spans


def mutants(text: str, rng: random.Random, count: int, tries: int = 50) -> list[tuple[str, str]]:
    """Up to `count` (kind, text) mutants of `text` by one token (deleted, inserted as a
    copy of another token, swapped with the next) that CPython rejects."""
    spans = _tokens(text)
    if len(spans) < 2:
        return []
    found: list[tuple[str, str]] = []
    for _ in range(tries):
        if len(found) >= count:
            break
        kind = rng.choice(("delete", "insert", "swap"))
        index = rng.randrange(len(spans) - 1)
        begin, end = spans[index]
        if kind == "delete":
            mutated = text[:begin] + text[end:]
        elif kind == "insert":
            source_begin, source_end = spans[rng.randrange(len(spans))]
            mutated = text[:begin] + text[source_begin:source_end] + " " + text[begin:]
        else:
            next_begin, next_end = spans[index + 1]
            mutated = text[:begin] + text[next_begin:next_end] + text[end:next_begin] + text[begin:end] + text[next_end:]
        if mutated != text and compiles(mutated) is not None:
            found.append((kind, mutated))
    return found


def error_offset(text: str, error: SyntaxError) -> int:
    """The character offset of the end of the error CPython reports (the end of the
    text when it gives no position)."""
    starts = _line_starts(text)
    line = error.end_lineno or error.lineno
    column = error.end_offset if error.end_lineno else error.offset
    if not line or line - 1 >= len(starts) or column is None:
        return len(text)
    return min(len(text), starts[line - 1] + max(0, column - 1))


@dataclass
class MutantVerdict:
    kind: str
    #: "before" (rejected at or before the end of the error CPython reports), "line"
    #: (after it, on the same line: CPython puts "unexpected indent" at the line start,
    #: a prefix check rejects at the first token), "later" (after that line, or the text
    #: cannot end), "missed" (accepted as a whole program)
    outcome: str
    rejected_at: int | None
    error_at: int
    message: str


def mutant_verdict(kind: str, text: str) -> MutantVerdict:
    """How the constraint answers a mutant CPython rejects."""
    error = compiles(text)
    error_at = error_offset(text, error) if error is not None else len(text)
    verdict = feed_pieces(text.splitlines(keepends=True))
    message = str(error.msg) if error is not None and error.msg else ""
    rejected_at = verdict.rejected_at
    if rejected_at is None and not verdict.complete:
        rejected_at = len(text)  # the text cannot end: rejected at the end
    if rejected_at is None:
        return MutantVerdict(kind, "missed", None, error_at, message)
    if rejected_at <= error_at:
        outcome = "before"
    elif "\n" not in text[error_at:rejected_at]:
        outcome = "line"
    else:
        outcome = "later"
    return MutantVerdict(kind, outcome, rejected_at, error_at, message)


@dataclass
class Report:
    """Totals over a corpus (the benchmark's table)."""

    files: int = 0
    tokenize_boundaries: int = 0
    bpe_boundaries: int = 0
    setup_cursors: int = 0
    false_rejections: list[str] = field(default_factory=list)
    mutants: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: {"before": 0, "line": 0, "later": 0, "missed": 0})
    missed_examples: list[str] = field(default_factory=list)
    piece_seconds: list[float] = field(default_factory=list)

    @property
    def soundness(self) -> float:
        """Share of rejected mutants the constraint rejects at or before the error."""
        return self.outcomes["before"] / self.mutants if self.mutants else float("nan")

    @property
    def soundness_line(self) -> float:
        """Share of rejected mutants rejected at the latest on the error's line."""
        return (self.outcomes["before"] + self.outcomes["line"]) / self.mutants if self.mutants else float("nan")

    @property
    def caught(self) -> float:
        """Share of rejected mutants the constraint rejects at all."""
        return 1.0 - self.outcomes["missed"] / self.mutants if self.mutants else float("nan")


def check_corpus(
    files: Sequence[tuple[Path, str]],
    *,
    bpe: Callable[[str], list[str]] | None = None,
    setup_cursors: int = 5,
    mutants_per_file: int = 5,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Completeness and soundness over `files`; `bpe(text)` gives a tokenizer's pieces."""
    report = Report()
    rng = random.Random(seed)
    for number, (path, text) in enumerate(files, 1):
        report.files += 1
        boundaries = tokenize_boundaries(text)
        report.tokenize_boundaries += len(boundaries)
        verdict = feed_pieces(pieces_at(text, boundaries))
        report.piece_seconds.extend(verdict.seconds)
        if verdict.rejected_at is not None or not verdict.complete:
            report.false_rejections.append(f"{path} (tokenize pieces) at {_where(text, verdict.rejected_at)}: {verdict.reason}")
        if bpe is not None:
            pieces = bpe(text)
            report.bpe_boundaries += len(pieces)
            verdict = feed_pieces(pieces)
            if verdict.rejected_at is not None or not verdict.complete:
                report.false_rejections.append(f"{path} (BPE pieces) at {_where(text, verdict.rejected_at)}: {verdict.reason}")
        cursors = rng.sample(boundaries, min(setup_cursors, len(boundaries)))
        report.setup_cursors += len(cursors)
        for position, reason in setup_positions(text, cursors):
            report.false_rejections.append(f"{path} (setup at {_where(text, position)}): {reason}")
        for kind, mutated in mutants(text, rng, mutants_per_file):
            outcome = mutant_verdict(kind, mutated)
            report.mutants += 1
            report.outcomes[outcome.outcome] += 1
            if outcome.outcome == "missed" and len(report.missed_examples) < 20:
                report.missed_examples.append(f"{path} {kind}: {outcome.message} at {_where(mutated, outcome.error_at)}")
        if progress is not None and number % 20 == 0:
            progress(f"{number}/{len(files)} files")
    return report


def _where(text: str, offset: int | None) -> str:
    if offset is None:
        return "the end"
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line} col {column}"
