"""JSON-RPC framing that survives bad input: a size cap and resynchronisation.

pygls reads ``Content-Length: N`` and then exactly N bytes.  One bad frame is enough to
kill or deafen it: a huge N makes it allocate N bytes (``MemoryError``) or wait for them
forever; a wrong N, a lowercase or missing header, or binary garbage glue the bytes of
the next message to the wrong place, and every later message is misread.

`FramedReader` owns the framing instead and hands pygls' loop (``pygls.io_.run_async``)
clean frames through the same ``readline``/``readexactly`` interface:

- the header name is matched case-insensitively, header lines may end in ``\\n``;
- bytes that are not part of a header block (garbage, a body without a header, the tail
  of a body whose length was too short) are skipped up to the next ``Content-Length``;
- a body is cut where the next header block starts.  That is safe: a JSON text cannot
  hold ``Content-Length: N`` followed by an empty line (outside strings it is not JSON,
  inside strings raw line breaks are not allowed), so a declared length that is too
  long costs only that one message;
- a frame longer than ``max_message_bytes`` (default 64 MiB) is never buffered: it is
  answered with an error and its bytes are skipped as they arrive.

Every skipped or rejected frame is reported through ``on_error(message, answer)``:
``answer`` is True for a rejected message (the server answers it with a JSON-RPC error
whose id is null: the client's id is unknown) and False for skipped bytes (logged).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Awaitable, Callable
from typing import BinaryIO

logger = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 64 * 2**20
#: longest header block accepted (a real one is ~60 bytes)
MAX_HEADER_BYTES = 8192
CHUNK_BYTES = 1 << 16

# "Content-Length: N" and the rest of its header block, up to and including the empty line
_HEADER = re.compile(rb"content-length[ \t]*:[ \t]*(\d{1,30})[ \t]*\r?\n((?:[!-9;-~]+[ \t]*:[^\r\n]*\r?\n)*?)\r?\n", re.I)
# header lines other than Content-Length (skipped silently)
_OTHER_HEADERS = re.compile(rb"(?:[!-9;-~]+[ \t]*:[^\r\n]*\r?\n)*")
# where a header block may start (to keep a split header across reads)
_HEADER_START = re.compile(rb"content-length", re.I)

ChunkSource = Callable[[], Awaitable[bytes]]


class FramedReader:
    """Frames from a byte-chunk source, for ``pygls.io_.run_async`` (see module doc)."""

    def __init__(
        self,
        read_chunk: ChunkSource,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        on_error: Callable[[str, bool], None] | None = None,
    ):
        self._read_chunk = read_chunk
        self.max_message_bytes = int(max_message_bytes)
        self._on_error = on_error or (lambda message, answer: None)
        self._skipped = 0
        self._skipped_sample = b""
        self._buffer = bytearray()
        self._eof = False
        self._pending: list[bytes] = []  # lines and the body of the next clean frame

    @classmethod
    def for_stream(cls, stream, **kwargs) -> FramedReader:
        """A framer over an `asyncio.StreamReader` (a TCP connection)."""
        return cls(lambda: stream.read(CHUNK_BYTES), **kwargs)

    # -- the interface run_async uses -----------------------------------------------------
    async def readline(self) -> bytes:
        if not self._pending:
            body = await self._next_body()
            if body is None:
                return b""
            self._pending = [b"Content-Length: %d\r\n" % len(body), b"\r\n", body]
        return self._pending.pop(0)

    async def readexactly(self, n: int) -> bytes:
        if not self._pending:  # run_async reads the body only after the header lines
            return b""
        return self._pending.pop(0)

    # -- framing ------------------------------------------------------------------------
    async def _fill(self) -> bool:
        """Append one chunk to the buffer; False at end of input."""
        if self._eof:
            return False
        chunk = await self._read_chunk()
        if not chunk:
            self._eof = True
            return False
        self._buffer += chunk
        return True

    def _skip(self, count: int, why: str) -> None:
        if count <= 0:
            return
        skipped = bytes(self._buffer[:count])
        del self._buffer[:count]
        if _OTHER_HEADERS.fullmatch(skipped) is None:
            if not self._skipped:
                self._skipped_sample = skipped[:40]
            self._skipped += count

    def _report_skipped(self) -> None:
        """One report per run of skipped bytes (sent when the stream is in step again)."""
        if self._skipped:
            self._on_error(
                f"skipped {self._skipped} bytes that were not a JSON-RPC message "
                f"(starting {self._skipped_sample!r})",
                False,
            )
            self._skipped, self._skipped_sample = 0, b""

    async def _next_body(self) -> bytes | None:
        while True:
            match = _HEADER.search(self._buffer)
            if match is None:
                # keep a possibly incomplete header block at the end, drop what precedes it
                start = _HEADER_START.search(self._buffer)
                if start is not None:
                    self._skip(start.start(), "no header before it")
                    if len(self._buffer) > MAX_HEADER_BYTES:
                        self._skip(len("content-length"), "a header block that does not end")
                        continue
                elif len(self._buffer) > MAX_HEADER_BYTES:  # (shorter: may be other header lines)
                    keep = len("content-length") - 1
                    self._skip(len(self._buffer) - keep, "no Content-Length header")
                if not await self._fill():
                    self._skip(len(self._buffer), "end of input")
                    self._report_skipped()
                    return None
                continue
            length, start, end = int(match.group(1)), match.start(), match.end()  # before the buffer changes
            self._skip(start, "no Content-Length header")
            self._report_skipped()
            del self._buffer[: end - start]
            if length == 0:  # pygls' loop would read the empty body as the end of input
                self._on_error("a message with Content-Length 0 is skipped", True)
                continue
            if length > self.max_message_bytes:
                self._on_error(
                    f"a message of {length} bytes exceeds the limit of {self.max_message_bytes} bytes "
                    "(serve --max-message-mb); it is skipped",
                    True,
                )
                await self._discard(length)
                continue
            body = await self._body(length)
            if body is None:
                continue
            return body

    async def _body(self, length: int) -> bytes | None:
        """The next `length` bytes, unless a header block starts inside them (then the
        declared length was wrong: the partial body is rejected and None returned)."""
        searched = 0
        while True:
            # a new header block inside the declared body means that the length was wrong
            match = _HEADER.search(self._buffer, max(0, searched - MAX_HEADER_BYTES), min(len(self._buffer), length + MAX_HEADER_BYTES))
            if match is not None and match.start() < length:
                self._on_error(
                    f"a message declared {length} bytes but the next message starts after {match.start()}; "
                    "the incomplete message is skipped",
                    True,
                )
                del self._buffer[: match.start()]
                return None
            if len(self._buffer) >= length:
                body = bytes(self._buffer[:length])
                del self._buffer[:length]
                return body
            searched = len(self._buffer)
            if not await self._fill():
                return None

    async def _discard(self, length: int) -> None:
        """Drop `length` bytes as they arrive, stopping early at a new header block."""
        remaining = length
        while remaining > 0:
            match = _HEADER.search(self._buffer)
            if match is not None and match.start() < remaining:
                del self._buffer[: match.start()]
                return
            if len(self._buffer) >= remaining:
                del self._buffer[:remaining]
                return
            keep = min(len(self._buffer), MAX_HEADER_BYTES)
            dropped = len(self._buffer) - keep
            del self._buffer[:dropped]
            remaining -= dropped
            if not await self._fill():
                return


def _raw_reader(stream: BinaryIO) -> Callable[[int], bytes]:
    """`os.read` on the stream's file descriptor when it has one: a daemon thread blocked
    in a buffered reader holds the buffer's lock, and Python aborts at exit when it
    cannot take that lock ("could not acquire lock ... at interpreter shutdown")."""
    import os

    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return getattr(stream, "read1", stream.read)
    return lambda size: os.read(descriptor, size)


class StdinChunks:
    """Chunks of a binary stream, read by one dedicated daemon thread.

    One thread for the life of the server: pygls' own stdin reader submits every
    ``readline`` to its thread pool, which on a loaded machine starts a new pool thread
    whenever the previous read's thread has not gone idle yet (threads grow up to the
    pool's maximum).
    """

    def __init__(self, stream: BinaryIO, chunk_bytes: int = CHUNK_BYTES):
        self._stream = stream
        self._chunk_bytes = chunk_bytes
        self._queue: asyncio.Queue[bytes] | None = None
        self._thread: threading.Thread | None = None

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        queue = self._queue

        read = _raw_reader(self._stream)

        def read_forever() -> None:
            while True:
                try:
                    chunk = read(self._chunk_bytes)
                except (OSError, ValueError):
                    chunk = b""
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, chunk)
                except RuntimeError:  # the loop is closed
                    return
                if not chunk:
                    return

        self._thread = threading.Thread(target=read_forever, name="lsp-stdin", daemon=True)
        self._thread.start()

    async def __call__(self) -> bytes:
        if self._queue is None:
            self._start()
        return await self._queue.get()
