"""The server process as editors run it: stderr is a pipe, read as log lines (no progress
bars: transformers' "Loading weights" bar would show up as log noise on every model load),
and the process ends at once after `exit`, well inside the 2 s editors wait before
killing it (VS Code: "Server process exited with signal SIGKILL"), with the tiny model
loaded and a completion running on the worker thread; the exit code follows the LSP spec
(0 after `shutdown`, 1 without)."""

from __future__ import annotations

import sys
import time

import pytest

from lsp_support import RawClient, inline_params

# the editors' limit (vscode-languageclient's stop timeout is 2 s)
EDITOR_EXIT_LIMIT_S = 2.0


@pytest.mark.slow
def test_exit_ends_the_process_while_a_completion_runs(tmp_path):
    client = RawClient()
    try:
        client.initialize({"model": "tiny", "device": "cpu", "maxNewTokens": 256, "multiline": True, "timeoutMs": 600000})
        status = client.wait_status()
        assert status["state"] == "ready", status
        source = tmp_path / "example.py"
        source.write_text("import os\n\n\ndef f():\n    os.")
        uri = source.as_uri()
        client.open(uri, source.read_text())
        client.request_async("textDocument/inlineCompletion", inline_params(uri, 4, 7))
        time.sleep(0.5)
        assert "result" in client.request("shutdown", timeout=60)
        started = time.monotonic()
        client.notify("exit")
        client.process.wait(timeout=60)
        elapsed = time.monotonic() - started
        assert client.process.returncode == 0
        assert elapsed < EDITOR_EXIT_LIMIT_S, f"exit took {elapsed:.2f} s"
    finally:
        client.close()


@pytest.mark.slow
def test_exit_without_shutdown_exits_with_code_1():
    client = RawClient()
    try:
        client.initialize({"model": "tiny", "device": "cpu"})
        client.notify("exit")
        client.process.wait(timeout=60)
        assert client.process.returncode == 1
    finally:
        client.close()


@pytest.mark.slow
def test_no_progress_bars_on_a_stderr_that_is_not_a_terminal(tmp_path):
    log = tmp_path / "stderr.txt"
    command = ["/bin/sh", "-c", 'exec "$0" -m adaptrack_lsp serve -v 2>"$1"', sys.executable, str(log)]
    client = RawClient(command=command)
    try:
        client.initialize({"model": "tiny", "device": "cpu"})
        status = client.wait_status()
        assert status["state"] == "ready", status
    finally:
        client.close()
    stderr = log.read_text()
    assert "INFO" in stderr, "the log itself still reaches stderr"
    assert "Loading weights" not in stderr and "\r" not in stderr, stderr[-2000:]
