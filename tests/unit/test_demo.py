"""`make demo` (scripts/demo.sh) with the built-in model: the TensorFlow 1 example is
checked against the bundled TensorFlow 2.21 snapshot where TensorFlow is not installed,
and each example's table comes out whole, with no progress line between its rows."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DECODERS = ("unconstrained", "constrained", "adaptrack")


def tensorflow_members() -> set[str]:
    """The reference: the top-level names of the bundled snapshot, read directly."""
    from adaptrack_lsp.apis.index import bundled_snapshot

    with gzip.open(bundled_snapshot("tensorflow"), "rt", encoding="utf-8") as handle:
        names = json.load(handle)["names"]
    return {name.split(".")[1] for name in names if name.count(".") >= 1}


def run(command: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # as on a terminal: progress and rows in one stream
        text=True,
        timeout=900,
        env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", **env},
    )


def test_fresh_machine_tensorflow_example_against_the_bundled_snapshot(builtin_model, tmp_path):
    """The demo's TensorFlow file where TensorFlow is not installed (a bare environment
    validates): TF 1's `tf.placeholder` is INVALID for TensorFlow 2.21, the constrained
    rows write names the snapshot has, and every row names the snapshot."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True, timeout=120)
    done = run([
        sys.executable, "-m", "adaptrack_lsp", "complete", "examples/tf_compat_v1.py", "--model", "builtin",
        "--python", str(tmp_path / "env" / "bin" / "python"), "--bundled-snapshots",
        "--compare", ",".join(DECODERS), "--timeout-ms", "120000",
    ])
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    rows = {line.split()[0]: line for line in lines[-3:]}
    assert set(rows) == set(DECODERS), done.stdout
    assert re.search(r"'placeholder\(.*' +INVALID \(tensorflow 2\.21\.0 snapshot\)$", rows["unconstrained"]), done.stdout
    members = tensorflow_members()
    for name in ("constrained", "adaptrack"):
        assert rows[name].endswith("valid (tensorflow 2.21.0 snapshot)"), done.stdout
        text = re.search(r"'(.*)'", rows[name]).group(1)
        assert re.match(r"\w+", text).group(0) in members, rows[name]


@pytest.mark.slow
def test_demo_tables_are_whole(builtin_model):
    """scripts/demo.sh as `make demo` runs it (this interpreter, the built-in model):
    per example the cursor line and one row per decoder, contiguous; the TensorFlow
    rows name the snapshot exactly when TensorFlow is not installed here."""
    done = run(["bash", "scripts/demo.sh"], PY=sys.executable)
    assert done.returncode == 0, done.stdout
    *blocks, checked = re.split(r"^== ", done.stdout, flags=re.MULTILINE)[1:]
    # last, `check` over the examples: each file's removed APIs, TensorFlow's from the snapshot
    assert checked.splitlines()[0] == "adaptrack-lsp check examples/", checked
    assert re.search(r"^examples/tf_compat_v1\.py:5:13: tf\.placeholder does not exist in tensorflow 2\.21\.0$", checked, re.M), checked
    assert re.search(r"^examples/numpy2_removals\.py:7:13: np\.product does not exist in numpy 2\.", checked, re.M), checked
    assert re.search(r"^Found \d+ problems in \d+ of \d+ files checked\.$", checked, re.M), checked
    examples = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.py"))
    assert [block.splitlines()[0] for block in blocks] == examples, done.stdout
    for block in blocks:
        lines = block.splitlines()[1:]
        cursor = next(i for i, line in enumerate(lines) if "\u2038" in line)
        assert all(line.startswith("adaptrack-lsp complete: ") for line in lines[:cursor]), block  # progress first
        table = lines[cursor + 1 :]
        assert [line.split()[0] for line in table] == list(DECODERS), block  # the rows, and nothing between them
    tf_rows = blocks[examples.index("examples/tf_compat_v1.py")].splitlines()[-3:]
    assert re.search(r"'placeholder\(.*' +INVALID", tf_rows[0]), tf_rows
    if importlib.util.find_spec("tensorflow") is None:
        assert all(row.endswith("(tensorflow 2.21.0 snapshot)") for row in tf_rows), tf_rows
    else:
        assert not any("snapshot" in row for row in tf_rows), tf_rows
        assert re.search(r"valid \(tensorflow [\w.+]+\)$", tf_rows[-1]), tf_rows
