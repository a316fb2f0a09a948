"""The loop every sampling decoder shares: k samples on one prefix tree.

A decoder supplies `sample_one(tree, rng) -> Node | None` (a leaf, or None for a
failed sample); `run_samples` owns the tree(s), the random generator, counters,
cancellation, the time budget and the result status.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from adaptrack_lsp.completion.decoders.base import Counters, DecodeRequest, DecodeResult, Stopwatch
from adaptrack_lsp.completion.tree import BudgetExceeded, Node, PrefixTree, finish_status

SampleOne = Callable[[PrefixTree, np.random.Generator], "Node | None"]


def best_partial(tree: PrefixTree) -> Node | None:
    """The most probable path through the nodes created so far (for a timed-out request)."""
    node = tree.root
    while node.children and not node.leaf:
        options = [c for c in node.children.values() if c.valid] or list(node.children.values())
        node = max(options, key=lambda c: c.logprob)
    return node if node.depth > 0 else None


def run_samples(
    lm,
    constraint,
    request: DecodeRequest,
    sample_one: SampleOne,
    *,
    share_tree: bool = True,
    exact: bool = True,
    make_tree: Callable[[Counters], PrefixTree] | None = None,
) -> DecodeResult:
    """Draw `request.num_samples` samples with `sample_one`.

    `share_tree`: all samples use one tree (logprobs, validity and Q are reused);
    otherwise each sample starts from a fresh tree.  `exact`: the decoder only returns
    None when no valid completion exists (Q[root] = 0), so the loop stops there.
    """
    counters = Counters()
    watch = Stopwatch(counters)
    rng = np.random.default_rng(request.seed)
    build = make_tree or (lambda c: PrefixTree(lm, constraint, request, c))
    tree = build(counters)
    prompt_info = tree.prompt_info  # later trees find the same prompt already fed
    samples = []
    failures = 0
    status_override = None
    message = ""
    try:
        for index in range(max(1, int(request.num_samples))):
            if index and not share_tree:
                tree = build(counters)
            leaf = sample_one(tree, rng)
            if leaf is None:
                if exact or tree.root.q <= 0.0:
                    if tree.root.q <= 0.0:
                        status_override = "no_valid_completion"
                        message = "no valid completion: every continuation violates the constraint"
                        failures += int(request.num_samples) - index
                        break
                failures += 1
                continue
            samples.append(tree.sample_of(leaf))
    except BudgetExceeded:
        partial = best_partial(tree)
        if partial is not None:
            samples.append(tree.partial_sample(partial))
        failures += int(request.num_samples) - len(samples)
        status_override = "partial"
        message = f"time budget of {request.timeout_s:.3g} s exceeded"
    status = status_override or finish_status(samples, failures, tree.root.q)
    result = tree.result(samples, watch.finish(), status, message, failures, prompt_info=prompt_info)
    if result.status == "no_valid_completion" and samples:
        result.status = "failed"
    if result.status == "partial" and not message:
        result.message = "max_new_tokens reached before the sequence ended"
    return result
