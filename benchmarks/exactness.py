"""Exactness and cost of every sampling decoder, in the regimes users meet.

For each decoder and each of the exactness suite's random tasks (tests/unit/test_exactness.py
draws the same ones), samples are drawn three ways: one sample per request on a fresh tree,
requests of 5 samples sharing a fresh tree, and all samples on one shared tree.  Printed:
the total variation distance (TVD) of the samples to the enumerated P(s | c) (mean and max
over the tasks), next to the TVD that exact samples of the same size show (the noise floor:
multinomial draws from P(s | c) itself), and LM calls per sample.

    python benchmarks/exactness.py [--tasks 6] [--samples 2000]
    python benchmarks/exactness.py --smoke   # one task, 20 samples (seconds)

Last line: `name=value` pairs: per decoder the mean TVD per request and LM calls per sample
in requests of 5, and `exact_over_adaptrack_lm_calls` (LM calls of `exact` / `adaptrack`,
requests of 5).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from adaptrack_lsp.completion.decoders import DECODERS, DecodeRequest, get_decoder
from adaptrack_lsp.evaluation.tasks import random_task

DECODERS_SAMPLED = ["exact", "cars", "ars", "rsft", "rs", "adaptrack", "asap", "constrained"]
MIN_ACCEPTANCE = 0.05  # as the exactness suite


def suite_tasks(count: int):
    tasks, seed = [], 0
    while len(tasks) < count:
        task = random_task(seed)
        if math.fsum(task.sequence_probability(s) for s in dict.fromkeys(task.valid)) >= MIN_ACCEPTANCE:
            tasks.append(task)
        seed += 1
    return tasks


def tvd(counts: dict, reference: dict) -> float:
    total = sum(counts.values())
    keys = set(counts) | set(reference)
    return 0.5 * sum(abs(counts.get(k, 0) / total - reference.get(k, 0.0)) for k in keys)


def draw(task, decoder: str, regime: str, samples: int, seed: int) -> tuple[dict, int]:
    lm, constraint = task.language_model(), task.constraint()
    results = []
    if regime == "fresh":
        request = DecodeRequest(prompt_ids=[], num_samples=samples, seed=seed, max_new_tokens=task.max_length, options={"share_estimates": False})
        results.append(get_decoder(decoder).decode(lm, constraint, request))
    elif regime == "requests of 5":
        for index in range(samples // 5):
            request = DecodeRequest(prompt_ids=[], num_samples=5, seed=seed * 100_003 + index, max_new_tokens=task.max_length)
            results.append(get_decoder(decoder).decode(lm, constraint, request))
    else:
        request = DecodeRequest(prompt_ids=[], num_samples=samples, seed=seed, max_new_tokens=task.max_length)
        results.append(get_decoder(decoder).decode(lm, constraint, request))
    counts: dict = {}
    calls = 0
    for result in results:
        calls += result.counters.lm_calls
        for sample in result.samples:
            if sample.complete and sample.valid:
                counts[tuple(sample.token_ids)] = counts.get(tuple(sample.token_ids), 0) + 1
    return counts, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--smoke", action="store_true", help="one task, 20 samples (a run check)")
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.samples = 1, 20
    tasks = suite_tasks(args.tasks)
    regimes = ["fresh", "requests of 5", "shared"]
    rng = np.random.default_rng(0)
    floor = []
    for task in tasks:
        exact = task.exact_distribution()
        keys = list(exact)
        draws = rng.multinomial(args.samples, [exact[k] for k in keys])
        floor.append(tvd(dict(zip(keys, draws)), exact))
    print(f"{len(tasks)} random tasks of the exactness suite, {args.samples} samples per task and regime")
    print(f"noise floor (TVD of {args.samples} exact multinomial draws): mean {np.mean(floor):.3f}, max {np.max(floor):.3f}")
    header = f"| decoder | exactness | {' | '.join(f'TVD {r} (mean / max)' for r in regimes)} | LM calls per sample ({' / '.join(regimes)}) |"
    print(header)
    print("|" + "---|" * (3 + len(regimes)))
    summary: dict[str, float] = {}
    for decoder in DECODERS_SAMPLED:
        started = time.perf_counter()
        cells, calls_cells = [], []
        for regime in regimes:
            distances, calls_per_sample = [], []
            for index, task in enumerate(tasks):
                counts, calls = draw(task, decoder, regime, args.samples, seed=1000 + index)
                distances.append(tvd(counts, task.exact_distribution()) if counts else 1.0)
                calls_per_sample.append(calls / args.samples)
            cells.append(f"{np.mean(distances):.3f} / {np.max(distances):.3f}")
            calls_cells.append(f"{np.mean(calls_per_sample):.2f}")
            if regime == "requests of 5":
                summary[f"tvd_request_{decoder}"] = float(np.mean(distances))
                summary[f"lm_calls_{decoder}"] = float(np.mean(calls_per_sample))
        print(f"| `{decoder}` | {DECODERS[decoder].exactness} | {' | '.join(cells)} | {' / '.join(calls_cells)} |  ({time.perf_counter() - started:.0f} s)", flush=True)
    summary["exact_over_adaptrack_lm_calls"] = summary["lm_calls_exact"] / summary["lm_calls_adaptrack"]
    summary["noise_floor"] = float(np.mean(floor))
    print(" ".join(f"{key}={value:.4f}" for key, value in summary.items()))


if __name__ == "__main__":
    main()
