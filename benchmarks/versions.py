"""Version coverage (issue #25): how well the constraint knows which APIs each version has,
measured in one run; one function per section, the figures of all sections on the last line.

Sections (`SECTIONS`; ``--sections`` picks some):

- ``gitchameleon``: GitChameleon 2.0 (`evaluation/gitchameleon.py`, docs/versions.md).
  Every record's pinned environment is built (wheels only, this Python; cached under the
  cache root), the reference solutions run against their tests there (ground truth by
  execution), and the constraint (`Explainer`, parts ``api,kwargs``, ``pythonPath`` =
  the record's environment) checks them.  Figures: ``recall`` (valid reference solutions
  accepted in their own environment; goal >= 0.98), ``catch`` (cross-version solutions
  that fail in the target environment with an AttributeError, ImportError or
  unexpected-keyword TypeError, rejected there; goal >= 0.8), ``false_rejection``
  (cross-version solutions that pass there, rejected; goal <= 0.02), and the counts
  ``records``, ``installable``, ``importable``, ``valid``.  ``--data DIR`` is the
  benchmark's dataset folder, which the user fetched (this script never downloads it);
  without it the section says it was not measured.
- ``receivers`` (benchmarks/version_receivers.py): typed receivers and import statements,
  false rejections over the standard library's, NumPy's and the project's test suites
  (goal 0), and the share of NumPy 2.0 / pandas 2.0 removals caught (goal >= 0.9).
- ``targets`` (benchmarks/version_targets.py): a second ``explain`` over a new target set
  once its snapshots are cached (goal <= 2 s).

``--smoke``: the gitchameleon section on the project's own small records
(tests/data/gitchameleon: numpy 1.26.4 and 2.2.6, and a pin without a wheel).

Executions are kept in ``--out`` (default: a folder under the cache root named after
the data), so a second run executes only what is new; the constraint is always asked
again.  The last line is ``recall=... catch=... false_rejection=... records=...
installable=... importable=... valid=...`` plus what the other sections report.

Usage: python benchmarks/versions.py [--smoke] [--data DIR] [--sections gitchameleon,receivers,targets]
       [--libraries numpy,scipy] [--out DIR] [--run-timeout 240]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMOKE_DATA = ROOT / "tests" / "data" / "gitchameleon"


def _show(value) -> str:
    return "na" if value is None else f"{value:.3f}"


def gitchameleon(args) -> dict[str, str]:
    from adaptrack_lsp.config import cache_root
    from adaptrack_lsp.evaluation import gitchameleon as gc
    from adaptrack_lsp.evaluation.report import gitchameleon_table

    data = SMOKE_DATA if args.smoke else args.data
    if data is None:
        print("gitchameleon: not measured (give --data DIR: the GitChameleon dataset folder, fetched by you)")
        return {"gitchameleon": "not_measured"}
    libraries = [name for name in args.libraries.split(",") if name.strip()] if args.libraries else None
    records = gc.load_records(data, libraries)
    folder = gc.dataset_folder(data).resolve()
    out = Path(args.out) if args.out else cache_root() / "bench-versions" / ("gitchameleon-" + hashlib.sha256(str(folder).encode()).hexdigest()[:12])
    started = time.perf_counter()
    evaluation = gc.evaluate(records, out, timeout_s=args.run_timeout, progress=not args.smoke)
    seconds = time.perf_counter() - started
    summary = evaluation.summary
    print(gitchameleon_table(summary))
    print(f"gitchameleon: {len(records)} records from {folder}{' (libraries: ' + args.libraries + ')' if libraries else ''}; "
          f"{summary['executed_runs']} test runs executed, the rest from {out}; {seconds:.0f} s")
    counts = summary["counts"]
    return {
        "recall": _show(summary["recall"]),
        "catch": _show(summary["catch"]),
        "false_rejection": _show(summary["false_rejection"]),
        **{name: str(counts[name]) for name in ("records", "installable", "importable", "valid")},
    }


def receivers(args) -> dict[str, str]:
    """benchmarks/version_receivers.py: false rejections of typed receivers and import
    statements over real test suites, and removed methods caught."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from version_receivers import receivers as measure

    return {name: str(value) for name, value in measure(args.smoke).items()}


def targets(args) -> dict[str, str]:
    """benchmarks/version_targets.py: a second ``explain`` over a new target set once its
    snapshots are cached."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from version_targets import targets as measure

    return {name: str(value) for name, value in measure(args.smoke).items()}


SECTIONS: dict[str, Callable[[argparse.Namespace], dict[str, str]]] = {
    "gitchameleon": gitchameleon,
    "receivers": receivers,
    "targets": targets,
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny inputs: the project's own GitChameleon-shaped records")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated sections ({', '.join(SECTIONS)})")
    parser.add_argument("--data", default=None, help="gitchameleon: the benchmark's dataset folder (dataset.jsonl, hidden_tests/)")
    parser.add_argument("--libraries", default=None, help="gitchameleon: only the records of these libraries (comma-separated)")
    parser.add_argument("--out", default=None, help="gitchameleon: where results and the execution cache go")
    parser.add_argument("--run-timeout", type=float, default=240.0, help="gitchameleon: seconds per test run (default 240)")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SECTIONS]
    if unknown or not chosen:
        parser.error(f"--sections: unknown or none ({', '.join(unknown)}); choose from {', '.join(SECTIONS)}")
    figures: dict[str, str] = {}
    for name in chosen:
        figures.update(SECTIONS[name](args))
    print(" ".join(f"{name}={value}" for name, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
