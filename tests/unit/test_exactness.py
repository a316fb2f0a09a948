"""Exactness suite: decoders against distributions computed by enumeration.

Every test uses fixed seeds.  Goodness of fit is Pearson's chi-square
(`tasks.chi_square`, categories with expected count < 5 pooled); a decoder passes when
p > ALPHA = 0.001 with SAMPLES = 10,000 samples.  Each distribution test is paired with
one showing that the same test *rejects* the wrong distribution (constrained decoding's
distorted one), so a pass is evidence, not an artefact of a weak test.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
from adaptrack_lsp.completion.tasks import (
    Task,
    binary_task,
    chi_square,
    counts_of,
    load_task,
    random_task,
)

TASKS_DIR = Path(__file__).resolve().parents[1] / "data" / "tasks"
SAMPLES = 10_000
ALPHA = 1e-3
#: a distorted distribution must be rejected far more decisively than ALPHA
REJECT_BELOW = 1e-9
EXACT_DECODERS = ["adaptrack", "cars", "rs", "ars", "rsft"]
NUM_TASKS = 20
#: rejection sampling needs ~1/acceptance attempts per sample; the suite draws its
#: random tasks among those whose valid sequences hold at least this much LM mass
MIN_ACCEPTANCE = 0.05


def acceptance(task: Task) -> float:
    return math.fsum(task.sequence_probability(s) for s in dict.fromkeys(task.valid))


def total_variation(p: dict, q: dict) -> float:
    total_q = sum(q.values())
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0) / total_q) for k in set(p) | set(q))


def _suite_tasks() -> list[Task]:
    tasks, seed = [], 0
    while len(tasks) < NUM_TASKS:
        task = random_task(seed)
        if acceptance(task) >= MIN_ACCEPTANCE:
            tasks.append(task)
        seed += 1
    return tasks


TASKS = _suite_tasks()
#: suite tasks on which GCD is clearly distorted (and rarely stuck)
DISTORTED = [
    t for t in TASKS if t.gcd_distribution().dead_end < 0.5 and total_variation(t.exact_distribution(), t.gcd_distribution().probabilities) > 0.1
][:6]


def decode(task: Task, decoder: str, n: int = SAMPLES, seed: int = 1, temperature: float = 1.0, **options):
    request = DecodeRequest(
        prompt_ids=[], num_samples=n, seed=seed, temperature=temperature, max_new_tokens=task.max_length, options=options
    )
    return get_decoder(decoder).decode(task.language_model(), task.constraint(), request)


def sample_counts(task: Task, decoder: str, n: int = SAMPLES, seed: int = 1, **options) -> dict:
    result = decode(task, decoder, n=n, seed=seed, **options)
    assert all(s.valid and s.complete for s in result.samples)
    return counts_of(s.token_ids for s in result.samples), result


def test_suite_is_large_and_distorted_enough():
    assert len(TASKS) == NUM_TASKS
    assert len({t.name for t in TASKS}) == NUM_TASKS
    assert all(len(t.exact_distribution()) >= 3 for t in TASKS)
    assert len(DISTORTED) >= 5


# -- exact samplers ------------------------------------------------------------------------
@pytest.mark.parametrize("task_index", range(NUM_TASKS))
@pytest.mark.parametrize("decoder", EXACT_DECODERS)
def test_exact_decoder_matches_enumerated_p_s_given_c(decoder, task_index):
    task = TASKS[task_index]
    counts, result = sample_counts(task, decoder, seed=100 + task_index)
    assert result.status == "ok" and result.failures == 0
    assert sum(counts.values()) == SAMPLES
    test = chi_square(counts, task.exact_distribution())
    assert test.p_value > ALPHA, f"{decoder} on {task.name}: chi2={test.statistic:.1f}, dof={test.degrees_of_freedom}, p={test.p_value:.2g}"


@pytest.mark.parametrize("decoder", ["adaptrack", "cars"])
def test_the_test_rejects_exact_samples_against_the_distorted_distribution(decoder):
    """Power check: exact samples fail the chi-square test against GCD's distribution."""
    for index, task in enumerate(DISTORTED[:3]):
        counts, _ = sample_counts(task, decoder, seed=200 + index)
        test = chi_square(counts, task.gcd_distribution().probabilities)
        assert test.p_value < REJECT_BELOW, f"{task.name}: p={test.p_value:.2g}"


# -- constrained decoding: its own distribution, not P(s|c) --------------------------------
@pytest.mark.parametrize("task_index", range(5))
def test_constrained_matches_its_own_distorted_distribution_and_fails_p_s_given_c(task_index):
    task = DISTORTED[task_index]
    result = decode(task, "constrained", seed=300 + task_index)
    counts = counts_of(s.token_ids for s in result.samples if s.complete)
    gcd = task.gcd_distribution()
    # GCD fails exactly the samples that reach a dead end
    expected_failures = SAMPLES * gcd.dead_end
    assert abs(result.failures - expected_failures) <= 5 * math.sqrt(SAMPLES * gcd.dead_end * (1 - gcd.dead_end)) + 1
    own = chi_square(counts, gcd.probabilities)
    assert own.p_value > ALPHA, f"{task.name}: p={own.p_value:.2g} against its own distribution"
    exact = chi_square(counts, task.exact_distribution())
    assert exact.p_value < REJECT_BELOW, f"{task.name}: p={exact.p_value:.2g}: not distorted?"


def test_binary_task_adaptrack_one_in_seventeen_constrained_one_half():
    task = binary_task(5)
    zeros = (0, 0, 0, 0, 0, 2)
    adaptrack_counts, _ = sample_counts(task, "adaptrack", seed=7)
    constrained_counts, _ = sample_counts(task, "constrained", seed=7)
    # binomial standard deviations at n = 10k: 0.0024 and 0.005; tolerances are 4 sd
    assert abs(adaptrack_counts.get(zeros, 0) / SAMPLES - 1 / 17) < 0.01
    assert abs(constrained_counts.get(zeros, 0) / SAMPLES - 1 / 2) < 0.02
    assert chi_square(adaptrack_counts, task.exact_distribution()).p_value > ALPHA
    assert chi_square(constrained_counts, task.exact_distribution()).p_value < REJECT_BELOW
    assert chi_square(constrained_counts, task.gcd_distribution().probabilities).p_value > ALPHA


def test_binary_task_file_is_the_builtin_task():
    loaded = load_task(TASKS_DIR / "binary.json")
    assert loaded.exact_distribution() == binary_task(5).exact_distribution()


# -- the paper's Figure 1 --------------------------------------------------------------------
def test_figure1_gcd_forces_matrix_power_adaptrack_finds_linalg_matrix_rank():
    task = load_task(TASKS_DIR / "figure1.json")
    matrix_power = task.parse("matrix _ power $")
    linalg_matrix_rank = task.parse("l inalg . matrix _ rank $")
    assert task.gcd_distribution().probabilities[matrix_power] == pytest.approx(0.5770, abs=5e-4)
    assert task.exact_distribution()[linalg_matrix_rank] == pytest.approx(0.7718, abs=5e-4)

    gcd_counts, _ = sample_counts(task, "constrained", seed=11)
    assert abs(gcd_counts[matrix_power] / SAMPLES - 0.577) < 0.02  # sd 0.005
    assert max(gcd_counts, key=gcd_counts.get) == matrix_power

    adaptrack_counts, _ = sample_counts(task, "adaptrack", seed=11)
    assert max(adaptrack_counts, key=adaptrack_counts.get) == linalg_matrix_rank
    assert abs(adaptrack_counts[linalg_matrix_rank] / SAMPLES - 0.7718) < 0.02  # sd 0.0042
    assert adaptrack_counts.get(matrix_power, 0) / SAMPLES < 0.02  # exact: 0.83%

    greedy = decode(task, "adaptrack", n=1, temperature=0.0)
    assert greedy.samples[0].token_ids == list(linalg_matrix_rank)
    greedy_gcd = decode(task, "constrained", n=1, temperature=0.0)
    assert greedy_gcd.samples[0].token_ids == list(matrix_power)


# -- greedy AdapTrack ---------------------------------------------------------------------------
def test_greedy_adaptrack_is_deterministic_and_valid_whenever_possible():
    checked = 0
    for seed in range(40):
        task = random_task(1000 + seed, zero_probability=0.3)
        first = decode(task, "adaptrack", n=1, seed=1, temperature=0.0)
        second = decode(task, "adaptrack", n=1, seed=2, temperature=-1.0)
        support = task.exact_distribution()
        if not support:
            assert first.status == "no_valid_completion" and not first.samples
            continue
        assert first.status == "ok"
        assert [s.token_ids for s in first.samples] == [s.token_ids for s in second.samples]
        assert tuple(first.samples[0].token_ids) in support
        assert first.samples[0].complete and first.samples[0].valid
        checked += 1
    assert checked >= 30
    # zero_probability=0.3 makes GCD dead ends common: greedy AdapTrack escapes them
    assert sum(random_task(1000 + s, zero_probability=0.3).gcd_distribution().dead_end > 0 for s in range(40)) >= 10


# -- max_backtrack_distance = 0 is GCD ----------------------------------------------------------
def test_max_backtrack_distance_zero_samples_like_constrained_decoding():
    """Without shared estimates, no rejection above the leaf = greedy constrained decoding.

    Tasks without zero probabilities have no dead ends, where AdapTrack would still
    backtrack and GCD would fail.
    """
    n = 3000
    tasks = [random_task(seed, zero_probability=0.0) for seed in range(40)]
    tasks = [t for t in tasks if total_variation(t.exact_distribution(), t.gcd_distribution().probabilities) > 0.2][:2]
    assert len(tasks) == 2
    for index, task in enumerate(tasks):
        assert task.gcd_distribution().dead_end == 0.0
        counts, _ = sample_counts(task, "adaptrack", n=n, seed=400 + index, max_backtrack_distance=0, share_estimates=False)
        assert chi_square(counts, task.gcd_distribution().probabilities).p_value > ALPHA
        assert chi_square(counts, task.exact_distribution()).p_value < REJECT_BELOW


# -- MAP ------------------------------------------------------------------------------------------
def test_map_returns_the_enumerated_argmax_in_100_of_100_random_cases():
    hits = 0
    for seed in range(100):
        task = random_task(
            2000 + seed, vocab_size=3 + seed % 3, max_length=3 + seed % 3, num_valid=5 + seed % 10, zero_probability=0.1
        )
        exact = task.exact_distribution()
        assert exact  # random_task always leaves a valid sequence with positive probability
        result = decode(task, "map", n=1)
        assert result.status == "ok"
        found = tuple(result.samples[0].token_ids)
        best = task.argmax()
        if found == best or math.isclose(exact.get(found, 0.0), exact[best], rel_tol=1e-12):
            hits += 1
    assert hits == 100
