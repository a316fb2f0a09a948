"""The loop every sampling decoder shares: k samples on one prefix tree.

A decoder supplies `sample_one(tree, rng) -> Node | None` (a leaf, or None for a
failed sample; `GiveUp` ends the request); `run_samples` owns the tree(s), the random
generator, counters, cancellation and the time budget; the tree's `result` decides the
status (`tree.decide_status`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from adaptrack_lsp.completion.decoding import BudgetExceeded, Counters, DecodeRequest, DecodeResult, Stopwatch
from adaptrack_lsp.completion.tree import MAX_NEW_TOKENS_MESSAGE, Node, PrefixTree  # noqa: F401

SampleOne = Callable[[PrefixTree, np.random.Generator], "Node | None"]


class GiveUp(Exception):
    """A sampler stopped trying (e.g. `max_attempts` restarts); the message says why."""


def best_partial(tree: PrefixTree) -> Node | None:
    """The most probable path through the nodes created so far (for a timed-out request)."""
    node = tree.root
    while node.children and not node.leaf:
        options = [c for c in node.children.values() if c.valid] or list(node.children.values())
        node = max(options, key=lambda c: c.logprob)
    return node if node.depth > 0 else None


def timeout_message(request: DecodeRequest) -> str:
    return f"time budget of {request.timeout_s:.3g} s exceeded"


def run_samples(
    lm,
    constraint,
    request: DecodeRequest,
    sample_one: SampleOne,
    *,
    share_tree: bool = True,
    make_tree: Callable[[Counters], PrefixTree] | None = None,
) -> DecodeResult:
    """Draw `request.num_samples` samples with `sample_one`.

    `share_tree`: all samples use one tree (logprobs, validity and Q are reused);
    otherwise each sample starts from a fresh tree.  A None from `sample_one` when
    Q[root] = 0 means no valid completion exists, and the loop stops there.
    """
    counters = Counters()
    watch = Stopwatch(counters)
    rng = np.random.default_rng(request.seed)
    build = make_tree or (lambda c: PrefixTree(lm, constraint, request, c))
    tree = build(counters)
    prompt_info = tree.prompt_info  # later trees find the same prompt already fed
    wanted = max(1, int(request.num_samples))
    samples = []
    failures = 0
    gave_up = ""
    timed_out = False
    try:
        for index in range(wanted):
            if index and not share_tree:
                tree.close()
                tree = build(counters)
            try:
                leaf = sample_one(tree, rng)
            except GiveUp as error:
                failures += wanted - index
                gave_up = str(error)
                break
            if leaf is None:
                if tree.root.q <= 0.0:  # no valid completion: the rest would fail too
                    failures += wanted - index
                    break
                failures += 1
                continue
            samples.append(tree.sample_of(leaf))
    except BudgetExceeded:
        partial = best_partial(tree)
        if partial is not None:
            samples.append(tree.sample_of(partial, complete=False))
        failures += wanted - len(samples)
        timed_out = True
    stopped = timeout_message(request) if timed_out else ""
    return tree.result(
        samples, watch.finish(), failures, timed_out=timed_out, stopped=stopped, gave_up=gave_up, prompt_info=prompt_info
    )
