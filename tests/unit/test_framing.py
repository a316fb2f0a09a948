"""`FramedReader`: clean frames out of a byte stream with bad frames in it."""

from __future__ import annotations

import asyncio
import json

import pytest

from adaptrack_lsp.lsp_server.framing import FramedReader


def frame(body: bytes, header: bytes = b"Content-Length") -> bytes:
    return header + b": %d\r\n\r\n" % len(body) + body


def message(number: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": number, "method": "textDocument/hover", "params": {"n": number}}).encode()


def read_all(data: bytes, chunk: int = 7, limit: int = 1 << 20) -> tuple[list[bytes], list[tuple[str, bool]]]:
    """Bodies as pygls' loop reads them (header line, empty line, body), and the errors."""
    chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    errors: list[tuple[str, bool]] = []

    async def source() -> bytes:
        return chunks.pop(0) if chunks else b""

    async def run() -> list[bytes]:
        reader = FramedReader(source, max_message_bytes=limit, on_error=lambda m, a: errors.append((m, a)))
        bodies = []
        while True:
            header = await reader.readline()
            if not header:
                return bodies
            assert header.startswith(b"Content-Length: ") and header.endswith(b"\r\n")
            assert await reader.readline() == b"\r\n"
            body = await reader.readexactly(int(header.split(b":")[1]))
            assert len(body) == int(header.split(b":")[1])
            bodies.append(body)

    return asyncio.run(run()), errors


def test_clean_stream_passes_unchanged_with_other_headers_and_split_chunks():
    data = frame(message(1)) + b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n" + frame(message(2))
    for chunk in (1, 5, 64, 1 << 16):
        bodies, errors = read_all(data, chunk)
        assert bodies == [message(1), message(2)] and errors == []


def test_lowercase_header_and_bare_newlines_are_read():
    bodies, errors = read_all(frame(message(1), b"content-length").replace(b"\r\n", b"\n") + frame(message(2)))
    assert bodies == [message(1), message(2)] and errors == []


@pytest.mark.parametrize("length", [10**12, 3_000_000_000, (1 << 20) + 1])
def test_oversized_message_is_answered_and_skipped_without_buffering(length):
    data = b"Content-Length: %d\r\n\r\n" % length + message(1) + frame(message(2))
    bodies, errors = read_all(data)
    assert bodies == [message(2)]
    assert len(errors) == 1 and errors[0][1] and str(length) in errors[0][0]


def test_oversized_message_sent_in_full_is_dropped_as_it_arrives():
    big = b'{"jsonrpc": "2.0", "method": "x", "params": "' + b"a" * (3 << 20) + b'"}'
    bodies, errors = read_all(frame(big) + frame(message(2)), chunk=1 << 16)
    assert bodies == [message(2)] and len(errors) == 1


def test_length_shorter_than_the_body_costs_only_that_message():
    body = message(1)
    data = b"Content-Length: %d\r\n\r\n" % (len(body) - 10) + body + frame(message(2))
    bodies, errors = read_all(data)
    assert bodies[-1] == message(2) and bodies[0] == body[:-10]
    assert [answer for _, answer in errors] == [False]  # the tail was skipped


def test_length_longer_than_the_body_is_cut_at_the_next_header():
    body = message(1)
    data = b"Content-Length: %d\r\n\r\n" % (len(body) + 500) + body + frame(message(2)) + frame(message(3))
    bodies, errors = read_all(data)
    assert bodies == [message(2), message(3)]
    assert len(errors) == 1 and errors[0][1]


def test_missing_header_and_binary_garbage_are_skipped_up_to_the_next_message():
    garbage = bytes(range(256)) * 256  # 64 KiB, newlines and all
    data = message(1) + garbage + frame(message(2)) + b"\r\n\r\nContent-Length: abc\r\n\r\n" + frame(message(3))
    bodies, errors = read_all(data, chunk=4096)
    assert bodies == [message(2), message(3)]
    assert all(not answer for _, answer in errors) and errors


def test_end_of_input_inside_a_body_ends_the_stream():
    bodies, _ = read_all(frame(message(1)) + b"Content-Length: 100\r\n\r\n{\"a\"")
    assert bodies == [message(1)]


def test_stream_readers_are_framed_too():
    async def run() -> list[bytes]:
        stream = asyncio.StreamReader()
        stream.feed_data(b"garbage" + frame(message(1), b"CONTENT-LENGTH"))
        stream.feed_eof()
        reader = FramedReader.for_stream(stream)
        header = await reader.readline()
        await reader.readline()
        return [await reader.readexactly(int(header.split(b":")[1])), await reader.readline()]

    assert asyncio.run(run()) == [message(1), b""]


def test_empty_message_is_answered_and_skipped():
    bodies, errors = read_all(b"Content-Length: 0\r\n\r\n" + frame(message(1)))
    assert bodies == [message(1)] and len(errors) == 1 and errors[0][1]
