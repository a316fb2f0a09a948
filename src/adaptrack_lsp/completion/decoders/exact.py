"""Exact sampling with AdapTrack's estimates: adaptive rejection with Q as the envelope.

Q is AdapTrack's estimate of P(c | x) (`completion/tree.py`): 0 for invalid prefixes, 1
for prefixes never evaluated, else sum_u P(u|x) Q[x+u]; it never falls below the true
P(c | x), so it is an envelope.  One attempt walks from the root drawing
u ∝ P(u|x)·Q[x+u].  When the walk steps onto a node y that was never evaluated, y is
evaluated and every token after it checked: its estimate drops from Q[y] (= 1) to
Q'[y] = sum_u P(u|y) Q[y+u]; the walk continues with probability Q'[y] / Q[y], otherwise
the attempt is rejected and the next one starts again from the ROOT, keeping every Q and
every evaluated node (restarts cost no LM call for nodes already evaluated).

Why it is exact.  Fix the estimates at the start of an attempt, Q_0.  The walk reaches
x_{i+1} from x_i with probability P(x_{i+1}|x_i)·Q[x_{i+1}] / Q[x_i], where Q[x_i] is
the value when the draw is made (Q'[x_i] if x_i was just evaluated) and Q[x_{i+1}] the
value before x_{i+1} is evaluated; evaluating x_{i+1} multiplies by Q'[x_{i+1}] /
Q[x_{i+1}].  The factors telescope: a complete valid sequence s (whose Q is 1) is
returned by the attempt with probability P(s) / Q_0[root], the same constant for every
s.  Whatever happened in earlier attempts or samples, the next sample is therefore
distributed as P(s) / sum over valid s' = P(s | c), per sample: on a fresh tree, in a
request of k samples sharing one tree, or after thousands of shared samples.  (AdapTrack
as published continues from an intermediate prefix after a rejection; that is what
biases it.)  Continuing from the prefix would need Q'[y] / Q[y] to be independent of
the path, which it is not.

A path cut by `max_new_tokens` keeps Q = 1 (its valid mass beyond the cut is unknown)
and is returned as a partial sample (`complete=False`), never as a sample of P(s | c):
among the samples that end, the distribution is P(s | c, |s| ≤ max_new_tokens).

Cost: the LM is asked once per node the walks evaluate, as for AdapTrack; the `backtracks`
counter counts rejected attempts.  At temperature ≤ 0 the decoder returns the argmax of
P(s | c) by best-first search (`map`), the mode of the distribution it samples.

Options: `share_estimates` (default True), `max_attempts` (attempts per sample before the
request gives up, default 100000), `node_budget` (greedy search, as `map`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from adaptrack_lsp.completion.decoders.base import DecodeRequest, DecodeResult, at_least, option
from adaptrack_lsp.completion.decoders.cars import Proposal, RejectionDecoder, RejectionOptions, Strategy
from adaptrack_lsp.completion.decoders.map import DEFAULT_NODE_BUDGET, MAPDecoder
from adaptrack_lsp.completion.tree import Node, PrefixTree


@dataclass(frozen=True)
class ExactOptions(RejectionOptions):
    #: node evaluations allowed to the greedy (argmax) search
    node_budget: int = option(DEFAULT_NODE_BUDGET, "int", at_least(1))


class EnvelopeRejection(Strategy):
    """Evaluate-and-check on arrival; continue with probability Q'/Q."""

    name = "exact"

    def prepare(self, tree: PrefixTree, node: Node, rng: np.random.Generator) -> bool:
        if node.checked and not node.pending:
            return True
        old = node.q
        tree.check_all(node)
        tree.propagate(node)
        if node.parent is None:
            return node.q > 0.0  # the root's factor is the same for every sequence
        if node.q >= old:
            return True
        return node.q > 0.0 and rng.random() * old < node.q


class ExactDecoder(RejectionDecoder):
    """Adaptive rejection sampling with AdapTrack's Q as the envelope (exact per sample)."""

    name = "exact"
    Options = ExactOptions
    strategy = EnvelopeRejection

    def decode(self, lm, constraint, request: DecodeRequest) -> DecodeResult:
        if request.temperature <= 0.0:
            options = self.options_for(request)
            search = MAPDecoder(node_budget=options.node_budget)
            return search.decode(lm, constraint, dataclasses.replace(request, options={}))
        return super().decode(lm, constraint, request)


__all__ = ["ExactDecoder", "EnvelopeRejection", "ExactOptions", "Proposal"]
