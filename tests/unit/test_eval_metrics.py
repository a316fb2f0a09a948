"""EM@k (paper eq. 5) against hand-computed values, LM-call statistics and KL divergence."""

import math

import pytest

from adaptrack_lsp.evaluation.metrics import (
    call_statistics,
    em_at_k,
    em_table,
    kl_divergence,
    latency_statistics,
    sliding_window_kl,
)


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (20, 5, 3, 1 - 455 / 1140),  # 1 - C(15,3)/C(20,3)
        (20, 1, 1, 1 / 20),
        (20, 1, 20, 1.0),
        (20, 0, 10, 0.0),
        (20, 20, 1, 1.0),
        (5, 2, 3, 1 - 1 / 10),  # 1 - C(3,3)/C(5,3)
        (5, 3, 3, 1.0),  # fewer than k misses: some draw of 3 always matches
        (10, 4, 5, 1 - 6 / 252),  # 1 - C(6,5)/C(10,5)
    ],
)
def test_em_at_k_matches_hand_computed_values(n, c, k, expected):
    assert em_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_em_at_k_is_not_the_biased_plug_in_estimate():
    # the naive 1 - (1 - c/n)^k differs from eq. 5; the test must tell them apart
    unbiased = em_at_k(20, 5, 3)
    biased = 1 - (1 - 5 / 20) ** 3
    assert abs(unbiased - biased) > 0.02


def test_em_at_k_rejects_bad_arguments():
    with pytest.raises(ValueError, match="k must be <= n"):
        em_at_k(5, 1, 10)
    with pytest.raises(ValueError, match="outside"):
        em_at_k(5, 6, 1)


def test_em_table_uses_greedy_for_em1_and_samples_for_larger_k():
    greedy = [True, False]
    samples = [[False] * 20, [True] * 5 + [False] * 15]
    table = em_table(greedy, samples, ks=(1, 3, 20))
    assert table["EM@1"] == pytest.approx(0.5)  # greedy: one of two items
    assert table["EM@3"] == pytest.approx((0 + (1 - 455 / 1140)) / 2)
    assert table["EM@20"] == pytest.approx(0.5)
    # without greedy runs EM@1 comes from the samples
    assert em_table([None, None], samples, ks=(1,))["EM@1"] == pytest.approx((0 + 5 / 20) / 2)


def test_call_statistics_average_per_item_min_and_max():
    stats = call_statistics([[4, 6, 8], [2, 2]])
    assert stats["avg"] == pytest.approx((6 + 2) / 2)
    assert stats["min"] == pytest.approx((4 + 2) / 2)
    assert stats["max"] == pytest.approx((8 + 2) / 2)
    assert stats["total"] == 22


def test_latency_percentiles():
    stats = latency_statistics([10.0] * 9 + [100.0])
    assert stats["p50"] == pytest.approx(10.0)
    assert stats["mean"] == pytest.approx(19.0)


def test_kl_divergence_known_value_and_invalid_samples():
    exact = {"a": 0.5, "b": 0.5}
    assert kl_divergence(["a", "b"], exact) == pytest.approx(0.0)
    assert kl_divergence(["a", "a", "a", "b"], exact) == pytest.approx(0.75 * math.log(1.5) + 0.25 * math.log(0.5))
    assert kl_divergence(["a", "c"], exact) == math.inf


def test_sliding_window_kl_uses_a_quarter_window_by_default():
    exact = {"a": 0.5, "b": 0.5}
    samples = ["a"] * 4 + ["a", "b"] * 2
    curve = sliding_window_kl(samples, exact)
    assert len(curve) == len(samples) - 2 + 1
    assert curve[0] == pytest.approx(math.log(2))  # window "a a": all mass on a
    assert curve[-1] == pytest.approx(0.0)  # window "a b"
