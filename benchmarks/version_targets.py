"""Version targets: what declaring `--target` ranges costs, first and once cached.

One run, in a fresh cache root (a temporary folder; `--cache DIR` keeps one), with
`adaptrack-lsp explain` as a user runs it (`--python` this interpreter, so the live index
introspects at runtime; `--constraints api,kwargs`):

1. the first `explain --target SET` over a target set builds its snapshots: each target
   version is installed from wheels into its own environment and walked there;
   `targets_build_s` is the slowest one's build (environment + walk) as recorded in its
   snapshot, `targets_first_explain_s` that whole first command;
2. a second `explain` over the same set, its snapshots cached: `targets_second_explain_s`
   (goal: <= 2 s; `targets_goal_met`), the wall time of the command, interpreter start
   included, and `targets_second_inprocess_s` the same check in this process (`Explainer`
   built and one text explained);
3. both commands must reject ``np.product`` naming the release that lacks it (the verdict
   is printed).

`--smoke`: the target is the installed numpy pinned (``numpy==<installed>``), its
snapshot walked from this interpreter into the temporary cache first: no download, no
environment, seconds.

`targets(smoke)` is the section `benchmarks/versions.py` runs; the last line is
``targets_build_s=... targets_first_explain_s=... targets_second_explain_s=...
targets_second_inprocess_s=... targets_goal_met=...``.

Usage: python benchmarks/version_targets.py [--smoke] [--target SPEC ...] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the target set of a full run (its lowest and highest release with a wheel are built)
DEFAULT_TARGETS = ("numpy>=1.26,<2.1",)
#: the goal of the issue: a second explain over a cached target set
GOAL_SECONDS = 2.0
PREFIX = "import numpy as np\nx = "


def _explain(targets, workdir: Path, env: dict) -> tuple[float, dict, str]:
    command = [sys.executable, "-m", "adaptrack_lsp", "explain", "use.py", "--text", "np.product(a)", "--python", sys.executable,
               "--constraints", "api,kwargs", "--json"]
    for target in targets:
        command += ["--target", target]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=workdir, timeout=1800)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"explain failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, json.loads(done.stdout), done.stderr


def _smoke_snapshot() -> list[str]:
    """The installed numpy, pinned, with its snapshot walked from this interpreter into the
    (temporary) cache: a target that needs no download."""
    import numpy

    from adaptrack_lsp.apis.snapshot import walk_snapshot, write_snapshot
    from adaptrack_lsp.apis.targets import snapshot_path

    started = time.perf_counter()
    data = walk_snapshot(sys.executable, "numpy")
    data.update(package="numpy", roots=["numpy"], build_seconds=round(time.perf_counter() - started, 1))
    path = snapshot_path("numpy", numpy.__version__)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_snapshot(data, path)
    return [f"numpy=={numpy.__version__}"]


def targets(smoke: bool = False, target_set=DEFAULT_TARGETS, cache: str | None = None) -> dict[str, object]:
    """The figures of the `targets` section (see the module docstring)."""
    holder = None
    if cache is None:
        holder = tempfile.TemporaryDirectory(prefix="adaptrack-targets-bench-")
        cache = holder.name
    previous = os.environ.get("ADAPTRACK_CACHE")
    os.environ["ADAPTRACK_CACHE"] = cache
    try:
        workdir = Path(cache) / "work"
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "use.py").write_text(PREFIX)
        env = {**os.environ, "ADAPTRACK_CACHE": cache}
        target_set = _smoke_snapshot() if smoke else list(target_set)
        print(f"target set: {' '.join(target_set)} (cache {cache})", flush=True)
        first_s, first, first_log = _explain(target_set, workdir, env)
        print(f"first explain: {first_s:.2f} s, {first['reason'] or 'accepted'}", flush=True)
        for line in first_log.splitlines():
            if "snapshot" in line or "ready" in line or ": numpy " in line:
                print("  " + line)
        second_s, second, _ = _explain(target_set, workdir, env)
        print(f"second explain (snapshots cached): {second_s:.2f} s, {second['reason'] or 'accepted'}", flush=True)

        from adaptrack_lsp.apis.targets import TargetsIndex
        from adaptrack_lsp.checking.explainer import Explainer
        from adaptrack_lsp.config import parse_settings

        settings, _ = parse_settings({"pythonPath": sys.executable, "versionTargets": target_set})
        started = time.perf_counter()
        explainer = Explainer(settings, ["api", "kwargs"])
        verdict = explainer.explain(PREFIX, "np.product(a)")
        inprocess_s = time.perf_counter() - started
        index = explainer.index
        builds = [float(t.path and _build_seconds(t.path)) for t in index.targets] if isinstance(index, TargetsIndex) else []
        explainer.close()
        print(f"in process (Explainer + one explain): {inprocess_s:.2f} s, {verdict['reason'] or 'accepted'}")
        if not smoke:
            for reason in (first["reason"], second["reason"]):
                if not reason.startswith("np.product: not in numpy"):
                    raise SystemExit(f"np.product was not rejected naming a release: {reason!r}")
        return {
            "targets_build_s": round(max(builds), 1) if builds else 0.0,
            "targets_first_explain_s": round(first_s, 2),
            "targets_second_explain_s": round(second_s, 2),
            "targets_second_inprocess_s": round(inprocess_s, 2),
            "targets_goal_met": int(second_s <= GOAL_SECONDS),
        }
    finally:
        if previous is None:
            os.environ.pop("ADAPTRACK_CACHE", None)
        else:
            os.environ["ADAPTRACK_CACHE"] = previous
        if holder is not None:
            holder.cleanup()


def _build_seconds(path: str) -> float:
    from adaptrack_lsp.apis.snapshot import read_snapshot

    return float(read_snapshot(path).get("build_seconds") or 0.0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="the installed numpy as the target: no download, seconds")
    parser.add_argument("--target", action="append", default=None, help=f"a target of the set (default {' '.join(DEFAULT_TARGETS)})")
    parser.add_argument("--cache", default=None, help="cache root to use (default: a fresh temporary folder)")
    args = parser.parse_args(argv)
    figures = targets(args.smoke, tuple(args.target or DEFAULT_TARGETS), args.cache)
    print(" ".join(f"{name}={value}" for name, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
