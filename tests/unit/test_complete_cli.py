"""`adaptrack-lsp complete`: cursor parsing, JSON output with the tiny model, clear failures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from adaptrack_lsp.apis.snapshot import module_snapshot, write_snapshot
from adaptrack_lsp.commands.complete import cursor_offset, parse_location


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "adaptrack_lsp", "complete", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def numpy_snapshot(path) -> str:
    write_snapshot(module_snapshot("numpy", ("linalg",)), path)
    return str(path)


def test_parse_location_and_cursor(tmp_path):
    source = tmp_path / "a.py"
    source.write_text("ab\ncd\n")
    assert parse_location(str(source)) == (str(source), None, None)
    assert parse_location(f"{source}:2:3") == (str(source), 2, 3)
    text = "ab\ncd\n"
    assert cursor_offset(text, None, None) == len(text)
    assert cursor_offset(text, 1, 1) == 0
    assert cursor_offset(text, 2, 3) == 5  # after "cd"
    with pytest.raises(ValueError, match="line 9"):
        cursor_offset(text, 9, 1)
    with pytest.raises(ValueError, match="column 4"):
        cursor_offset(text, 2, 4)


def test_json_output_with_the_tiny_model(tmp_path):
    import numpy

    source = tmp_path / "example.py"
    source.write_text("import numpy as np\nx = np.\nprint(x)\n")
    snapshot = numpy_snapshot(tmp_path / "numpy.json")
    done = run_cli(f"{source}:2:8", "--model", "tiny", "--snapshot", snapshot, "--samples", "3", "--max-new-tokens", "4", "--json")
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert set(output) >= {"candidates", "counters", "constraint"}
    assert output["candidates"]
    names = {n for n in dir(numpy) if not n.startswith("_")}
    for candidate in output["candidates"]:
        assert set(candidate) >= {"text", "logprob", "valid"}
        assert re.match(r"\w*", candidate["text"]).group(0) in names
    logprobs = [c["logprob"] for c in output["candidates"]]
    assert logprobs == sorted(logprobs, reverse=True)
    assert output["constraint"]["source"] == "snapshot"
    assert output["constraint"]["packages"] == {"numpy": numpy.__version__}
    assert output["counters"]["lm_calls"] >= 1 and output["counters"]["tokens_fed"] >= 1


def test_compare_prints_each_decoder_with_its_validity(tmp_path):
    source = tmp_path / "example.py"
    source.write_text("import numpy as np\nx = np.")
    snapshot = numpy_snapshot(tmp_path / "numpy.json")
    done = run_cli(
        str(source), "--model", "tiny", "--snapshot", snapshot, "--max-new-tokens", "3",
        "--compare", "unconstrained,constrained,adaptrack",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].strip().startswith("x = np.")
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {"unconstrained", "constrained", "adaptrack"}
    for name in ("constrained", "adaptrack"):  # constrained decoders write valid text
        assert re.search(r"'\s+valid\b", rows[name]), rows[name]
    assert re.search(r"(valid|INVALID)", rows["unconstrained"])
    bad = run_cli(str(source), "--model", "tiny", "--compare", "unconstrained,fastest")
    assert bad.returncode == 2 and "unknown decoder 'fastest'" in bad.stderr


def test_a_package_that_is_not_installed_is_unchecked_never_valid(tmp_path):
    """The demo's TensorFlow file on a machine without TensorFlow: nothing can be checked,
    and the row says so instead of calling the text valid."""
    source = tmp_path / "example.py"
    source.write_text("import adaptrack_absent_package as ap\nx = ap.")
    done = run_cli(
        str(source), "--model", "tiny", "--max-new-tokens", "3", "--python", sys.executable,
        "--compare", "unconstrained,adaptrack",
    )
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    assert set(rows) == {"unconstrained", "adaptrack"}
    for row in rows.values():
        assert row.endswith("unchecked (adaptrack_absent_package not installed here)"), row
        assert not re.search(r"\bvalid\b", row), row


def test_model_that_cannot_be_loaded_fails_loudly(tmp_path):
    source = tmp_path / "example.py"
    source.write_text("x = 1\n")
    done = run_cli(str(source), "--model", str(tmp_path / "no-such-model"))
    assert done.returncode != 0
    assert "--model builtin" in done.stderr
    assert done.stdout == ""


def test_bad_cursor_and_bad_python_are_errors(tmp_path):
    source = tmp_path / "example.py"
    source.write_text("x = 1\n")
    done = run_cli(f"{source}:5:1", "--model", "tiny")
    assert done.returncode == 2 and "line 5" in done.stderr
    done = run_cli(str(source), "--model", "tiny", "--python", str(tmp_path / "missing" / "python"))
    assert done.returncode == 2 and "--python" in done.stderr
