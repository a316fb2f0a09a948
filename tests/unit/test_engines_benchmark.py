"""`benchmarks/engines.py --smoke` runs end to end (tiny configurations, seconds) and ends
with the figures line the full run prints."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (`.ci/install-llama-cpp` builds it)")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "engines.py"


def test_smoke_run_prints_every_row_and_the_figures_line(monkeypatch, capsys):
    argv = [str(SCRIPT), "--smoke", "--models", "0_5b", "--engines", "transformers,q8_0,server"]
    monkeypatch.setattr(sys, "argv", argv)
    module = runpy.run_path(str(SCRIPT), run_name="engines")
    assert module["main"]() == 0
    lines = capsys.readouterr().out.strip().splitlines()
    text = "\n".join(lines)
    for row in ("transformers fp32      own", "transformers fp32      greedy", "transformers fp32      exact k=5",
                "llama.cpp q8_0", "ghost text over 1 edits", "ghost split (mean ms per completion): prompt",
                "ghost budget: 1.2 x", "branch switch KV ops: seq_cp", "machine:"):
        assert row in text, row
    assert "server" in text  # a row, or the reason it was skipped
    number = r"(\d+\.\d+|nan)"
    pattern = (rf"llamacpp_node_over_own_token={number} llamacpp_speedup_vs_transformers_0_5b={number} "
               rf"server_calls_per_greedy={number} server_p50_over_inprocess={number} "
               rf"ghost_p50_over_budget_max={number} ghost_outside_model_max={number} "
               rf"ghost_speedup_vs_transformers_0_5b={number} "
               rf"ghost_speedup_over_call_speedup={number}")
    assert re.fullmatch(pattern, lines[-1]), lines[-1]
    assert not lines[-1].startswith("llamacpp_node_over_own_token=nan")
