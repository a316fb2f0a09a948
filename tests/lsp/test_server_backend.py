"""The language server over stdio on the `server` backend (a real llama-server serving the
tiny model as GGUF, and the fault proxy in front of it): ghost text arrives; an inference
server that is down at start, or that answers HTTP 500, gives status `degraded` with one
message naming the fix and an empty answer (no crash, no error status), and the next
request after the server is back answers and sets the status to `ready`; an endpoint
that ignores logit_bias is `degraded` for as long as it is used (its model is the top-K
truncation)."""

from __future__ import annotations

import pytest
from llama_server_support import LlamaServer, fault_proxy, free_port, llama_server, tiny_gguf  # noqa: F401

from lsp_support import RawClient, inline_params, write_numpy_snapshot

TEXT = "import numpy as np\n\nvalues = np."


def settings(endpoint: str, snapshot) -> dict:
    return {"model": "tiny", "backend": "server", "endpoint": endpoint, "maxNewTokens": 8, "timeoutMs": 60000,
            "temperature": 0.0, "apiSnapshot": str(snapshot), "serverTimeoutMs": 20000}  # fmt: skip


def ghost_text(client: RawClient, uri: str) -> list:
    response = client.request_settled("textDocument/inlineCompletion", inline_params(uri, 2, len("values = np.")))
    assert "error" not in response, response
    result = response["result"]
    return result["items"] if isinstance(result, dict) else (result or [])


def statuses(client: RawClient) -> list[tuple[str, str]]:
    return [(m["params"]["state"], m["params"]["message"]) for m in list(client.notification_log) if m.get("method") == "adaptrack/status"]


def open_document(client: RawClient, tmp_path) -> str:
    source = tmp_path / "example.py"
    source.write_text(TEXT)
    client.open(source.as_uri(), TEXT)
    return source.as_uri()


@pytest.mark.slow
def test_ghost_text_from_an_inference_server(tmp_path, llama_server):  # noqa: F811
    snapshot = write_numpy_snapshot(tmp_path / "numpy.json")
    client = RawClient()
    try:
        client.initialize(settings(llama_server.url, snapshot), root=str(tmp_path))
        status = client.wait_status(("ready", "error", "degraded"))
        assert status["state"] == "ready", status
        uri = open_document(client, tmp_path)
        items = ghost_text(client, uri)
        assert items and items[0]["insertText"].strip()
    finally:
        client.close()


@pytest.mark.slow
def test_a_server_down_at_start_is_degraded_then_recovers(tmp_path):
    snapshot = write_numpy_snapshot(tmp_path / "numpy.json")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    client = RawClient()
    server = None
    try:
        client.initialize(settings(endpoint, snapshot), root=str(tmp_path))
        status = client.wait_status(("ready", "error", "degraded"))
        assert status["state"] == "degraded" and "cannot reach the inference server" in status["message"]
        assert endpoint in status["message"] and "set `endpoint`" in status["message"]
        uri = open_document(client, tmp_path)
        assert ghost_text(client, uri) == []  # answered, empty, no error
        assert client.process.poll() is None
        server = LlamaServer(tiny_gguf(), port=port, log_dir=tmp_path).start()
        items = ghost_text(client, uri)
        assert items and items[0]["insertText"].strip()
        assert statuses(client)[-1][0] == "ready"
        shown = [m["params"]["message"] for m in client.notification_log if m.get("method") == "window/showMessage"]
        assert sum("cannot reach the inference server" in m for m in shown) == 1  # one message, not one per request
    finally:
        client.close()
        if server is not None:
            server.stop()


@pytest.mark.slow
def test_http_500_is_degraded_then_recovers_and_an_ignored_logit_bias_stays_degraded(tmp_path, llama_server):  # noqa: F811
    snapshot = write_numpy_snapshot(tmp_path / "numpy.json")
    with fault_proxy(llama_server.url) as proxy:
        client = RawClient()
        try:
            client.initialize(settings(proxy.url, snapshot), root=str(tmp_path))
            assert client.wait_status(("ready", "error", "degraded"))["state"] == "ready"
            uri = open_document(client, tmp_path)
            proxy.fault("http500")
            assert ghost_text(client, uri) == []
            state, message = statuses(client)[-1]
            assert state == "degraded" and "HTTP 500" in message and "check the server's log" in message
            proxy.fault("none")
            assert ghost_text(client, uri)
            assert statuses(client)[-1][0] == "ready"
            proxy.fault("ignore_bias")
            client.notify("workspace/didChangeConfiguration", {"settings": {"adaptrack": {**settings(proxy.url, snapshot), "serverTopLogprobs": 10}}})
            status = client.wait_notification(
                lambda m: m.get("method") == "adaptrack/status" and "ignores logit_bias" in m["params"]["message"]
            )["params"]
            assert status["state"] == "degraded"
            ghost_text(client, uri)  # answered from the top-10 truncation (the random model's may hold nothing valid)
            state, message = statuses(client)[-1]
            assert state == "degraded" and "top-10 truncation" in message
            assert client.process.poll() is None
        finally:
            client.close()
