"""Inline-completion latency of the language server, where the time goes, and prompt
tokens re-fed after an edit.

Starts `adaptrack-lsp serve` over stdio with the test model `tiny` (`--model builtin`: the
default built-in model; every default constraint on: API chains, keyword names, Python
syntax), opens a ~200-line file, and
simulates typing ``x = np.`` on a new last line, over and over: after each keystroke
(`didChange`) one `textDocument/inlineCompletion` request; latency is measured from
sending the request to receiving its response (the server's whole work: prompt building,
constraint, decoding).

The split: the same requests are then run in this process through `CompletionService`
(the code the server runs), and each request's counters say where its time went: the
model (`lm_seconds`), each constraint part's masks (`constraint_part_seconds`, by part),
the rest of the constraint (transitions, lazy checks), building the prompt, building the
constraint (per-request setup), the rest (the decoder's bookkeeping), and reading the
document for the request (`request_build`: typed receivers, context, paths; built as
the server builds it, from the document's analysis edited keystroke by keystroke).
It is printed for the median request and averaged over the slowest 5 %, so that a
regression names the part that grew.

Then, to measure prompt KV reuse, one completion request at a cursor, a 5-character
edit before the cursor, and a second request: the `prompt_tokens_fed` counter of the
second request is the number of prompt tokens the model had to process again (goal <=
16), with the cursor at the end of the file (left-to-right prompt) and in the middle of
it (fill-in-the-middle prompt, whose suffix follows the edit and is re-fed as well).

Then, with diagnostics on vs off (setting `diagnostics`, toggled on the same server in
off/on/on/off blocks so that drift cancels), the same typing on a longer file (~4,000
lines, one missing API use): each keystroke is an edit and a request, and the next
keystroke comes once the check of the edit before has started (the diagnostics'
`DEBOUNCE_S` after that edit, and after its answer) and a pause of 20 ms to 1.5 s
(cycling through `PAUSES_S`): most requests meet a check under way, some checks finish
(the worst case of an editor's diagnostics: a typist who pauses just longer than the
debounce).  The ratio of the two p50s is the cost of diagnostics to
ghost text (goal <= 1.1).

Validity comes from a snapshot of the installed numpy unless `--live-index` (jedi) is
given, so that the first jedi look-up of numpy does not dominate the run.

    python benchmarks/lsp_latency.py [--requests 60] [--max-new-tokens 8]
    python benchmarks/lsp_latency.py --model builtin --max-new-tokens 24   # the default model
    python benchmarks/lsp_latency.py --smoke   # 14 requests (two rounds of `x = np.`), 4 per diagnostics mode

The smoke run exits 1 when p95 > 3 x p50 over its requests (a bimodal distribution: some
keystrokes far slower than the rest), after printing its figures.

Last line: ``p50_ms=... p95_ms=... p95_over_p50=... outside_model_p50=... lm_calls_p50=...
lm_calls_max=... split_ms.<part>=... edit_tokens_fed=... edit_tokens_fed_fim=...
diag_off_p50_ms=... diag_on_p50_ms=... diag_p50_ratio=... diag_checks=...`` where
`outside_model_p50` is the share of the median in-process request (reading the document
included) spent outside the model (goal <= 0.15), the split is the mean per request in
milliseconds and `diag_checks` counts the diagnostics published meanwhile.
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
                message["received"] = received  # time.perf_counter() when read
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


TYPED = "x = np."
#: requests before the measured ones (caches warm up)
WARM_UP = 3
#: the smoke run fails when p95 exceeds this multiple of p50
SMOKE_P95_OVER_P50 = 3.0


def typing_sequence(text: str, requests: int) -> list[str]:
    """The document after each keystroke: one more character of `TYPED` on a new last
    line, cycling (the warm-up requests first)."""
    return [text + TYPED[: index % len(TYPED) + 1] for index in range(requests + WARM_UP)]


def percentile(sorted_values: list[float], share: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(round(share * (len(sorted_values) - 1))))]


def split_of(counters: dict) -> dict[str, float]:
    """Milliseconds of one request by part: model (the prompt's feed included), each
    constraint part's masks, the rest of the constraint, prompt plan, constraint setup,
    and the rest."""
    # the model: the tree's nodes and the prompt's feed (`set_prompt`)
    parts = {"model": counters.get("lm_seconds", 0.0) + counters.get("prompt_seconds", 0.0)}
    masks = counters.get("constraint_part_seconds", {}) or {}
    for label, seconds in sorted(masks.items()):
        parts[f"constraint.{label}"] = seconds
    parts["constraint.other"] = max(0.0, counters.get("constraint_seconds", 0.0) - sum(masks.values()))
    parts["prompt"] = counters.get("plan_seconds", 0.0)  # building the prompt plan
    parts["constraint_setup"] = counters.get("constraint_setup_seconds", 0.0)
    accounted = sum(parts.values())
    parts["other"] = max(0.0, counters.get("service_seconds", 0.0) - accounted)
    # reading the document for the request (typed receivers, context, paths): before the
    # service's clock starts, on the server's message thread
    parts["request_build"] = counters.get("request_build_seconds", 0.0)
    return {name: 1000.0 * seconds for name, seconds in parts.items()}


def in_process_split(settings: dict, documents: list[str], uri: str) -> tuple[list[float], list[dict], list[int]]:
    """The same requests through `CompletionService` in this process, built as the
    server builds them (the document's analysis edited keystroke by keystroke): (ms from
    reading the document to the answer, split per request, LM calls per request) for
    the measured requests."""
    from adaptrack_lsp.completion.pipeline import run
    from adaptrack_lsp.completion.project_context import document_path
    from adaptrack_lsp.completion.request import RequestControl
    from adaptrack_lsp.completion.service import CompletionService
    from adaptrack_lsp.config import parse_settings
    from adaptrack_lsp.lsp_server.documents import DocumentAnalyses

    parsed, problems = parse_settings(settings)
    if problems:
        raise SystemExit(f"bad settings: {problems}")
    service = CompletionService(parsed)
    analyses = DocumentAnalyses()
    analyses.opened(uri, documents[0])
    path = document_path(uri)  # as the server lists its open documents
    try:
        service.load()
        times, splits, calls = [], [], []
        for index, document in enumerate(documents):
            started = time.perf_counter()
            request = service.request(
                document, len(document), document=uri, open_documents=((path, document),), analysis=analyses.analysis(uri, document)
            )
            built = time.perf_counter()
            result = run(request, service.host, service.constraints, RequestControl(), wait_for_index=True)
            if index >= WARM_UP:
                counters = result.counters
                counters["request_build_seconds"] = built - started
                times.append(1000.0 * (built - started + counters["service_seconds"]))
                splits.append(split_of(counters))
                calls.append(int(counters.get("lm_calls", 0)))
        return times, splits, calls
    finally:
        service.close()


def mean_split(splits: list[dict]) -> dict[str, float]:
    names = list(dict.fromkeys(name for split in splits for name in split))
    return {name: statistics.fmean(split.get(name, 0.0) for split in splits) for name in names}


def outside_model_share(times: list[float], splits: list[dict]) -> float:
    """The share of the median request's time (reading the document to the answer)
    spent outside the model (its forward passes, the prompt's included)."""
    median = sorted(range(len(times)), key=times.__getitem__)[len(times) // 2]
    return 1.0 - splits[median]["model"] / times[median] if times[median] > 0 else float("nan")


def print_split(times: list[float], splits: list[dict], calls: list[int]) -> dict[str, float]:
    """Print the split of the median request, the mean one and the slowest 5 %; returns the mean."""
    order = sorted(range(len(times)), key=times.__getitem__)
    median = order[len(order) // 2]
    slowest = order[-max(1, round(0.05 * len(order))) :]
    rows = {
        f"median request ({times[median]:.1f} ms, {calls[median]} LM calls)": splits[median],
        f"mean over {len(times)} requests": mean_split(splits),
        f"slowest {len(slowest)} ({statistics.fmean(times[i] for i in slowest):.1f} ms, "
        f"{statistics.fmean(calls[i] for i in slowest):.0f} LM calls)": mean_split([splits[i] for i in slowest]),
    }
    names = list(dict.fromkeys(name for row in rows.values() for name in row))
    print("where the time goes, in process (ms per request):")
    width = max(len(name) for name in names)
    for title, row in rows.items():
        print(f"  {title}")
        for name in names:
            print(f"    {name:{width}} {row.get(name, 0.0):8.2f}")
    return rows[f"mean over {len(times)} requests"]


#: a check starts this long after the last edit (`lsp_server.diagnostics.DEBOUNCE_S`)
DIAGNOSTICS_DEBOUNCE_S = 0.4
#: functions of the document typed in for the diagnostics comparison (4 lines each)
DIAGNOSTICS_FUNCTIONS = 1000
#: pauses after the check of the last edit started, before the next keystroke (cycled)
PAUSES_S = (0.02, 0.06, 0.12, 0.25, 1.5)


def diagnostics_latency(peer: StdioPeer, folder: Path, settings: dict, requests: int) -> tuple[dict[str, list[float]], int]:
    """Ghost-text latency (ms) per diagnostics mode ("off", "warning") while the document
    is edited (see the module docstring), and the number of diagnostics published."""
    uri = (folder / "diagnosed.py").as_uri()
    text = document_text(DIAGNOSTICS_FUNCTIONS) + "legacy = np.float_(1)\n"
    block = max(2, requests // 4)
    modes = [("off", "warning", "warning", "off")[index % 4] for index in range(max(4, -(-requests // block)))]
    peer.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
    version = 1
    latencies: dict[str, list[float]] = {"off": [], "warning": []}
    published = 0
    next_edit = time.perf_counter()
    pauses = 0
    for mode in modes:
        peer.notify("workspace/didChangeConfiguration", {"settings": {"adaptrack": {**settings, "diagnostics": mode}}})
        for step, current in enumerate(typing_sequence(text, block)[: block + 1]):  # the first after the switch: warm-up
            time.sleep(max(0.0, next_edit - time.perf_counter()))
            version += 1
            peer.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": current}]})
            edited = time.perf_counter()
            line, column = position_of(current, len(current))
            seconds, response = peer.request("textDocument/inlineCompletion", inline_params(uri, line, column))
            next_edit = max(edited + DIAGNOSTICS_DEBOUNCE_S, time.perf_counter()) + PAUSES_S[pauses % len(PAUSES_S)]
            pauses += 1
            if "error" in response:
                raise RuntimeError(f"inline completion failed: {response['error']}")
            if step >= 1:
                latencies[mode].append(seconds * 1000)
        while True:
            try:
                message = peer.notifications.get_nowait()
            except queue.Empty:
                break
            if message.get("method") == "textDocument/publishDiagnostics" and message["params"]["uri"] == uri:
                published += 1
    return latencies, published


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--model", default="tiny", help="the model setting: tiny (default) or builtin")
    parser.add_argument("--decoder", default="adaptrack")
    parser.add_argument("--live-index", action="store_true", help="validity from jedi instead of a numpy snapshot")
    parser.add_argument("--threads", default="1", help="OMP_NUM_THREADS for the server (default 1)")
    parser.add_argument("--smoke", action="store_true", help=f"{2 * len(TYPED)} requests; fails when p95 > 3 x p50")
    args = parser.parse_args(argv)
    if args.smoke:
        args.requests = 2 * len(TYPED)

    os.environ.setdefault("OMP_NUM_THREADS", args.threads)  # the in-process split, as the server
    env = {**os.environ, "OMP_NUM_THREADS": args.threads, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    folder = Path(tempfile.mkdtemp(prefix="adaptrack-bench-"))
    settings = {"model": args.model, "maxNewTokens": args.max_new_tokens, "numSamples": 1, "decoder": args.decoder, "timeoutMs": 60000}
    if not args.live_index:
        settings["apiSnapshot"] = numpy_snapshot(folder)
    uri = (folder / "bench.py").as_uri()
    text = document_text()
    documents = typing_sequence(text, args.requests)
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

        peer.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
        version = 1
        latencies = []
        for index, current in enumerate(documents):
            version += 1
            peer.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": current}]})
            line, column = position_of(current, len(current))
            seconds, response = peer.request("textDocument/inlineCompletion", inline_params(uri, line, column))
            if "error" in response:
                raise RuntimeError(f"inline completion failed: {response['error']}")
            if index >= WARM_UP:  # the first requests warm caches
                latencies.append(seconds * 1000)
        ordered = sorted(latencies)
        p50 = statistics.median(ordered)
        p95 = percentile(ordered, 0.95)
        print(f"inline completion over {len(ordered)} requests: p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {ordered[-1]:.1f} ms")
        by_step: dict[str, list[float]] = {}
        for index, latency in enumerate(latencies):
            by_step.setdefault(TYPED[: (index + WARM_UP) % len(TYPED) + 1], []).append(latency)
        print("  median per keystroke: " + ", ".join(f"{step!r} {statistics.median(v):.0f} ms" for step, v in by_step.items()))

        end_fed, version = edit_tokens_fed(peer, uri, text + "y = ", len(text) + 4, version + 1)
        middle = text.index("def feature_100")
        fim_fed, version = edit_tokens_fed(peer, uri, text[:middle] + "y = \n" + text[middle:], middle + 4, version + 1)
        print(f"prompt tokens fed after a 5-character edit: cursor at end of file {end_fed}, mid-file (FIM) {fim_fed}")

        diagnosed, checks = diagnostics_latency(peer, folder, settings, 8 if args.smoke else args.requests)
        diag_off, diag_on = (statistics.median(diagnosed[mode]) for mode in ("off", "warning"))
        diag_ratio = diag_on / diag_off if diag_off > 0 else float("inf")
        print(
            f"ghost text while editing a {document_text(DIAGNOSTICS_FUNCTIONS).count(chr(10))}-line file, each keystroke after "
            f"the diagnostics debounce: p50 {diag_off:.1f} ms with diagnostics off, {diag_on:.1f} ms on "
            f"({len(diagnosed['off'])} + {len(diagnosed['warning'])} requests, {checks} diagnostics published): ratio {diag_ratio:.2f}"
        )
    finally:
        peer.close()

    times, splits, calls = in_process_split(settings, documents, uri)
    mean = print_split(times, splits, calls)
    outside = outside_model_share(times, splits)
    print(f"outside the model: {100 * outside:.0f}% of the median request in process")
    ordered_calls = sorted(calls)
    ratio = p95 / p50 if p50 > 0 else float("inf")
    split_text = " ".join(f"split_ms.{name}={value:.2f}" for name, value in mean.items())
    print(
        f"p50_ms={p50:.1f} p95_ms={p95:.1f} p95_over_p50={ratio:.2f} outside_model_p50={outside:.3f} "
        f"lm_calls_p50={statistics.median(ordered_calls):.0f} "
        f"lm_calls_max={ordered_calls[-1]} {split_text} edit_tokens_fed={end_fed} edit_tokens_fed_fim={fim_fed} "
        f"diag_off_p50_ms={diag_off:.1f} diag_on_p50_ms={diag_on:.1f} diag_p50_ratio={diag_ratio:.2f} diag_checks={checks}"
    )
    if args.smoke and ratio > SMOKE_P95_OVER_P50:
        print(f"p95 {p95:.1f} ms is more than {SMOKE_P95_OVER_P50:g} x p50 {p50:.1f} ms: some keystrokes are far slower (see the split)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
