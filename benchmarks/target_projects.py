"""Version targets over real projects' declarations: every target built, or named with
its reason, and a second `explain` over the cached set within 2 s.

For each project file given (``--project NAME=PATH``: a ``pyproject.toml``, optionally
with ``[groups]``, or a requirements file; the project's own files, read from where they
are, never copied here), `adaptrack-lsp explain --target-from PATH` runs twice as a user
runs it, in one cache root (``--cache DIR``; default: the user's cache root, so what an
earlier run built is reused):

1. the first run builds what is not cached: for each target the versions it checks
   (the lowest and highest release matching it with a wheel for this Python that
   install, dependencies as of their release, and import here; bisection where an end
   does not), each walked into a snapshot;
2. the second run reads them back: ``second_explain_max_s`` is the slowest second run
   (goal <= 2 s, interpreter start included).

From the first run's stderr each target is counted as built (``version targets ready``
names its versions), named with a reason (``version target X: ...``: not built, its
package unchecked under it), or skipped by the file reader (options, URLs, markers that
do not hold: ``--target-from: skipped``); ``unnamed`` counts targets the run said
nothing about (goal 0).  The lines naming the reasons are printed.

`--smoke`: one requirements file pinning the installed numpy, its snapshot walked from
this interpreter into a temporary cache (no download, seconds).

Last line: ``projects=… targets=… built=… named=… skipped=… unnamed=…
second_explain_max_s=… goal_met=…``.

Usage: python benchmarks/target_projects.py --project requests=/path/to/requests/pyproject.toml ... [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

GOAL_SECONDS = 2.0


def _explain(path: str, workdir: Path, env: dict, module: str) -> tuple[float, subprocess.CompletedProcess]:
    """`explain` of ``<module>.__name__`` after ``import <module>`` (a name of the first
    target's package: its snapshots are read)."""
    (workdir / "use.py").write_text(f"import {module}\nx = ")
    command = [sys.executable, "-m", "adaptrack_lsp", "explain", "use.py", "--text", f"{module}.__name__", "--python", sys.executable,
               "--constraints", "api,kwargs", "--target-from", path]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=workdir, timeout=6 * 3600)
    return time.perf_counter() - started, done


def _smoke_project(folder: Path) -> list[tuple[str, str]]:
    """A requirements file pinning the installed numpy, whose snapshot is walked from this
    interpreter into the (temporary) cache: no download."""
    import numpy

    from adaptrack_lsp.apis.snapshot import walk_snapshot, write_snapshot
    from adaptrack_lsp.apis.targets import snapshot_path

    data = walk_snapshot(sys.executable, "numpy")
    data.update(package="numpy", roots=["numpy"])
    path = snapshot_path("numpy", numpy.__version__)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_snapshot(data, path)
    requirements = folder / "requirements.txt"
    requirements.write_text(f"numpy=={numpy.__version__}\n--index-url https://example.invalid/simple\n")
    return [("smoke", str(requirements))]


def _module_of(target: str, cache: str) -> str:
    """The top-level module of a target's package (from its built snapshot when there is
    one, else the package name)."""
    import json

    from adaptrack_lsp.apis.targets import parse_target

    name = parse_target(target).name
    folder = Path(cache) / "targets" / "snapshots"
    guess = re.sub(r"[-_.]+", "-", name).lower()
    for summary in sorted(folder.glob(f"{guess}-*.summary.json")):
        try:
            roots = json.loads(summary.read_text()).get("roots") or []
        except (OSError, ValueError):
            continue
        if roots:
            return roots[0]
    return guess.replace("-", "_")


def _declared(path: str) -> list[str]:
    from adaptrack_lsp.apis.targets import targets_from_file

    return targets_from_file(path).targets


def measure(projects: list[tuple[str, str]], cache: str) -> dict[str, object]:
    env = {**os.environ, "ADAPTRACK_CACHE": cache}
    workdir = Path(tempfile.mkdtemp(prefix="adaptrack-projects-"))
    totals = {"targets": 0, "built": 0, "named": 0, "skipped": 0, "unnamed": 0}
    seconds: list[float] = []
    for name, path in projects:
        declared = _declared(path)
        module = _module_of(declared[0], cache)
        first_s, first = _explain(path, workdir, env, module)
        second_s, second = _explain(path, workdir, env, module)
        seconds.append(second_s)
        log = first.stderr
        ready = next((line for line in reversed(log.splitlines()) if "version targets ready:" in line), "")
        skipped = [line for line in log.splitlines() if "--target-from: skipped" in line]
        named, built = [], []
        for target in declared:
            failed = [line for line in log.splitlines() if f"version target {target}" in line and "unchecked under that target" in line]
            package = re.split(r"[<>=!~;\[ ]", target, maxsplit=1)[0].lower().replace("_", "-")
            if failed:
                named.append(failed[-1])
            elif re.search(rf"\b{re.escape(package)} \d", ready.lower().replace("_", "-")):
                built.append(target)
        unnamed = [t for t in declared if t not in built and not any(f"version target {t}" in line for line in named)]
        totals["targets"] += len(declared)
        totals["built"] += len(built)
        totals["named"] += len(named)
        totals["skipped"] += len(skipped)
        totals["unnamed"] += len(unnamed)
        print(f"{name}: {len(declared)} targets ({', '.join(declared)}); built {len(built)}, named {len(named)}, "
              f"skipped by the reader {len(skipped)}; first explain {first_s:.1f} s (exit {first.returncode}), "
              f"second {second_s:.2f} s (exit {second.returncode})", flush=True)
        for line in [*(line for line in log.splitlines() if "do not install or import" in line or "does not install or import" in line),
                     *named, *skipped, *(line for line in log.splitlines() if "standard-library names" in line)]:
            print(f"  {line.removeprefix('adaptrack-lsp explain: ')}")
        if ready:
            print(f"  {ready.removeprefix('adaptrack-lsp explain: ')}")
        for target in unnamed:
            print(f"  UNNAMED: {target}")
    worst = max(seconds) if seconds else 0.0
    return {
        "projects": len(projects),
        **totals,
        "second_explain_max_s": round(worst, 2),
        "goal_met": int(totals["unnamed"] == 0 and worst <= GOAL_SECONDS),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="the installed numpy pinned: no download, seconds")
    parser.add_argument("--project", action="append", default=[], metavar="NAME=PATH", help="a project file (repeatable)")
    parser.add_argument("--cache", default=None, help="cache root (default: the user's; --smoke: a temporary one)")
    args = parser.parse_args(argv)
    holder = None
    if args.smoke:
        holder = tempfile.TemporaryDirectory(prefix="adaptrack-projects-smoke-")
        cache = holder.name
        os.environ["ADAPTRACK_CACHE"] = cache
        projects = _smoke_project(Path(cache))
    else:
        from adaptrack_lsp.config import cache_root

        cache = args.cache or str(cache_root())
        projects = [tuple(item.split("=", 1)) for item in args.project]
        if not projects or any(len(p) != 2 for p in projects):
            parser.error("give --project NAME=PATH (repeatable), or --smoke")
    try:
        figures = measure(projects, cache)
    finally:
        if holder is not None:
            holder.cleanup()
    print(" ".join(f"{name}={value}" for name, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
