"""How long the language server takes to end after `exit`, as an editor sees it.

Starts `adaptrack-lsp serve` over stdio with the built-in tiny model (the client's
`python -m adaptrack_lsp serve`, stderr a pipe), waits for `ready`, then per run: starts a
long completion (so the worker thread is busy, the case that used to wait), sends
`shutdown` and `exit`, and measures from `exit` to the end of the process.  Editors kill
a server that is still running 2 s after `exit` (vscode-languageclient).

    python benchmarks/server_exit.py [--runs 3]
    python benchmarks/server_exit.py --smoke   # one run

Last line: ``exit_ms_max=... exit_ms_median=... runs=...``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


class Server:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "adaptrack_lsp", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def read(self) -> dict:
        length = 0
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its stdout")
            if line == b"\r\n":
                break
            name, value = line.decode().split(":", 1)
            if name.lower() == "content-length":
                length = int(value)
        return json.loads(self.process.stdout.read(length))

    def until(self, predicate) -> dict:
        while True:
            message = self.read()
            if predicate(message):
                return message


def one_run(workspace: Path) -> float:
    server = Server()
    source = workspace / "example.py"
    source.write_text("import os\n\n\ndef f():\n    os.")
    options = {"model": "tiny", "device": "cpu", "maxNewTokens": 256, "multiline": True, "timeoutMs": 600000}
    server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}, "initializationOptions": options}})  # fmt: skip
    server.until(lambda m: m.get("id") == 1)
    server.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    status = server.until(lambda m: m.get("method") == "adaptrack/status" and m["params"]["state"] in ("ready", "error"))
    if status["params"]["state"] != "ready":
        raise RuntimeError(status["params"])
    uri = source.as_uri()
    server.send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                 "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": source.read_text()}}})  # fmt: skip
    server.send({"jsonrpc": "2.0", "id": 2, "method": "textDocument/inlineCompletion",
                 "params": {"textDocument": {"uri": uri}, "position": {"line": 4, "character": 7}, "context": {"triggerKind": 1}}})  # fmt: skip
    time.sleep(0.5)
    server.send({"jsonrpc": "2.0", "id": 3, "method": "shutdown"})
    server.until(lambda m: m.get("id") == 3)
    started = time.perf_counter()
    server.send({"jsonrpc": "2.0", "method": "exit"})
    server.process.wait(60)
    elapsed = time.perf_counter() - started
    server.process.stderr.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="one run (a run check)")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    times = []
    with tempfile.TemporaryDirectory() as folder:
        for run in range(args.runs):
            times.append(one_run(Path(folder)))
            print(f"run {run + 1}: exit {times[-1] * 1000:.0f} ms", flush=True)
    print(f"exit_ms_max={max(times) * 1000:.0f} exit_ms_median={statistics.median(times) * 1000:.0f} runs={len(times)}")


if __name__ == "__main__":
    main()
