"""Exactness and cost of the decoders over a real inference server (llama-server, the tiny
model as GGUF), against P(s | c) enumerated from the same engine's full distributions.

The problem is the one of tests/unit/test_server_exactness.py: nine two-token sequences
from the engine's own ranking (a first token in the tail of the top-5 list), ended by a
stop rule.  Per decoder and regime (one sample per request on a fresh tree; requests of 5
samples), printed: total variation distance (TVD) and KL(samples || P(s | c)) of the
samples to the enumeration, the TVD exact samples of the same size show (noise floor:
multinomial draws from P(s | c) itself), chi-square p and PASS (p > 1e-4) / FAIL, and
server calls per sample.  Then server calls per greedy completion where the model's own
path is valid (greedy AdapTrack unconstrained; greedy masking constrained to the model's
own line) over six prompts.  Last, sequences ended by end-of-generation tokens in the
tail of a flat model (tests/unit/end_of_generation_support.py: eight allowed lines, 3000
exact samples in one request, top-20 lists) against P(s | c) computed by llama.cpp itself.

    python benchmarks/server_exactness.py [--samples 600] [--smoke]

Needs llama-server (`make llama-cpp`, or $ADAPTRACK_LLAMA_SERVER).  Last line:
`exact_tvd_fresh=... cars_tvd_fresh=... gcd_tvd=... server_calls_per_greedy=... eog_tvd=... eog_p=...`.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

PROMPT = "import numpy as np\n\ndef scale(values, factor):\n    return np."
FIRST_RANKS = (0, 2, 6)
SECOND_RANKS = ((0, 1, 2), (300, 600, 1200), (5, 6, 10))
GREEDY_PROMPTS = [
    "import numpy as np\n\ndef norm(a):\n    return np.",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n        self.",
    "for index, value in enumerate(values):\n    print(",
    "with open(path) as handle:\n    data = json.",
    "import os\n\nroot = os.path.",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(",
]
DECODERS = [("exact", "fresh"), ("cars", "fresh"), ("rsft", "fresh"), ("ars", "fresh"), ("exact", "requests of 5"),
            ("cars", "requests of 5"), ("ars", "requests of 5"), ("adaptrack", "requests of 5"), ("constrained", "fresh")]  # fmt: skip


def llama_server_binary() -> Path | None:
    explicit = os.environ.get("ADAPTRACK_LLAMA_SERVER")
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    from adaptrack_lsp.config import cache_root

    path = cache_root() / "llama.cpp-0.3.36" / "bin" / "llama-server"
    return path if path.is_file() else None


def tiny_gguf() -> Path:
    from adaptrack_lsp.cache import cached_build
    from adaptrack_lsp.completion.lm.gguf_export import export_gguf
    from adaptrack_lsp.completion.lm.tiny import tiny_model_path

    folder = tiny_model_path()
    return cached_build(f"{folder.name}-gguf-f32", lambda t: export_gguf(folder, t / "tiny-f32.gguf", "f32", name="tiny"), "tiny-f32.gguf") / "tiny-f32.gguf"


def start_server(binary: Path) -> tuple[subprocess.Popen, str]:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(binary), "-m", str(tiny_gguf()), "--host", "127.0.0.1", "--port", str(port), "-c", "2048", "-np", "1", "-t", "1",
               "--alias", "tiny", "--no-webui"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("llama-server did not start within 120 s")


def problem(lm):
    from adaptrack_lsp.evaluation.tasks import SequenceConstraint

    prompt = lm.encode(PROMPT)
    lm.set_prompt(prompt, max_new_tokens=2)

    def ranked(path):
        full = lm.next_logprobs(path)
        order = [int(i) for i in np.argsort(-full, kind="stable") if not lm.vocab.is_special(int(i)) and lm.vocab.text(int(i)).strip()]
        return full, order

    root, root_order = ranked([])
    firsts = [root_order[r] for r in FIRST_RANKS]
    probability, gcd = {}, {}
    first_mass = math.fsum(math.exp(root[t]) for t in firsts)
    for first, ranks in zip(firsts, SECOND_RANKS, strict=True):
        after, order = ranked([first])
        seconds = [order[r] for r in ranks]
        second_mass = math.fsum(math.exp(after[u]) for u in seconds)
        for second in seconds:
            probability[(first, second)] = math.exp(root[first] + after[second])
            gcd[(first, second)] = math.exp(root[first]) / first_mass * math.exp(after[second]) / second_mass
    total = math.fsum(probability.values())
    exact = {s: p / total for s, p in probability.items()}
    texts = {lm.vocab.text(a) + lm.vocab.text(b) for a, b in exact}
    return prompt, exact, gcd, SequenceConstraint(lm.vocab, list(exact)), (lambda text, checked: text in texts)


def tvd(counts: dict, reference: dict) -> float:
    total = sum(counts.values())
    return 0.5 * sum(abs(counts.get(k, 0) / total - reference.get(k, 0.0)) for k in set(counts) | set(reference))


def kl(counts: dict, reference: dict) -> float:
    total = sum(counts.values())
    return sum((n / total) * math.log((n / total) / reference[k]) if reference.get(k, 0.0) > 0 else math.inf for k, n in counts.items() if n)


TESTS = Path(__file__).resolve().parents[1] / "tests"


def end_of_generation_row(lm, samples: int, rng) -> tuple[float, float]:
    """The end-of-generation case (tests/unit/end_of_generation_support.py): a flat model,
    eight allowed lines each ended by an end-of-generation token that lies in the tail
    of the top-K lists, `samples` exact samples in one request, against P(s | c) from
    llama.cpp itself; one printed row, returns (TVD, chi-square p)."""
    sys.path[:0] = [str(TESTS), str(TESTS / "unit")]
    from end_of_generation_support import draw, reference

    from adaptrack_lsp.evaluation.tasks import chi_square

    exact, without_markers, _ = reference()
    started = time.perf_counter()
    counts, result = draw(lm, samples)
    seconds = time.perf_counter() - started
    total = sum(counts.values())
    names = list(exact)
    floor = float(np.mean([tvd(dict(zip(names, rng.multinomial(total, [exact[n] for n in names]), strict=True)), exact) for _ in range(200)]))
    p_value = chi_square(counts, exact).p_value
    print(
        f"{'exact':<12} {'EOG in tail':<14} {tvd(counts, exact):>7.4f} {floor:>7.4f} {kl(counts, exact):>8.4f} {p_value:>9.3g} "
        f"{'PASS' if p_value > 1e-4 else 'FAIL':>8} {result.counters.server_calls / max(1, total):>13.3f}  ({total} samples in one request, "
        f"top-{lm.options.top_logprobs}, {result.counters.tail_draws} tail draws; vs llama.cpp's P(s|c); ended without its FIM "
        f"markers: p {chi_square(counts, without_markers).p_value:.2g}, {seconds:.0f} s)"
    )
    return tvd(counts, exact), p_value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=600)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds)")
    args = parser.parse_args(argv)
    samples = 40 if args.smoke else args.samples
    binary = llama_server_binary()
    if binary is None:
        print("llama-server is not built: run `make llama-cpp` (.ci/install-llama-cpp) or set ADAPTRACK_LLAMA_SERVER")
        return 2
    from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
    from adaptrack_lsp.completion.lm.server import load_from_settings
    from adaptrack_lsp.config import Settings
    from adaptrack_lsp.constrainers.allowed_lines import allowed_lines_constraint
    from adaptrack_lsp.constrainers.base import Unconstrained
    from adaptrack_lsp.evaluation.tasks import chi_square

    process, url = start_server(binary)
    try:
        lm = load_from_settings(Settings(model="tiny", backend="server", endpoint=url, server_top_logprobs=5))
        assert lm.connected, lm.connect_error
        prompt, exact, gcd, constraint, stop = problem(lm)
        rng = np.random.default_rng(0)
        print(f"llama-server (tiny GGUF), top-5 log-probabilities; {len(exact)} valid sequences; {samples} samples per row")
        print(f"{'decoder':<12} {'regime':<14} {'TVD':>7} {'floor':>7} {'KL':>8} {'chi2 p':>9} {'verdict':>8} {'calls/sample':>13}")
        figures = {}
        names = list(exact)
        for decoder, regime in DECODERS[:3] if args.smoke else DECODERS:
            reference = gcd if decoder == "constrained" else exact
            calls, counts = 0, {}
            requests = [(samples, 11)] if regime == "fresh" else [(5, 5000 + i) for i in range(samples // 5)]
            for count, seed in requests:
                options = {"share_estimates": False} if regime == "fresh" else {}
                request = DecodeRequest(prompt_ids=prompt, num_samples=count, seed=seed, max_new_tokens=2, stop=stop, timeout_s=900, options=options)
                result = get_decoder(decoder).decode(lm, constraint, request)
                calls += result.counters.server_calls
                for sample in result.samples:
                    if sample.complete:
                        counts[tuple(sample.token_ids)] = counts.get(tuple(sample.token_ids), 0) + 1
            total = sum(counts.values())
            floor = float(np.mean([tvd(dict(zip(names, rng.multinomial(total, [reference[n] for n in names]), strict=True)), reference) for _ in range(200)]))
            p_value = chi_square({k: v for k, v in counts.items()}, reference).p_value
            verdict = "PASS" if p_value > 1e-4 else "FAIL"
            label = decoder if decoder != "constrained" else "constrained"
            target = "" if decoder != "constrained" else " (vs GCD)"
            print(f"{label:<12} {regime:<14} {tvd(counts, reference):>7.4f} {floor:>7.4f} {kl(counts, reference):>8.4f} {p_value:>9.3g} {verdict:>8} {calls / max(1, total):>13.3f}{target}")
            key = f"{decoder}_tvd_{'fresh' if regime == 'fresh' else 'requests5'}"
            figures[key] = tvd(counts, reference)
        if not args.smoke:
            counts = {}
            request = DecodeRequest(prompt_ids=prompt, num_samples=samples, seed=3, max_new_tokens=2, stop=stop, options={"share_estimates": False})
            for sample in get_decoder("constrained").decode(lm, constraint, request).samples:
                counts[tuple(sample.token_ids)] = counts.get(tuple(sample.token_ids), 0) + 1
            figures["gcd_tvd"] = tvd(counts, exact)
            print(f"{'constrained':<12} {'fresh':<14} {figures['gcd_tvd']:>7.4f} {'':>7} {kl(counts, exact):>8.4f} {chi_square(counts, exact).p_value:>9.3g} {'FAIL':>8}  (vs P(s|c): distorted, as it must be)")
        greedy_calls = []
        fresh = load_from_settings(Settings(model="tiny", backend="server", endpoint=url))
        for text in GREEDY_PROMPTS[: 2 if args.smoke else None]:
            ids = fresh.encode(text)
            first = get_decoder("adaptrack").decode(fresh, Unconstrained(fresh.vocab), DecodeRequest(prompt_ids=ids, temperature=0.0, max_new_tokens=24, timeout_s=120))
            greedy_calls.append(first.counters.server_calls)
            own = first.samples[0].token_ids
            fresh.set_prompt([1], 1)
            line = allowed_lines_constraint(fresh.vocab, ["".join(fresh.vocab.text(t) for t in own)])
            masked = get_decoder("constrained").decode(fresh, line, DecodeRequest(prompt_ids=ids, temperature=0.0, max_new_tokens=24, timeout_s=120))
            greedy_calls.append(masked.counters.server_calls)
            fresh.set_prompt([1], 1)
        figures["server_calls_per_greedy"] = sum(greedy_calls) / len(greedy_calls)
        print(f"server calls per greedy completion (24 tokens, lookahead 32, model's own path valid): {greedy_calls}")
        eog = load_from_settings(Settings(model="tiny", backend="server", endpoint=url))
        figures["eog_tvd"], figures["eog_p"] = end_of_generation_row(eog, 300 if args.smoke else 3000, rng)
    finally:
        process.terminate()
        process.wait(timeout=30)
    print(" ".join(f"{name}={value:.4g}" for name, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
