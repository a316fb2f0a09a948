"""ASAp, the rejection samplers (cars, rs, ars, rsft), beam search and MAP on task LMs."""

from __future__ import annotations

import copy
import math

import pytest

from adaptrack_lsp.completion.decoders import (
    DecodeCancelled,
    DecodeRequest,
    get_decoder,
)
from adaptrack_lsp.evaluation.tasks import (
    binary_task,
    chi_square,
    counts_of,
    random_task,
    task_from_dict,
)

ALPHA = 1e-3
ALL_CONSTRAINED = ["constrained", "adaptrack", "asap", "cars", "rs", "ars", "rsft", "beam", "map"]

SMALL = {
    "vocab": ["a", "b", "$"],
    "eos": "$",
    "default": {"a": 0.5, "b": 0.5},
    "next": [
        {"prefix": ["a"], "probs": {"a": 0.2, "b": 0.3, "$": 0.5}},
        {"prefix": ["a", "b"], "probs": {"$": 1.0}},
        {"prefix": ["b"], "probs": {"$": 0.9, "a": 0.1}},
    ],
    "valid": [["a", "$"], ["a", "b", "$"], ["b", "$"]],
}


def decode(task, decoder, n=1, seed=1, temperature=1.0, max_new_tokens=None, **options):
    return task.decode(decoder, n, seed=seed, temperature=temperature, max_new_tokens=max_new_tokens, **options)


# -- no valid completion --------------------------------------------------------------------
@pytest.mark.timeout(20)
@pytest.mark.parametrize("decoder", ALL_CONSTRAINED)
def test_constraint_rejecting_everything_gives_no_valid_completion(decoder):
    task = task_from_dict(dict(copy.deepcopy(SMALL), valid=[]))
    result = decode(task, decoder, n=5)
    assert result.status == "no_valid_completion"
    assert result.samples == []


@pytest.mark.timeout(20)
@pytest.mark.parametrize("decoder", [d for d in ALL_CONSTRAINED if d != "constrained"])
def test_valid_sequences_of_probability_zero_give_no_valid_completion(decoder):
    data = copy.deepcopy(SMALL)
    data["next"][0] = {"prefix": ["a"], "probs": {"a": 0.4, "b": 0.6}}  # a$ has P = 0
    data["next"][1] = {"prefix": ["a", "b"], "probs": {"a": 1.0}}  # ab$ has P = 0
    data["next"][2] = {"prefix": ["b"], "probs": {"b": 1.0}}  # b$ has P = 0
    task = task_from_dict(data)
    assert task.exact_distribution() == {}
    result = decode(task, decoder, n=3)
    assert result.status == "no_valid_completion"
    assert result.samples == []


# -- ASAp ---------------------------------------------------------------------------------------
def test_asap_without_shared_estimates_is_constrained_decoding():
    task = binary_task(5)
    result = decode(task, "asap", n=1200, share_estimates=False)
    counts = counts_of(s.token_ids for s in result.samples)
    assert chi_square(counts, task.gcd_distribution().probabilities).p_value > ALPHA
    assert chi_square(counts, task.exact_distribution()).p_value < 1e-9


def test_asap_learns_q_across_samples_and_never_backtracks():
    task = binary_task(5)
    result = decode(task, "asap", n=4000, seed=3)
    assert result.status == "ok" and result.counters.backtracks == 0
    late = counts_of(s.token_ids for s in result.samples[2000:])
    # once every node is evaluated Q is exact and so are the samples
    assert chi_square(late, task.exact_distribution()).p_value > ALPHA
    assert result.counters.lm_calls == 37  # 1 + 2 + 4 + 8 + 16 + 1 (00000) + 5 (all nodes up to 5 bits)


def test_asap_counts_dead_ends_as_failures_and_learns_from_them():
    task = random_task(1003, zero_probability=0.3)
    gcd = task.gcd_distribution()
    assert gcd.dead_end > 0.05
    result = decode(task, "asap", n=2000, seed=5)
    assert result.status == "failed"
    assert 0 < result.failures < 2000 * gcd.dead_end  # fewer than GCD: later samples avoid known dead ends
    assert all(s.valid and s.complete for s in result.samples)


# -- rejection samplers ------------------------------------------------------------------------
def test_restarts_fall_as_strategies_learn_more():
    task = random_task(16)
    restarts = {d: decode(task, d, n=2000, seed=1).counters.backtracks for d in ["rs", "ars", "cars"]}
    assert restarts["rs"] > 10 * restarts["ars"] > 10 * restarts["cars"] >= 0


def test_rsft_never_restarts_on_an_invalid_first_token():
    data = copy.deepcopy(SMALL)
    data["default"] = {"a": 0.1, "b": 0.9}
    data["valid"] = [["a", "$"], ["a", "b", "$"]]  # b is an invalid first token with P = 0.9
    task = task_from_dict(data)
    rs = decode(task, "rs", n=500, seed=2)
    rsft = decode(task, "rsft", n=500, seed=2)
    assert rs.counters.backtracks > 1000  # ~9 rejections per sample
    assert rsft.counters.backtracks < 300  # only "a a" rejections (P = 0.2 after a)
    for result in (rs, rsft):
        counts = counts_of(s.token_ids for s in result.samples)
        assert chi_square(counts, task.exact_distribution()).p_value > ALPHA


@pytest.mark.parametrize("decoder", ["ars", "cars"])
def test_greedy_adaptive_samplers_return_a_valid_sequence_deterministically(decoder):
    for seed in range(20):
        task = random_task(1000 + seed, zero_probability=0.3)
        first = decode(task, decoder, seed=1, temperature=0.0)
        second = decode(task, decoder, seed=9, temperature=0.0)
        assert first.status == "ok"
        assert first.samples[0].token_ids == second.samples[0].token_ids
        assert tuple(first.samples[0].token_ids) in task.exact_distribution()


def test_greedy_rs_fails_cleanly_when_the_argmax_path_is_invalid():
    data = copy.deepcopy(SMALL)
    data["default"] = {"a": 0.1, "b": 0.9}
    data["valid"] = [["a", "$"]]
    task = task_from_dict(data)
    result = decode(task, "rs", n=2, temperature=0.0)
    assert result.status == "failed" and result.failures == 2 and result.samples == []


def test_max_attempts_turns_hopeless_samples_into_failures():
    data = copy.deepcopy(SMALL)
    data["default"] = {"a": 0.001, "b": 0.999}
    data["valid"] = [["a", "$"]]
    task = task_from_dict(data)
    result = decode(task, "rs", n=20, seed=4, max_attempts=3)
    assert result.status == "failed"
    assert result.failures >= 15
    with pytest.raises(ValueError, match="max_attempts"):
        decode(task, "rs", max_attempts=0)


@pytest.mark.timeout(20)
def test_time_budget_stops_rejection_sampling():
    data = copy.deepcopy(SMALL)
    data["default"] = {"a": 1e-7, "b": 1 - 1e-7}
    data["valid"] = [["a", "$"]]
    task = task_from_dict(data)
    request = DecodeRequest(prompt_ids=[], num_samples=5, seed=1, max_new_tokens=3, timeout_s=0.3)
    result = get_decoder("rs", max_attempts=10**9).decode(task.language_model(), task.constraint(), request)
    assert result.status == "partial"
    assert result.counters.wall_seconds < 5


def test_cancellation_is_raised():
    task = random_task(16)
    request = DecodeRequest(prompt_ids=[], num_samples=100, seed=1, max_new_tokens=task.max_length, cancelled=lambda: True)
    with pytest.raises(DecodeCancelled):
        get_decoder("cars").decode(task.language_model(), task.constraint(), request)


def test_counters_are_honest():
    task = random_task(16)
    result = decode(task, "cars", n=500)
    c = result.counters
    assert c.lm_calls == c.tokens_fed + 1  # tabular LM: every non-root node feeds one token
    assert 0 < c.lm_calls <= sum(len(s) for s in task.valid)  # each prefix evaluated at most once
    assert c.constraint_checks > 0 and c.wall_seconds >= c.lm_seconds


# -- beam search --------------------------------------------------------------------------------
def test_beam_returns_valid_complete_sequences_best_first():
    for seed in range(20):
        task = random_task(3000 + seed)
        result = decode(task, "beam", n=3, beam_width=4)
        assert result.status == "ok"
        assert 1 <= len(result.samples) <= 3
        logprobs = [s.logprob for s in result.samples]
        assert logprobs == sorted(logprobs, reverse=True)
        for sample in result.samples:
            assert tuple(sample.token_ids) in task.exact_distribution()
            assert sample.logprob == pytest.approx(math.log(task.sequence_probability(sample.token_ids)), rel=1e-5)


def test_beam_of_width_one_is_greedy_constrained_decoding():
    for seed in range(10):
        task = random_task(3000 + seed, zero_probability=0.0)
        beam = decode(task, "beam", beam_width=1)
        greedy = decode(task, "constrained", temperature=0.0)
        assert beam.samples[0].token_ids == greedy.samples[0].token_ids


def test_wide_beam_finds_the_k_best():
    task = random_task(42)
    exact = task.exact_distribution()
    best = sorted(exact, key=exact.get, reverse=True)[:3]
    result = decode(task, "beam", n=3, beam_width=1000)
    assert [tuple(s.token_ids) for s in result.samples] == best


def test_beam_width_must_be_positive():
    with pytest.raises(ValueError, match="beam_width"):
        decode(random_task(1), "beam", beam_width=0)


# -- MAP ----------------------------------------------------------------------------------------
def test_map_returns_the_k_best_in_order():
    for seed in range(20):
        task = random_task(4000 + seed)
        exact = task.exact_distribution()
        result = decode(task, "map", n=4)
        expected = sorted(exact.values(), reverse=True)[:4]
        found = [exact[tuple(s.token_ids)] for s in result.samples]
        assert found == pytest.approx(expected, rel=1e-9)


def test_map_beats_greedy_on_figure1_shaped_tasks():
    """GCD's greedy path is not argmax P(s|c); MAP's is."""
    disagreements = 0
    for seed in range(30):
        task = random_task(5000 + seed, zero_probability=0.0)
        map_result = decode(task, "map")
        greedy = decode(task, "constrained", temperature=0.0)
        exact = task.exact_distribution()
        assert exact[tuple(map_result.samples[0].token_ids)] >= exact[tuple(greedy.samples[0].token_ids)]
        disagreements += map_result.samples[0].token_ids != greedy.samples[0].token_ids
    assert disagreements >= 3


def test_map_node_budget_gives_a_partial_result():
    task = binary_task(5)  # ties everywhere: best-first expands breadth-first
    result = decode(task, "map", node_budget=3)
    assert result.status == "partial"
    assert "node budget" in result.message
    assert len(result.samples) == 1 and not result.samples[0].complete
    assert result.counters.lm_calls <= 3
    full = decode(task, "map", node_budget=100)
    assert full.status == "ok" and full.samples[0].complete
    with pytest.raises(ValueError, match="node_budget"):
        decode(task, "map", node_budget=0)


def test_map_is_cut_by_max_new_tokens():
    task = binary_task(5)
    result = decode(task, "map", max_new_tokens=3)
    assert result.status == "partial"
    assert len(result.samples[0].token_ids) == 3 and not result.samples[0].complete
