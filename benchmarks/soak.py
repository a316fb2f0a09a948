"""Memory of the language server over a long session.

Starts `adaptrack-lsp serve` over stdio with the built-in tiny model, opens 20 documents
(different imports, sizes and cursor places) and runs rounds: in each round every
document is edited (`didChange`, the whole text: a line typed at a place that moves) and
gets one completion request (inline and list requests alternate).  The server's resident
memory (RSS) is sampled after every round.  Validity comes from the live environment
(jedi) unless `--snapshot` is given.

    python benchmarks/soak.py [--rounds 40] [--documents 20] [--warmup-rounds 10]
    python benchmarks/soak.py --smoke   # 3 rounds over 2 documents

Last line: ``... last_half_growth_mb=... last_half_slope_mb_per_100_requests=...
rss_growth_mb_after_warmup=...``: growth from the end of the warm-up rounds to the end
and over the last half (each level is the median of the 5 samples ending at that round:
single samples saw-tooth with the memory release), and the least-squares slope of RSS
over the last half (goal: <= 50 MB after the warm-up, and a slope near 0).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lsp_latency import StdioPeer, inline_params, numpy_snapshot, position_of  # noqa: E402

IMPORTS = [
    "import numpy as np",
    "import os\nimport os.path as osp",
    "import json\nimport collections",
    "import numpy as np\nimport numpy.linalg as la",
    "from collections import OrderedDict\nimport re",
]
TYPED = ["x = np.", "p = os.path.", "d = json.", "v = la.", "m = re.", "q = collections."]


def document(index: int) -> str:
    lines = [IMPORTS[index % len(IMPORTS)], ""]
    for i in range(20 + 15 * (index % 7)):
        lines.append(f"def step_{index}_{i}(values, scale={i}):")
        lines.append(f"    total = sum(v * scale for v in values)  # document {index}")
        lines.append("    return total")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--warmup-rounds", type=int, default=10)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--num-samples", type=int, default=5)
    parser.add_argument("--snapshot", action="store_true", help="validity from a numpy snapshot instead of jedi")
    parser.add_argument("--smoke", action="store_true", help="3 rounds over 2 documents, a numpy snapshot (a run check)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.documents, args.warmup_rounds, args.max_new_tokens, args.num_samples = 3, 2, 1, 4, 2
        args.snapshot = True
    if not 0 < args.warmup_rounds < args.rounds:
        parser.error("--warmup-rounds must be between 1 and --rounds - 1")

    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    folder = Path(tempfile.mkdtemp(prefix="adaptrack-soak-"))
    settings = {"model": "tiny", "maxNewTokens": args.max_new_tokens, "numSamples": args.num_samples, "timeoutMs": 60000}
    if args.snapshot:
        settings["apiSnapshot"] = numpy_snapshot(folder)
    command = [sys.executable, "-m", "adaptrack_lsp", "serve"]
    if os.environ.get("SOAK_SERVER_COMMAND"):  # e.g. a wrapper that traces allocations
        command = os.environ["SOAK_SERVER_COMMAND"].split()
    peer = StdioPeer(command, env)
    process = psutil.Process(peer.process.pid)
    started = time.perf_counter()
    try:
        peer.request("initialize", {"processId": os.getpid(), "rootUri": folder.as_uri(), "capabilities": {}, "initializationOptions": settings})
        peer.notify("initialized", {})
        status = peer.wait_status()
        if status["state"] != "ready":
            print(f"model did not load: {status['message']}", file=sys.stderr)
            return 1
        uris = [(folder / f"soak_{i}.py").as_uri() for i in range(args.documents)]
        texts = [document(i) for i in range(args.documents)]
        versions = [1] * args.documents
        for uri, text in zip(uris, texts):
            peer.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
        rss_mb = [process.memory_info().rss / 2**20]
        print(f"model ready, {args.documents} documents open: rss {rss_mb[0]:.0f} MB")
        requests = 0
        for round_index in range(args.rounds):
            for doc, uri in enumerate(uris):
                # type a line at a place that moves through the file
                text = texts[doc]
                lines = text.split("\n")
                where = 2 + (round_index * 7 + doc) % (len(lines) - 3)
                typed = TYPED[(round_index + doc) % len(TYPED)]
                edited = "\n".join(lines[:where] + [typed] + lines[where:])
                versions[doc] += 1
                peer.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": versions[doc]}, "contentChanges": [{"text": edited}]})
                line, column = position_of(edited, len("\n".join(lines[:where])) + 1 + len(typed))
                if (round_index + doc) % 2:
                    _, response = peer.request("textDocument/inlineCompletion", inline_params(uri, line, column))
                else:
                    _, response = peer.request("textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": line, "character": column}})
                if "error" in response:
                    raise RuntimeError(f"request failed: {response['error']}")
                requests += 1
                if round_index % 5 == 4:  # now and then the edit stays (documents change over time)
                    texts[doc] = edited
            rss_mb.append(process.memory_info().rss / 2**20)
            print(f"round {round_index + 1}: {requests} requests, rss {rss_mb[-1]:.0f} MB, {time.perf_counter() - started:.0f} s", flush=True)
        def level(round_number: int) -> float:
            """RSS around a round: the median of the 5 samples ending there (the release
            of finished requests' memory makes single samples saw-toothed)."""
            return statistics.median(rss_mb[max(1, round_number - 4) : round_number + 1])

        rounds = args.rounds
        growth = level(rounds) - level(args.warmup_rounds)
        last_half = level(rounds) - level(rounds // 2)
        # least-squares slope of RSS over the last half, per 100 requests (flat: near 0)
        xs = list(range(rounds // 2, rounds + 1))
        ys = [rss_mb[x] for x in xs]
        mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
        slope_per_100 = slope * 100 / args.documents
        print(
            f"rss_start_mb={rss_mb[0]:.0f} rss_end_mb={rss_mb[-1]:.0f} rss_peak_mb={max(rss_mb):.0f} "
            f"requests={requests} documents={args.documents} "
            f"seconds={time.perf_counter() - started:.0f} last_half_growth_mb={last_half:.1f} "
            f"last_half_slope_mb_per_100_requests={slope_per_100:.1f} "
            f"rss_growth_mb_after_warmup={growth:.1f}"
        )
    finally:
        peer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
