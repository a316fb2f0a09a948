"""Unusable interpreters are named with the reason, within a time limit."""

from __future__ import annotations

import time

import pytest

from adaptrack_lsp.apis.interpreter_check import call_with_time_limit
from adaptrack_lsp.apis.jedi_index import JediIndex
from adaptrack_lsp.config import parse_settings


def test_jedi_index_reports_the_problem_instead_of_an_empty_one():
    index = JediIndex(python="/bin/false", cache_dir=None)
    assert index.members(("os",)) is None  # the interpreter is first run (time-limited) here
    assert "did not say its version (exit code 1" in index.problem


def test_call_with_time_limit():
    assert call_with_time_limit(lambda: 3, 1, "x") == 3
    with pytest.raises(TimeoutError, match="sleeping did not finish within 0.2 s"):
        call_with_time_limit(lambda: time.sleep(5), 0.2, "sleeping")
    with pytest.raises(ZeroDivisionError):
        call_with_time_limit(lambda: 1 / 0, 1, "x")


@pytest.mark.parametrize("value", [1e-300, 5e-324, 1e-4])
def test_tiny_positive_temperatures_are_rejected_with_a_message(value):
    settings, problems = parse_settings({"temperature": value})
    assert settings.temperature == 0.0
    assert problems and "temperature" in problems[0] and "0 (greedy)" in problems[0]


@pytest.mark.parametrize("value", [0, 0.001, 0.7, 10])
def test_usable_temperatures_are_kept(value):
    settings, problems = parse_settings({"temperature": value})
    assert settings.temperature == value and problems == []


def test_a_hanging_interpreter_and_its_children_are_stopped_in_time(tmp_path):
    """The probe kills the interpreter's whole process group: a child it leaves behind
    holding the pipes open does not hold the call."""
    import stat as stat_module

    from adaptrack_lsp.apis.index_cache import EnvironmentProbeError, probe_environment

    hanging = tmp_path / "hanging-python"
    hanging.write_text("#!/bin/sh\nsleep 600 &\nexec sleep 600\n", encoding="utf-8")
    hanging.chmod(hanging.stat().st_mode | stat_module.S_IXUSR)
    started = time.monotonic()
    with pytest.raises(EnvironmentProbeError, match="did not say its version within 1 s"):
        probe_environment(str(hanging), timeout_s=1)
    assert time.monotonic() - started < 8
