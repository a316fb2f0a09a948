"""Inline-completion latency of the language server, and prompt tokens re-fed after an edit.

Starts `adaptrack-lsp serve` over stdio with the built-in tiny model, opens a ~200-line
file, and simulates typing: after each keystroke (`didChange`) one
`textDocument/inlineCompletion` request; latency is measured from sending the request
to receiving its response (the server's whole work: prompt building, constraint,
decoding).  Then, to measure prompt KV reuse, one completion request at a cursor,
a 5-character edit before the cursor, and a second request: the `prompt_tokens_fed`
counter of the second request is the number of prompt tokens the model had to
process again (goal <= 16), with the cursor at the end of the file (left-to-right
prompt) and in the middle of it (fill-in-the-middle prompt, whose suffix follows the
edit and is re-fed as well).

Validity comes from a snapshot of the installed numpy unless `--live-index` (jedi) is
given, so that the first jedi look-up of numpy does not dominate the run.

    python benchmarks/lsp_latency.py [--requests 60] [--max-new-tokens 8]
    python benchmarks/lsp_latency.py --smoke   # 3 requests, 2 new tokens

Last line: ``p50_ms=... p95_ms=... edit_tokens_fed=... edit_tokens_fed_fim=...``.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


class StdioPeer:
    """Minimal JSON-RPC peer on the server's stdio."""

    def __init__(self, command: list[str], env: dict[str, str]):
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.responses: dict[int, tuple[float, dict]] = {}
        self.notifications: queue.Queue = queue.Queue()
        self.lock = threading.Condition()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

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
                elif line.strip() == b"" and length is not None:
                    break
            message = json.loads(stream.read(length))
            received = time.perf_counter()
            if "method" in message and "id" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "method" in message:
                self.notifications.put(message)
            else:
                with self.lock:
                    self.responses[message["id"]] = (received, message)
                    self.lock.notify_all()

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def notify(self, method: str, params) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params, timeout: float = 300.0) -> tuple[float, dict]:
        """(seconds from sending to receiving the response, response)."""
        self.next_id += 1
        request_id = self.next_id
        sent = time.perf_counter()
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        with self.lock:
            while request_id not in self.responses:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{method} not answered in {timeout} s")
                self.lock.wait(0.5)
            received, response = self.responses.pop(request_id)
        return received - sent, response

    def wait_status(self, timeout: float = 300.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                message = self.notifications.get(timeout=1.0)
            except queue.Empty:
                continue
            if message.get("method") == "adaptrack/status" and message["params"]["state"] in ("ready", "error"):
                return message["params"]
        raise TimeoutError("the model did not load")

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=10)
            self.notify("exit", None)
            self.process.wait(timeout=10)
        except Exception:
            self.process.kill()


def numpy_snapshot(folder: Path) -> str:
    from adaptrack_lsp.apis.snapshot import module_snapshot, write_snapshot

    path = folder / "numpy.json"
    write_snapshot(module_snapshot("numpy", ("linalg", "random", "fft")), path)
    return str(path)


def document_text(lines: int = 200) -> str:
    body = ["import numpy as np", "", ""]
    for i in range(lines):
        body.append(f"def feature_{i}(values):")
        body.append(f"    scaled = np.asarray(values) * {i + 1}")
        body.append("    return scaled.sum()")
        body.append("")
    return "\n".join(body) + "\n"


def inline_params(uri: str, line: int, character: int) -> dict:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}, "context": {"triggerKind": 2}}


def position_of(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset)
    return line, offset - (text.rfind("\n", 0, offset) + 1)


def edit_tokens_fed(peer: StdioPeer, uri: str, text: str, cursor: int, version: int) -> tuple[int | None, int]:
    """Prompt tokens fed by a completion request after typing 5 characters at `cursor`."""
    peer.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]})
    line, column = position_of(text, cursor)
    peer.request("textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": line, "character": column}})
    edited = text[:cursor] + "np.li" + text[cursor:]
    version += 1
    peer.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": edited}]})
    line, column = position_of(edited, cursor + 5)
    _, response = peer.request("textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": line, "character": column}})
    items = response.get("result", {}).get("items", [])
    if not items:
        return None, version + 1
    return int(items[0]["data"]["counters"]["prompt_tokens_fed"]), version + 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--decoder", default="adaptrack")
    parser.add_argument("--live-index", action="store_true", help="validity from jedi instead of a numpy snapshot")
    parser.add_argument("--threads", default="1", help="OMP_NUM_THREADS for the server (default 1)")
    parser.add_argument("--smoke", action="store_true", help="3 requests of 2 new tokens (a run check)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.requests, args.max_new_tokens = 3, 2

    env = {**os.environ, "OMP_NUM_THREADS": args.threads, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    folder = Path(tempfile.mkdtemp(prefix="adaptrack-bench-"))
    settings = {"model": "tiny", "maxNewTokens": args.max_new_tokens, "numSamples": 1, "decoder": args.decoder, "timeoutMs": 60000}
    if not args.live_index:
        settings["apiSnapshot"] = numpy_snapshot(folder)
    peer = StdioPeer([sys.executable, "-m", "adaptrack_lsp", "serve"], env)
    try:
        peer.request("initialize", {"processId": os.getpid(), "rootUri": folder.as_uri(), "capabilities": {}, "initializationOptions": settings})
        peer.notify("initialized", {})
        started = time.perf_counter()
        status = peer.wait_status()
        if status["state"] != "ready":
            print(f"model did not load: {status['message']}", file=sys.stderr)
            return 1
        print(f"model ready in {time.perf_counter() - started:.1f} s; settings {settings}")

        uri = (folder / "bench.py").as_uri()
        text = document_text()
        peer.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
        version = 1
        typed = "x = np."
        latencies = []
        prompt_tokens = []
        for index in range(args.requests + 3):
            # type one more character of `result = np.` ... on a new last line, cycling
            step = index % len(typed)
            current = text + typed[: step + 1]
            version += 1
            peer.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": current}]})
            line, column = position_of(current, len(current))
            seconds, response = peer.request("textDocument/inlineCompletion", inline_params(uri, line, column))
            if "error" in response:
                raise RuntimeError(f"inline completion failed: {response['error']}")
            if index >= 3:  # the first requests warm caches
                latencies.append(seconds * 1000)
        prompt_tokens.append(len(text) // 4)
        latencies.sort()
        p50 = statistics.median(latencies)
        p95 = latencies[min(len(latencies) - 1, int(round(0.95 * (len(latencies) - 1))))]
        print(f"inline completion over {len(latencies)} requests: p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {latencies[-1]:.1f} ms")

        end_fed, version = edit_tokens_fed(peer, uri, text + "y = ", len(text) + 4, version + 1)
        middle = text.index("def feature_100")
        fim_fed, version = edit_tokens_fed(peer, uri, text[:middle] + "y = \n" + text[middle:], middle + 4, version + 1)
        print(f"prompt tokens fed after a 5-character edit: cursor at end of file {end_fed}, mid-file (FIM) {fim_fed}")
        print(f"p50_ms={p50:.1f} p95_ms={p95:.1f} edit_tokens_fed={end_fed} edit_tokens_fed_fim={fim_fed}")
    finally:
        peer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
