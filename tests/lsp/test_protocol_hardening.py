"""Protocol-level hardening: bad frames, the LSP lifecycle, invalid params, LSP line
breaks, and messages for completions that fail or lose their constraint.

Servers here either load no model (framing and lifecycle need none) or the built-in
tiny model.
"""

from __future__ import annotations

import json
import stat
import sys
import textwrap
import time

import pytest

from lsp_support import SERVER_COMMAND, RawClient, completion_params, frame, inline_params, server_env

URI = "file:///workspace/hardening.py"
TINY = {"model": "tiny", "maxNewTokens": 6, "numSamples": 3, "timeoutMs": 60000}


def offline_env() -> dict[str, str]:
    return {**server_env(), "HF_HUB_OFFLINE": "1"}


def answers(client: RawClient, timeout: float = 30) -> bool:
    response = client.request("textDocument/completion", completion_params("file:///nowhere.py", 0, 0), timeout=timeout)
    return response.get("result") == {"isIncomplete": True, "items": []}


@pytest.fixture()
def modelless():
    client = RawClient(env=offline_env())
    try:
        client.initialize({"model": "/nonexistent/model", "timeoutMs": 2000})
        yield client
    finally:
        client.close()
        if client.process.poll() is None:
            client.process.kill()


@pytest.fixture(scope="module")
def tiny():
    client = RawClient(env=offline_env())
    try:
        client.initialize(TINY)
        assert client.wait_status()["state"] == "ready"
        yield client
    finally:
        client.close()


def null_id_errors(client: RawClient) -> list[dict]:
    return [r["error"] for k, r in list(client.responses.items()) if k == "null"]


# -- item 8: one message must not kill or deafen the server -------------------------------
BAD_FRAMES = {
    "huge length": b"Content-Length: 1000000000000\r\n\r\n{}",
    "3 GB length": b"Content-Length: 3000000000\r\n\r\n{}",
    "length too short": b'Content-Length: 20\r\n\r\n{"jsonrpc": "2.0", "id": "short", "method": "shutdown"}',
    "length too long": b'Content-Length: 900\r\n\r\n{"jsonrpc": "2.0", "id": "long", "method": "shutdown"}',
    "lowercase header": b'content-length: 49\r\n\r\n{"jsonrpc": "2.0", "method": "$/setTrace", "params": {}}',
    "missing header": b'{"jsonrpc": "2.0", "method": "$/setTrace", "params": {}}',
    "binary garbage": bytes(range(256)) * 256,
}


@pytest.mark.parametrize("name", list(BAD_FRAMES))
def test_a_bad_frame_neither_kills_nor_deafens_the_server(modelless, name):
    modelless.write(BAD_FRAMES[name])
    assert answers(modelless), name
    assert answers(modelless), name
    assert modelless.process.poll() is None


def test_oversized_messages_are_answered_with_an_error(modelless):
    modelless.write(b"Content-Length: 1000000000000\r\n\r\n{}")
    assert answers(modelless)
    deadline = time.monotonic() + 10
    while not null_id_errors(modelless) and time.monotonic() < deadline:
        time.sleep(0.05)
    errors = null_id_errors(modelless)
    assert errors and "1000000000000" in errors[0]["message"] and "limit" in errors[0]["message"]


def test_message_size_limit_is_configurable():
    client = RawClient(command=[*SERVER_COMMAND, "--max-message-mb", "0.01"], env=offline_env())
    try:
        client.initialize({"model": "/nonexistent/model"})
        client.write(frame(json.dumps({"jsonrpc": "2.0", "method": "$/setTrace", "params": {"x": "a" * 20000}}).encode()))
        assert answers(client)
        time.sleep(0.5)
        assert any("limit of 10485 bytes" in e["message"] for e in null_id_errors(client))
    finally:
        client.close()


# -- item 10: lifecycle and invalid params ---------------------------------------------------
def test_second_initialize_is_rejected_and_keeps_the_service(tiny):
    tiny.open(URI, "import os\nx = os.")
    first = tiny.request_settled("textDocument/inlineCompletion", inline_params(URI, 1, 7))
    assert first["result"]["items"], first
    again = tiny.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": {"model": "tiny"}})
    assert again["error"]["code"] == -32600 and "already initialized" in again["error"]["message"]
    second = tiny.request_settled("textDocument/inlineCompletion", inline_params(URI, 1, 7))
    assert second["result"]["items"] == first["result"]["items"]


def test_invalid_params_are_answered_with_the_field_named(modelless):
    bad = {"textDocument": {"uri": URI}, "position": {"line": "three", "character": 0}}
    response = modelless.request("textDocument/completion", bad)
    assert response["error"]["code"] == -32602
    assert "position" in response["error"]["message"] and "line" in response["error"]["message"], response


def test_requests_after_shutdown_get_invalid_request_and_exit_is_clean(modelless):
    assert modelless.request("shutdown")["result"] is None
    response = modelless.request("textDocument/completion", completion_params(URI, 0, 0), timeout=10)
    assert response["error"]["code"] == -32600, response
    modelless.notify("exit")
    assert modelless.process.wait(timeout=20) == 0


def test_exit_without_shutdown_exits_with_code_1(modelless):
    modelless.notify("exit")
    assert modelless.process.wait(timeout=20) == 1
    # also right after `initialize` (pygls swallowed the exit code: the process ended with 0)
    client = RawClient(env=offline_env())
    try:
        client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": {"model": "/nonexistent"}})
        client.notify("exit")
        assert client.process.wait(timeout=20) == 1
    finally:
        if client.process.poll() is None:
            client.process.kill()


# -- item 11: LSP line breaks -------------------------------------------------------------------
def test_positions_after_unicode_line_separators_follow_lsp_line_breaks(tiny):
    uri = "file:///workspace/separators.py"
    text = "import os\ns = '\u2028\u0085\x0c\x1c'\nx = os.pat"
    tiny.open(uri, text)
    response = tiny.request_settled("textDocument/completion", completion_params(uri, 2, 10))
    items = response["result"]["items"]
    assert items, response
    for item in items:
        edit = item["textEdit"]
        assert edit["range"]["start"] == {"line": 2, "character": 7}, edit
        assert edit["newText"].startswith("pat"), edit
    # an incremental edit on line 2 lands on line 2
    tiny.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 2},
         "contentChanges": [{"range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 1}}, "text": "y"}]},
    )
    response = tiny.request_settled("textDocument/completion", completion_params(uri, 2, 10))
    assert all(i["textEdit"]["range"]["start"] == {"line": 2, "character": 7} for i in response["result"]["items"])
    tiny.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 3},
         "contentChanges": [{"range": {"start": {"line": 2, "character": 4}, "end": {"line": 2, "character": 10}}, "text": ""}]},
    )
    response = tiny.request_settled("textDocument/completion", completion_params(uri, 2, 4))
    assert all(i["textEdit"]["range"]["start"] == {"line": 2, "character": 4} for i in response["result"]["items"])


# -- item 9: failures and dropped constraints are told, once ----------------------------------
def shown(client: RawClient) -> list[str]:
    return [m["params"]["message"] for m in list(client.notification_log) if m.get("method") == "window/showMessage"]


def statuses(client: RawClient) -> list[tuple[str, str]]:
    return [(m["params"]["state"], m["params"]["message"]) for m in list(client.notification_log) if m.get("method") == "adaptrack/status"]


NAN_SERVER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from adaptrack_lsp.completion.lm import loading
    from adaptrack_lsp.cli import main

    original = loading.load_model

    def load_nan_model(*args, **kwargs):
        model = original(*args, **kwargs)
        forward = model.model.forward

        def nan_forward(*a, **k):
            output = forward(*a, **k)
            output.logits.fill_(float("nan"))
            return output

        model.model.forward = nan_forward
        return model

    loading.load_model = load_nan_model
    sys.exit(main(["serve"]))
    """
)


def test_a_model_producing_nan_turns_the_status_to_error_with_one_message():
    client = RawClient(command=[sys.executable, "-c", NAN_SERVER], env=offline_env())
    try:
        client.initialize(TINY)
        assert client.wait_status()["state"] == "ready"
        client.open(URI, "import os\nx = os.")
        for _ in range(3):
            response = client.request_settled("textDocument/inlineCompletion", inline_params(URI, 1, 7))
            assert response["result"] == {"items": []}
        time.sleep(0.5)
        assert any(state == "error" and "NaN" in message for state, message in statuses(client)), statuses(client)
        nan_messages = [m for m in shown(client) if "NaN" in m]
        assert len(nan_messages) == 1, shown(client)
    finally:
        client.close()


def write_script(path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.parametrize(
    "kind, expected",
    [("false", "did not say its version (exit code 1"), ("garbage", "did not say its version (exit code 0: Hello"), ("hang", "did not say its version within")],
)
def test_an_unusable_python_path_is_told_and_completions_still_come(tmp_path, kind, expected):
    python = {
        "false": "/bin/false",
        "garbage": write_script(tmp_path / "garbage-python", "echo 'Hello from a shell script'"),
        "hang": write_script(tmp_path / "hanging-python", "exec sleep 600"),
    }[kind]
    client = RawClient(env=offline_env())
    try:
        client.initialize({**TINY, "pythonPath": python, "timeoutMs": 4000})
        assert client.wait_status()["state"] == "ready"
        client.open(URI, "import os\nx = os.")
        started = time.monotonic()
        first = client.request_settled("textDocument/completion", completion_params(URI, 1, 7))
        first_seconds = time.monotonic() - started
        constraint = first["result"]["items"][0]["data"]["constraint"]
        assert expected in constraint["problem"], constraint
        started = time.monotonic()
        second = client.request_settled("textDocument/completion", completion_params(URI, 1, 7))
        assert second["result"]["items"]
        if kind == "hang":  # bounded once (the check's time limit), then no wait at all
            assert first_seconds < 30 and time.monotonic() - started < 4.0, first_seconds
        time.sleep(0.3)
        assert ("degraded" in {state for state, _ in statuses(client)}), statuses(client)
        assert len([m for m in shown(client) if expected in m]) == 1, shown(client)
    finally:
        client.close()


# -- item 12: reading stdin does not start threads ------------------------------------------
def test_a_burst_of_messages_starts_no_thread(modelless):
    import psutil

    assert answers(modelless)
    process = psutil.Process(modelless.process.pid)
    time.sleep(1.0)
    before = process.num_threads()
    burst = b"".join(frame(json.dumps({"jsonrpc": "2.0", "method": "$/setTrace", "params": {"value": "off"}}).encode()) for _ in range(50))
    for _ in range(60):
        modelless.write(burst)
        time.sleep(0.005)
    assert answers(modelless)
    assert process.num_threads() <= before, (before, process.num_threads())
