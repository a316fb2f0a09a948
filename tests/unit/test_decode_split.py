"""Where a decode's time goes (`Counters.split`): the parts are measured where they
happen and never overlap, re-fed tokens and branch switches are counted as the backends
really fed and switched (counted here independently of the counters under test)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
from adaptrack_lsp.completion.decoding import Counters
from adaptrack_lsp.completion.lm.tabular import TabularLM
from adaptrack_lsp.constrainers.base import Unconstrained
from adaptrack_lsp.vocab import Vocabulary

PARTS = ("prompt", "forward", "kv", "distribution", "constraint", "other")
#: seconds each call of the slow table sleeps: far above the tree's own work per node
SLEEP = 0.02


def assert_parts_cover_the_wall(counters: Counters) -> None:
    parts = counters.split()
    assert tuple(parts) == PARTS
    assert all(value >= 0.0 for value in parts.values()), parts
    measured = sum(value for name, value in parts.items() if name != "other")
    assert measured <= counters.wall_seconds + 1e-3, (parts, counters.wall_seconds)  # no part counted twice
    assert counters.prompt_forward_seconds <= counters.prompt_seconds
    assert counters.forward_seconds + counters.kv_seconds <= counters.lm_seconds + 1e-6


class SlowTable(TabularLM):
    """A table whose every node evaluation takes SLEEP seconds (a network's time), with
    no `forward_seconds` of its own: the tree counts the whole call as forward."""

    def next_logprobs(self, path):
        time.sleep(SLEEP)
        return super().next_logprobs(path)


def test_lm_time_is_forward_and_never_distribution_or_other():
    vocab = Vocabulary([b"a", b"b", b"c", b""], eos_ids=[3])
    lm = SlowTable(vocab, default=[0.4, 0.3, 0.2, 0.1])
    request = DecodeRequest(prompt_ids=[0, 1], num_samples=1, temperature=0.0, max_new_tokens=4, seed=0)
    counters = get_decoder("adaptrack").decode(lm, Unconstrained(vocab), request).counters
    assert counters.lm_calls >= 4
    assert counters.forward_seconds >= SLEEP * counters.lm_calls
    split = counters.split()
    assert split["distribution"] < SLEEP and split["other"] < SLEEP, split  # a sleep would show in either
    assert_parts_cover_the_wall(counters)


# -- transformers: the node store spares re-feeding; without it, switches re-feed ----------
@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from adaptrack_lsp.completion.lm.loading import load_model

    return load_model("tiny", dtype="float32")


def walk(tree, steps: int, seed: int) -> int:
    """Evaluate `steps` new nodes, jumping to a random evaluated node a third of the time;
    returns the jumps (each a branch switch for the backend)."""
    rng = np.random.default_rng(seed)
    tree.evaluate(tree.root)
    evaluated, last, jumps = [tree.root], tree.root, 0
    while steps:
        node = evaluated[int(rng.integers(len(evaluated)))] if rng.random() < 0.35 else last
        order = np.argsort(-node.probs)[:8]
        child = tree.child(node, int(order[int(rng.integers(order.size))]), require_valid=False)
        if child.evaluated or child.leaf:
            continue
        jumps += node is not last
        tree.evaluate(child)
        evaluated.append(child)
        last, steps = child, steps - 1
    return jumps


@pytest.mark.parametrize("store", [True, False])
def test_transformers_counts_branch_switches_and_refed_tokens(tiny, store):
    from adaptrack_lsp.completion.lm.hf import HFLanguageModel
    from adaptrack_lsp.completion.tree import PrefixTree

    from hf_support import PROMPT

    lm = HFLanguageModel(tiny.model, tiny.tokenizer, vocab=tiny.vocab, max_node_cache_bytes=(64 << 20) if store else 0)
    prompt = tiny.encode(PROMPT)
    tree = PrefixTree(lm, Unconstrained(tiny.vocab), DecodeRequest(prompt_ids=prompt, max_new_tokens=12), prune_logprob=8.0)
    jumps = walk(tree, 40, seed=4)
    counters = tree.counters
    counters.wall_seconds = time.perf_counter() - tree.started
    nodes = counters.lm_calls - 1  # the root's distribution came with the prompt
    tree_tokens = lm.tokens_fed - len(prompt)  # what the backend really fed after the prompt
    assert counters.prompt_tokens_fed == len(prompt)
    assert counters.refed_tokens == tree_tokens - nodes
    if store:
        assert counters.refed_tokens == 0
    else:
        assert counters.refed_tokens > 0
    assert 0 < counters.branch_switches <= jumps
    assert counters.kv_seconds > 0.0 and counters.distribution_seconds > 0.0
    assert_parts_cover_the_wall(counters)


# -- llama.cpp: a switch is one sequence copy, and feeds nothing again ---------------------
def test_llamacpp_branch_switches_are_sequence_copies_and_feed_one_token_per_node(monkeypatch):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (`.ci/install-llama-cpp` builds it)")
    from adaptrack_lsp.completion.lm.llamacpp import load_llamacpp
    from adaptrack_lsp.completion.tree import PrefixTree

    from hf_support import PROMPT

    lm = load_llamacpp("tiny", max_node_cache_bytes=0)
    copies = []
    original = lm.engine.seq_cp
    monkeypatch.setattr(lm.engine, "seq_cp", lambda *args: (copies.append(args), original(*args))[1])
    prompt = lm.encode(PROMPT)
    tree = PrefixTree(lm, Unconstrained(lm.vocab), DecodeRequest(prompt_ids=prompt, max_new_tokens=12), prune_logprob=8.0)
    walk(tree, 40, seed=9)
    counters = tree.counters
    counters.wall_seconds = time.perf_counter() - tree.started
    assert counters.tokens_fed - counters.prompt_tokens_fed == counters.lm_calls - 1
    assert counters.refed_tokens == 0
    assert counters.branch_switches == len(copies) > 1  # the first node copies the prompt, later jumps more
    assert counters.kv_seconds > 0.0 and counters.prompt_forward_seconds > 0.0
    assert_parts_cover_the_wall(counters)
    lm.close()
