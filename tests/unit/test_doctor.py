"""`adaptrack-lsp doctor` on a healthy setup and on broken ones: real processes, real
interpreters, packages made absent through the import guard, a closed port for the
inference server, a damaged built model."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

GUARD = str(Path(__file__).resolve().parents[1] / "lsp" / "import_guard.py")


def doctor(*args: str, absent: str = "", env: dict | None = None) -> tuple[int, dict, str]:
    environment = {**os.environ, **(env or {}), "HF_HUB_OFFLINE": "1"}
    if absent:
        environment.update({"ADAPTRACK_TEST_WATCH": absent, "ADAPTRACK_TEST_ABSENT": "1"})
    run = subprocess.run([sys.executable, GUARD, "doctor", "--json", *args], capture_output=True, text=True, env=environment, timeout=180)
    return run.returncode, json.loads(run.stdout), run.stderr


def by_name(report: dict) -> dict[str, dict]:
    return {check["name"]: check for check in report["checks"]}


def test_a_healthy_setup_exits_0_and_says_what_it_uses(builtin_model):
    code, report, stderr = doctor()
    assert code == 0 and report["ok"], (report, stderr)
    checks = by_name(report)
    assert {"server", "packages", "extra transformers", "extra llamacpp", "extra grammar", "extra eval", "trust", "project python", "model", "cache"} <= set(checks)
    assert all(check["level"] in ("ok", "info") for check in report["checks"]), report
    import numpy

    assert f"numpy {numpy.__version__}" in checks["packages"]["detail"]
    assert checks["model"]["detail"].startswith("builtin: built")
    assert "Python" in checks["project python"]["detail"]


def test_the_text_form_names_each_fix(builtin_model):
    run = subprocess.run([sys.executable, "-m", "adaptrack_lsp", "doctor", "--python", "/nonexistent/bin/python"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    failing = [i for i, line in enumerate(lines) if line.startswith("FAIL")]
    assert failing and all(lines[i + 1].strip().startswith("fix: ") for i in failing), run.stdout
    assert lines[-1] == "something would fail: see the FAIL lines"


def test_a_broken_setup_exits_1_with_a_fix_per_problem():
    """A core package missing, a model whose extra is missing, a project interpreter that
    does not exist: each a FAIL line naming its fix."""
    code, report, _ = doctor("--model", "Qwen/Qwen2.5-Coder-0.5B", "--python", "/nonexistent/bin/python", absent="jedi,torch,transformers")
    assert code == 1 and not report["ok"]
    checks = by_name(report)
    assert checks["packages"]["level"] == "FAIL" and "jedi" in checks["packages"]["detail"]
    assert "--force-reinstall adaptrack-lsp" in checks["packages"]["fix"]
    assert checks["model"]["level"] == "FAIL" and "transformers extra" in checks["model"]["detail"]
    assert checks["model"]["fix"].endswith("-m pip install 'adaptrack-lsp[transformers]'")
    assert checks["extra transformers"]["level"] == "info"
    assert checks["project python"]["level"] == "FAIL" and "/nonexistent/bin/python" in checks["project python"]["detail"]
    assert "pythonPath" in checks["project python"]["fix"]


def test_an_unreachable_inference_server_fails_the_model_check():
    from adaptrack_lsp.completion.lm.tiny import tiny_model_path

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, report, _ = doctor("--backend", "server", "--endpoint", f"http://127.0.0.1:{port}", "--tokenizer", str(tiny_model_path()))
    model = by_name(report)["model"]
    assert code == 1 and model["level"] == "FAIL", report
    assert f"127.0.0.1:{port}" in model["detail"] and model["fix"]


def test_a_damaged_built_model_is_a_warning_with_the_folder(tmp_path):
    from adaptrack_lsp.completion.lm.builtin import MARKER, recipe_key

    folder = tmp_path / recipe_key()
    folder.mkdir()
    (folder / MARKER).write_text("{not json")
    code, report, _ = doctor(env={"ADAPTRACK_CACHE": str(tmp_path)})
    model = by_name(report)["model"]
    assert model["level"] == "warn" and "damaged" in model["detail"] and str(folder) in model["fix"], model
    assert code == 0  # rebuilt at the next start: nothing fails
