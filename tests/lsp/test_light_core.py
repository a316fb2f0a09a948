"""The light core: serving the built-in model needs neither torch nor transformers, and a
model that needs a missing extra stops with one message naming the install command, in
the editor's status and on the command line.

Real server processes over stdio, started through `import_guard.py`, which logs every
import of the watched packages (the interpreter's import audit event) and, in the
"absent" runs, makes them behave as not installed, as in `pip install adaptrack-lsp`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lsp_support import RawClient, inline_params, server_env, write_numpy_snapshot

GUARD = str(Path(__file__).with_name("import_guard.py"))
#: what the core must not import: the packages of the transformers, llamacpp, grammar and eval extras
HEAVY = "torch,transformers,llama_cpp,gguf,llguidance,matplotlib,scipy"
URI = "file:///workspace/light.py"
TEXT = "import numpy as np\n\nvalues = np."
INSTALL = "-m pip install 'adaptrack-lsp[transformers]'"


def guarded_env(log: Path, absent: bool) -> dict[str, str]:
    log.touch()
    return {
        **server_env(),
        "ADAPTRACK_TEST_WATCH": HEAVY,
        "ADAPTRACK_TEST_IMPORT_LOG": str(log),
        "ADAPTRACK_TEST_ABSENT": "1" if absent else "0",
        "HF_HUB_OFFLINE": "1",
    }


@pytest.mark.parametrize("absent", [False, True], ids=["installed", "absent"])
def test_serving_builtin_never_imports_torch(tmp_path, builtin_model, absent):
    log = tmp_path / "imports.log"
    snapshot = write_numpy_snapshot(tmp_path / "numpy.json")
    client = RawClient(command=[sys.executable, GUARD, "serve"], env=guarded_env(log, absent))
    try:
        client.initialize({"model": "builtin", "maxNewTokens": 12, "timeoutMs": 60000, "apiSnapshot": str(snapshot)})
        status = client.wait_status()
        assert status["state"] == "ready", status
        client.open(URI, TEXT)
        response = client.request_settled("textDocument/inlineCompletion", inline_params(URI, 2, len("values = np.")))
        items = response["result"]["items"]
        assert items and items[0]["insertText"], response
    finally:
        client.close()
    assert log.read_text() == "", f"the server imported {log.read_text().split()}"


def test_the_guard_sees_an_import_and_makes_it_fail(tmp_path):
    """The watch is not vacuous: an import of a watched package is logged, and in an
    absent run it fails as if the package were not installed."""
    log = tmp_path / "imports.log"
    code = (
        f"import runpy\nrunpy.run_path({GUARD!r}, run_name='guard')\n"
        "from adaptrack_lsp.extras import present\nassert not present('torch')\nimport torch\n"
    )
    env = guarded_env(log, absent=True)
    probe = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr, probe.stderr
    assert log.read_text().split() == ["torch"]


def test_a_model_needing_a_missing_extra_is_the_editor_status(tmp_path):
    log = tmp_path / "imports.log"
    client = RawClient(command=[sys.executable, GUARD, "serve"], env=guarded_env(log, absent=True))
    try:
        client.initialize({"model": "Qwen/Qwen2.5-Coder-0.5B"})
        status = client.wait_status()
        assert status["state"] == "error", status
        assert "transformers extra" in status["message"] and INSTALL in status["message"], status
        assert "\n" not in status["message"].strip()
    finally:
        client.close()
    assert log.read_text() == ""


@pytest.mark.parametrize("model", ["tiny", "Qwen/Qwen2.5-Coder-0.5B"])
def test_a_model_needing_a_missing_extra_stops_the_cli_with_one_line(tmp_path, model):
    source = tmp_path / "a.py"
    source.write_text(TEXT)
    run = subprocess.run(
        [sys.executable, GUARD, "complete", "--model", model, f"{source}:3:{len('values = np.')}"],
        env=guarded_env(tmp_path / "imports.log", absent=True),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and INSTALL in lines[0] and f"model {model!r}" in lines[0], run.stderr


def test_explain_index_and_sample_run_on_the_light_core(tmp_path):
    """The other commands the core serves, with every extra's package absent."""
    source = tmp_path / "a.py"
    source.write_text("import numpy as np\nx = np.")
    task = Path(__file__).resolve().parents[1] / "data" / "tasks" / "binary.json"
    env = guarded_env(tmp_path / "imports.log", absent=True)
    runs = {
        "explain": [str(source), "--text", "linalg.norm(x)"],
        "index": ["--package", "json", "-o", str(tmp_path / "json.json")],
        "sample": ["--task", str(task), "--n", "20"],
    }
    for command, args in runs.items():
        run = subprocess.run([sys.executable, GUARD, command, *args], env=env, capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, (command, run.stdout, run.stderr)
        if command == "sample":  # the chi-square test is the eval extra's: named, not failed
            assert "needs scipy (the eval extra):" in run.stdout and "-m pip install 'adaptrack-lsp[eval]'" in run.stdout
    assert (tmp_path / "json.json").is_file()
    assert set((tmp_path / "imports.log").read_text().split()) <= {"scipy"}
