"""Exactness through llama.cpp: every decoder on the tiny model's GGUF, per request, against
P(s | c) enumerated from the same engine's full distributions.

The task is built from the engine itself (fixed prompt, temperature 0.35 so that a few
sequences carry real mass): the four most probable first tokens, each followed by two of
its continuations; the first token's two are its 3rd and 4th most probable, so greedy
masking (GCD), which gives that branch the first token's whole mass, is far from P(s|c).
A sequence ends where its text is one of the allowed texts (a stop rule, as the editor's
end-of-line rule), so P(s) is the product of its two tempered conditionals.

Statistics as in tests/unit/test_exactness.py: fixed seeds, Pearson's chi-square with
p > ALPHA = 1e-4 for a pass, and GCD rejected at p < 1e-9 by the same test.  `tvd_table`
prints per decoder the total variation distance to the enumeration (`pytest -s`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from llamacpp_support import require_llama_cpp

require_llama_cpp()

from adaptrack_lsp.completion.decoders import DECODERS, DecodeRequest, get_decoder
from adaptrack_lsp.completion.lm.llamacpp import load_llamacpp
from adaptrack_lsp.evaluation.tasks import SequenceConstraint, chi_square

from hf_support import PROMPT

TEMPERATURE = 0.35
ALPHA = 1e-4
REJECT_BELOW = 1e-9
#: samples per (decoder, regime)
SAMPLES = 1000
EXACT_DECODERS = ["exact", "cars", "rs", "ars", "rsft"]


def tempered(logprobs: np.ndarray) -> np.ndarray:
    """log P_T(. | x) over the whole vocabulary, as the prefix tree tempers a conditional."""
    scaled = logprobs.astype(np.float64) / TEMPERATURE
    top = scaled.max()
    return scaled - (top + math.log(float(np.exp(scaled - top).sum())))


class EngineTask:
    """The allowed sequences, the stop rule, and P(s|c) and GCD's distribution, enumerated
    through the engine's own `next_logprobs`."""

    def __init__(self, lm):
        self.prompt = lm.encode(PROMPT)
        lm.set_prompt(self.prompt)
        vocab = lm.vocab

        def eligible(logprobs):
            order = [int(t) for t in np.argsort(-logprobs)]
            return [t for t in order if not vocab.is_special(t) and vocab.text(t) and "\n" not in vocab.text(t)]

        raw_root = lm.next_logprobs([]).astype(np.float64)
        root = tempered(raw_root)
        firsts = eligible(root)[:4]
        raw = {}  # log P(s) at temperature 1 (what `map` maximises)
        self.sequences: list[tuple[int, int]] = []
        weights, gcd = {}, {}
        first_mass = sum(math.exp(root[a]) for a in firsts)
        for rank, first in enumerate(firsts):
            raw_after = lm.next_logprobs([first]).astype(np.float64)
            after = tempered(raw_after)
            seconds = eligible(after)[2:4] if rank == 0 else eligible(after)[:2]
            second_mass = sum(math.exp(after[b]) for b in seconds)
            for second in seconds:
                sequence = (first, second)
                self.sequences.append(sequence)
                weights[sequence] = math.exp(root[first] + after[second])
                raw[sequence] = raw_root[first] + raw_after[second]
                gcd[sequence] = math.exp(root[first]) / first_mass * math.exp(after[second]) / second_mass
        total = math.fsum(weights.values())
        self.exact = {s: w / total for s, w in weights.items()}
        self.gcd = gcd
        self.most_probable = max(raw, key=raw.get)
        self.acceptance = total
        self.texts = {vocab.decode(s) for s in self.sequences}
        assert len(self.texts) == len(self.sequences), "two allowed sequences share a text"
        assert not self.texts & {vocab.text(a) for a in firsts}, "a first token's text ends a sequence"
        self.vocab = vocab

    def stop(self, text: str, checked: int = 0) -> bool:
        return text in self.texts

    def constraint(self) -> SequenceConstraint:
        return SequenceConstraint(self.vocab, self.sequences, source="llamacpp-task")

    def request(self, samples: int, seed: int, **options) -> DecodeRequest:
        return DecodeRequest(
            prompt_ids=self.prompt, num_samples=samples, seed=seed, max_new_tokens=3,
            temperature=TEMPERATURE, stop=self.stop, options=options,
        )


@pytest.fixture(scope="module")
def lm():
    return load_llamacpp("tiny")


@pytest.fixture(scope="module")
def task(lm):
    return EngineTask(lm)


def draw(lm, task, decoder: str, samples_per_request: int, total: int, seed: int) -> dict:
    """Counts of token sequences from requests of `samples_per_request` samples on fresh
    trees (1: a fresh tree per sample)."""
    constraint = task.constraint()
    if samples_per_request == 1:
        requests = [task.request(total, seed, share_estimates=False)]
    else:
        requests = [task.request(samples_per_request, seed * 100_003 + i) for i in range(total // samples_per_request)]
    counts: dict = {}
    for request in requests:
        result = get_decoder(decoder).decode(lm, constraint, request)
        assert result.status == "ok", (decoder, result.status, result.message)
        for sample in result.samples:
            assert sample.valid and sample.complete, decoder
            key = tuple(sample.token_ids)
            counts[key] = counts.get(key, 0) + 1
    assert sum(counts.values()) == total
    return counts


def tvd(counts: dict, reference: dict) -> float:
    total = sum(counts.values())
    return 0.5 * sum(abs(counts.get(k, 0) / total - reference.get(k, 0.0)) for k in set(counts) | set(reference))


def test_the_task_is_finite_probable_and_distorted_by_greedy_masking(task):
    assert len(task.sequences) == 8 and abs(sum(task.exact.values()) - 1.0) < 1e-12
    assert task.acceptance > 0.03  # rejection samplers need ~1/acceptance attempts
    assert tvd({s: round(p * 1e6) for s, p in task.gcd.items()}, task.exact) > 0.2


@pytest.mark.parametrize("decoder", EXACT_DECODERS)
def test_exact_decoders_are_exact_per_request_of_one_sample(lm, task, decoder):
    counts = draw(lm, task, decoder, 1, SAMPLES, seed=700)
    test = chi_square(counts, task.exact)
    assert test.p_value > ALPHA, f"{decoder}: chi2={test.statistic:.1f}, p={test.p_value:.2g}, tvd={tvd(counts, task.exact):.3f}"


@pytest.mark.parametrize("decoder", ["exact", "cars"])
def test_exact_decoders_are_exact_per_request_of_five_samples(lm, task, decoder):
    counts = draw(lm, task, decoder, 5, SAMPLES, seed=710)
    test = chi_square(counts, task.exact)
    assert test.p_value > ALPHA, f"{decoder}: chi2={test.statistic:.1f}, p={test.p_value:.2g}"


def test_exact_without_the_node_cache_every_request_walks_the_kv_branches(task):
    uncached = load_llamacpp("tiny", max_node_cache_bytes=0)
    counts = draw(uncached, task, "exact", 5, 400, seed=720)
    assert chi_square(counts, task.exact).p_value > ALPHA
    # every request evaluated its nodes again (one token each, from the held branches)
    assert uncached.tokens_fed - len(task.prompt) >= 400 // 5


def test_greedy_masking_fails_the_same_test_where_it_must(lm, task):
    counts = draw(lm, task, "constrained", 1, SAMPLES, seed=730)
    assert chi_square(counts, task.exact).p_value < REJECT_BELOW
    assert chi_square(counts, task.gcd).p_value > ALPHA  # it samples GCD's distribution


def test_every_other_decoder_runs_through_llama_cpp(lm, task):
    constraint = task.constraint()
    result = get_decoder("map").decode(lm, constraint, task.request(1, 0))
    assert result.status == "ok" and tuple(result.samples[0].token_ids) == task.most_probable  # argmax of P(s|c)
    for decoder in ("adaptrack", "asap", "beam"):
        result = get_decoder(decoder).decode(lm, constraint, task.request(5, 1))
        assert result.status == "ok" and result.samples, decoder
        assert all(s.valid and tuple(s.token_ids) in task.exact for s in result.samples), decoder
    result = get_decoder("unconstrained").decode(lm, constraint, task.request(20, 2))
    assert len(result.samples) == 20
    assert all(s.valid == (tuple(s.token_ids) in task.exact) for s in result.samples if s.complete)
    assert set(DECODERS) == {"unconstrained", "constrained", "adaptrack", "exact", "asap", "cars", "rs", "ars", "rsft", "beam", "map"}


@pytest.mark.slow
def test_tvd_table(lm, task, capsys):
    """Per decoder, one sample per request: TVD to the enumeration, beside the noise floor
    (exact multinomial draws of the same size)."""
    rng = np.random.default_rng(0)
    keys = list(task.exact)
    floor = np.mean([
        tvd(dict(zip(keys, rng.multinomial(SAMPLES, [task.exact[k] for k in keys]))), task.exact) for _ in range(200)
    ])
    rows = []
    for decoder in EXACT_DECODERS + ["adaptrack", "asap", "constrained"]:
        counts = draw(lm, task, decoder, 1, SAMPLES, seed=700 if decoder in EXACT_DECODERS else 740)
        p_value = chi_square(counts, task.exact).p_value
        rows.append((decoder, tvd(counts, task.exact), p_value))
    with capsys.disabled():
        print(f"\nllama.cpp exactness, tiny GGUF, T={TEMPERATURE}, {SAMPLES} samples (1 per request); noise floor TVD {floor:.3f}")
        for decoder, distance, p_value in rows:
            verdict = "pass" if p_value > ALPHA else "fail"
            print(f"  {decoder:12s} TVD {distance:.3f}  p {p_value:.2g}  {verdict}")
    assert all(p > ALPHA for d, _, p in rows if d in EXACT_DECODERS)
    assert dict((d, p) for d, _, p in rows)["constrained"] < REJECT_BELOW
