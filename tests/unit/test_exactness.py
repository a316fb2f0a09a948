"""Exactness suite: decoders against distributions computed by enumeration.

Three regimes, as users meet them:

- **per request, one sample**: every sample starts from a fresh prefix tree (an LSP
  request of one sample; `share_estimates=False`);
- **per request, five samples**: separate requests of 5 samples each, the 5 sharing one
  fresh tree (a completion list);
- **shared**: thousands of samples on one tree (evaluation runs).

Every test uses fixed seeds.  Goodness of fit is Pearson's chi-square
(`tasks.chi_square`, categories with expected count < 5 pooled); a decoder passes when
p > ALPHA = 1e-4: with about 200 such tests, the chance that an exact decoder fails one
by bad luck is about 2%, while the wrong distributions below are rejected at p < 1e-9.  Each kind of test is paired with one showing that it *rejects* a
wrong distribution (AdapTrack's per-sample bias, constrained decoding's distortion), so a
pass is evidence, not an artefact of a weak test.

The decoders the README calls exact per request are `EXACT_DECODERS`; `adaptrack` (the
paper's Algorithm 2) and `asap` only converge with shared estimates; `constrained` is
distorted.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from adaptrack_lsp.completion.decoders import DECODERS, DecodeRequest, get_decoder
from adaptrack_lsp.evaluation.tasks import (
    Task,
    binary_task,
    chi_square,
    counts_of,
    load_task,
    random_task,
    task_from_dict,
)

TASKS_DIR = Path(__file__).resolve().parents[1] / "data" / "tasks"
SAMPLES = 10_000
#: samples per (task, decoder) in the per-request regimes (fresh trees are slower)
REQUEST_SAMPLES = 1_500
ALPHA = 1e-4
#: a wrong distribution must be rejected far more decisively than ALPHA
REJECT_BELOW = 1e-9
EXACT_DECODERS = ["exact", "cars", "rs", "ars", "rsft"]
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


# -- tasks built to break samplers ------------------------------------------------------------
def three_sequences() -> Task:
    """The smallest case of Algorithm 2's bias: a .4 / b .4 / $ .2 everywhere; valid
    `a $`, `a a $`, `b $`: P(s|c) = 5/12, 2/12, 5/12."""
    return task_from_dict(
        {"vocab": ["a", "b", "$"], "eos": "$", "default": {"a": 0.4, "b": 0.4, "$": 0.2}, "valid": [["a", "$"], ["a", "a", "$"], ["b", "$"]]},
        name="three_sequences",
    )


def deep_dead_end() -> Task:
    """The most probable path stays valid for four tokens and then has no valid
    continuation the model allows (P($ | a a a a) = 0)."""
    return task_from_dict(
        {
            "vocab": ["a", "b", "$"],
            "eos": "$",
            "default": {"a": 0.85, "b": 0.1, "$": 0.05},
            "next": [{"prefix": ["a", "a", "a", "a"], "probs": {"a": 0.5, "b": 0.5}}],
            "valid": [["a", "a", "a", "a", "$"], ["b", "$"], ["a", "b", "$"], ["a", "a", "b", "$"], ["a", "a", "a", "b", "$"]],
        },
        name="deep_dead_end",
    )


def overlapping_tokenizations() -> Task:
    """Multi-character tokens: the same text has several tokenizations, each its own
    sequence (exactness is over token sequences)."""
    return task_from_dict(
        {
            "vocab": ["a", "b", "ab", "ba", "$"],
            "eos": "$",
            "default": {"a": 0.3, "b": 0.2, "ab": 0.25, "ba": 0.1, "$": 0.15},
            "valid": [["ab", "$"], ["a", "b", "$"], ["a", "ba", "$"], ["ab", "a", "$"], ["a", "b", "a", "$"], ["b", "a", "b", "$"], ["ba", "b", "$"]],
        },
        name="overlapping_tokenizations",
    )


def eos_at_some_depths() -> Task:
    """EOS is valid after two and after four tokens, never after three."""
    return task_from_dict(
        {
            "vocab": ["a", "b", "$"],
            "eos": "$",
            "default": {"a": 0.45, "b": 0.35, "$": 0.2},
            "valid": [["a", "a", "$"], ["a", "b", "$"], ["a", "a", "a", "a", "$"], ["a", "b", "b", "a", "$"], ["b", "b", "b", "b", "$"], ["b", "a", "a", "b", "$"]],
        },
        name="eos_at_some_depths",
    )


def tiny_branch(probability: float) -> Task:
    """The only valid sequences start with a token of probability `probability`."""
    return task_from_dict(
        {
            "vocab": ["a", "b", "$"],
            "eos": "$",
            "default": {"a": 0.3, "b": 0.7},
            "next": [
                {"prefix": [], "probs": {"a": 1.0 - probability, "b": probability}},
                {"prefix": ["a"], "probs": {"$": 1.0}},
                {"prefix": ["b", "a"], "probs": {"$": 1.0}},
                {"prefix": ["b", "b"], "probs": {"$": 1.0}},
            ],
            "valid": [["b", "a", "$"], ["b", "b", "$"]],
        },
        name=f"tiny_branch_{probability:g}",
    )


def long_sequences() -> Task:
    """Valid sequences of 2 to 6 tokens, for truncation at max_new_tokens = 4."""
    return task_from_dict(
        {
            "vocab": ["a", "b", "$"],
            "eos": "$",
            "default": {"a": 0.4, "b": 0.4, "$": 0.2},
            "valid": [["a", "$"], ["b", "a", "$"], ["a", "a", "b", "$"], ["a", "a", "a", "a", "$"], ["b", "b", "b", "b", "b", "$"], ["a", "b", "a", "b", "a", "$"], ["a", "a", "a", "a", "a", "$"]],
        },
        name="long_sequences",
    )


BREAKERS = [three_sequences(), deep_dead_end(), overlapping_tokenizations(), eos_at_some_depths(), tiny_branch(1e-12), tiny_branch(1e-45)]
#: tasks of the per-request regimes: random suite tasks and the breakers
REQUEST_TASKS = TASKS[:4] + BREAKERS
#: rejection sampling cannot reach a sequence of probability 1e-12: it gives up and says so
HOPELESS_FOR = {"rs": {"tiny_branch_1e-12", "tiny_branch_1e-45"}}


def decode(task: Task, decoder: str, n: int = SAMPLES, seed: int = 1, temperature: float = 1.0, max_new_tokens=None, **options):
    return task.decode(decoder, n, seed=seed, temperature=temperature, max_new_tokens=max_new_tokens, **options)


def sample_counts(task: Task, decoder: str, n: int = SAMPLES, seed: int = 1, **options) -> tuple[dict, object]:
    result = decode(task, decoder, n=n, seed=seed, **options)
    assert all(s.valid and s.complete for s in result.samples)
    return counts_of(s.token_ids for s in result.samples), result


def per_request_counts(task: Task, decoder: str, samples_per_request: int, total: int, seed: int, **options) -> dict:
    """Samples from separate requests, each on a fresh tree (one model instance, as a
    server keeps it)."""
    lm, constraint = task.language_model(), task.constraint()
    counts: dict = {}
    if samples_per_request == 1:  # one call, a fresh tree per sample
        request = DecodeRequest(prompt_ids=[], num_samples=total, seed=seed, max_new_tokens=task.max_length, options=dict(options, share_estimates=False))
        results = [get_decoder(decoder).decode(lm, constraint, request)]
    else:
        results = []
        for index in range(total // samples_per_request):
            request = DecodeRequest(prompt_ids=[], num_samples=samples_per_request, seed=seed * 100_003 + index, max_new_tokens=task.max_length, options=options)
            results.append(get_decoder(decoder).decode(lm, constraint, request))
    for result in results:
        assert result.status == "ok", (result.status, result.message)
        for sample in result.samples:
            assert sample.valid and sample.complete
            key = tuple(sample.token_ids)
            counts[key] = counts.get(key, 0) + 1
    assert sum(counts.values()) == total
    return counts


def test_suite_is_large_and_distorted_enough():
    assert len(TASKS) == NUM_TASKS
    assert len({t.name for t in TASKS}) == NUM_TASKS
    assert all(len(t.exact_distribution()) >= 3 for t in TASKS)
    assert len(DISTORTED) >= 5
    assert all(task.exact_distribution() for task in BREAKERS)
    assert deep_dead_end().gcd_distribution().dead_end > 0.5  # built to trap greedy masking


def test_every_decoder_is_labelled():
    labels = {name: cls.exactness for name, cls in DECODERS.items()}
    assert {name for name, label in labels.items() if label == "exact"} == set(EXACT_DECODERS)
    assert labels["adaptrack"] == labels["asap"] == "converges"
    assert labels["constrained"] == "distorted"
    assert labels["map"] == labels["beam"] == "search"


# -- per request: fresh trees -------------------------------------------------------------------
@pytest.mark.parametrize("task_index", range(len(REQUEST_TASKS)), ids=[t.name for t in REQUEST_TASKS])
@pytest.mark.parametrize("decoder", EXACT_DECODERS)
def test_exact_decoders_are_exact_per_request_of_one_sample(decoder, task_index):
    task = REQUEST_TASKS[task_index]
    if task.name in HOPELESS_FOR.get(decoder, ()):
        result = decode(task, decoder, n=1, max_attempts=2000, share_estimates=False)
        assert result.status == "failed" and "max_attempts" in result.message and not result.samples
        return
    counts = per_request_counts(task, decoder, 1, REQUEST_SAMPLES, seed=500 + task_index)
    test = chi_square(counts, task.exact_distribution())
    assert test.p_value > ALPHA, f"{decoder} on {task.name}: chi2={test.statistic:.1f}, p={test.p_value:.2g}"


@pytest.mark.parametrize("task_index", range(len(REQUEST_TASKS)), ids=[t.name for t in REQUEST_TASKS])
@pytest.mark.parametrize("decoder", ["exact", "cars"])
def test_exact_decoders_are_exact_per_request_of_five_samples(decoder, task_index):
    task = REQUEST_TASKS[task_index]
    counts = per_request_counts(task, decoder, 5, REQUEST_SAMPLES, seed=600 + task_index)
    test = chi_square(counts, task.exact_distribution())
    assert test.p_value > ALPHA, f"{decoder} on {task.name}: chi2={test.statistic:.1f}, p={test.p_value:.2g}"


#: Algorithm 2's output distribution on `three_sequences` with a fresh tree, every
#: random choice of the algorithm enumerated
ALGORITHM_2_THREE_SEQUENCES = {("a", "$"): Fraction(17, 36), ("a", "a", "$"): Fraction(6, 36), ("b", "$"): Fraction(13, 36)}


def test_adaptrack_as_published_is_biased_per_sample_and_this_is_detected():
    """The paper's Algorithm 2 gives 17/36, 6/36, 13/36 where P(s|c) is 5/12, 2/12, 5/12;
    the implementation matches the algorithm, and the per-request test rejects it."""
    task = three_sequences()
    exact = task.exact_distribution()
    assert {tuple(task.names(k)): v for k, v in exact.items()} == pytest.approx({("a", "$"): 5 / 12, ("a", "a", "$"): 2 / 12, ("b", "$"): 5 / 12})
    counts = per_request_counts(task, "adaptrack", 1, 20_000, seed=7)
    algorithm = {task.ids(k): float(v) for k, v in ALGORITHM_2_THREE_SEQUENCES.items()}
    assert chi_square(counts, algorithm).p_value > ALPHA
    assert chi_square(counts, exact).p_value < REJECT_BELOW


def test_adaptrack_fails_per_request_on_random_tasks_where_exact_passes():
    """Power check of the per-request test on three of the suite's own tasks (on which
    the exact decoders pass above): AdapTrack's samples are rejected decisively."""
    for task in (TASKS[0], TASKS[2], TASKS[4]):
        counts = per_request_counts(task, "adaptrack", 1, 3000, seed=700)
        assert chi_square(counts, task.exact_distribution()).p_value < REJECT_BELOW, task.name


def test_truncated_paths_are_partial_and_never_counted_as_samples_of_p_s_given_c():
    """With max_new_tokens = 4 the samples that end follow P(s | c, |s| <= 4); a path cut
    at 4 tokens is returned as partial, at the rate its envelope (Q = 1) gives it."""
    task = long_sequences()
    limit = 4
    ended = {s: task.sequence_probability(s) for s in dict.fromkeys(task.valid) if len(s) <= limit}
    total_ended = math.fsum(ended.values())
    prefixes = {s[:limit] for s in task.valid if len(s) > limit and task.eos_id not in s[:limit]}
    cut_mass = math.fsum(task.sequence_probability(p) for p in prefixes)
    expected_cut_share = cut_mass / (cut_mass + total_ended)
    for decoder in ["exact", "cars"]:
        result = decode(task, decoder, n=6000, seed=11, max_new_tokens=limit)
        assert result.status == "partial" and "max_new_tokens" in result.message
        cut = [s for s in result.samples if not s.complete]
        assert all(len(s.token_ids) == limit and task.eos_id not in s.token_ids for s in cut)
        share = len(cut) / 6000
        assert abs(share - expected_cut_share) < 4 * math.sqrt(expected_cut_share * (1 - expected_cut_share) / 6000)
        counts = counts_of(s.token_ids for s in result.samples if s.complete)
        assert chi_square(counts, {s: p / total_ended for s, p in ended.items()}).p_value > ALPHA


# -- shared estimates -------------------------------------------------------------------------
@pytest.mark.parametrize("task_index", range(NUM_TASKS))
@pytest.mark.parametrize("decoder", EXACT_DECODERS + ["adaptrack"])
def test_decoders_match_enumerated_p_s_given_c_with_shared_estimates(decoder, task_index):
    task = TASKS[task_index]
    counts, result = sample_counts(task, decoder, seed=100 + task_index)
    assert result.status == "ok" and result.failures == 0
    assert sum(counts.values()) == SAMPLES
    test = chi_square(counts, task.exact_distribution())
    assert test.p_value > ALPHA, f"{decoder} on {task.name}: chi2={test.statistic:.1f}, dof={test.degrees_of_freedom}, p={test.p_value:.2g}"


@pytest.mark.parametrize("decoder", ["exact", "cars"])
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


def test_binary_task_exact_one_in_seventeen_constrained_one_half():
    task = binary_task(5)
    zeros = (0, 0, 0, 0, 0, 2)
    for decoder in ["exact", "adaptrack"]:
        counts, _ = sample_counts(task, decoder, seed=7)
        # binomial standard deviation at n = 10k: 0.0024; tolerance 4 sd
        assert abs(counts.get(zeros, 0) / SAMPLES - 1 / 17) < 0.01
        assert chi_square(counts, task.exact_distribution()).p_value > ALPHA
    constrained_counts, _ = sample_counts(task, "constrained", seed=7)
    assert abs(constrained_counts.get(zeros, 0) / SAMPLES - 1 / 2) < 0.02
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

    for decoder in ["exact", "adaptrack"]:
        counts, _ = sample_counts(task, decoder, seed=11)
        assert max(counts, key=counts.get) == linalg_matrix_rank
        assert abs(counts[linalg_matrix_rank] / SAMPLES - 0.7718) < 0.02  # sd 0.0042
        assert counts.get(matrix_power, 0) / SAMPLES < 0.02  # exact: 0.83%

    for decoder in ["adaptrack", "exact", "map"]:
        greedy = decode(task, decoder, n=1, temperature=0.0)
        assert greedy.samples[0].token_ids == list(linalg_matrix_rank), decoder
    greedy_gcd = decode(task, "constrained", n=1, temperature=0.0)
    assert greedy_gcd.samples[0].token_ids == list(matrix_power)


# -- greedy -------------------------------------------------------------------------------------
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


def test_greedy_map_and_exact_break_near_ties_in_float64():
    """Two valid sequences whose probabilities differ by 1e-12 (relative): float32 cannot
    tell them apart, float64 can; the more probable one wins."""
    task = task_from_dict(
        {
            "vocab": ["a", "b", "$"],
            "eos": "$",
            "default": {"$": 1.0},
            "next": [{"prefix": [], "probs": {"a": 0.5 - 1e-13, "b": 0.5 + 1e-13}}],
            "valid": [["a", "$"], ["b", "$"]],
        }
    )
    assert np.float32(0.5 - 1e-13) == np.float32(0.5 + 1e-13)
    for decoder in ["map", "exact", "adaptrack", "constrained"]:
        assert decode(task, decoder, n=1, temperature=0.0).samples[0].token_ids == list(task.parse("b $")), decoder


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


# -- grammar tasks (llguidance): the grammar is the whole constraint ----------------------------
GRAMMARS_DIR = TASKS_DIR.parent / "grammars"
#: task -> (LM file, grammar file, length cap of the enumerated P(s | c, |s| <= cap))
GRAMMAR_TASKS = {
    "binary": (TASKS_DIR / "binary.json", GRAMMARS_DIR / "binary.lark", 6),
    "brackets": (GRAMMARS_DIR / "brackets.task.json", GRAMMARS_DIR / "brackets.lark", 11),
    "slia": (GRAMMARS_DIR / "slia.task.json", GRAMMARS_DIR / "slia.lark", 12),
}
_grammar_tasks: dict = {}


def grammar_task(name: str):
    pytest.importorskip("llguidance")
    if name not in _grammar_tasks:
        from adaptrack_lsp.constrainers.grammar import GrammarSpec
        from adaptrack_lsp.evaluation.grammar_tasks import bind_grammar

        lm_file, grammar_file, cap = GRAMMAR_TASKS[name]
        _grammar_tasks[name] = bind_grammar(load_task(lm_file, require_valid=False), GrammarSpec.from_file(grammar_file), cap)
    return _grammar_tasks[name]


def grammar_request_counts(task, decoder: str, samples_per_request: int, total: int, seed: int) -> tuple[dict, int]:
    """Complete samples of `total` drawn in requests of `samples_per_request` (1: a fresh
    tree per sample), and how many were cut at the length cap (partial, never counted)."""
    lm, constraint = task.language_model(), task.constraint()
    requests = [
        DecodeRequest(prompt_ids=[], num_samples=total, seed=seed, max_new_tokens=task.max_length, options={"share_estimates": False})
    ] if samples_per_request == 1 else [
        DecodeRequest(prompt_ids=[], num_samples=samples_per_request, seed=seed * 100_003 + i, max_new_tokens=task.max_length)
        for i in range(total // samples_per_request)
    ]
    counts: dict = {}
    cut = 0
    for request in requests:
        result = get_decoder(decoder).decode(lm, constraint, request)
        assert result.status in ("ok", "partial") and result.failures == 0, (result.status, result.message)
        for sample in result.samples:
            assert sample.valid
            if not sample.complete:
                assert len(sample.token_ids) == task.max_length
                cut += 1
                continue
            counts[tuple(sample.token_ids)] = counts.get(tuple(sample.token_ids), 0) + 1
    return counts, cut


@pytest.mark.parametrize("name", list(GRAMMAR_TASKS))
@pytest.mark.parametrize("decoder", EXACT_DECODERS)
def test_exact_decoders_are_exact_per_request_under_grammars(decoder, name):
    """One sample per request, each on a fresh tree, against P(s | c, |s| <= cap)
    enumerated under the grammar; a path cut at the cap (Q = 1 there) comes back as a
    partial sample at the rate cut mass / (cut mass + valid mass)."""
    task = grammar_task(name)
    counts, cut = grammar_request_counts(task, decoder, 1, REQUEST_SAMPLES, seed=800 + len(name))
    assert sum(counts.values()) + cut == REQUEST_SAMPLES
    share = task.cut_mass / (task.cut_mass + acceptance(task))
    assert abs(cut - REQUEST_SAMPLES * share) <= 5 * math.sqrt(REQUEST_SAMPLES * share * (1 - share)) + 1
    test = chi_square(counts, task.exact_distribution())
    assert test.p_value > ALPHA, f"{decoder} on {name}: chi2={test.statistic:.1f}, p={test.p_value:.2g}"


@pytest.mark.parametrize("name", list(GRAMMAR_TASKS))
@pytest.mark.parametrize("decoder", ["exact", "cars"])
def test_exact_decoders_are_exact_per_request_of_five_under_grammars(decoder, name):
    task = grammar_task(name)
    counts, _ = grammar_request_counts(task, decoder, 5, REQUEST_SAMPLES, seed=900 + len(name))
    test = chi_square(counts, task.exact_distribution())
    assert test.p_value > ALPHA, f"{decoder} on {name}: chi2={test.statistic:.1f}, p={test.p_value:.2g}"


@pytest.mark.parametrize("name", list(GRAMMAR_TASKS))
def test_constrained_decoding_under_grammars_follows_its_own_distribution_not_p_s_given_c(name):
    """GCD's samples match the distribution greedy masking gives under the grammar
    (enumerated through the grammar's masks) and are rejected against P(s | c): the
    test detects the wrong answer where theory says GCD must give it."""
    task = grammar_task(name)
    result = decode(task, "constrained", n=SAMPLES, seed=1000 + len(name), max_new_tokens=task.max_length)
    counts = counts_of(s.token_ids for s in result.samples if s.complete)
    gcd = task.gcd_distribution()
    assert abs(result.failures + sum(not s.complete for s in result.samples) - SAMPLES * gcd.dead_end) <= 5 * math.sqrt(
        SAMPLES * gcd.dead_end * (1 - gcd.dead_end)
    ) + 1
    own = chi_square(counts, gcd.probabilities)
    assert own.p_value > ALPHA, f"{name}: p={own.p_value:.2g} against its own distribution"
    exact = chi_square(counts, task.exact_distribution())
    assert exact.p_value < REJECT_BELOW, f"{name}: p={exact.p_value:.2g}: not distorted?"
