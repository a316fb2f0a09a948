"""Task files, the sequence constraint, exact enumerations and the chi-square harness."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

from adaptrack_lsp.evaluation.tasks import (
    SequenceConstraint,
    TaskError,
    binary_task,
    chi_square,
    counts_of,
    load_task,
    random_task,
    task_from_dict,
)

TASKS_DIR = Path(__file__).resolve().parents[1] / "data" / "tasks"

SMALL = {
    "vocab": ["a", "b", "$"],
    "eos": "$",
    "default": {"a": 0.5, "b": 0.5},
    "next": [
        {"prefix": ["a"], "probs": {"a": 0.2, "b": 0.3, "$": 0.5}},
        {"prefix": ["a", "b"], "probs": {"$": 1.0}},
        {"prefix": ["b"], "probs": {"$": 0.9, "a": 0.1}},
        {"prefix": ["a", "a"], "probs": {"$": 1.0}},
    ],
    "valid": [["a", "$"], ["a", "b", "$"], ["b", "$"]],
}


def small_task():
    return task_from_dict(copy.deepcopy(SMALL))


# -- conditionals ------------------------------------------------------------------------
def test_conditionals_exact_prefix_else_default_and_missing_tokens_are_zero():
    task = small_task()
    a, b, _eos = task.ids(["a", "b", "$"])
    np.testing.assert_allclose(task.probs(()), [0.5, 0.5, 0.0])  # default, "$" missing
    np.testing.assert_allclose(task.probs((a,)), [0.2, 0.3, 0.5])
    np.testing.assert_allclose(task.probs((a, b)), [0.0, 0.0, 1.0])
    np.testing.assert_allclose(task.probs((b, b)), [0.5, 0.5, 0.0])  # no entry: default, not ["b"]'s
    lm = task.language_model()
    lm.set_prompt([])
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(lm.next_logprobs([a]), np.log([0.2, 0.3, 0.5]), rtol=1e-6)
        assert lm.next_logprobs([a, b])[a] == -np.inf


def test_exact_distribution_is_p_s_over_valid_mass():
    task = small_task()
    exact = task.exact_distribution()
    # P(a$) = .25, P(ab$) = .15, P(b$) = .45; valid mass .85
    assert exact[task.parse("a $")] == pytest.approx(0.25 / 0.85)
    assert exact[task.parse("a b $")] == pytest.approx(0.15 / 0.85)
    assert exact[task.parse("b $")] == pytest.approx(0.45 / 0.85)
    assert math.fsum(exact.values()) == pytest.approx(1.0)
    assert task.argmax() == task.parse("b $")


def test_gcd_distribution_is_the_product_of_renormalised_conditionals():
    task = small_task()
    gcd = task.gcd_distribution()
    # root: a, b both valid (.5/.5); after a: a invalid -> b .3/.8, $ .5/.8; after b: $ only
    assert gcd.probabilities[task.parse("a $")] == pytest.approx(0.5 * 0.5 / 0.8)
    assert gcd.probabilities[task.parse("a b $")] == pytest.approx(0.5 * 0.3 / 0.8)
    assert gcd.probabilities[task.parse("b $")] == pytest.approx(0.5)
    assert gcd.dead_end == 0.0


def test_gcd_distribution_reports_dead_end_mass():
    data = copy.deepcopy(SMALL)
    data["next"][2] = {"prefix": ["b"], "probs": {"a": 1.0}}  # b's only valid continuation ($) has P = 0
    task = task_from_dict(data)
    gcd = task.gcd_distribution()
    assert gcd.dead_end == pytest.approx(0.5)
    assert math.fsum(gcd.probabilities.values()) == pytest.approx(0.5)
    assert task.parse("b $") not in task.exact_distribution()


def test_tempered_distributions():
    task = small_task()
    hot = task.exact_distribution(temperature=1000.0)
    # near-uniform conditionals: P(a$) ~ 1/2·1/3, P(ab$) ~ 1/2·1/3·1, P(b$) ~ 1/2·1/2
    assert hot[task.parse("b $")] > hot[task.parse("a $")]
    cold = task.exact_distribution(temperature=0.01)
    # the root's a/b tie survives cooling; after a, $ (.5) beats b (.3)
    assert cold[task.parse("a $")] == pytest.approx(0.5, abs=1e-6)
    assert cold[task.parse("b $")] == pytest.approx(0.5, abs=1e-6)
    assert cold.get(task.parse("a b $"), 0.0) < 1e-6


def test_binary_task_reference_values():
    task = binary_task(5)
    zeros = task.parse("0 0 0 0 0 $")
    assert len(task.valid) == 17
    assert task.exact_distribution()[zeros] == pytest.approx(1 / 17)
    assert task.gcd_distribution().probabilities[zeros] == pytest.approx(1 / 2)
    assert all(p == pytest.approx(1 / 17) for p in task.exact_distribution().values())


def test_figure1_task_file_reproduces_the_paper_numbers():
    task = load_task(TASKS_DIR / "figure1.json")
    assert task.probs(())[task.ids(["matrix"])[0]] == pytest.approx(0.6046)
    assert task.sequence_probability(task.ids(["matrix", "_", "rank"])) == pytest.approx(0.6021, abs=5e-5)
    assert task.sequence_probability(task.parse("matrix _ power $")) == pytest.approx(0.0020, abs=5e-5)
    assert task.gcd_distribution().probabilities[task.parse("matrix _ power $")] == pytest.approx(0.5770, abs=5e-5)


# -- constraint -----------------------------------------------------------------------------
def test_sequence_constraint_is_prefix_closed_with_eos_only_at_ends():
    task = small_task()
    constraint = task.constraint()
    a, b, eos = task.ids(["a", "b", "$"])
    root = constraint.initial_state()
    assert constraint.mask(root).tolist() == [True, True, False]
    after_a = constraint.advance(root, a)
    assert constraint.mask(after_a).tolist() == [False, True, True]
    assert constraint.advance(after_a, a) is None
    after_ab = constraint.advance(after_a, b)
    assert constraint.allowed(after_ab, [a, b, eos]).tolist() == [False, False, True]
    done = constraint.advance(after_ab, eos)
    assert not constraint.mask(done).any()  # nothing follows EOS


def test_empty_valid_list_rejects_everything():
    data = dict(copy.deepcopy(SMALL), valid=[])
    task = task_from_dict(data)
    constraint = task.constraint()
    assert not constraint.mask(constraint.initial_state()).any()
    assert task.exact_distribution() == {}
    assert task.argmax() is None


def test_mask_is_a_copy():
    constraint = SequenceConstraint(small_task().vocab, [(0, 2)])
    mask = constraint.mask(0)
    mask[:] = True
    assert constraint.mask(0).tolist() == [True, False, False]


# -- malformed files --------------------------------------------------------------------------
def _broken(change):
    data = copy.deepcopy(SMALL)
    change(data)
    return data


MALFORMED = [
    (lambda d: d["next"][3].update(probs={"$": 0.9}), "next[3].probs: sums to 0.9, not 1"),
    (lambda d: d["valid"][2].insert(1, "x"), 'valid[2][1]: unknown token "x"'),
    (lambda d: d.pop("vocab"), "vocab: missing"),
    (lambda d: d.update(vocab=["a", "a", "$"]), "vocab[1]: duplicate token"),
    (lambda d: d.update(eos="#"), "eos: '#' is not in vocab"),
    (lambda d: d.update(default={"a": 0.5, "b": 0.6}), "default: sums to 1.1, not 1"),
    (lambda d: d.update(default={"a": 1.5, "b": -0.5}), 'default["b"]: must be a finite non-negative number'),
    (lambda d: d.update(default={"a": "half", "b": 0.5}), 'default["a"]: must be a number'),
    (lambda d: d["next"][1].update(prefix=["a", "z"]), 'next[1].prefix[1]: unknown token "z"'),
    (lambda d: d["next"][0].pop("probs"), "next[0].probs: missing"),
    (lambda d: d["next"].append({"prefix": ["a"], "probs": {"$": 1.0}}), "next[4].prefix: same prefix as next[0]"),
    (lambda d: d["next"].append({"prefix": ["a", "$"], "probs": {"$": 1.0}}), "next[4].prefix: contains the eos token"),
    (lambda d: d["valid"][0].pop(), "valid[0]: must end with the eos token"),
    (lambda d: d["valid"].append(["$", "a", "$"]), "valid[3][0]: eos '$' before the end"),
    (lambda d: d["valid"].append([]), "valid[3]: must be a non-empty list"),
    (lambda d: d.update(valid="a $"), "valid: must be a list"),
    (lambda d: d.update(extra=1), "unknown field(s): extra"),
]


@pytest.mark.parametrize("change, message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_task_names_the_field(change, message):
    with pytest.raises(TaskError) as error:
        task_from_dict(_broken(change))
    assert message in str(error.value)


def test_malformed_files(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"vocab": [}', encoding="utf-8")
    with pytest.raises(TaskError, match=r"bad\.json: not valid JSON \(line 1"):
        load_task(bad_json)
    with pytest.raises(TaskError, match="cannot read the task file"):
        load_task(tmp_path / "missing.json")
    sums = tmp_path / "sums.json"
    sums.write_text(json.dumps(_broken(lambda d: d["next"][3].update(probs={"$": 0.9}))), encoding="utf-8")
    with pytest.raises(TaskError, match=r"sums\.json: next\[3\]\.probs: sums to 0\.9, not 1"):
        load_task(sums)
    not_object = tmp_path / "list.json"
    not_object.write_text("[]", encoding="utf-8")
    with pytest.raises(TaskError, match="must be a JSON object"):
        load_task(not_object)


def test_round_trip_through_json(tmp_path):
    task = random_task(3)
    path = tmp_path / "task.json"
    path.write_text(json.dumps(task.to_dict()), encoding="utf-8")
    loaded = load_task(path)
    assert loaded.valid == task.valid
    for sequence, probability in task.exact_distribution().items():
        assert loaded.exact_distribution()[sequence] == pytest.approx(probability, rel=1e-9)


# -- random tasks -------------------------------------------------------------------------------
def test_random_task_is_deterministic_and_well_formed():
    first, again, other = random_task(5), random_task(5), random_task(6)
    assert first.valid == again.valid
    assert first.exact_distribution() == again.exact_distribution()
    assert first.valid != other.valid
    assert len(set(first.valid)) == len(first.valid) == 12
    for sequence in first.valid:
        assert sequence[-1] == first.eos_id and first.eos_id not in sequence[:-1]
        assert 2 <= len(sequence) <= 5
    for probabilities in list(first.table.values()) + [first.default]:
        assert probabilities.sum() == pytest.approx(1.0)
    for seed in range(50):
        assert random_task(seed, zero_probability=0.5).exact_distribution()


# -- chi-square harness -------------------------------------------------------------------------
def test_chi_square_accepts_the_right_distribution_and_rejects_a_slightly_wrong_one():
    reference = {"x": 0.5, "y": 0.3, "z": 0.15, "w": 0.05}
    wrong = {"x": 0.47, "y": 0.33, "z": 0.15, "w": 0.05}
    rng = np.random.default_rng(0)
    keys = list(reference)
    accepted = 0
    for _ in range(20):
        draws = rng.choice(len(keys), size=10_000, p=list(reference.values()))
        counts = counts_of([(keys[i],) for i in draws])
        counts = {k[0]: n for k, n in counts.items()}
        accepted += chi_square(counts, reference).p_value > 1e-3
        assert chi_square(counts, wrong).p_value < 1e-3  # a 3-point shift is detected at n = 10k
    assert accepted >= 19  # false rejections at alpha = 1e-3 are rare


def test_chi_square_pools_rare_categories_and_flags_impossible_samples():
    reference = {"x": 0.9, "y": 0.0999, "z": 0.0001}
    result = chi_square({"x": 900, "y": 100}, reference)
    assert result.degrees_of_freedom == 1  # z (expected 0.1) pooled into y
    assert result.p_value > 0.5
    impossible = chi_square({"x": 900, "q": 1}, reference)
    assert impossible.p_value == 0.0 and impossible.impossible == 1
    with pytest.raises(ValueError):
        chi_square({}, reference)
