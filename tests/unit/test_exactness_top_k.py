"""Exactness on top-K nodes: the decoders against enumeration when the model shows only
its top-K tokens, the tail's mass and exclusion draws (what a remote engine gives).

`TopKTabularLM` wraps an exact table and exposes nothing else, so every tail token a
decoder uses must come through `draw_excluding`.  The reference is the full table's
P(s | c) (enumeration).  Same regimes, seeds discipline and tolerance as
`test_exactness.py` (Pearson's chi-square, pass at p > ALPHA = 1e-4, wrong
distributions rejected at p < 1e-9); k = 1 and 2 on vocabularies of 3 to 6 tokens make
the tail hold most of the mass at most nodes, so the tests exercise the tail draws.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_exactness import (
    ALPHA,
    BREAKERS,
    DISTORTED,
    EXACT_DECODERS,
    REJECT_BELOW,
    TASKS,
    deep_dead_end,
    three_sequences,
    tiny_branch,
)

from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
from adaptrack_lsp.completion.lm.base import TopK
from adaptrack_lsp.completion.lm.tabular import TabularLM, TopKTabularLM
from adaptrack_lsp.completion.tree import PrefixTree
from adaptrack_lsp.evaluation.tasks import Task, chi_square, random_task, task_from_dict

REQUEST_SAMPLES = 1_200
#: tails below float precision are out of reach on top-K nodes (see the docs): the
#: 1e-45 branch stays with the float64 suite
TOP_K_TASKS = TASKS[:2] + [t for t in BREAKERS if t.name != "tiny_branch_1e-45"]
HOPELESS_FOR = {"rs": {"tiny_branch_1e-12"}}


def run(task: Task, decoder: str, k: int, n: int, seed: int, per_request: int = 1, temperature: float = 1.0, **lm_options):
    """Samples of `decoder` on the top-K view of `task`: `per_request` samples per
    request (1: a fresh tree per sample).  Returns (counts of complete samples, results)."""
    lm = TopKTabularLM(task.language_model(), k, **lm_options)
    constraint = task.constraint()
    results = []
    if per_request == 1:
        request = DecodeRequest(
            prompt_ids=[], num_samples=n, seed=seed, temperature=temperature, max_new_tokens=task.max_length, options={"share_estimates": False}
        )
        results.append(get_decoder(decoder).decode(lm, constraint, request))
    else:
        for index in range(n // per_request):
            request = DecodeRequest(
                prompt_ids=[], num_samples=per_request, seed=seed * 100_003 + index, temperature=temperature, max_new_tokens=task.max_length
            )
            results.append(get_decoder(decoder).decode(lm, constraint, request))
    counts: dict = {}
    for result in results:
        for sample in result.samples:
            if sample.complete:
                key = tuple(sample.token_ids)
                counts[key] = counts.get(key, 0) + 1
    return counts, results


def truncated_task(task: Task, k: int, temperature: float = 1.0) -> Task:
    """The top-K truncation of `task`'s model at `temperature`: at every prefix the k
    most probable tokens, tempered and renormalised; the rest get 0."""

    def truncate(probs: np.ndarray) -> np.ndarray:
        positive = np.flatnonzero(probs > 0.0)
        keep = positive[np.argsort(-probs[positive], kind="stable")][:k]
        values = np.zeros_like(probs)
        values[keep] = probs[keep] ** (1.0 / temperature)
        return values / values.sum()

    return Task(
        tokens=task.tokens,
        eos=task.eos,
        default=truncate(task.default),
        table={prefix: truncate(p) for prefix, p in task.table.items()},
        valid=task.valid,
        name=f"{task.name}_top{k}",
    )


# -- the partial-distribution contract -----------------------------------------------------------
def test_top_k_keeps_the_tail_mass_and_sorts():
    top = TopK.of([3, 1, 2], np.log([0.1, 0.5, 0.2]))
    assert list(top.ids) == [1, 2, 3]
    assert math.isclose(top.tail_mass, 0.2, rel_tol=1e-12)
    assert math.isclose(top.smallest, 0.1, rel_tol=1e-12)
    truncated = TopK.of([3, 1], np.log([0.1, 0.5]), truncate=True)
    assert truncated.tail_mass == 0.0 and truncated.truncated
    assert math.isclose(math.fsum(np.exp(truncated.logprobs)), 1.0, rel_tol=1e-12)
    assert TopK.of([0, 1], np.log([0.6, 0.4000001])).tail_mass == 0.0  # float rounding past 1


def test_a_top_k_node_draws_its_tail_one_token_at_a_time_with_exact_probabilities():
    task = three_sequences()
    lm = TopKTabularLM(task.language_model(), 1)
    tree = PrefixTree(lm, task.constraint(), DecodeRequest(prompt_ids=[], max_new_tokens=3))
    tree.evaluate(tree.root)
    root = tree.root
    assert root.partial and root.candidates.size == 1
    assert math.isclose(root.tail_mass, 0.6, rel_tol=1e-12) and root.tail_q == 1.0 and root.q == 1.0
    rng = np.random.default_rng(0)
    first = tree.draw_from_tail(root, rng)
    second = tree.draw_from_tail(root, rng)
    assert {int(root.candidates[first]), int(root.candidates[second])} == {1, 2}
    assert np.allclose(np.sort(root.probs), [0.2, 0.4, 0.4])
    assert root.tail_mass < 1e-12 and lm.draw_calls == 2
    assert tree.counters.tail_draws == 2 and tree.counters.lm_calls == 3
    assert tree.draw_from_tail(root, rng) is None and not root.partial  # nothing left


def test_greedy_takes_the_argmax_over_the_tail_too():
    """The best token sits in the tail of every top-1 node once the listed one is
    invalid: greedy choices draw the tail's best token and compare exactly."""
    task = task_from_dict(
        {
            "vocab": ["a", "b", "c", "$"],
            "eos": "$",
            "default": {"a": 0.5, "b": 0.3, "c": 0.15, "$": 0.05},
            "valid": [["b", "$"], ["c", "$"]],
        }
    )
    lm = TopKTabularLM(task.language_model(), 1)
    for decoder in ["map", "exact", "beam", "adaptrack", "constrained", "asap"]:
        result = get_decoder(decoder).decode(lm, task.constraint(), DecodeRequest(prompt_ids=[], temperature=0.0, max_new_tokens=2))
        assert [task.names(s.token_ids) for s in result.samples] == [["b", "$"]], decoder


# -- exact samplers, per request ----------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("task_index", range(len(TOP_K_TASKS)), ids=[t.name for t in TOP_K_TASKS])
@pytest.mark.parametrize("decoder", EXACT_DECODERS)
def test_exact_decoders_are_exact_per_request_on_top_1_nodes(decoder, task_index):
    task = TOP_K_TASKS[task_index]
    if task.name in HOPELESS_FOR.get(decoder, ()):
        pytest.skip("rejection sampling cannot reach a 1e-12 branch (test_exactness checks that it says so)")
    counts, results = run(task, decoder, 1, REQUEST_SAMPLES, seed=900 + task_index)
    assert all(r.status == "ok" for r in results), [(r.status, r.message) for r in results]
    assert sum(counts.values()) == REQUEST_SAMPLES
    assert sum(r.counters.tail_draws for r in results) > 0  # the tail was used
    test = chi_square(counts, task.exact_distribution())
    assert test.p_value > ALPHA, f"{decoder} on {task.name}: chi2={test.statistic:.1f}, p={test.p_value:.2g}"


@pytest.mark.parametrize("decoder", ["exact", "cars"])
@pytest.mark.parametrize("k", [1, 2])
def test_exact_decoders_are_exact_per_request_of_five_samples_on_top_k_nodes(decoder, k):
    for index, task in enumerate([three_sequences(), deep_dead_end(), TASKS[3]]):
        counts, results = run(task, decoder, k, 1000, seed=950 + index, per_request=5)
        assert all(r.status == "ok" for r in results)
        test = chi_square(counts, task.exact_distribution())
        assert test.p_value > ALPHA, f"{decoder} k={k} on {task.name}: p={test.p_value:.2g}"


def test_the_top_k_test_rejects_a_wrong_distribution():
    """Power check: the exact samples on top-1 nodes are rejected against GCD's
    distribution, and the truncated model's P(s | c) differs from the full one."""
    task = DISTORTED[0]
    counts, _ = run(task, "exact", 1, 3000, seed=960)
    assert chi_square(counts, task.gcd_distribution().probabilities).p_value < REJECT_BELOW


# -- GCD masks exactly on top-K nodes, and is distorted ------------------------------------------
@pytest.mark.parametrize("task_index", range(3))
def test_constrained_decoding_masks_exactly_on_top_k_nodes_and_fails_p_s_given_c(task_index):
    """GCD's own distribution (mask, renormalise) is reproduced on top-1 nodes, whose
    valid tokens mostly sit in the tail: the mask is exact; and P(s | c) is rejected."""
    task = DISTORTED[task_index]
    lm = TopKTabularLM(task.language_model(), 1)
    request = DecodeRequest(prompt_ids=[], num_samples=4000, seed=970 + task_index, max_new_tokens=task.max_length)
    result = get_decoder("constrained").decode(lm, task.constraint(), request)
    counts: dict = {}
    for sample in result.samples:
        if sample.complete:
            counts[tuple(sample.token_ids)] = counts.get(tuple(sample.token_ids), 0) + 1
    gcd = task.gcd_distribution()
    assert abs(result.failures - 4000 * gcd.dead_end) <= 5 * math.sqrt(4000 * gcd.dead_end * (1 - gcd.dead_end)) + 1
    assert chi_square(counts, gcd.probabilities).p_value > ALPHA
    assert chi_square(counts, task.exact_distribution()).p_value < REJECT_BELOW


# -- greedy and search ----------------------------------------------------------------------------
def test_map_beam_and_gcd_greedy_agree_with_full_distributions():
    """Searches that depend only on P (map, exact at temperature 0, beam, greedy GCD and
    ASAp) give the same answer on top-1 nodes as on the full table; greedy AdapTrack and
    CARS (steered by Q estimates, which count a top-K tail as possibly valid) give a
    valid complete sequence whenever one exists."""
    for seed in range(12):
        task = random_task(1000 + seed, zero_probability=0.3)
        support = task.exact_distribution()
        for decoder in ["map", "exact", "beam", "constrained", "asap", "adaptrack", "cars"]:
            request = DecodeRequest(prompt_ids=[], temperature=0.0, max_new_tokens=task.max_length)
            full = get_decoder(decoder).decode(task.language_model(), task.constraint(), request)
            top = get_decoder(decoder).decode(TopKTabularLM(task.language_model(), 1), task.constraint(), request)
            assert top.status == full.status, (seed, decoder)
            if decoder in ("adaptrack", "cars"):
                if support:
                    assert tuple(top.samples[0].token_ids) in support, (seed, decoder)
                continue
            assert [s.token_ids for s in top.samples] == [s.token_ids for s in full.samples], (seed, decoder)


def test_map_finds_the_argmax_through_tail_draws_and_counts_them():
    task = tiny_branch(0.05)
    lm = TopKTabularLM(task.language_model(), 1)
    result = get_decoder("map").decode(lm, task.constraint(), DecodeRequest(prompt_ids=[], temperature=0.0, max_new_tokens=3))
    assert tuple(result.samples[0].token_ids) == task.argmax()
    assert result.counters.tail_draws >= 1 and lm.draw_calls == result.counters.tail_draws


# -- engines that cannot exclude tokens, and other temperatures: the top-K truncation ------------
@pytest.mark.parametrize("decoder", ["exact", "cars"])
def test_without_exclusion_the_model_is_the_top_k_truncation(decoder):
    task = TASKS[6]
    truncated = truncated_task(task, 3)
    assert len(truncated.exact_distribution()) >= 5
    counts, results = run(task, decoder, 3, 3000, seed=980, can_exclude=False)
    assert all(r.counters.tail_draws == 0 for r in results)
    assert chi_square(counts, truncated.exact_distribution()).p_value > ALPHA
    assert chi_square(counts, task.exact_distribution()).p_value < REJECT_BELOW


def test_other_temperatures_sample_the_tempered_top_k_truncation():
    task = TASKS[6]
    truncated = truncated_task(task, 3, temperature=0.5)
    assert len(truncated.exact_distribution()) >= 5
    counts, results = run(task, "exact", 3, 3000, seed=990, temperature=0.5)
    assert all(r.counters.tail_draws == 0 for r in results)
    assert chi_square(counts, truncated.exact_distribution()).p_value > ALPHA


def test_a_tail_that_needs_many_draws_is_enumerated_where_the_engine_can():
    """A node whose valid tokens are deep in the tail: after
    TAIL_DRAWS_BEFORE_ENUMERATION draws the tail is enumerated through the full
    distribution (one call), and sampling stays exact."""
    from adaptrack_lsp.completion.tree import TAIL_DRAWS_BEFORE_ENUMERATION
    from adaptrack_lsp.vocab import Vocabulary

    size = TAIL_DRAWS_BEFORE_ENUMERATION + 10
    names = [f"t{i}" for i in range(size)] + ["$"]
    vocab = Vocabulary.from_strings(names, "$")
    probs = np.full(size + 1, 1.0)
    probs[-2], probs[-3] = 0.01, 0.02  # the only valid first tokens are the least probable
    probs = probs / probs.sum()
    end = np.zeros(size + 1)
    end[-1] = 1.0
    table = {(): probs, (size - 1,): end, (size - 2,): end}
    from adaptrack_lsp.evaluation.tasks import SequenceConstraint

    constraint = SequenceConstraint(vocab, [(size - 1, size), (size - 2, size)])
    lm = TopKTabularLM(TabularLM(vocab, default=end, table=table), 1, can_enumerate=True)
    request = DecodeRequest(prompt_ids=[], num_samples=600, seed=3, max_new_tokens=2)
    result = get_decoder("exact").decode(lm, constraint, request)
    assert result.status == "ok" and result.counters.tail_evaluations == 1
    counts: dict = {}
    for sample in result.samples:
        counts[tuple(sample.token_ids)] = counts.get(tuple(sample.token_ids), 0) + 1
    assert chi_square(counts, {(size - 1, size): 1 / 3, (size - 2, size): 2 / 3}).p_value > ALPHA
