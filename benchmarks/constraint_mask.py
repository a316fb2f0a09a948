"""Constraint mask speed at a >= 100k-token vocabulary (goals: median mask <= 0.5 ms in
chain states, lazy `allowed` <= 20 us per token).

Vocabulary: `build_large_tokenizer` (byte-level BPE built locally, cached).  Index: the
installed numpy's public names, two levels (a `StaticIndex`, so index lookups cost
nothing and the figures are the constraint's own cost).  Chain states: every position
inside the attribute chains of a few numpy calls (``np.linalg.norm``, ...).

Figures, all in one run:
- `mask_median_ms`: median over chain states of a *fresh* mask computation: the per-state
  mask cache and the (state, token) cache are cleared before every computation; the
  per-vocabulary tables and the per-path member tables stay warm (built once).
- `mask_cold_median_ms`: the same with the per-path member tables and the alias-token
  verdicts also rebuilt every time.
- `mask_code_median_ms`: fresh masks in ordinary code/string states.
- `allowed_per_token_us`: `allowed(state, ids)` for 64 random ids per state, caches
  cleared, divided by 64.
- `brute_force_ms`: one mask by checking every token (the naive cost), for the ratio.

Usage: python benchmarks/constraint_mask.py [--vocab 120000] [--repeats 5]
       python benchmarks/constraint_mask.py --smoke    # a 2k-token vocabulary, one repeat (seconds)

Last line: ``vocab=... mask_median_ms=... mask_cold_median_ms=... mask_code_median_ms=...
allowed_per_token_us=... brute_force_ms=...``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np

CHAINS = [
    "x = np.linalg.norm(a)",
    "y = np.random.randint(0, 3)",
    "z = np.fft.fft(a)",
    "w = np.zeros_like(a)",
    "v = np.prod(a)",
    "u = np.array(b).reshape",
    "t = np.linalg.matrix_rank(m)",
    "s = np.random.default_rng(0)",
]
CODE_PREFIXES = [
    "x = ",
    "def f(a):\n    return ",
    "s = 'np.",
    "# np.",
    "y = foo(a",
    "z = 1.5",
    'w = """doc\n',
]


def numpy_names() -> list[str]:
    from adaptrack_lsp.apis.snapshot import module_snapshot

    return module_snapshot("numpy", ("linalg", "random", "fft", "polynomial", "ma", "char", "testing"))["names"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--vocab",
        type=int,
        default=120_000,
        help="tokenizer size (>= 100k for the goal)",
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="fresh computations per state"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="a 2k-token vocabulary and one repeat (a run check)")
    args = parser.parse_args()
    if args.smoke:
        args.vocab, args.repeats = 2000, 1

    from adaptrack_lsp.completion.lm.tiny import build_large_tokenizer
    from adaptrack_lsp.completion.tokenizer_bytes import vocabulary_from_tokenizer
    from adaptrack_lsp.constrainers.api import (
        ApiMonitor,
        ConstraintContext,
        StaticIndex,
    )
    from adaptrack_lsp.constrainers.token_index import TokenIndex, TokenTables

    tokenizer = build_large_tokenizer(args.vocab)
    vocab = vocabulary_from_tokenizer(tokenizer)
    start = time.perf_counter()
    TokenTables.of(vocab)
    tables_seconds = time.perf_counter() - start
    document = "import numpy as np\nimport os.path\nfrom numpy import linalg as la\n"
    monitor = ApiMonitor(StaticIndex(numpy_names(), source="numpy names"))
    monitor.start(ConstraintContext(document, document))

    def states_for(prefixes):
        found = []
        for prefix in prefixes:
            state = monitor.start(ConstraintContext(document, document + prefix))
            found.append(state)
        return found

    chain_prefixes = []
    for chain in CHAINS:
        begin = chain.index("np.") + 2
        end = begin
        while end < len(chain) and (chain[end].isalnum() or chain[end] in "._"):
            end += 1
        chain_prefixes.extend(chain[:k] for k in range(begin, end + 1))
    chain_states = [
        s for s in dict.fromkeys(states_for(chain_prefixes)) if ApiMonitor.in_chain(s)
    ]
    code_states = list(dict.fromkeys(states_for(CODE_PREFIXES)))
    index = TokenIndex(monitor, vocab, context=ConstraintContext(document, document))
    index.initial_state()

    def fresh_mask_ms(state, cold: bool) -> float:
        index._mask_cache.clear()
        index._advance_cache.clear()
        if cold:
            index.plan_cache.clear()
            monitor._paths.clear()
        begin = time.perf_counter()
        index.mask(state)
        return (time.perf_counter() - begin) * 1e3

    # warm the per-path tables once, then measure
    for state in chain_states + code_states:
        index.mask(state)
    warm = [
        fresh_mask_ms(s, cold=False) for _ in range(args.repeats) for s in chain_states
    ]
    cold = [
        fresh_mask_ms(s, cold=True) for _ in range(args.repeats) for s in chain_states
    ]
    for state in chain_states + code_states:
        index.mask(state)
    code = [
        fresh_mask_ms(s, cold=False) for _ in range(args.repeats) for s in code_states
    ]

    rng = random.Random(args.seed)
    per_token = []
    for state in chain_states + code_states:
        ids = [rng.randrange(vocab.num_defined) for _ in range(64)]
        index._mask_cache.clear()
        index._advance_cache.clear()
        begin = time.perf_counter()
        index.allowed(state, ids)
        per_token.append((time.perf_counter() - begin) * 1e6 / len(ids))

    # correctness spot check and the naive cost
    state = chain_states[len(chain_states) // 2]
    begin = time.perf_counter()
    brute = index.brute_force_mask(state)
    brute_ms = (time.perf_counter() - begin) * 1e3
    if not np.array_equal(brute, index.compute_mask(state)):
        raise SystemExit("mask differs from brute force")

    mask_median = statistics.median(warm)
    allowed_median = statistics.median(per_token)
    print(
        f"vocabulary: {vocab.size} ids ({vocab.num_defined} defined); tables built in {tables_seconds:.2f} s (once per vocabulary)"
    )
    print(
        f"chain states: {len(chain_states)}; code/string states: {len(code_states)}; repeats: {args.repeats}"
    )
    print(
        f"fresh mask in chain states (state caches cleared, per-path tables warm): median {mask_median:.3f} ms, "
        f"p90 {np.percentile(warm, 90):.3f} ms, max {max(warm):.3f} ms"
    )
    print(
        f"cold mask in chain states (per-path tables rebuilt too): median {statistics.median(cold):.3f} ms, max {max(cold):.3f} ms"
    )
    print(f"fresh mask in code/string states: median {statistics.median(code):.3f} ms")
    print(
        f"lazy allowed: median {allowed_median:.2f} us per token (64 random ids per state, caches cleared)"
    )
    print(
        f"brute force (every token checked): {brute_ms:.1f} ms per state, {brute_ms / mask_median:.0f}x the fresh mask"
    )
    print(
        f"vocab={vocab.size} mask_median_ms={mask_median:.3f} mask_cold_median_ms={statistics.median(cold):.3f} "
        f"mask_code_median_ms={statistics.median(code):.3f} allowed_per_token_us={allowed_median:.2f} "
        f"brute_force_ms={brute_ms:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
