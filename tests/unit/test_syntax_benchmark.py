"""`benchmarks/syntax_constraint.py --smoke` runs end to end (4 files) and ends with the
figures line the issue names."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "syntax_constraint.py"


def test_smoke_run_prints_the_tables_and_the_figures_line(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--smoke"])
    module = runpy.run_path(str(SCRIPT), run_name="syntax_constraint")
    assert module["main"]() == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert any(line.startswith("| files | tokenize boundaries") for line in lines)
    assert any(line.startswith("| rejected mutants |") for line in lines)
    figures = dict(item.split("=") for item in lines[-1].split())
    assert lines[-1].startswith("files=")
    for name in ("check_us_p50", "setup_ms", "false_rejections", "soundness", "caught", "mask_ms_p50"):
        assert name in figures, name
    assert figures["files"] == "4" and figures["false_rejections"] == "0"
    assert re.fullmatch(r"\d+\.\d+", figures["check_us_p50"]) and float(figures["setup_ms"]) > 0
