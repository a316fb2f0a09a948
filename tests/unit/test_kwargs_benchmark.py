"""`benchmarks/kwargs.py --smoke` runs end to end (the numpy cases against the installed
numpy) and ends with the figures line the issue names."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "kwargs.py"


def test_smoke_run_ends_with_the_figures_line():
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    match = re.fullmatch(r"removed_rejected=([\d.]+) current_accepted=([\d.]+) check_us=([\d.]+)", lines[-1])
    assert match, lines[-1]
    assert float(match.group(1)) == 1.0 and float(match.group(2)) == 1.0
    assert "| numpy | `np.histogram(a, normed=…` | `density` | yes | yes | yes |" in lines
    assert any("np.histogram takes no keyword normed in numpy" in line for line in lines)
