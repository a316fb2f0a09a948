"""The server over stdio on the llamacpp backend: a GGUF model loads, inline completions
arrive, and every byte the process writes to stdout is a well-formed LSP frame (llama.cpp
logs nothing there); a bad GGUF is a status `error` naming the fix, and a good one given
afterwards loads."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (`.ci/install-llama-cpp` builds it)")

from adaptrack_lsp.completion.lm.llamacpp import tiny_gguf_path
from adaptrack_lsp.config import settings_schema

from lsp_support import RawClient, inline_params, write_numpy_snapshot


class RecordingClient(RawClient):
    """A `RawClient` that keeps every byte the server wrote to stdout."""

    def _read(self) -> None:
        original = self.process.stdout
        raw = self.raw = bytearray()

        class Tee:
            def readline(self):
                data = original.readline()
                raw.extend(data)
                return data

            def read(self, size):
                data = original.read(size)
                raw.extend(data)
                return data

        self.process.stdout = Tee()
        super()._read()


def strict_frames(raw: bytes) -> list[dict]:
    """The messages of a stdout stream that must consist of LSP frames and nothing else."""
    messages, position = [], 0
    while position < len(raw):
        end = raw.index(b"\r\n\r\n", position)
        headers = dict(line.split(b": ", 1) for line in raw[position:end].split(b"\r\n"))
        assert set(headers) <= {b"Content-Length", b"Content-Type"}, raw[position:end][:200]
        length = int(headers[b"Content-Length"])
        body = raw[end + 4 : end + 4 + length]
        assert len(body) == length
        messages.append(json.loads(body))
        position = end + 4 + length
    return messages


def settings(model: str, snapshot) -> dict:
    named = {"backend": "llamacpp"} if "backend" in settings_schema()["properties"] else {}
    return {"model": model, **named, "device": "cpu", "threads": 1, "maxNewTokens": 8, "timeoutMs": 120000,
            "temperature": 0.0, "apiSnapshot": str(snapshot)}


@pytest.mark.slow
def test_ghost_text_from_a_gguf_and_nothing_but_frames_on_stdout(tmp_path):
    snapshot = write_numpy_snapshot(tmp_path / "numpy.json")
    client = RecordingClient()
    try:
        client.initialize(settings(str(tiny_gguf_path()), snapshot), root=str(tmp_path))
        status = client.wait_status()
        assert status["state"] == "ready", status
        source = tmp_path / "example.py"
        text = "import numpy as np\n\nvalues = np."
        source.write_text(text)
        client.open(source.as_uri(), text)
        response = client.request_settled("textDocument/inlineCompletion", inline_params(source.as_uri(), 2, len("values = np.")))
        items = response["result"]["items"] if isinstance(response["result"], dict) else response["result"]
        assert items and items[0]["insertText"].strip()
    finally:
        client.close()
    messages = strict_frames(bytes(client.raw))
    assert any(m.get("id") is not None and "result" in m for m in messages)
    assert any(m.get("method") == "adaptrack/status" and m["params"]["state"] == "ready" for m in messages)


@pytest.mark.slow
def test_a_bad_gguf_is_an_error_status_naming_the_fix_and_a_good_one_then_loads(tmp_path):
    snapshot = write_numpy_snapshot(tmp_path / "numpy.json")
    bad = tmp_path / "half.gguf"
    bad.write_bytes(tiny_gguf_path().read_bytes()[:300_000])
    client = RecordingClient()
    try:
        client.initialize(settings(str(bad), snapshot), root=str(tmp_path))
        status = client.wait_status()
        assert status["state"] == "error"
        assert "half.gguf" in status["message"] and "corrupt or truncated" in status["message"]
        client.notify("workspace/didChangeConfiguration", {"settings": {"adaptrack": settings(str(tiny_gguf_path()), snapshot)}})
        status = client.wait_status(("ready",))
        assert status["state"] == "ready"
        assert client.process.poll() is None
    finally:
        client.close()
    strict_frames(bytes(client.raw))
