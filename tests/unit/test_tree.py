"""Prefix tree mechanics: one LM call per node, Q bookkeeping, budgets and bad input."""

import math

import numpy as np
import pytest

from adaptrack_lsp.completion.decoders import DecodeCancelled, DecodeRequest, get_decoder
from adaptrack_lsp.completion.lm.base import ModelError
from adaptrack_lsp.completion.lm.tabular import TabularLM
from adaptrack_lsp.completion.tree import PrefixTree
from adaptrack_lsp.constrainers.base import TokenConstraint, Unconstrained
from adaptrack_lsp.vocab import Vocabulary


class WordsConstraint(TokenConstraint):
    """Token sequences that are prefixes of the given token-name sequences."""

    def __init__(self, vocab, words):
        self.vocab = vocab
        self.words = [tuple(w) for w in words]

    def initial_state(self):
        return ()

    def advance(self, state, token_id):
        new = state + (self.vocab.names[token_id],)
        return new if any(w[: len(new)] == new for w in self.words) else None

    def mask(self, state):
        return np.array([self.advance(state, t) is not None for t in range(self.vocab.size)])


@pytest.fixture
def vocab():
    return Vocabulary.from_strings(["a", "b", "c", "$"], "$")


def uniform_lm(vocab, length=3):
    def conditional(path):
        if len(path) >= length:
            return [0, 0, 0, 1.0]
        return [1 / 3, 1 / 3, 1 / 3, 0]

    return TabularLM(vocab, conditional=conditional)


def test_each_node_is_evaluated_once_across_shared_samples(vocab):
    lm = uniform_lm(vocab)
    constraint = WordsConstraint(vocab, [("a", "b", "c", "$"), ("c", "c", "c", "$")])
    result = get_decoder("adaptrack").decode(lm, constraint, DecodeRequest(prompt_ids=[], num_samples=500, seed=3))
    assert {s.text for s in result.samples} == {"abc", "ccc"}
    # the valid paths have 1 + 3 + 3 internal nodes; no node is asked twice
    assert result.counters.lm_calls <= 7
    assert result.counters.tokens_fed == result.counters.lm_calls - 1  # empty prompt, root feeds nothing


def test_q_is_exact_after_full_exploration(vocab):
    lm = uniform_lm(vocab)
    constraint = WordsConstraint(vocab, [("a", "b", "c", "$"), ("c", "c", "c", "$")])
    request = DecodeRequest(prompt_ids=[], num_samples=300, seed=0)
    tree = PrefixTree(lm, constraint, request)
    from adaptrack_lsp.completion.decoders.adaptrack import backtrack_sample

    rng = np.random.default_rng(0)
    for _ in range(300):
        backtrack_sample(tree, rng)
    # P(c) = 2 valid sequences of probability (1/3)^3 each
    assert math.isclose(tree.root.q, 2 / 27, rel_tol=1e-6)  # the LM interface is float32


def test_no_valid_completion_is_reported_not_looped(vocab):
    lm = uniform_lm(vocab)
    constraint = WordsConstraint(vocab, [("a", "a", "a", "a", "$")])  # needs 4 tokens, LM ends at 3
    for name in ["adaptrack", "constrained"]:
        result = get_decoder(name).decode(lm, constraint, DecodeRequest(prompt_ids=[], num_samples=4, seed=1))
        assert result.samples == []
        assert result.status in {"no_valid_completion", "failed"}
    result = get_decoder("adaptrack").decode(lm, constraint, DecodeRequest(prompt_ids=[], num_samples=4, seed=1))
    assert result.status == "no_valid_completion" and "no valid completion" in result.message


def test_max_new_tokens_gives_flagged_partial_result(vocab):
    lm = uniform_lm(vocab, length=10)
    result = get_decoder("adaptrack").decode(lm, Unconstrained(vocab), DecodeRequest(prompt_ids=[], max_new_tokens=4, seed=1))
    assert result.status == "partial"
    assert not result.samples[0].complete and len(result.samples[0].token_ids) == 4


def test_cancellation_raises_between_lm_calls(vocab):
    lm = uniform_lm(vocab, length=10)
    calls = {"n": 0}

    def cancelled():
        calls["n"] += 1
        return calls["n"] > 3

    with pytest.raises(DecodeCancelled):
        get_decoder("adaptrack").decode(lm, Unconstrained(vocab), DecodeRequest(prompt_ids=[], cancelled=cancelled))


def test_time_budget_returns_partial(vocab):
    lm = uniform_lm(vocab, length=10)
    result = get_decoder("adaptrack").decode(
        lm, Unconstrained(vocab), DecodeRequest(prompt_ids=[], timeout_s=0.0, max_new_tokens=8)
    )
    assert result.status == "partial" and "time budget" in result.message


def test_nan_logits_raise_model_error(vocab):
    class NaNLM(TabularLM):
        def next_logprobs(self, path):
            return np.full(self.vocab.size, np.nan, dtype=np.float32)

    lm = NaNLM(vocab, default=[0.25] * 4)
    with pytest.raises(ModelError):
        get_decoder("adaptrack").decode(lm, Unconstrained(vocab), DecodeRequest(prompt_ids=[]))


def test_temperature_zero_is_greedy_and_deterministic(vocab):
    def conditional(path):
        return [0.5, 0.3, 0.2, 0.0] if len(path) < 2 else [0, 0, 0, 1.0]

    lm = TabularLM(vocab, conditional=conditional)
    constraint = WordsConstraint(vocab, [("b", "a", "$"), ("c", "c", "$")])
    texts = set()
    for seed in range(5):
        result = get_decoder("adaptrack").decode(lm, constraint, DecodeRequest(prompt_ids=[], temperature=0, seed=seed))
        texts.add(result.samples[0].text)
    assert texts == {"ba"}


def test_temperature_flattens_conditionals(vocab):
    def conditional(path):
        return [0.8, 0.2, 0.0, 0.0] if not path else [0, 0, 0, 1.0]

    lm = TabularLM(vocab, conditional=conditional)
    request = DecodeRequest(prompt_ids=[], num_samples=4000, seed=5, temperature=2.0)
    result = get_decoder("adaptrack").decode(lm, Unconstrained(vocab), request)
    share_a = sum(s.text == "a" for s in result.samples) / 4000
    expected = 0.8**0.5 / (0.8**0.5 + 0.2**0.5)  # 2/3
    assert abs(share_a - expected) < 0.03
    # log P(s) is reported at temperature 1
    assert any(math.isclose(s.logprob, math.log(0.8), rel_tol=1e-5) for s in result.samples if s.text == "a")


def test_cache_key_reaches_the_model(vocab):
    class KeyedLM(TabularLM):
        def set_prompt(self, prompt_ids, max_new_tokens=0, cache_key=None):
            self.keys.append(cache_key)
            return super().set_prompt(prompt_ids, max_new_tokens)

    keyed = KeyedLM(vocab, conditional=uniform_lm(vocab)._conditional)
    keyed.keys = []
    for lm in (keyed, uniform_lm(vocab)):
        request = DecodeRequest(prompt_ids=[0, 1], num_samples=2, seed=1, cache_key="file:///a.py")
        result = get_decoder("adaptrack").decode(lm, Unconstrained(vocab), request)
        assert len(result.samples) == 2
        assert result.counters.prompt_tokens_fed == 2
    assert keyed.keys == ["file:///a.py"]


def test_two_level_draw_on_a_large_vocabulary_follows_the_weights(vocab):
    from scipy.stats import chisquare

    tree = PrefixTree(uniform_lm(vocab), Unconstrained(vocab), DecodeRequest(prompt_ids=[]))
    weights = np.zeros(20_000)
    chosen = np.array([3, 1023, 1024, 5000, 19_999])  # block edges and the last token
    weights[chosen] = [0.1, 0.2, 0.3, 0.15, 0.25]
    rng = np.random.default_rng(7)
    draws = [tree.draw(weights, rng) for _ in range(20_000)]
    assert set(draws) <= set(chosen.tolist())
    counts = np.array([draws.count(int(i)) for i in chosen])
    assert chisquare(counts, weights[chosen] * len(draws)).pvalue > 1e-3
    # the same test rejects a draw that ignores the weights
    uniform = np.full(len(chosen), len(draws) / len(chosen))
    assert chisquare(uniform, weights[chosen] * len(draws)).pvalue < 1e-9


def test_very_unlikely_valid_tokens_keep_their_probability(vocab):
    # "c" has probability e^-120: far below float32's range, but it is the only valid token
    tiny = math.exp(-120)

    def conditional(path):
        return [0.5 - tiny / 2, 0.5 - tiny / 2, tiny, 0.0] if not path else [0, 0, 0, 1.0]

    lm = TabularLM(vocab, conditional=conditional)
    constraint = WordsConstraint(vocab, [("c", "$")])
    for name in ["constrained", "adaptrack"]:
        result = get_decoder(name).decode(lm, constraint, DecodeRequest(prompt_ids=[], seed=0))
        assert [s.text for s in result.samples] == ["c"], name
        assert math.isclose(result.samples[0].logprob, -120.0, rel_tol=1e-5)
    for name in ["exact", "cars", "ars", "rsft", "map"]:  # every decoder that checks or learns
        result = get_decoder(name).decode(lm, constraint, DecodeRequest(prompt_ids=[], seed=0))
        assert [s.text for s in result.samples] == ["c"], name


def test_pruned_tokens_form_a_tail_that_is_never_lost(vocab):
    """Without validity checks only the tokens within `prune_logprob` nats of the best are
    candidates; the rest keep their mass as a tail (Q = 1), and expanding it asks the
    model again and restores every token at its exact probability."""
    tiny = math.exp(-40)

    def conditional(path):
        return [1.0 - 3 * tiny, tiny, tiny, tiny] if not path else [0, 0, 0, 1.0]

    lm = TabularLM(vocab, conditional=conditional)
    tree = PrefixTree(lm, Unconstrained(vocab), DecodeRequest(prompt_ids=[]))
    tree.evaluate(tree.root)
    assert tree.root.candidates.tolist() == [0]
    assert math.isclose(tree.root.tail_mass, 3 * tiny, rel_tol=1e-12) and tree.root.tail_q == 1.0
    assert math.isclose(tree.root.q, 1.0, rel_tol=1e-12)  # Q counts the tail as possibly valid
    calls = tree.counters.lm_calls
    new = tree.expand_tail(tree.root)
    assert tree.root.candidates[new].tolist() == [1, 2, 3]
    assert np.allclose(tree.root.probs[new], tiny, rtol=1e-12)
    assert tree.counters.lm_calls == calls + 1 and tree.counters.tail_evaluations == 1
    assert tree.root.tail_mass == 0.0 and tree.expand_tail(tree.root).size == 0


def test_top_p_validity_stops_after_the_token_that_reaches_p(vocab):
    """The paper's rule token by token: with P = .5/.3/.15/.05 and every token valid,
    p = 0.6 is reached after the second token (.8 / (.8 + .2)); the two others count as
    invalid, even though they fit in one chunk of checks."""
    lm = TabularLM(vocab, conditional=lambda path: [0.5, 0.3, 0.05, 0.15] if not path else [0, 0, 0, 1.0])
    tree = PrefixTree(lm, Unconstrained(vocab), DecodeRequest(prompt_ids=[]))
    tree.check_top_p(tree.root, 0.6)
    verdicts = dict(zip(tree.root.candidates.tolist(), tree.root.validity.tolist()))
    assert verdicts == {0: 1, 1: 1, 2: 0, 3: 0}
    assert tree.counters.constraint_checks == 2
    assert math.isclose(tree.root.q, 0.8)
    full = PrefixTree(lm, Unconstrained(vocab), DecodeRequest(prompt_ids=[]))
    full.check_top_p(full.root, 1.0)
    assert math.isclose(full.root.q, 1.0)


@pytest.mark.parametrize("tail_share", [0.3, 1e-4, 1e-9, 0.0])
def test_tail_mass_of_float32_distributions_equals_the_sum_over_the_tail(tail_share):
    """A float32 distribution (the engines' kind): the tail's mass is the total less the
    kept tokens' (one exp over the vocabulary); it must equal the sum over the tail
    computed here in float64, token by token (to float32's precision: the engines' exp),
    also where that subtraction would lose it (a tail of 1e-9) and where the only tail
    tokens lie below float32's exp range (a tail of 2e-40, not 0)."""
    names = [f"t{i}" for i in range(300)] + ["$"]
    vocab = Vocabulary.from_strings(names, "$")
    rng = np.random.default_rng(7)
    head = rng.dirichlet(np.ones(20))
    values = np.full(vocab.size, -np.inf)
    values[:20] = np.log(head * (1.0 - tail_share))
    if tail_share:
        tail = rng.dirichlet(np.ones(200))
        values[20:220] = np.log(tail * tail_share)
    values[220:260] = -95.0  # below FLOAT32_EXP_FLOOR: float32 exp gives 0
    floats = values.astype(np.float32)

    class Float32LM(TabularLM):
        def next_logprobs(self, path):
            return floats.copy()

    lm = Float32LM(vocab, conditional=lambda path: [1.0 / vocab.size] * vocab.size)
    tree = PrefixTree(lm, Unconstrained(vocab), DecodeRequest(prompt_ids=[]), prune_logprob=6.0)
    tree.evaluate(tree.root)
    kept = set(tree.root.candidates.tolist())
    assert kept and kept < set(range(220))
    reference = math.fsum(math.exp(float(v)) for i, v in enumerate(floats.tolist()) if i not in kept and v > -np.inf)
    assert math.isclose(tree.root.tail_mass, reference, rel_tol=1e-7, abs_tol=0.0)
    expected = [math.exp(float(floats[i])) for i in tree.root.candidates.tolist()]
    assert np.allclose(tree.root.probs, expected, rtol=1e-6, atol=0.0)


@pytest.mark.parametrize("name", ["adaptrack", "exact", "constrained", "map", "beam"])
def test_a_finished_decode_leaves_no_nodes_for_the_garbage_collector(vocab, name):
    """A node and its children refer to each other; a tree left so would keep its
    vocabulary-sized arrays until the next full collection (MB per request in a server).
    `result` breaks the cycles: with the collector off, no node outlives the decode."""
    import gc

    from adaptrack_lsp.completion.tree import Node

    lm = uniform_lm(vocab)
    constraint = WordsConstraint(vocab, [("a", "b", "c", "$"), ("c", "c", "c", "$")])
    gc.collect()
    gc.disable()
    try:
        result = get_decoder(name).decode(lm, constraint, DecodeRequest(prompt_ids=[], num_samples=3, seed=1))
        left = sum(type(o) is Node for o in gc.get_objects())
    finally:
        gc.enable()
    assert result.samples
    assert left == 0


def test_every_greedy_choice_is_the_argmax_of_p_times_q():
    """Greedy AdapTrack asks for the argmax of P·Q at every ancestor whose Q changed;
    `choose` answers from the last choice while the chosen weight stays above the others'
    best.  Each answer is checked here against ``np.argmax(probs * child_q)`` over random
    models and constraints with many dead ends (so Q falls and choices move)."""
    vocab = Vocabulary.from_strings(["a", "b", "c", "d", "e", "f", "$"], "$")
    checked = {"choices": 0, "kept": 0}
    choose = PrefixTree.choose

    def checked_choose(tree, node, rng, weighting="q", **kwargs):
        before = node.greedy_choice
        index = choose(tree, node, rng, weighting, **kwargs)
        if tree.greedy and weighting == "q" and kwargs.get("exclude") is None and not node.partial and index is not None:
            weights = node.probs * node.child_q
            assert index == int(np.argmax(weights)), (index, weights)
            checked["choices"] += 1
            checked["kept"] += int(node.greedy_choice is before and before is not None)
        return index

    for seed in range(60):
        rng = np.random.default_rng(seed)
        tables = {}

        def conditional(path, rng=rng, tables=tables):
            key = tuple(path)
            if key not in tables:
                weights = rng.gamma(0.3, size=7)  # peaked, with near ties now and then
                weights[6] += 1.0 if len(path) >= 4 else 0.0
                tables[key] = weights / weights.sum()
            return tables[key]

        words = {tuple(rng.choice(list("abcdef"), size=int(rng.integers(2, 5)))) + ("$",) for _ in range(6)}
        constraint = WordsConstraint(vocab, words)
        lm = TabularLM(vocab, conditional=conditional)
        PrefixTree.choose = checked_choose
        try:
            result = get_decoder("adaptrack").decode(lm, constraint, DecodeRequest(prompt_ids=[], temperature=0, seed=seed, max_new_tokens=5))
        finally:
            PrefixTree.choose = choose
        assert result.samples and tuple(result.samples[0].text) + ("$",) in words
    assert checked["choices"] > 200 and checked["kept"] > 50, checked
