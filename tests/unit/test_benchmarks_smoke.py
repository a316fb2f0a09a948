"""Every script in `benchmarks/` runs in its smoke mode, so none can rot unnoticed.

The convention a benchmark script follows (a new script is picked up by its file name):

- ``python benchmarks/NAME.py --smoke`` runs the whole script at tiny sizes in seconds,
  on the CPU, without a download;
- it exits with status 0;
- its last line of standard output is the figures line, ``name=value`` pairs separated by
  single spaces (the same names a full run prints).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(path.name for path in BENCHMARKS.glob("*.py") if not path.name.startswith("_"))
FIGURES_LINE = re.compile(r"[A-Za-z_][\w.]*=\S+( [A-Za-z_][\w.]*=\S+)*")
#: seconds one smoke run may take (a smoke run is meant to take seconds; this is the hang guard)
SMOKE_TIMEOUT_S = 300


def test_every_benchmark_is_found():
    assert len(SCRIPTS) >= 10 and "builtin_model.py" in SCRIPTS and "constraint_mask.py" in SCRIPTS


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_smoke_mode_runs_and_ends_with_the_figures_line(script, tmp_path):
    source = BENCHMARKS / script
    assert "--smoke" in source.read_text(encoding="utf-8"), f"{script} has no --smoke mode (see this module's docstring)"
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])),
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    done = subprocess.run(
        [sys.executable, str(source), "--smoke"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=SMOKE_TIMEOUT_S,
    )
    assert done.returncode == 0, f"{script} --smoke exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"{script} --smoke printed nothing"
    assert FIGURES_LINE.fullmatch(lines[-1]), f"{script} --smoke: the last line is not `name=value ...`: {lines[-1]!r}"
