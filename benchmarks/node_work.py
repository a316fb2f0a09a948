"""The decoder's own work per evaluated node at a real model's vocabulary size, without a
model: what a prefix tree node costs beside the forward pass (log-probabilities checked
and cut to the eligible tokens, the constraint's mask applied, candidates gathered,
probabilities and the tail's mass, Q).

Vocabulary: 151,936 tokens (Qwen2's logits).  Model: a tabular one (`TabularLM`) whose
next-token distributions are four fixed Dirichlet draws (concentration 0.05, seed 0), so
no forward pass is timed.  Constraint: a fixed mask keeping a share of the tokens (30 %:
a syntax constraint after a name; 2 %: an API chain), every kept token advancing.
Decoder: greedy AdapTrack, 6 new tokens, 6 requests (the first one a warm-up).  The
figure is the tree's `distribution_seconds` per LM call (the constraint's mask time is
counted apart and left out).

    python benchmarks/node_work.py
    python benchmarks/node_work.py --smoke   # a 20,000-token vocabulary, 3 requests

Last line: ``node_ms_keep30=... node_ms_keep2=...`` (ms per evaluated node).
"""

from __future__ import annotations

import argparse

import numpy as np

VOCABULARY = 151_936
SHARES = (0.30, 0.02)


def node_ms(vocabulary: int, share: float, requests: int, seed: int = 0) -> tuple[float, int]:
    """(ms of the decoder's distribution work per LM call, LM calls measured)."""
    from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
    from adaptrack_lsp.completion.lm.tabular import TabularLM
    from adaptrack_lsp.constrainers.base import TokenConstraint
    from adaptrack_lsp.vocab import Vocabulary

    vocab = Vocabulary.from_strings([f"t{i}" for i in range(vocabulary - 1)] + ["$"], "$")
    rng = np.random.default_rng(seed)
    tables = [rng.dirichlet(np.full(vocabulary, 0.05)) for _ in range(4)]
    kept = rng.random(vocabulary) < share
    kept[vocabulary - 1] = True  # the end token

    class KeptShare(TokenConstraint):
        def initial_state(self):
            return 0

        def advance(self, state, token_id):
            return state + 1 if kept[token_id] else None

        def mask(self, state):
            return kept

    lm = TabularLM(vocab, conditional=lambda path: tables[len(path) % len(tables)])
    seconds, calls = 0.0, 0
    for index in range(requests):
        request = DecodeRequest(prompt_ids=[], num_samples=1, seed=index, max_new_tokens=6)
        counters = get_decoder("adaptrack").decode(lm, KeptShare(), request).counters
        if index:  # the first request warms up
            seconds += counters.distribution_seconds
            calls += counters.lm_calls
    return 1000.0 * seconds / max(1, calls), calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--smoke", action="store_true", help="a 20,000-token vocabulary, 3 requests (a run check)")
    args = parser.parse_args(argv)
    vocabulary = 20_000 if args.smoke else VOCABULARY
    requests = 3 if args.smoke else args.requests
    figures = {}
    for share in SHARES:
        ms, calls = node_ms(vocabulary, share, requests)
        print(f"{vocabulary} tokens, {share:.0%} kept: {ms:.3f} ms of the decoder's work per node ({calls} nodes)")
        figures[f"node_ms_keep{round(100 * share)}"] = ms
    print(" ".join(f"{name}={value:.3f}" for name, value in figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
