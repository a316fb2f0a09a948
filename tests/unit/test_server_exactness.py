"""Exactness over a real inference server: the decoders on llama-server (the tiny model as
GGUF, top-5 log-probabilities per position) against P(s | c) enumerated from the same
engine's full distributions (n_probs = the vocabulary).

The constraint: nine two-token sequences built from the engine's own ranking, ending
where their text is complete (a stop rule, as a line ends ghost text).  First tokens of
ranks 0, 2 and 6 at the root (rank 6 lies in the tail of the top-5 list, so it is found
by exclusion draws and, once a node's tail needed many draws, through the full
distribution); second tokens of high rank under one first token, of low rank (300 to 1200) under
another, so that greedy masking (GCD) is far from P(s | c) and the test can tell.

Tolerance as in `test_exactness.py`: chi-square, pass at p > 1e-4, wrong distributions
rejected at p < 1e-9.  Fixed seeds.  `rs` is left out: a valid sequence has probability
~1e-4 under the random tiny model, out of reach of plain rejection sampling (the
tabular suites show that it says so).  `ars` per request: see below.

And sequences ended by end-of-generation tokens, not a stop rule, on a flat model whose
end tokens lie outside the top-K (`end_of_generation_support`), against P(s | c)
computed by llama.cpp itself.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from end_of_generation_support import assert_exact_with_end_tokens_in_the_tail
from llama_server_support import llama_server  # noqa: F401
from test_exactness import ALPHA, REJECT_BELOW

from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
from adaptrack_lsp.completion.lm.server import load_from_settings
from adaptrack_lsp.config import Settings
from adaptrack_lsp.evaluation.tasks import SequenceConstraint, chi_square

PROMPT = "import numpy as np\n\ndef scale(values, factor):\n    return np."
SAMPLES = 400
FIRST_RANKS = (0, 2, 6)
SECOND_RANKS = ((0, 1, 2), (300, 600, 1200), (5, 6, 10))


class Problem:
    """The sequences, their exact P(s | c) and GCD's distribution, from full distributions."""

    def __init__(self, lm):
        self.lm = lm
        self.prompt = lm.encode(PROMPT)
        lm.set_prompt(self.prompt, max_new_tokens=2)
        vocab = lm.vocab

        def ranked(path):
            full = lm.next_logprobs(path)
            order = [int(i) for i in np.argsort(-full, kind="stable") if not vocab.is_special(int(i)) and vocab.text(int(i)).strip()]
            return full, order

        root, root_order = ranked([])
        firsts = [root_order[r] for r in FIRST_RANKS]
        self.sequences: list[tuple[int, int]] = []
        self.probability: dict[tuple[int, int], float] = {}
        self.gcd: dict[tuple[int, int], float] = {}
        first_mass = math.fsum(math.exp(root[t]) for t in firsts)
        for first, ranks in zip(firsts, SECOND_RANKS, strict=True):
            after, order = ranked([first])
            seconds = [order[r] for r in ranks]
            second_mass = math.fsum(math.exp(after[u]) for u in seconds)
            for second in seconds:
                sequence = (first, second)
                self.sequences.append(sequence)
                self.probability[sequence] = math.exp(root[first] + after[second])
                self.gcd[sequence] = math.exp(root[first]) / first_mass * math.exp(after[second]) / second_mass
        total = math.fsum(self.probability.values())
        self.exact = {s: p / total for s, p in self.probability.items()}
        self.texts = {vocab.text(a) + vocab.text(b) for a, b in self.sequences}
        assert not {vocab.text(a) for a, _ in self.sequences} & self.texts  # a first token never ends a sequence
        self.constraint = SequenceConstraint(vocab, self.sequences, source="server exactness")

    def stop(self, text: str, checked: int) -> bool:
        return text in self.texts

    def decode(self, decoder: str, num_samples: int, seed: int, **options):
        request = DecodeRequest(
            prompt_ids=self.prompt, num_samples=num_samples, seed=seed, max_new_tokens=2, stop=self.stop, timeout_s=600, options=options
        )
        return get_decoder(decoder).decode(self.lm, self.constraint, request)


@pytest.fixture(scope="module")
def problem(llama_server) -> Problem:  # noqa: F811
    lm = load_from_settings(Settings(model="tiny", backend="server", endpoint=llama_server.url, server_top_logprobs=5))
    assert lm.connected, lm.connect_error
    return Problem(lm)


def counts(results) -> dict:
    found: dict = {}
    for result in results:
        assert result.status == "ok", (result.status, result.message)
        for sample in result.samples:
            assert sample.complete and sample.valid
            found[tuple(sample.token_ids)] = found.get(tuple(sample.token_ids), 0) + 1
    return found


def test_the_problem_needs_the_tail_and_separates_gcd_from_p_s_given_c(problem):
    top = problem.lm.next_top([])
    assert problem.sequences[6][0] not in set(top.ids.tolist())  # the rank-6 first token is in the tail
    assert 0.5 * sum(abs(problem.exact[s] - problem.gcd[s]) for s in problem.sequences) > 0.15


@pytest.mark.slow
@pytest.mark.parametrize("decoder", ["exact", "cars", "rsft"])
def test_exact_decoders_are_exact_per_request_over_the_server(problem, decoder):
    """One sample per request, a fresh prefix tree each (as ghost-text requests).  `ars`
    learns one invalid token per restart: on a fresh tree over this random model's
    6016-token vocabulary a sample takes thousands of restarts (minutes for the suite);
    it is checked per request on top-K nodes in test_exactness_top_k.py."""
    result = problem.decode(decoder, SAMPLES, seed=31, share_estimates=False)
    found = counts([result])
    assert sum(found.values()) == SAMPLES
    test = chi_square(found, problem.exact)
    assert test.p_value > ALPHA, f"{decoder}: chi2={test.statistic:.1f}, p={test.p_value:.2g}"


@pytest.mark.parametrize("decoder", ["exact", "cars"])
def test_exact_decoders_are_exact_per_request_of_five_samples_over_the_server(problem, decoder):
    """Five samples per request sharing one tree (a completion list); separate requests."""
    results = [problem.decode(decoder, 5, seed=4000 + index) for index in range(SAMPLES // 5)]
    found = counts(results)
    test = chi_square(found, problem.exact)
    assert test.p_value > ALPHA, f"{decoder}: chi2={test.statistic:.1f}, p={test.p_value:.2g}"
    assert chi_square(found, problem.gcd).p_value < REJECT_BELOW  # power: not GCD's distribution


def test_greedy_masking_follows_its_own_distribution_and_fails_p_s_given_c(problem):
    found = counts([problem.decode("constrained", 1000, seed=5, share_estimates=False)])
    assert chi_square(found, problem.gcd).p_value > ALPHA
    assert chi_square(found, problem.exact).p_value < REJECT_BELOW


def test_map_returns_the_argmax_over_the_server(problem):
    request = DecodeRequest(prompt_ids=problem.prompt, temperature=0.0, max_new_tokens=2, stop=problem.stop, timeout_s=120)
    result = get_decoder("map").decode(problem.lm, problem.constraint, request)
    assert tuple(result.samples[0].token_ids) == max(problem.exact, key=problem.exact.get)


def test_sequences_ended_by_end_of_generation_tokens_in_the_tail_are_exact(llama_server):  # noqa: F811
    """The end tokens lie in the tail (top-20 lists of a flat model); sequences end where
    llama.cpp ends generation (its `llama_vocab_is_eog` set, <|fim_pad|> included)."""
    lm = load_from_settings(Settings(model="tiny", backend="server", endpoint=llama_server.url))
    assert lm.connected and lm.dialect == "llamacpp", lm.connect_error
    assert_exact_with_end_tokens_in_the_tail(lm)


def test_the_server_says_where_it_ends_generation(llama_server):  # noqa: F811
    """Ids the tokenizer does not name an end but the server ends generation at are
    found at connect (each forced once) and end sequences here too."""
    from end_of_generation_support import reference

    from adaptrack_lsp.vocab import Vocabulary

    lm = load_from_settings(Settings(model="tiny", backend="server", endpoint=llama_server.url))
    named = lm.vocab
    lm.vocab = Vocabulary(named.token_bytes, [min(named.eos_ids)], named.size, named.special_ids)  # a tokenizer naming one end
    lm.connect()
    assert lm.vocab.eos_ids == frozenset(reference()[2])  # llama.cpp's end-of-generation ids, found by asking the server
