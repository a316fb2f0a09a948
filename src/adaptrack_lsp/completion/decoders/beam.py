"""Constrained beam search (difficulty-constrained-decoding.txt §4.5) on the prefix tree.

Keeps the `beam_width` most probable valid prefixes; at every step each live beam's
candidates are checked against the constraint (invalid tokens are masked, as in
constrained decoding) and the best `beam_width` valid one-token extensions survive.
Beams that end (EOS or a stop rule) are set aside as finished hypotheses.  The search
stops when no live beam remains, when `max_new_tokens` is reached, or when
`beam_width` hypotheses are finished and none of the live beams can still beat the
worst of them (scores only decrease as a sequence grows).  Returns up to `num_samples`
finished sequences, most probable first.

Scores are log P(s) at temperature 1 (the request's temperature does not change a
deterministic search).  Beam search is neither exact nor guaranteed to find
argmax P(s | c) (see `map`), but it costs at most beam_width node evaluations per step.

Option: `beam_width` (default max(4, num_samples)).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from adaptrack_lsp.completion.decoders.base import (
    Counters,
    Decoder,
    DecodeRequest,
    DecodeResult,
    DecoderOptions,
    Stopwatch,
    at_least,
    option,
)
from adaptrack_lsp.completion.decoders.sampling import timeout_message
from adaptrack_lsp.completion.tree import VALID, BudgetExceeded, Node, PrefixTree


@dataclass(frozen=True)
class BeamOptions(DecoderOptions):
    #: beams kept per step (None: max(4, num_samples))
    beam_width: int | None = option(None, "int", at_least(1), nullable=True)


class BeamDecoder(Decoder):
    name = "beam"
    Options = BeamOptions
    exactness = "search"

    def decode(self, lm, constraint, request: DecodeRequest) -> DecodeResult:
        num_samples = max(1, int(request.num_samples))
        width = self.options_for(request).beam_width or max(4, num_samples)
        counters = Counters()
        watch = Stopwatch(counters)
        tree = PrefixTree(lm, constraint, request, counters)
        finished: list[Node] = []
        cut: list[Node] = []
        beams: list[Node] = [tree.root] if tree.root.valid else []
        message = ""
        timed_out = False
        try:
            while beams:
                extensions: list[tuple[float, int, Node, int]] = []
                for order, node in enumerate(beams):
                    tree.check_all(node)
                    tree.propagate(node)
                    valid = np.flatnonzero((node.validity == VALID) & (node.raw_logprobs > -np.inf))
                    for index in valid:
                        score = node.logprob + float(node.raw_logprobs[index])
                        extensions.append((score, order, node, int(index)))
                best = heapq.nlargest(width, extensions, key=lambda e: (e[0], -e[1], -e[3]))
                beams = []
                for _score, _order, node, index in best:
                    child = tree.child(node, index)
                    if child is None:  # cannot happen: only valid candidates are extended
                        continue
                    if child.terminal:
                        finished.append(child)
                    elif child.cut:
                        cut.append(child)
                    else:
                        beams.append(child)
                if len(finished) >= width:
                    finished.sort(key=lambda n: -n.logprob)
                    worst_kept = finished[width - 1].logprob
                    if not beams or max(b.logprob for b in beams) <= worst_kept:
                        break
        except BudgetExceeded:
            timed_out = True
            message = timeout_message(request)

        finished.sort(key=lambda n: -n.logprob)
        samples = [tree.sample_of(node) for node in finished[:num_samples]]
        gave_up = ""
        if not samples:
            fallback = sorted(cut + (beams if timed_out else []), key=lambda n: -n.logprob)
            samples.extend(tree.sample_of(node, complete=False) for node in fallback[:num_samples])
            if not samples and tree.root.q > 0.0:
                gave_up = message or "beam search pruned every valid completion"
        failures = num_samples - len(samples) if (timed_out or not finished) else 0
        return tree.result(samples, watch.finish(), failures, timed_out=timed_out, stopped=message, gave_up=gave_up)

