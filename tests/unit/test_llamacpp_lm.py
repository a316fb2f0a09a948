"""The llamacpp backend on the tiny model's GGUF: its vocabulary read from the GGUF, full
distributions, KV reuse between branches (one token per node), prompt reuse across edits
and documents, batches, and the KV cache running full."""

from __future__ import annotations

import numpy as np
import pytest
from llamacpp_support import HF_TOLERANCE, HF_TVD, TOLERANCE, close_enough, require_llama_cpp, straight_line, tvd

require_llama_cpp()

from adaptrack_lsp.completion.lm.base import ModelError
from adaptrack_lsp.completion.lm.llamacpp import load_llamacpp, tiny_gguf_path

from hf_support import PROMPT, max_diff, random_walk

SOURCE = (
    "import numpy as np\n"
    "import os\n\n\n"
    "def load(path):\n"
    "    with open(path) as handle:\n"
    "        data = handle.read()\n"
    "    return np.array([float(x) for x in data.split()])\n\n\n"
    "values = load(os.path.join('data', 'values.txt'))\n"
    "total = np.linalg."
)


@pytest.fixture(scope="module")
def lm():
    return load_llamacpp("tiny", max_sequences=256)


@pytest.fixture(scope="module")
def reference():
    return load_llamacpp("tiny")


@pytest.fixture(scope="module")
def hf():
    pytest.importorskip("transformers")
    from adaptrack_lsp.completion.lm.loading import load_model

    return load_model("tiny", dtype="float32")


# -- the vocabulary ---------------------------------------------------------------------
def test_the_vocabulary_comes_from_the_gguf_and_matches_the_tokenizer(lm, hf):
    from adaptrack_lsp.completion.context import PromptBuilder, detect_fim

    vocab = lm.vocab
    assert vocab.size == hf.vocab.size == 6016 and vocab.num_defined == hf.vocab.num_defined
    assert vocab.token_bytes == hf.vocab.token_bytes  # exact bytes, byte-level alphabet resolved
    ids = {name: hf.tokenizer.convert_tokens_to_ids(name) for name in ("<|endoftext|>", "<|im_end|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")}
    assert vocab.eos_ids == frozenset(ids.values())  # every end-of-generation id llama.cpp names
    assert hf.vocab.eos_ids <= vocab.eos_ids
    assert hf.tokenizer.convert_tokens_to_ids("<|fim_prefix|>") in vocab.special_ids
    assert lm.fim_format == detect_fim(hf.tokenizer)  # the GGUF's FIM ids, the family named
    assert lm.bos_ids == ()
    builder = PromptBuilder.for_model(lm)
    plan = builder.build("import numpy as np\nx = np.\ny = 2\n", len("import numpy as np\nx = np."))
    assert plan.fim == "qwen" and plan.prompt_ids[0] == lm.fim_format.prefix_id and plan.prompt_ids[-1] == lm.fim_format.middle_id
    assert plan.prompt_ids == PromptBuilder.for_model(hf).build("import numpy as np\nx = np.\ny = 2\n", len("import numpy as np\nx = np.")).prompt_ids


def test_token_bytes_equal_llama_cpp_detokenization_on_a_corpus(lm, hf):
    import sysconfig
    from pathlib import Path

    text = (Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py").read_text(encoding="utf-8")
    text += "x = 'é日本' + \"\\t\" * 3  # ünïcödé\r\n"
    ids = lm.encode(text)
    assert ids == hf.encode(text)
    # llama.cpp's pieces token by token (what it generates; partial UTF-8 included)
    assert lm.vocab.decode_bytes(ids) == lm.pieces(ids) == text.encode("utf-8")
    # its detokenizer agrees where it does not "clean up" spaces (for GPT-2 style
    # vocabularies it drops the space in ", 's" or " ." as Hugging Face's cleanup does,
    # which is why the vocabulary is read piece by piece)
    assert lm.detokenize(lm.encode("x = ['a', 'shorten'] .")) == b"x = ['a','shorten']."
    code = SOURCE + PROMPT
    assert lm.vocab.decode_bytes(lm.encode(code)) == lm.detokenize(lm.encode(code)) == code.encode("utf-8")


# -- distributions ---------------------------------------------------------------------------
def test_logprobs_are_full_distributions_equal_to_transformers(lm, hf):
    from hf_support import full_forward

    prompt = lm.encode(SOURCE)
    info = lm.set_prompt(prompt)
    assert info.length == len(prompt) and info.truncated == 0
    root = lm.next_logprobs([])
    assert root.dtype == np.float32 and root.shape == (lm.vocab.size,)
    assert np.isneginf(root[lm.vocab.num_defined :]).all()  # padded logits are impossible
    assert np.isfinite(root[: lm.vocab.num_defined]).all()
    assert abs(float(np.exp(root.astype(np.float64)).sum()) - 1.0) < 1e-4
    expected = full_forward(hf, prompt)
    assert max_diff(root, expected) <= HF_TOLERANCE and tvd(root, expected) <= HF_TVD
    path = lm.encode("norm(values)")
    expected = full_forward(hf, prompt + path)
    got = lm.next_logprobs(path)
    assert max_diff(got, expected) <= HF_TOLERANCE and tvd(got, expected) <= HF_TVD


# -- KV reuse between branches ----------------------------------------------------------------
def test_random_walk_feeds_one_token_per_node_and_matches_fresh_states(reference):
    lm = load_llamacpp("tiny", max_sequences=256)
    prompt = lm.encode(PROMPT)
    nodes, switched = random_walk(lm, prompt, switches=220, seed=11)
    assert switched >= 200
    assert lm.tokens_fed == len(prompt) + len(nodes) - 1  # every node: one token
    assert lm.evictions == 0 and max(len(path) for path in nodes) >= 6
    checked = list(nodes.items())[::3]
    worst = max(max_diff(logprobs, straight_line(reference, prompt, path)) for path, logprobs in checked)
    assert worst <= TOLERANCE, worst
    # the comparison is sensitive: a sibling's distribution is far from this one
    siblings = [p for p in nodes if len(p) == 1][:2]
    assert max_diff(nodes[siblings[0]], straight_line(reference, prompt, siblings[1])) > 100 * TOLERANCE


def test_with_few_sequences_branches_are_dropped_and_refed_but_results_stay_exact(reference):
    small = load_llamacpp("tiny", max_sequences=4, max_node_cache_bytes=0)
    prompt = small.encode(PROMPT)
    nodes, _ = random_walk(small, prompt, switches=40, seed=5)
    assert small.evictions > 0
    assert small.tokens_fed > len(prompt) + len(nodes) - 1  # dropped branches cost re-fed tokens
    assert all(close_enough(logprobs, straight_line(reference, prompt, path)) for path, logprobs in nodes.items())


def test_a_node_asked_again_costs_no_token_and_a_new_prompt_forgets_it(reference):
    fresh = load_llamacpp("tiny")
    prompt = fresh.encode(SOURCE)
    fresh.set_prompt(prompt)
    path = fresh.encode("norm(x)")
    first = [fresh.next_logprobs(path[:end]) for end in range(1, len(path) + 1)]
    assert fresh.tokens_fed == len(prompt) + len(path)
    assert fresh.set_prompt(prompt).reused == len(prompt)  # the same prompt: nothing fed
    again = [fresh.next_logprobs(path[:end]) for end in range(1, len(path) + 1)]
    assert fresh.tokens_fed == len(prompt) + len(path)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    # without the node cache a node asked again is one token (its parent's cells are held)
    uncached = load_llamacpp("tiny", max_node_cache_bytes=0)
    uncached.set_prompt(prompt)
    for end in range(1, len(path) + 1):
        uncached.next_logprobs(path[:end])
    fed = uncached.tokens_fed
    assert max_diff(uncached.next_logprobs(path), first[-1]) <= TOLERANCE  # one token, as before
    assert uncached.tokens_fed == fed + 1
    # a different prompt drops the nodes
    fresh.set_prompt(prompt + fresh.encode(" "))
    fed = fresh.tokens_fed
    fresh.next_logprobs(path[:3])
    assert fresh.tokens_fed == fed + 3


def test_through_the_prefix_tree_and_the_decoders_each_node_costs_one_token(lm):
    from adaptrack_lsp.completion import decoders
    from adaptrack_lsp.evaluation.tasks import SequenceConstraint

    eos = min(lm.vocab.eos_ids)
    names = ["linalg.norm(x)", "linalg.svd(x)", "linalg.matrix_rank(x)", "fft.fft(x)", "zeros_like(x)"]
    valid = [lm.encode(name) + [eos] for name in names]
    prompt = lm.encode(PROMPT)
    for name in ("adaptrack", "constrained", "exact", "cars", "beam", "map"):
        backend = load_llamacpp("tiny", max_node_cache_bytes=0)
        result = decoders.get_decoder(name).decode(
            backend, SequenceConstraint(backend.vocab, valid),
            decoders.DecodeRequest(prompt_ids=prompt, num_samples=8, seed=0, max_new_tokens=16),
        )
        counters = result.counters
        assert result.samples and all(s.valid and s.complete for s in result.samples), name
        assert {tuple(s.token_ids) for s in result.samples} <= {tuple(v) for v in valid}
        assert counters.tokens_fed == len(prompt) + counters.lm_calls - 1, name
        assert backend.tokens_fed == counters.tokens_fed
        backend.close()


def test_a_batch_of_paths_is_one_decode_of_one_token_each(reference):
    batch = load_llamacpp("tiny", max_node_cache_bytes=0)
    prompt = batch.encode(PROMPT)
    batch.set_prompt(prompt)
    root = batch.next_logprobs([])
    top = [int(t) for t in np.argsort(-root)[:5]]
    calls, fed = batch.forward_calls, batch.tokens_fed
    firsts = batch.next_logprobs_batch([[t] for t in top] + [[top[0]]])  # a repeat is evaluated once
    assert batch.forward_calls == calls + 1 and batch.tokens_fed == fed + 5
    assert np.array_equal(firsts[0], firsts[-1])
    # siblings under one parent, a grandchild and the root, in one call
    paths = [[top[0], top[1]], [top[0], top[2]], [top[1], top[0]], [], [top[0], top[1], top[3]]]
    results = batch.next_logprobs_batch(paths)
    assert batch.forward_calls == calls + 2 and batch.tokens_fed == fed + 5 + 3 + 2
    for path, logprobs in zip(paths, results):
        assert close_enough(logprobs, straight_line(reference, prompt, path))


# -- prompts ----------------------------------------------------------------------------------
def test_small_edit_reuses_the_prompt_cache(reference):
    lm = load_llamacpp("tiny")
    first = lm.encode(SOURCE)
    info = lm.set_prompt(first, cache_key="file:///a.py")
    assert info.reused == 0 and lm.tokens_fed == len(first)
    lm.next_logprobs(lm.encode("svd(x"))  # a decode wandered down a path; then the user typed
    second = lm.encode(SOURCE + "norm(")
    before = lm.tokens_fed
    info = lm.set_prompt(second, cache_key="file:///a.py")
    fed = lm.tokens_fed - before
    assert info.length == len(second) and info.reused >= len(first) - 2
    assert fed == len(second) - info.reused and fed <= 8
    assert close_enough(lm.next_logprobs([]), straight_line(reference, second, []))  # fed in two parts
    path = lm.encode("x)")
    assert close_enough(lm.next_logprobs(path), straight_line(reference, second, path))


def test_documents_keep_their_prompts_in_an_lru_with_saved_states(reference):
    lm = load_llamacpp("tiny", max_cached_prompts=2)
    a, b, c = (lm.encode(f"# document {name}\n" + SOURCE) for name in "abc")
    lm.set_prompt(a, cache_key="a")
    lm.set_prompt(b, cache_key="b")  # a's state goes to host memory
    fed = lm.tokens_fed
    x = lm.encode("x")
    info = lm.set_prompt(a + x, cache_key="a")
    assert info.reused == len(a) and lm.tokens_fed == fed + 1  # restored, not re-fed
    assert close_enough(lm.next_logprobs([]), straight_line(reference, a + x, []))
    path = lm.encode("(y)")
    assert close_enough(lm.next_logprobs(path), straight_line(reference, a + x, path))
    lm.set_prompt(c, cache_key="c")  # evicts b (least recently used)
    assert lm.set_prompt(a + x, cache_key="a").reused == len(a + x)
    assert lm.set_prompt(b, cache_key="b").reused == 0  # b was evicted (and now c is)
    assert lm.set_prompt(c, cache_key="c").reused == 0
    # a budget of 0 bytes for saved states: switching documents re-feeds
    tight = load_llamacpp("tiny", max_saved_prompt_bytes=0)
    tight.set_prompt(a, cache_key="a")
    tight.set_prompt(b, cache_key="b")
    assert tight.set_prompt(a, cache_key="a").reused == 0
    assert max_diff(tight.next_logprobs([]), straight_line(reference, a, [])) <= TOLERANCE  # fed whole again


def test_long_prompts_are_left_truncated_and_empty_ones_start_a_document(reference):
    short = load_llamacpp("tiny", context_length=40)
    assert short.max_context == 40
    prompt = short.encode(SOURCE)
    info = short.set_prompt(prompt, max_new_tokens=8)
    assert info.length == 32 and info.truncated == len(prompt) - 32 and short.tokens_fed == 32
    assert max_diff(short.next_logprobs([]), straight_line(reference, prompt[-32:], [])) <= TOLERANCE
    with pytest.raises(ModelError, match="exceeds the context"):
        short.next_logprobs([5] * 9)
    assert short.set_prompt([]).length == 1
    start = min(short.vocab.eos_ids)  # the tiny GGUF's BOS is its end-of-text token
    assert max_diff(short.next_logprobs([]), straight_line(reference, [start], [])) <= TOLERANCE


def test_bad_calls(reference):
    fresh = load_llamacpp("tiny")
    with pytest.raises(ModelError, match="set_prompt"):
        fresh.next_logprobs([5])
    fresh.set_prompt(fresh.encode("a = 1"))
    with pytest.raises(ValueError, match="outside"):
        fresh.next_logprobs([fresh.vocab.num_defined])  # a padding id cannot be fed
    with pytest.raises(ValueError, match="outside"):
        fresh.set_prompt([-1])
    with pytest.raises(ValueError, match="no room"):
        fresh.set_prompt([5], max_new_tokens=fresh.max_context)


def test_a_full_kv_cache_drops_branches_and_then_says_what_to_raise(reference):
    cramped = load_llamacpp("tiny", context_length=64, tree_cells=0, max_node_cache_bytes=0)
    assert cramped.engine.kv_cells >= 64
    prompt = cramped.encode(SOURCE)[-40:]
    cramped.set_prompt(prompt)
    rng = np.random.default_rng(0)
    paths = [list(rng.integers(100, 5000, size=6)) for _ in range(40)]  # 240 cells wanted
    for path in paths:
        logprobs = cramped.next_logprobs(path)
    assert cramped.evictions > 0
    assert close_enough(logprobs, straight_line(reference, prompt, paths[-1]))
    with pytest.raises(ModelError, match="exceeds the context"):
        cramped.next_logprobs([5] * 30)


def test_the_tiny_gguf_is_built_once_in_the_cache():
    path = tiny_gguf_path()
    assert path.is_file() and path.suffix == ".gguf"
    assert tiny_gguf_path() == path
