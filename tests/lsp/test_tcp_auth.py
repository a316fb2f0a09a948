"""`serve --tcp`: only a client that knows the per-start token gets a session; one at a time.

The attacks: any local process (or a web page POSTing to localhost) connecting to the
port and speaking LSP without the token.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time

import pytest

from lsp_support import server_env

pytestmark = pytest.mark.skipif(os.name != "posix", reason="token file mode checked with POSIX permissions")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _initialize(token: str | None, message_id: int = 1) -> bytes:
    options = {"model": "tiny"} if token is None else {"model": "tiny", "token": token}
    return _frame({"jsonrpc": "2.0", "id": message_id, "method": "initialize",
                   "params": {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": options}})


def _read_message(sock: socket.socket, timeout: float = 30.0) -> dict | None:
    """One framed message, or None when the server closed the connection first."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    header, body = data.split(b"\r\n\r\n", 1)
    length = next(int(line.split(b":")[1]) for line in header.split(b"\r\n") if line.lower().startswith(b"content-length"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        body += chunk
    return json.loads(body[:length])


def _messages_until(sock: socket.socket, last, timeout: float = 60.0) -> list[dict]:
    """Every message the server sends up to the first for which `last(message)` holds."""
    sock.settimeout(timeout)
    data, messages = b"", []
    while not messages or not last(messages[-1]):
        while b"\r\n\r\n" in data:
            header, rest = data.split(b"\r\n\r\n", 1)
            length = next(int(line.split(b":")[1]) for line in header.split(b"\r\n") if line.lower().startswith(b"content-length"))
            if len(rest) < length:
                break
            messages.append(json.loads(rest[:length]))
            data = rest[length:]
            if last(messages[-1]):
                return messages
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection after {messages}"
        data += chunk
    return messages


def _closed_by_server(sock: socket.socket, timeout: float = 10.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def _until_closed(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Everything the server sends before it closes the connection (reset counts as closed)."""
    sock.settimeout(timeout)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def _start(tmp_path, env):
    port = _free_port()
    token_file = tmp_path / "token"
    process = subprocess.Popen(
        [sys.executable, "-m", "adaptrack_lsp", "serve", "--tcp", "--port", str(port), "--token-file", str(token_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
    )
    deadline = time.monotonic() + 60
    announced = b""
    while b"listening on" not in announced:  # the server says so once the port is bound
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            pytest.fail(f"the TCP server did not start: {announced.decode(errors='replace')[-2000:]}")
        announced += process.stderr.readline()
    yield port, token_file, process
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)


@pytest.fixture
def tcp_server(tmp_path):
    yield from _start(tmp_path, {key: value for key, value in server_env().items() if key != "ADAPTRACK_LSP_TOKEN"})


@pytest.fixture
def tcp_server_with_client_token(tmp_path, monkeypatch):
    monkeypatch.setenv("ADAPTRACK_LSP_TOKEN", "given-by-the-client")
    yield from _start(tmp_path, server_env())


def test_a_token_given_by_the_client_is_required_and_no_token_file_is_written(tcp_server_with_client_token):
    port, token_file, _ = tcp_server_with_client_token
    assert not token_file.exists()
    with connect(port) as attacker:
        attacker.sendall(_initialize(None))
        assert "unauthorized" in _read_message(attacker)["error"]["message"]
    with connect(port) as client:
        client.sendall(_initialize("given-by-the-client"))
        assert _read_message(client, timeout=60)["result"]["serverInfo"]["name"] == "adaptrack-lsp"


def test_the_token_is_checked_in_constant_time_and_removed_from_the_settings():
    from adaptrack_lsp.lsp_server import tcp

    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"initializationOptions": {"token": "t0k", "model": "tiny"}}}
    checked = tcp.check_token(message, "t0k")
    assert checked["params"]["initializationOptions"] == {"model": "tiny"}
    for wrong in ("t0K", "", None, 3):
        bad = {**message, "params": {"initializationOptions": {"token": wrong}}}
        with pytest.raises(tcp.Refused):
            tcp.check_token(bad, "t0k")
    assert "compare_digest" in open(tcp.__file__, encoding="utf-8").read()


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def test_a_client_without_the_token_is_refused(tcp_server):
    port, token_file, _ = tcp_server
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    with connect(port) as attacker:
        attacker.sendall(_initialize(None))
        answer = _read_message(attacker)
        assert answer is not None and "result" not in answer
        assert answer["error"]["code"] == -32001 and "unauthorized" in answer["error"]["message"]
        assert _closed_by_server(attacker)
    with connect(port) as attacker:
        attacker.sendall(_initialize("not-the-token"))
        answer = _read_message(attacker)
        assert answer is not None and "result" not in answer and "unauthorized" in answer["error"]["message"]
    with connect(port) as browser:  # a web page POSTing LSP-shaped text to localhost
        body = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'
        browser.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                        b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert _closed_by_server(browser)
    with connect(port) as huge:  # a first message over the 1 MiB limit is not read
        huge.sendall(b"Content-Length: 2000000\r\n\r\n" + b" " * 65536)
        assert b'"result"' not in _until_closed(huge)
    with connect(port) as other:  # another request than initialize first
        other.sendall(_frame({"jsonrpc": "2.0", "id": 7, "method": "shutdown"}))
        answer = _read_message(other)
        assert answer is not None and answer["id"] == 7 and "error" in answer


def test_the_token_holder_gets_the_session_and_a_second_connection_is_refused(tcp_server):
    port, token_file, process = tcp_server
    token = token_file.read_text().strip()
    with connect(port) as client:
        client.sendall(_initialize(token))
        answer = _read_message(client, timeout=60)
        assert answer is not None and answer["result"]["serverInfo"]["name"] == "adaptrack-lsp"
        with connect(port) as second:  # even with the token: one client at a time
            second.sendall(_initialize(token, message_id=2))
            received = _until_closed(second)
            assert b'"result"' not in received
            assert not received or b"already connected" in received
        client.sendall(_frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}))
        assert _read_message(client, timeout=60)["id"] == 3
        client.sendall(_frame({"jsonrpc": "2.0", "method": "exit"}))
    process.wait(timeout=60)
    assert not token_file.exists()  # removed when the server stops


def test_a_bad_frame_after_authentication_neither_kills_nor_deafens_the_session(tcp_server):
    """The authenticated connection is read like stdio: an oversized frame (3 GB declared)
    and garbage are answered or skipped, and the next request is served."""
    port, token_file, process = tcp_server
    token = token_file.read_text().strip()
    with connect(port) as client:
        client.sendall(_initialize(token))
        assert _read_message(client, timeout=60)["result"]["serverInfo"]["name"] == "adaptrack-lsp"
        client.sendall(b"Content-Length: 3000000000\r\n\r\n" + b"x" * 1000)
        client.sendall(b"\x00\xffgarbage\r\n" + _frame({"jsonrpc": "2.0", "id": 5, "method": "shutdown"}))
        answers = _messages_until(client, lambda m: m.get("id") == 5)
        assert any(m.get("id") is None and "error" in m for m in answers), answers  # the 3 GB frame
        assert "result" in answers[-1], answers
        client.sendall(_frame({"jsonrpc": "2.0", "method": "exit"}))
    process.wait(timeout=60)
    assert process.returncode == 0
