"""Unusable interpreters are named with the reason, within a time limit."""

from __future__ import annotations

import stat
import sys
import time

import pytest

from adaptrack_lsp.config import parse_settings
from adaptrack_lsp.constrainers.interpreter_check import call_with_time_limit, check_interpreter
from adaptrack_lsp.constrainers.jedi_index import JediIndex


def script(path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_working_interpreter_passes():
    assert check_interpreter(sys.executable) == ""


def test_false_garbage_and_hanging_interpreters_say_why(tmp_path):
    assert "exited with status 1" in check_interpreter("/bin/false")
    garbage = script(tmp_path / "garbage", "echo 'not a python'")
    assert "does not behave like a Python 3 interpreter" in check_interpreter(garbage)
    assert "not a python" in check_interpreter(garbage)
    hanging = script(tmp_path / "hanging", "sleep 600 & exec sleep 600")
    started = time.monotonic()
    assert "did not answer within 1 s" in check_interpreter(hanging, timeout_s=1)
    assert time.monotonic() - started < 8
    (tmp_path / "not-executable").write_text("x")
    assert "cannot be started" in check_interpreter(str(tmp_path / "not-executable"))


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
