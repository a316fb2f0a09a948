"""Shared pieces of the protocol-level tests: server command, a snapshot of the installed
numpy, and a raw JSON-RPC client over stdio that can send malformed bytes."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from adaptrack_lsp.apis.snapshot import module_snapshot, write_snapshot

SERVER_COMMAND = [sys.executable, "-m", "adaptrack_lsp", "serve"]


def make_client():
    """A pytest-lsp client that records every `adaptrack/status` as (state, message)."""
    import pytest_lsp

    client = pytest_lsp.make_test_lsp_client()
    client.statuses = []

    @client.feature("adaptrack/status")
    def status(ls, params):
        ls.statuses.append((params.state, params.message))

    return client


def server_env() -> dict[str, str]:
    # one intra-op thread: on a small shared CI machine torch's thread pool spins
    # against other processes (10-20x slower steps); the tiny model needs no more
    return {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "TF_CPP_MIN_LOG_LEVEL": "3"}


async def initialize_until_ready(lsp_client, settings: dict, limit_s: float = 120.0):
    """Initialize a pytest-lsp session with `settings` and wait for the first "ready"
    status (the model loaded)."""
    import asyncio

    from lsprotocol import types

    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=types.ClientCapabilities(), initialization_options=settings)
    )
    deadline = time.monotonic() + limit_s
    while not any(state == "ready" for state, _ in lsp_client.statuses):
        assert time.monotonic() < deadline, lsp_client.statuses
        await asyncio.sleep(0.05)


def numpy_public_names() -> set[str]:
    import numpy

    return {name for name in dir(numpy) if not name.startswith("_")}


def write_numpy_snapshot(path: Path) -> Path:
    """A SnapshotIndex JSON of the installed numpy (top level + linalg/random/fft)."""
    write_snapshot(module_snapshot("numpy", ("linalg", "random", "fft")), path)
    return path


async def initialize_with_numpy_snapshot(lsp_client, tmp_path_factory, settings: dict):
    """Initialize a pytest-lsp session whose validity comes from a snapshot of the installed
    numpy (`apiSnapshot`, fast and deterministic), with progress support; the client keeps
    the snapshot path in `.snapshot`.  Returns the initialize result."""
    from lsprotocol import types

    snapshot = write_numpy_snapshot(tmp_path_factory.mktemp("snapshot") / "numpy.json")
    lsp_client.snapshot = str(snapshot)
    capabilities = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True))
    return await lsp_client.initialize_session(
        types.InitializeParams(capabilities=capabilities, initialization_options={**settings, "apiSnapshot": str(snapshot)})
    )


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def encode(message: Any) -> bytes:
    return frame(json.dumps(message).encode("utf-8"))


class RawClient:
    """A JSON-RPC peer on a server subprocess's stdio (requests answered by id)."""

    def __init__(self, command=SERVER_COMMAND, env=None):
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env or server_env(),
        )
        self.responses: dict[Any, dict] = {}
        self.notifications: queue.Queue[dict] = queue.Queue()
        self.notification_log: list[dict] = []
        self._condition = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._ids = iter(range(1, 1 << 30))

    # -- reading ---------------------------------------------------------------------
    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                elif line in (b"\r\n", b"\n") and length is not None:
                    break
            try:
                message = json.loads(stream.read(length))
            except ValueError:
                self.notification_log.append({"method": "<unparsable message from the server>"})
                continue
            if not isinstance(message, dict):
                self.notification_log.append({"method": "<non-object message>", "params": message})
                continue
            if "method" in message and "id" in message:  # a request from the server
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
                self.notification_log.append(message)
            elif "method" in message:
                self.notification_log.append(message)
                self.notifications.put(message)
            else:
                with self._condition:
                    self.responses[_key(message.get("id"))] = message
                    self._condition.notify_all()

    # -- writing ---------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: Any) -> None:
        self.write(encode(message))

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request_async(self, method: str, params: Any = None, request_id: Any = None) -> Any:
        request_id = request_id if request_id is not None else f"r{next(self._ids)}"
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def wait(self, request_id: Any, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        with self._condition:
            while _key(request_id) not in self.responses:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    raise TimeoutError(f"no response to {request_id!r} (server alive: {self.process.poll() is None})")
                self._condition.wait(min(remaining, 0.5))
            return self.responses.pop(_key(request_id))

    def request(self, method: str, params: Any = None, timeout: float = 60.0) -> dict:
        return self.wait(self.request_async(method, params), timeout)

    def last_status(self) -> str | None:
        states = [m["params"]["state"] for m in list(self.notification_log) if m.get("method") == "adaptrack/status"]
        return states[-1] if states else None

    def request_settled(self, method: str, params: Any = None, timeout: float = 120.0) -> dict:
        """The first answer that is not the empty one given while the API index computes
        members the completion needs (status "indexing", sent before the answer): such a
        request is asked again.  The index may finish, and the status turn "ready", before
        the answer is looked at, so the statuses sent since the request count."""
        deadline = time.monotonic() + timeout
        while True:
            seen = len(self.notification_log)
            response = self.request(method, params, timeout)
            result = response.get("result")
            items = result.get("items") if isinstance(result, dict) else result
            indexing = any(
                m.get("method") == "adaptrack/status" and m["params"].get("state") == "indexing"
                for m in self.notification_log[seen:]
            )
            if items or not (indexing or self.last_status() == "indexing") or time.monotonic() > deadline:
                return response
            time.sleep(0.3)

    def wait_notification(self, predicate, timeout: float = 120.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("notification not received")
            try:
                message = self.notifications.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                if self.process.poll() is not None:
                    raise TimeoutError("server exited") from None
                continue
            if predicate(message):
                return message

    # -- session ---------------------------------------------------------------------
    def initialize(self, options: dict, root: str | None = None) -> dict:
        capabilities = {"window": {"workDoneProgress": True}}
        result = self.request(
            "initialize",
            {"processId": os.getpid(), "rootUri": Path(root).as_uri() if root else None, "capabilities": capabilities,
             "initializationOptions": options},
        )
        self.notify("initialized", {})
        return result

    def wait_status(self, states=("ready", "error"), timeout: float = 240.0) -> dict:
        message = self.wait_notification(
            lambda m: m.get("method") == "adaptrack/status" and m["params"]["state"] in states, timeout
        )
        return message["params"]

    def open(self, uri: str, text: str, version: int = 1) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}})

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.wait(self.request_async("shutdown"), timeout=10)
                self.notify("exit")
                self.process.wait(timeout=10)
            except Exception:
                self.process.kill()
                self.process.wait(timeout=10)


def _key(message_id: Any) -> str:
    """Responses are filed by the JSON text of their id (ids can be any JSON value)."""
    return json.dumps(message_id, sort_keys=True)


def inline_params(uri: str, line: int, character: int) -> dict:
    return {
        "textDocument": {"uri": uri},
        "position": {"line": line, "character": character},
        "context": {"triggerKind": 1},
    }


def completion_params(uri: str, line: int, character: int) -> dict:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}
