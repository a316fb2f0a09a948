"""The simulated-intent LM is an exact LanguageModel: conditionals multiply to its closed form."""

import math

import pytest

from adaptrack_lsp.evaluation.simulated import (
    Candidate,
    SimulatedIntentLM,
    tfv1_intent_candidates,
)
from adaptrack_lsp.vocab import Vocabulary

TOKENS = [".", "a", "b", "ab", "(", "$"]


@pytest.fixture()
def literal_lm():
    vocab = Vocabulary.from_strings(TOKENS, "$")
    encode = lambda text: [TOKENS.index(c) for c in text]  # one character per token
    candidates = [Candidate(".ab(", 0.6), Candidate(".a(", 0.3), Candidate(".b(", 0.1)]
    return SimulatedIntentLM(vocab, encode, candidates, smoothing=0.1, smoothing_eos=0.3)


def path_logprob(lm, ids):
    return float(sum(lm.next_logprobs(ids[:i])[ids[i]] for i in range(len(ids))))


def test_conditionals_are_distributions(literal_lm):
    for path in [(), (0,), (0, 1), (0, 3), (1, 1, 1)]:
        probs = literal_lm.next_probs(path)
        assert probs.sum() == pytest.approx(1.0, abs=1e-12)
        assert (probs > 0).sum() == len(TOKENS)  # smoothing keeps every token possible


def test_chain_rule_equals_the_closed_form_mixture(literal_lm):
    eos = TOKENS.index("$")
    sequences = [
        (0, 1, 2, 4, eos),  # candidate ".ab("
        (0, 1, 4, eos),  # candidate ".a(" (a prefix of the first candidate's path)
        (0, 3, 4, eos),  # ".ab(" spelled with the "ab" token: smoothing only
        (1, 2, eos),  # off every candidate
    ]
    for ids in sequences:
        assert path_logprob(literal_lm, ids) == pytest.approx(literal_lm.sequence_logprob(ids), abs=1e-5)
    # the closed form itself: candidate mass plus smoothing mass
    smooth = 0.1 * ((0.7 / 5) ** 4) * 0.3
    assert math.exp(literal_lm.sequence_logprob(sequences[0])) == pytest.approx(0.9 * 0.6 + smooth, rel=1e-9)


def test_total_probability_of_short_strings_is_one(literal_lm):
    # sum over every sequence of up to L tokens ending in EOS, plus the mass still
    # running after L tokens, is 1 (a proper distribution over strings)
    eos = TOKENS.index("$")
    ordinary = [i for i in range(len(TOKENS)) if i != eos]
    total, frontier = 0.0, {(): 1.0}
    for _ in range(6):
        new_frontier = {}
        for path, mass in frontier.items():
            probs = literal_lm.next_probs(path)
            total += mass * probs[eos]
            for t in ordinary:
                new_frontier[path + (t,)] = mass * probs[t]
        frontier = new_frontier
    assert total + sum(frontier.values()) == pytest.approx(1.0, abs=1e-9)


def test_tfv1_prior_prefers_the_v1_spelling():
    for path in ["losses.mean_pairwise_squared_error", "get_variable", "nn.rnn_cell.static_rnn"]:
        weights = {c.text.split("(")[0]: c.weight for c in tfv1_intent_candidates(path)}
        assert weights["." + path] > weights[".compat.v1." + path] > 0
    # reproducible jitter: the same path gives the same weights
    assert tfv1_intent_candidates("get_variable") == tfv1_intent_candidates("get_variable")


def test_bad_parameters():
    vocab = Vocabulary.from_strings(TOKENS, "$")
    with pytest.raises(ValueError, match="smoothing"):
        SimulatedIntentLM(vocab, lambda t: [], [Candidate(".a", 1.0)], smoothing=0.0)
    with pytest.raises(ValueError, match="at least one candidate"):
        SimulatedIntentLM(vocab, lambda t: [], [])
