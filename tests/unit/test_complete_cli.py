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


# -- TensorFlow without TensorFlow: the bundled TensorFlow 2.21 snapshot -------------------

TF_DOCUMENT = "import tensorflow as tf\nloss = tf."
TF_TOKENS = ["<eos>", ".", "placeholder", "compat", "v1", "(", ")", "\n", "import", " ", "tensorflow", "as", "tf", "loss", "="]


def tf1_habit_model():
    """An exact tabular model with a TensorFlow 1 habit: after ``tf.`` it writes
    ``placeholder()`` (p 0.6) before ``compat.v1.placeholder()`` (p 0.3)."""
    import numpy as np

    from adaptrack_lsp.completion.lm.tabular import TabularLM
    from adaptrack_lsp.vocab import Vocabulary

    vocab = Vocabulary.from_strings(TF_TOKENS, eos="<eos>")
    index = {token: i for i, token in enumerate(TF_TOKENS)}
    following = {
        "": {"placeholder": 0.6, "compat": 0.3},
        "placeholder": {"(": 0.9},
        "compat": {".": 0.9},
        "compat.": {"v1": 0.9},
        "compat.v1": {".": 0.9},
        "compat.v1.": {"placeholder": 0.9},
        "compat.v1.placeholder": {"(": 0.9},
        "placeholder(": {")": 0.9},
        "compat.v1.placeholder(": {")": 0.9},
    }

    def conditional(path):
        probs = np.full(len(TF_TOKENS), 1e-3)
        if not path:  # the healed "." may come first
            probs[index["."]] = 0.3
        text = "".join(TF_TOKENS[i] for i in path).removeprefix(".")
        for token, p in following.get(text, {"<eos>": 0.9}).items():
            probs[index[token]] += p
        return probs / probs.sum()

    return TabularLM(vocab, conditional=conditional)


@pytest.fixture(scope="module")
def python_without_tensorflow(tmp_path_factory):
    """A bare virtual environment (the standard library only): TensorFlow is not installed
    there, whatever the test environment has."""
    folder = tmp_path_factory.mktemp("bare-env")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('tensorflow'))"],
                           capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "None", probe
    return str(python)


def tensorflow_names() -> set[str]:
    """The reference: the bundled snapshot's names, read directly."""
    import gzip
    from importlib import resources

    data = resources.files("adaptrack_lsp") / "data" / "tensorflow-2.21.json.gz"
    with gzip.open(str(data), "rt", encoding="utf-8") as handle:
        return set(json.load(handle)["names"])


def test_tf_placeholder_is_invalid_and_compat_v1_valid_against_the_bundled_snapshot(python_without_tensorflow):
    """`complete --compare --snapshot tensorflow` where TensorFlow is not installed: the
    snapshot decides, and every row names it."""
    from adaptrack_lsp.apis.routed import resolve_snapshot, snapshot_index_factory
    from adaptrack_lsp.commands.complete import compare_rows
    from adaptrack_lsp.completion.service import CompletionService
    from adaptrack_lsp.config import Settings

    names = tensorflow_names()
    assert "tensorflow.placeholder" not in names and "tensorflow.compat.v1.placeholder" in names
    settings = Settings(model="tabular", python_path=python_without_tensorflow, max_new_tokens=12, timeout_ms=60_000)
    service = CompletionService(
        settings,
        model_loader=lambda s, progress: tf1_habit_model(),
        index_factory=snapshot_index_factory([resolve_snapshot("tensorflow")]),
    )
    try:
        service.load()
        rows, warnings = compare_rows(
            service, settings, ["unconstrained", "constrained", "adaptrack"], TF_DOCUMENT, len(TF_DOCUMENT), "tf1.py"
        )
    finally:
        service.close()
    assert warnings == []
    assert rows[0].strip().startswith("loss = tf.")
    by_decoder = {row.split()[0]: row for row in rows[1:]}
    assert re.search(r"'placeholder\(\)' +INVALID \(tensorflow 2\.21\.0 snapshot\)$", by_decoder["unconstrained"]), rows
    for name in ("constrained", "adaptrack"):
        assert re.search(r"'compat\.v1\.placeholder\(\)' +valid \(tensorflow 2\.21\.0 snapshot\)$", by_decoder[name]), rows


def test_cli_snapshot_by_package_name_names_the_snapshot_on_every_row(tmp_path, python_without_tensorflow):
    source = tmp_path / "tf1.py"
    source.write_text(TF_DOCUMENT)
    done = run_cli(
        str(source), "--model", "tiny", "--max-new-tokens", "3", "--python", python_without_tensorflow,
        "--snapshot", "tensorflow", "--compare", "unconstrained,adaptrack",
    )
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    assert set(rows) == {"unconstrained", "adaptrack"}
    for row in rows.values():
        assert re.search(r"\b(valid|INVALID) \(tensorflow 2\.21\.0 snapshot\)$", row), row
    assert "unchecked" not in done.stdout
    # --bundled-snapshots does the same for a package that is not installed
    done = run_cli(
        str(source), "--model", "tiny", "--max-new-tokens", "3", "--python", python_without_tensorflow,
        "--bundled-snapshots", "--compare", "adaptrack",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].endswith("(tensorflow 2.21.0 snapshot)"), done.stdout
    # without either, nothing is checked, and the row says how to check it
    done = run_cli(
        str(source), "--model", "tiny", "--max-new-tokens", "3", "--python", python_without_tensorflow,
        "--compare", "adaptrack",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].endswith(
        "unchecked (tensorflow not installed here; --snapshot tensorflow checks it against the bundled snapshot)"
    ), done.stdout


def test_unknown_snapshot_name_is_an_error(tmp_path):
    source = tmp_path / "example.py"
    source.write_text("x = 1\n")
    done = run_cli(str(source), "--model", "tiny", "--snapshot", "no_such_package")
    assert done.returncode == 2
    assert "no_such_package: no such snapshot file" in done.stderr and "bundled: tensorflow" in done.stderr


def test_progress_is_one_line_rewritten_on_a_terminal_and_erased():
    import io

    from adaptrack_lsp.commands.complete import StatusLine

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    status = StatusLine(terminal)
    status("computing the API members of numpy")
    status("computing the API members of numpy.linalg")
    status.clear()
    written = terminal.getvalue()
    assert "\n" not in written  # never a new line: each message replaces the last
    assert written.count("\r\x1b[K") == 3 and written.endswith("\r\x1b[K")
    pipe = io.StringIO()
    status = StatusLine(pipe)
    status("computing the API members of numpy")
    status.clear()
    assert pipe.getvalue() == "adaptrack-lsp complete: computing the API members of numpy (kept on disk for the next run) ...\n"
