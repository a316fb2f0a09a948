"""`serve --tcp`: one authenticated LSP connection on 127.0.0.1.

Any local process (or a web page POSTing to localhost) can open a TCP connection, so the
listening server trusts a peer only after its first message proves it knows the token:

- the token is ``$ADAPTRACK_LSP_TOKEN`` when the client set it, else generated per start
  (`secrets.token_urlsafe`) and written to a token file readable by the user only
  (mode 0600), whose path is printed on stderr;
- the first message must be a well-framed ``initialize`` request (only ``Content-Length``
  / ``Content-Type`` headers, at most `FIRST_MESSAGE_LIMIT` bytes) whose
  ``initializationOptions.token`` equals the token (compared with
  `hmac.compare_digest`); anything else gets a JSON-RPC error where it has an id, and the
  connection is closed.  The token is removed before the message reaches the server;
- while an authenticated client is connected, every further connection is closed at
  once (a JSON-RPC error first when it already sent a request).

After the check the connection is served by pygls' message loop, as ``start_tcp`` does,
reading frames through `framing.FramedReader` as on stdio (size cap, resynchronisation).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import re
import secrets
import sys
import threading
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TOKEN_ENV = "ADAPTRACK_LSP_TOKEN"
#: key of `initializationOptions` that carries the token
TOKEN_OPTION = "token"
#: largest accepted first message (an initialize request is a few KB)
FIRST_MESSAGE_LIMIT = 1024 * 1024
MAX_HEADER_LINES = 8
#: seconds a peer has to send its first message
FIRST_MESSAGE_TIMEOUT_S = 10.0
UNAUTHORIZED = -32001
_HEADER = re.compile(rb"^(Content-Length|Content-Type):\s*(.*?)\r?\n$", re.IGNORECASE)


class Refused(Exception):
    """The first message does not authenticate the peer."""

    def __init__(self, reason: str, message_id: Any = None):
        super().__init__(reason)
        self.reason = reason
        self.message_id = message_id


def default_token_file(port: int) -> Path:
    """``$XDG_RUNTIME_DIR/adaptrack-lsp-<port>.token``, else in the user cache dir."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / f"adaptrack-lsp-{port}.token"
    from adaptrack_lsp.config import cache_root

    return cache_root() / f"tcp-{port}.token"


def write_token_file(path: Path, token: str) -> None:
    """Write `token` to `path`, readable and writable by the user only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")


def frame(message: Any) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def read_first_message(reader: asyncio.StreamReader) -> dict:
    """The first JSON-RPC message of a connection, strictly framed and size-capped."""
    length = None
    for _ in range(MAX_HEADER_LINES + 1):
        line = await reader.readline()
        if not line:
            raise Refused("connection closed before the first message")
        if line in (b"\r\n", b"\n"):
            break
        match = _HEADER.match(line)
        if match is None:
            raise Refused(f"not an LSP header: {line[:40]!r}")
        if match.group(1).lower() == b"content-length":
            try:
                length = int(match.group(2))
            except ValueError:
                raise Refused("invalid Content-Length") from None
    else:
        raise Refused("too many header lines")
    if length is None or not 0 < length <= FIRST_MESSAGE_LIMIT:
        raise Refused(f"the first message needs a Content-Length between 1 and {FIRST_MESSAGE_LIMIT}")
    body = await reader.readexactly(length)
    try:
        message = json.loads(body)
    except ValueError:
        raise Refused("the first message is not JSON") from None
    if not isinstance(message, dict):
        raise Refused("the first message is not a JSON-RPC object")
    return message


def check_token(message: dict, token: str) -> dict:
    """The message without its token when it is an ``initialize`` carrying `token`."""
    message_id = message.get("id")
    if message.get("method") != "initialize":
        raise Refused("the first message must be an initialize request", message_id)
    params = message.get("params")
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    given = options.get(TOKEN_OPTION) if isinstance(options, dict) else None
    if not isinstance(given, str) or not hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8")):
        raise Refused(f"initializationOptions.{TOKEN_OPTION} is missing or wrong", message_id)
    options = {key: value for key, value in options.items() if key != TOKEN_OPTION}
    return {**message, "params": {**params, "initializationOptions": options}}


def framed_after(first: bytes, reader: asyncio.StreamReader, server):
    """The connection's frames for pygls' loop: `first` (the checked initialize,
    re-framed), then the stream through `framing.FramedReader` (size cap, errors
    answered, resynchronisation after bad frames), as on stdio."""
    from adaptrack_lsp.lsp_server.framing import CHUNK_BYTES, FramedReader

    replay = [first]

    async def read_chunk() -> bytes:
        if replay:
            return replay.pop()
        try:
            return await reader.read(CHUNK_BYTES)
        except ConnectionError:
            return b""

    return FramedReader(read_chunk, server.max_message_bytes, server.framing_error)


def serve_tcp(server, host: str, port: int, token: str, announce: str = "") -> None:
    """Serve `server` (a pygls LanguageServer) on host:port, one authenticated client;
    `announce` is printed on stderr once the port is bound."""
    from pygls.io_ import run_async

    server._stop_event = stop_event = threading.Event()
    state = {"connected": False}

    async def refuse(writer: asyncio.StreamWriter, peer, reason: str, message_id: Any = None) -> None:
        logger.warning("refused a connection from %s: %s", peer, reason)
        if isinstance(message_id, (int, str)) and not isinstance(message_id, bool):
            error_body = {"code": UNAUTHORIZED, "message": f"unauthorized: {reason}"}
            writer.write(frame({"jsonrpc": "2.0", "id": message_id, "error": error_body}))
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        if state["connected"]:
            await refuse(writer, peer, "a client is already connected (one at a time)")
            return
        try:
            message = await asyncio.wait_for(read_first_message(reader), FIRST_MESSAGE_TIMEOUT_S)
            message = check_token(message, token)
        except Refused as error:
            await refuse(writer, peer, error.reason, error.message_id)
            return
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError) as error:
            await refuse(writer, peer, type(error).__name__)
            return
        if state["connected"]:  # another client authenticated meanwhile
            await refuse(writer, peer, "a client is already connected (one at a time)", message.get("id"))
            return
        state["connected"] = True
        logger.info("client %s authenticated", peer)
        server.protocol.set_writer(writer)
        await run_async(
            stop_event=stop_event,
            reader=framed_after(frame(message), reader, server),
            protocol=server.protocol,
            logger=logger,
            error_handler=server.report_server_error,
        )
        server.shutdown()

    async def main() -> None:
        listener = await asyncio.start_server(connection, host, port)
        server._server = listener
        if announce:
            print(announce, file=sys.stderr, flush=True)
        async with listener:
            try:
                await listener.serve_forever()
            except asyncio.CancelledError:
                pass

    try:
        asyncio.run(main())
    except asyncio.CancelledError:
        pass


def start(server, host: str, port: int, token_file: str | None = None) -> None:
    """Resolve the token (client-given or generated and written), then serve."""
    token = os.environ.get(TOKEN_ENV, "")
    written: Path | None = None
    if token:
        announce = f"adaptrack-lsp: listening on {host}:{port}; token from ${TOKEN_ENV}"
    else:
        token = secrets.token_urlsafe(32)
        written = Path(token_file) if token_file else default_token_file(port)
        write_token_file(written, token)
        announce = f"adaptrack-lsp: listening on {host}:{port}; token in {written} (mode 0600)"
        token_path = written
        server.exit_cleanups.append(lambda: token_path.unlink(missing_ok=True))
    try:
        serve_tcp(server, host, port, token, announce)
    finally:
        if written is not None:
            try:
                written.unlink()
            except OSError:
                pass
