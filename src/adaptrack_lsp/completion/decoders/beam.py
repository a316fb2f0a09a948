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

On a top-K node (a remote engine) the tail is drawn best token first while its best
possible token could still enter the beam (`_extensions`).

Option: `beam_width` (default max(4, num_samples)).
"""

from __future__ import annotations

import heapq
import math
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
from adaptrack_lsp.completion.tree import TAIL_DRAWS_BEFORE_ENUMERATION, VALID, BudgetExceeded, Node, PrefixTree


@dataclass(frozen=True)
class BeamOptions(DecoderOptions):
    #: beams kept per step (None: max(4, num_samples))
    beam_width: int | None = option(None, "int", at_least(1), nullable=True)


def _valid_extensions(beams: list[Node]) -> list[tuple[float, int, Node, int]]:
    extensions: list[tuple[float, int, Node, int]] = []
    for order, node in enumerate(beams):
        valid = np.flatnonzero((node.validity == VALID) & (node.raw_logprobs > -np.inf) & (node.probs > 0.0))
        for index in valid:
            extensions.append((node.logprob + float(node.raw_logprobs[index]), order, node, int(index)))
    return extensions


def _extensions(tree: PrefixTree, beams: list[Node], width: int) -> list[tuple[float, int, Node, int]]:
    """Every valid one-token extension of the beams that can be among the best `width`.

    A top-K beam's tail is drawn best token first (one LM call each) while its best
    possible token could still beat the `width`-th best extension known; a tail that
    needs more draws than the engine allows before enumeration is left out (beam search
    is a heuristic search)."""
    while True:
        extensions = _valid_extensions(beams)
        scores = sorted((e[0] for e in extensions), reverse=True)
        threshold = scores[width - 1] if len(scores) >= width else -math.inf
        drew = False
        for node in beams:
            bound = tree.tail_best_weight(node, "valid")
            if not bound or node.logprob + math.log(bound) <= threshold:
                continue
            if node.tail_draws >= TAIL_DRAWS_BEFORE_ENUMERATION and not getattr(tree.lm, "can_enumerate", False):
                continue
            tree.draw_from_tail(node, None, check=True, greedy=True)
            drew = True
        if not drew:
            return extensions


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
                for node in beams:
                    tree.check_all(node)
                    tree.propagate(node)
                extensions = _extensions(tree, beams, width)
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

