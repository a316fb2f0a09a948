"""`adaptrack-lsp check` as users run it: a real process over real files, every output
format, the exit status, bad input, and a tree of 10,000 files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

NUMPY = f"numpy {numpy.__version__}"
NUMPY1 = """\
import numpy as np

values = np.zeros(4)
total = np.product(values)
spread = values.ptp()
counts, edges = np.histogram(values, normed=True)
ok = np.linalg.norm(values)
"""


def check(*args, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        [sys.executable, "-m", "adaptrack_lsp", "check", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture()
def project(tmp_path):
    (tmp_path / "numpy1.py").write_text(NUMPY1)
    (tmp_path / "clean.py").write_text("import numpy as np\nx = np.prod(np.zeros(2))\n")
    return tmp_path


def test_text_is_path_line_col_message_and_exit_1(project):
    ran = check("numpy1.py", cwd=project)
    assert ran.returncode == 1, ran.stderr
    assert ran.stdout.splitlines() == [
        f"numpy1.py:4:12: np.product does not exist in {NUMPY}",
        f"numpy1.py:5:17: values.ptp does not exist in {NUMPY} (values is what np.zeros() returns)",
        f"numpy1.py:6:38: np.histogram takes no keyword normed in {NUMPY} (parameters: a, bins, range, density, weights)",
        "Found 3 problems in 1 of 1 file checked.",
    ]


def test_a_bundled_snapshot_checks_its_package_and_the_environment_the_rest(tmp_path):
    """`--snapshot tensorflow`: TensorFlow's names from the bundled 2.21 snapshot (it lists
    no submodules, its members are the module), numpy's from the environment."""
    (tmp_path / "tf1.py").write_text(
        "import numpy as np\nimport tensorflow as tf\nx = tf.placeholder(tf.float32)\ny = tf.compat.v1.placeholder(tf.float32)\nz = np.float_\n"
    )
    ran = check("--snapshot", "tensorflow", "tf1.py", cwd=tmp_path)
    assert ran.stdout.splitlines() == [
        "tf1.py:3:8: tf.placeholder does not exist in tensorflow 2.21.0",
        f"tf1.py:5:8: np.float_ does not exist in {NUMPY}",
        "Found 2 problems in 1 of 1 file checked.",
    ], ran.stderr


def test_nothing_found_exits_0(project):
    ran = check("clean.py", cwd=project)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "Found 0 problems in 0 of 1 file checked."


def test_json_records(project):
    ran = check("--format", "json", ".", cwd=project)
    assert ran.returncode == 1
    records = json.loads(ran.stdout)
    assert [(r["path"], r["line"], r["column"], r["end_line"], r["end_column"], r["name"], r["kind"]) for r in records] == [
        ("numpy1.py", 4, 12, 4, 19, "np.product", "attribute"),
        ("numpy1.py", 5, 17, 5, 20, "values.ptp", "receiver"),
        ("numpy1.py", 6, 38, 6, 44, "np.histogram(normed=)", "keyword"),
    ]
    assert all(r["targets"] == [NUMPY] and r["message"] for r in records)
    line = NUMPY1.splitlines()[3]
    assert line[records[0]["column"] - 1 : records[0]["end_column"] - 1] == "product"


def test_github_annotations(project):
    ran = check("--format", "github", "numpy1.py", cwd=project)
    lines = ran.stdout.splitlines()
    assert lines[0] == (
        "::error file=numpy1.py,line=4,col=12,endLine=4,endColumn=19,title=adaptrack missing-attribute::"
        f"np.product does not exist in {NUMPY}"
    )
    assert len(lines) == 3 and all(line.startswith("::error file=numpy1.py,") for line in lines)


def test_sarif_2_1_0(project):
    ran = check("--format", "sarif", ".", cwd=project)
    log = json.loads(ran.stdout)
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert run["columnKind"] == "unicodeCodePoints"
    results = run["results"]
    assert [r["ruleId"] for r in results] == ["missing-attribute", "missing-member", "unknown-keyword"]
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        region = result["locations"][0]["physicalLocation"]["region"]
        assert {"startLine", "startColumn", "endLine", "endColumn"} <= set(region)
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "numpy1.py"
        assert result["level"] == "error" and result["message"]["text"]


def test_bad_input_is_named_and_the_rest_is_checked(tmp_path):
    (tmp_path / "latin1.py").write_bytes("x = 'caf\xe9'\n".encode("latin-1"))
    (tmp_path / "binary.py").write_bytes(b"\x00\x01\x02import numpy\n")
    (tmp_path / "huge.py").write_text("x = 1\n" * (1_500_000))
    (tmp_path / "broken.py").write_text("import numpy as np\nx = np.float_(1)\ndef f(:\n    pass\ny = np.alltrue([1])\n")
    before = {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*")}
    ran = check(".", cwd=tmp_path)
    assert ran.returncode == 1
    assert "latin1.py: skipped: not UTF-8" in ran.stderr
    assert "binary.py: skipped: binary" in ran.stderr
    assert "huge.py: skipped: larger than 8 MiB" in ran.stderr
    assert "broken.py:3:" in ran.stderr and "not checked" in ran.stderr
    assert [line.split(":")[:2] for line in ran.stdout.splitlines()[:-1]] == [["broken.py", "2"], ["broken.py", "5"]]
    # nothing of the user's was written
    assert {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*")} == before


def test_usage_errors_exit_2_naming_the_problem(project):
    ran = check("numpy1.py", "no_such_dir", cwd=project)
    assert ran.returncode == 2 and "no such file or folder: no_such_dir" in ran.stderr and not ran.stdout
    ran = check("--python", str(project / "no" / "python"), ".", cwd=project)
    assert ran.returncode == 2 and "no such interpreter" in ran.stderr
    broken = project / "broken-python"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    ran = check("--python", str(broken), ".", cwd=project)
    assert ran.returncode == 2 and str(broken) in ran.stderr, ran.stderr
    ran = check("--format", "xml", ".", cwd=project)
    assert ran.returncode == 2 and "invalid choice" in ran.stderr


def test_hidden_folders_and_environments_are_skipped(project):
    for folder in (".hidden", "venv_here", "lib/site-packages", "node_modules"):
        (project / folder).mkdir(parents=True)
        (project / folder / "bad.py").write_text("import numpy as np\nnp.float_\n")
    (project / "venv_here" / "pyvenv.cfg").write_text("home = /usr\n")
    ran = check("--format", "json", ".", cwd=project)
    assert {record["path"] for record in json.loads(ran.stdout)} == {"numpy1.py"}
    # a file named on the command line is checked wherever it is
    ran = check("--format", "json", ".hidden/bad.py", cwd=project)
    assert [record["name"] for record in json.loads(ran.stdout)] == ["np.float_"]


def _tree(root: Path, files: int) -> None:
    for number in range(files):
        folder = root / f"pkg{number // 500}"
        folder.mkdir(exist_ok=True)
        extra = "z = np.float_\n" if number % 1000 == 0 else ""
        (folder / f"m{number}.py").write_text(f"import os\nimport numpy as np\nx = os.path.join('a', 'b')\ny = np.zeros(3).sum()\n{extra}")


def _peak_rss_kib(*args, cwd, env=None) -> tuple[subprocess.CompletedProcess, int]:
    code = (
        "import resource, subprocess, sys\n"
        "ran = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.stderr.write(ran.stderr); sys.stdout.write(ran.stdout)\n"
    )
    ran = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "adaptrack_lsp", "check", *args], cwd=cwd,
                         capture_output=True, text=True, timeout=900, env=env)
    first, _, rest = ran.stdout.partition("\n")
    return subprocess.CompletedProcess(ran.args, ran.returncode, rest, ran.stderr), int(first)


def test_a_tree_of_10000_files_shows_progress_in_bounded_memory(tmp_path):
    small, large = tmp_path / "small", tmp_path / "large"
    small.mkdir()
    large.mkdir()
    _tree(small, 1000)
    _tree(large, 10000)
    _peak_rss_kib(".", cwd=small)  # the first run may compute the API index (its worker counts too)
    ran_small, rss_small = _peak_rss_kib(".", cwd=small)
    # a progress line every 0.1 s (2 s by default): a fast machine may finish before 2 s
    ran_large, rss_large = _peak_rss_kib(".", cwd=large, env={**os.environ, "ADAPTRACK_PROGRESS_EVERY_S": "0.1"})
    assert ran_large.stdout.splitlines()[-1] == "Found 10 problems in 10 of 10000 files checked."
    assert ran_small.stdout.splitlines()[-1] == "Found 1 problem in 1 of 1000 files checked."
    # progress on stderr while it runs (when stderr is not a terminal, a line per interval)
    assert "files so far)" in ran_large.stderr
    # ten times the files, not ten times the memory
    assert rss_large - rss_small < 30 * 1024, (rss_small, rss_large)
