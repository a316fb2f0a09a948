"""`benchmarks/server_exactness.py --smoke` runs end to end against a real llama-server and
ends with its figures line (skips where llama-server is not built)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest
from llama_server_support import BUILD_HINT, llama_server_binary

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "server_exactness.py"


@pytest.mark.skipif(llama_server_binary() is None, reason=BUILD_HINT)
def test_smoke_run_prints_the_table_and_the_figures_line(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--smoke"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    assert done.value.code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert any(line.startswith("exact ") and "PASS" in line for line in lines)
    figures = dict(part.split("=") for part in lines[-1].split())
    assert {"exact_tvd_fresh", "server_calls_per_greedy"} <= set(figures)
    assert float(figures["server_calls_per_greedy"]) <= 1.5
