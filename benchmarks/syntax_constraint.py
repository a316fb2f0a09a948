"""The Python syntax constraint against CPython, and its speed (issue: Python syntax).

Completeness and soundness on real files not written here (`evaluation/syntax_check.py`):
>= 200 files CPython parses, half from the standard library and half from installed
packages; every prefix at every `tokenize` boundary and every BPE boundary of the tiny
model's tokenizer, plus `--setup-cursors` cursors per file through the per-request setup;
`--mutants` one-token mutants per file that CPython rejects.

Speed, all in one run:
- `check_us_p50`: lazily checked tokens (`TokenIndex.allowed`, caches fresh per state):
  64 random tokens of the tiny vocabulary plus the file's own next token at sampled
  cursors, median over cursors of microseconds per token;
- `feed_us_p50`: median microseconds per BPE piece when a whole file is fed piece by piece;
- `setup_ms`, `setup_ms_p95`, `setup_cpu_ms`: the per-request setup (`PythonSyntax.prepare`:
  scan + skeleton parse, table loaded) at random cursors of the standard-library file
  closest to 2,000 lines (wall median, 95th percentile, CPU median);
- `mask_ms_p50`: a fresh full-vocabulary mask (tiny vocabulary) at sampled cursors;
  `mask_large_ms_p50` the same at a >= 100k-token vocabulary (`--large-vocab`, the
  tokenizer `build_large_tokenizer` builds locally), with `large_tables_s`, the one-time
  lexing of its tokens.

Goals: false_rejections=0, check_us_p50 <= 50, setup_ms <= 5.
Usage: python benchmarks/syntax_constraint.py [--files 200] [--mutants 5] [--smoke]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import sysconfig
import time
from pathlib import Path


def setup_file() -> Path:
    """The standard-library module with the fewest lines among those with >= 2,000."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    best = None
    for path in sorted(stdlib.glob("*.py")):
        try:
            lines = path.read_text(encoding="utf-8").count("\n")
        except (OSError, UnicodeDecodeError):
            continue
        if lines >= 2000 and (best is None or lines < best[0]):
            best = (lines, path)
    return best[1]


def percentile(values, share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200, help="files of the corpus (>= 200 for the figures)")
    parser.add_argument("--mutants", type=int, default=5, help="rejected one-token mutants per file")
    parser.add_argument("--setup-cursors", type=int, default=5, help="cursors per file checked through the per-request setup")
    parser.add_argument("--setup-samples", type=int, default=60, help="timed setups on the 2,000-line file")
    parser.add_argument("--speed-cursors", type=int, default=100, help="cursors for check_us and mask_ms")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--large-vocab", action="store_true", help="also time masks at a >= 100k-token vocabulary")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds): the CI check that the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.files, args.mutants, args.setup_cursors, args.setup_samples, args.speed_cursors = 4, 3, 2, 5, 5

    import numpy as np
    from transformers import AutoTokenizer

    from adaptrack_lsp.completion.lm.tiny import tiny_model_path
    from adaptrack_lsp.completion.tokenizer_bytes import vocabulary_from_tokenizer
    from adaptrack_lsp.constrainers.api import ConstraintContext
    from adaptrack_lsp.constrainers.python_syntax import GRAMMAR_VERSION, PythonSyntax, load_table
    from adaptrack_lsp.constrainers.token_index import TokenIndex
    from adaptrack_lsp.evaluation.syntax_check import check_corpus, corpus

    began = time.perf_counter()
    load_table()
    table_seconds = time.perf_counter() - began
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_path()))
    vocab = vocabulary_from_tokenizer(tokenizer)

    def bpe(text: str) -> list[str]:
        return [vocab.texts[i] for i in tokenizer.encode(text, add_special_tokens=False)]

    files = corpus(args.files, seed=args.seed)
    print(f"grammar: {GRAMMAR_VERSION}; table loaded in {table_seconds * 1000:.0f} ms; corpus: {len(files)} files", flush=True)
    report = check_corpus(
        files,
        bpe=bpe,
        setup_cursors=args.setup_cursors,
        mutants_per_file=args.mutants,
        seed=args.seed,
        progress=lambda message: print(f"  {message}", file=sys.stderr, flush=True),
    )
    for line in report.false_rejections[:20]:
        print(f"false rejection: {line}")
    for line in report.missed_examples[:10]:
        print(f"missed mutant: {line}")

    # -- speed -------------------------------------------------------------------------------
    rng = random.Random(args.seed)
    ordinary = np.flatnonzero([bool(t) and i not in vocab.special_ids for i, t in enumerate(vocab.texts[: vocab.num_defined])])
    per_token_us, mask_ms = [], []
    for _ in range(args.speed_cursors):
        _, text = files[rng.randrange(len(files))]
        ids = tokenizer.encode(text, add_special_tokens=False)
        cut = rng.randrange(1, len(ids))
        prefix = vocab.decode(ids[:cut])
        if not text.startswith(prefix):  # a cut inside a character
            continue
        syntax = PythonSyntax()
        state = syntax.prepare(prefix)
        index = TokenIndex(syntax, vocab, context=ConstraintContext(prefix, prefix))
        candidates = [int(i) for i in rng.sample(list(ordinary), 64)] + [ids[cut]]
        began = time.perf_counter()
        index.allowed(state, candidates)
        per_token_us.append((time.perf_counter() - began) * 1e6 / len(candidates))
        index = TokenIndex(syntax, vocab, context=ConstraintContext(prefix, prefix))
        began = time.perf_counter()
        index.compute_mask(state)
        mask_ms.append((time.perf_counter() - began) * 1e3)

    large_ms, large_tables_s = [], float("nan")
    if args.large_vocab:
        from adaptrack_lsp.completion.lm.tiny import build_large_tokenizer
        from adaptrack_lsp.constrainers.python_syntax_mask import SyntaxVocab
        from adaptrack_lsp.constrainers.token_index import TokenTables

        large_tokenizer = build_large_tokenizer(120_000)
        large = vocabulary_from_tokenizer(large_tokenizer)
        TokenTables.of(large)
        began = time.perf_counter()
        SyntaxVocab.of(PythonSyntax(), large)
        large_tables_s = time.perf_counter() - began
        for _ in range(args.speed_cursors):
            _, text = files[rng.randrange(len(files))]
            prefix = text[: rng.randrange(1, len(text))]
            syntax = PythonSyntax()
            try:
                state = syntax.prepare(prefix)
            except Exception:
                continue
            index = TokenIndex(syntax, large, context=ConstraintContext(prefix, prefix))
            began = time.perf_counter()
            index.compute_mask(state)
            large_ms.append((time.perf_counter() - began) * 1e3)
        print(f"masks at {large.size} tokens: median {statistics.median(large_ms):.2f} ms, p95 {percentile(large_ms, 0.95):.2f} ms; "
              f"token tables built in {large_tables_s:.2f} s")

    path = setup_file()
    text = path.read_text(encoding="utf-8")
    setup_wall, setup_cpu = [], []
    for _ in range(args.setup_samples):
        position = rng.randrange(len(text))
        syntax = PythonSyntax()
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            syntax.prepare(text[:position])
        except Exception as error:  # reported, not fatal: the figure counts what was set up
            print(f"setup failed at offset {position}: {error}")
        setup_cpu.append((time.thread_time() - cpu) * 1e3)
        setup_wall.append((time.perf_counter() - wall) * 1e3)

    feed_us = statistics.median(report.piece_seconds) * 1e6 if report.piece_seconds else float("nan")
    print()
    print("| files | tokenize boundaries | BPE boundaries | setup cursors | false rejections |")
    print(f"| {report.files} | {report.tokenize_boundaries} | {report.bpe_boundaries} | {report.setup_cursors} | {len(report.false_rejections)} |")
    print()
    outcomes = report.outcomes
    print("| rejected mutants | at or before the error | on the error's line | later | missed |")
    print(f"| {report.mutants} | {outcomes['before']} | {outcomes['line']} | {outcomes['later']} | {outcomes['missed']} |")
    print()
    print(f"setup on {path.name} ({text.count(chr(10))} lines): wall median {statistics.median(setup_wall):.2f} ms, "
          f"p95 {percentile(setup_wall, 0.95):.2f} ms, max {max(setup_wall):.2f} ms; CPU median {statistics.median(setup_cpu):.2f} ms")
    print(
        f"files={report.files} boundaries={report.tokenize_boundaries + report.bpe_boundaries} "
        f"false_rejections={len(report.false_rejections)} mutants={report.mutants} soundness={report.soundness:.3f} "
        f"soundness_line={report.soundness_line:.3f} caught={report.caught:.3f} "
        f"check_us_p50={statistics.median(per_token_us):.1f} feed_us_p50={feed_us:.1f} "
        f"setup_ms={statistics.median(setup_wall):.2f} setup_ms_p95={percentile(setup_wall, 0.95):.2f} "
        f"setup_cpu_ms={statistics.median(setup_cpu):.2f} mask_ms_p50={statistics.median(mask_ms):.2f} "
        f"mask_large_ms_p50={statistics.median(large_ms) if large_ms else float('nan'):.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
