"""`benchmarks/gpu_decoding.py --smoke` runs end to end on the CPU (tiny configurations)
and ends with the figures line the GPU run prints."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_decoding.py"


def test_smoke_run_prints_every_row_and_the_figures_line(monkeypatch, capsys):
    argv = [str(SCRIPT), "--smoke", "--models", "1_5b", "--edits", "1", "--new-tokens", "2", "--timeout", "1"]
    monkeypatch.setattr(sys, "argv", argv)
    module = runpy.run_path(str(SCRIPT), run_name="gpu_decoding")
    assert module["main"]() == 0
    lines = capsys.readouterr().out.strip().splitlines()
    text = "\n".join(lines)
    for row in (
        "eager DynamicCache",
        "static cache",
        "ours unconstrained",
        "ours constrained",
        "ours adaptrack ",
        "ours adaptrack_k5",
        "CompletionService over 1 edits",
        "constrained request after an edit",
    ):
        assert row in text, row
    assert "StaticCacheLanguageModel, static cache" in text
    last = lines[-1]
    assert re.fullmatch(r"ratio_1_5b=\d+\.\d+ ratio_7b=nan service_ratio_7b=nan constrained_16_ms_7b=nan", last), last
