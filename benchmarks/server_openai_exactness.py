"""Exactness of the decoders over the server backend's OpenAI protocol (`/v1/completions`)
on a real server: llama-server's OpenAI endpoint (dialect "openai") or vLLM's CPU build,
each serving the tiny model, against P(s | c) enumerated from the same server's full
distributions.

The problem is the one of tests/unit/test_server_openai.py (imported from there, one
source): nine `--allowed` lines of two short ASCII tokens from the engine's own ranking,
every tokenization of a line its own sequence, top-5 log-probabilities per position.  Per
decoder and regime (one sample per request on a fresh tree; requests of 5 samples),
printed: total variation distance (TVD) and KL(samples || P(s | c)), the TVD exact samples
of the same size show (noise floor: multinomial draws from P(s | c) itself), chi-square p
against P(s | c) and against greedy masking's distribution (GCD), PASS (p > 1e-4 against
P(s | c)) / FAIL, server calls per sample and seconds.  Last, sequences ended by
end-of-generation tokens in the tail of a flat model (tests/unit/end_of_generation_support.py:
eight allowed lines, 3000 exact samples in one request, top-20 lists) against P(s | c)
computed by llama.cpp itself.

    python benchmarks/server_openai_exactness.py [--server llama-server|vllm] [--samples 400] [--smoke]

Needs llama-server (`make llama-cpp`) or vLLM (`.ci/install-vllm`).  Last line:
`exact_tvd_fresh=... cars_tvd_fresh=... ars_tvd_fresh=... gcd_tvd=... worst_exact_p=... eog_tvd=... eog_p=...`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from server_exactness import end_of_generation_row, kl, tvd  # the same figures as the native protocol's table

TESTS = Path(__file__).resolve().parents[1] / "tests"
ROWS = [("exact", "fresh"), ("cars", "fresh"), ("ars", "fresh"), ("exact", "requests of 5"), ("cars", "requests of 5"),
        ("ars", "requests of 5"), ("constrained", "fresh")]  # fmt: skip


def start(server: str, folder: Path):
    if server == "vllm":
        from vllm_server_support import VllmServer, vllm_python

        if vllm_python() is None:
            return None
        return VllmServer(folder).start()
    from llama_server_support import LlamaServer, llama_server_binary, tiny_gguf

    if llama_server_binary() is None:
        return None
    return LlamaServer(tiny_gguf(), log_dir=folder).start()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=("llama-server", "vllm"), default="llama-server")
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds)")
    args = parser.parse_args(argv)
    samples = 20 if args.smoke else args.samples
    sys.path[:0] = [str(TESTS), str(TESTS / "unit")]
    from test_server_openai import Problem, connect

    from adaptrack_lsp.evaluation.tasks import chi_square

    with tempfile.TemporaryDirectory() as folder:
        process = start(args.server, Path(folder))
        if process is None:
            print(f"{args.server} is not installed: `make llama-cpp` (llama-server) or `.ci/install-vllm` (vLLM)")
            print("skipped=1")
            return 0
        try:
            problem = Problem(connect(process.url, server_top_logprobs=5), connect(process.url))
            lm = problem.lm
            rng = np.random.default_rng(0)
            names = list(problem.exact)
            print(
                f"{args.server} ({lm.software}, OpenAI protocol), tiny model, top-5 log-probabilities; {len(problem.texts)} allowed lines, "
                f"{len(names)} token sequences; {samples} samples per row"
            )
            print(f"{'decoder':<12} {'regime':<14} {'TVD':>7} {'floor':>7} {'KL':>8} {'p vs P':>9} {'p vs GCD':>9} {'verdict':>8} {'calls/sample':>13} {'s':>6}")
            figures: dict[str, float] = {}
            worst = 1.0
            for decoder, regime in ROWS[:2] if args.smoke else ROWS:
                calls, counts, started = 0, {}, time.perf_counter()
                requests = [(samples, 41)] if regime == "fresh" else [(5, 5000 + i) for i in range(samples // 5)]
                for count, seed in requests:
                    options = {"share_estimates": False} if regime == "fresh" else {}
                    result = problem.decode(decoder, count, seed, **options)
                    calls += result.counters.server_calls
                    for sample in result.samples:
                        if sample.complete and sample.valid:
                            counts[tuple(sample.token_ids)] = counts.get(tuple(sample.token_ids), 0) + 1
                seconds = time.perf_counter() - started
                total = sum(counts.values())
                exact = problem.exact
                floor = float(np.mean([tvd(dict(zip(names, rng.multinomial(total, [exact[n] for n in names]), strict=True)), exact) for _ in range(200)]))
                p_exact = chi_square(counts, problem.exact).p_value
                p_gcd = chi_square(counts, problem.gcd).p_value
                if decoder == "constrained":
                    verdict = "FAIL" if p_exact < 1e-4 else "PASS"
                    note = "  (GCD: follows its own distribution, fails P(s|c) as it must)"
                    figures["gcd_tvd"] = tvd(counts, problem.exact)
                else:
                    verdict = "PASS" if p_exact > 1e-4 else "FAIL"
                    note = ""
                    worst = min(worst, p_exact)
                    figures[f"{decoder}_tvd_{'fresh' if regime == 'fresh' else 'requests5'}"] = tvd(counts, problem.exact)
                print(
                    f"{decoder:<12} {regime:<14} {tvd(counts, problem.exact):>7.4f} {floor:>7.4f} {kl(counts, problem.exact):>8.4f} "
                    f"{p_exact:>9.3g} {p_gcd:>9.3g} {verdict:>8} {calls / max(1, total):>13.3f} {seconds:>6.0f}{note}"
                )
            figures["worst_exact_p"] = worst
            figures["eog_tvd"], figures["eog_p"] = end_of_generation_row(connect(process.url), 300 if args.smoke else 3000, rng)
        finally:
            process.stop()
    print(" ".join(f"{name}={value:.4g}" for name, value in figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
