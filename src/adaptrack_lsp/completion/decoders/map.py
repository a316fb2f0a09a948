"""MAP decoding: best-first (uniform-cost) search for argmax P(s | c) on the prefix tree.

The frontier holds valid one-token extensions of expanded prefixes, keyed by the
extension's log P at temperature 1.  A prefix's probability never increases as it
grows, so the first complete valid sequence popped is the most probable valid complete
sequence (argmax P(s | c) = argmax P(s) over valid s), the next one popped the second
most probable, and so on: `num_samples = k` returns the k best, in order.

Only expanded prefixes are evaluated by the LM (and have their candidates checked), so
the cost is the number of prefixes more probable than the answer.  The frontier is lazy:
an expanded prefix's valid children are ranked once (by probability) and only the best
one not yet popped waits in the heap, so a node costs one sort, not one heap entry per
valid token of the vocabulary.  `node_budget`
(default 1000) caps those evaluations; when it runs out before k sequences are found the
result is "partial" (with the most probable open prefix when nothing complete was
found).  The request's temperature does not change the search.
"""

from __future__ import annotations

import heapq
import itertools
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

DEFAULT_NODE_BUDGET = 1000


@dataclass(frozen=True)
class MAPOptions(DecoderOptions):
    #: node evaluations allowed before the search stops with a partial result
    node_budget: int = option(DEFAULT_NODE_BUDGET, "int", at_least(1))


class MAPDecoder(Decoder):
    name = "map"
    Options = MAPOptions
    exactness = "search"

    def decode(self, lm, constraint, request: DecodeRequest) -> DecodeResult:
        num_samples = max(1, int(request.num_samples))
        node_budget = self.options_for(request).node_budget
        counters = Counters()
        watch = Stopwatch(counters)
        tree = PrefixTree(lm, constraint, request, counters)
        tiebreak = itertools.count()
        # entries: (-log P(prefix), order, parent node, rank among the parent's valid
        # children by probability, or -1 for the node itself).  Only each expanded node's
        # best child not yet popped is in the frontier; popping it pushes the next one
        # (siblings come in descending probability, so the order stays best-first).
        frontier: list[tuple[float, int, Node, int]] = []
        ranked: dict[int, list[int]] = {}  # id(node) -> valid candidate indices, most probable first
        if tree.root.valid:
            frontier.append((-0.0, next(tiebreak), tree.root, -1))

        def push(parent: Node, rank: int) -> None:
            order = ranked[id(parent)]
            if rank < len(order):
                candidate = int(order[rank])
                score = parent.logprob + float(parent.raw_logprobs[candidate])
                heapq.heappush(frontier, (-score, next(tiebreak), parent, rank))
                return
            # a top-K node's tail: an entry at the bound of its best token (drawn when popped)
            bound = tree.tail_best_weight(parent, "valid")
            if bound and (parent.tail_draws < TAIL_DRAWS_BEFORE_ENUMERATION or getattr(tree.lm, "can_enumerate", False)):
                heapq.heappush(frontier, (-(parent.logprob + math.log(bound)), next(tiebreak), parent, rank))

        def draw_tail(parent: Node) -> None:
            """The best token of `parent`'s tail joins its ranked valid children (it is
            no more probable than any of them)."""
            before = parent.candidates.size
            tree.draw_from_tail(parent, None, check=True, greedy=True)
            new = np.arange(before, parent.candidates.size)
            valid = new[(parent.validity[new] == VALID) & (parent.probs[new] > 0.0)]
            order = valid[np.argsort(-parent.raw_logprobs[valid], kind="stable")]
            ranked[id(parent)].extend(int(i) for i in order)
        found: list[Node] = []
        cut: list[Node] = []
        open_prefix: Node | None = None
        expanded = 0
        stop_reason = ""
        timed_out = False
        try:
            while frontier and len(found) < num_samples:
                _, _, parent, rank = heapq.heappop(frontier)
                if rank >= len(ranked.get(id(parent), ())):  # a tail entry: draw its best token
                    if expanded >= node_budget:
                        stop_reason = f"node budget of {node_budget} evaluations exhausted"
                        break
                    draw_tail(parent)
                    expanded += 1
                    push(parent, rank)
                    continue
                if rank >= 0:
                    push(parent, rank + 1)
                node = parent if rank < 0 else tree.child(parent, int(ranked[id(parent)][rank]))
                if node is None:  # cannot happen: only valid candidates enter the frontier
                    continue
                if node.terminal:
                    found.append(node)
                    continue
                if node.cut:
                    cut.append(node)
                    continue
                if expanded >= node_budget:
                    open_prefix = node
                    stop_reason = f"node budget of {node_budget} evaluations exhausted"
                    break
                tree.check_all(node)
                tree.propagate(node)
                expanded += 1
                valid = np.flatnonzero((node.validity == VALID) & (node.probs > 0.0))
                ranked[id(node)] = [int(i) for i in valid[np.argsort(-node.raw_logprobs[valid], kind="stable")]]
                push(node, 0)
        except BudgetExceeded:
            stop_reason = timeout_message(request)
            timed_out = True
            if frontier:
                _, _, parent, rank = frontier[0]
                order = ranked.get(id(parent), [])
                open_prefix = parent if not 0 <= rank < len(order) else parent.children.get(int(order[rank]), parent)

        samples = [tree.sample_of(node) for node in found]
        stopped = stop_reason if len(found) < num_samples else ""
        if not samples:
            fallback = max(cut, key=lambda n: n.logprob, default=None)
            if fallback is None and stopped and open_prefix is not None and open_prefix.depth > 0:
                fallback = open_prefix
            if fallback is not None:
                samples.append(tree.sample_of(fallback, complete=False))
        failures = num_samples - len([s for s in samples if s.complete]) if (stopped or not found) else 0
        return tree.result(
            samples, watch.finish(), failures, timed_out=timed_out, stopped=stopped, exhausted=not samples and not stopped
        )
