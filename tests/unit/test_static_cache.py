"""The static-KV-cache path on the tiny model (CPU, eager): every node's log-probabilities
equal the dynamic path's and a fresh forward pass, batches equal one-by-one calls, prompt
reuse and bucket changes stay exact, and unsupported architectures fall back."""

from __future__ import annotations

import logging

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from adaptrack_lsp.completion.lm import static_cache
from adaptrack_lsp.completion.lm.base import ModelError
from adaptrack_lsp.completion.lm.hf import HFLanguageModel
from adaptrack_lsp.completion.lm.loading import load_model
from adaptrack_lsp.completion.lm.static_cache import (
    BUCKET,
    StaticCacheLanguageModel,
    bucket_capacity,
    use_static_cache,
)

from hf_support import PROMPT, TOLERANCE, max_diff, random_walk
from hf_support import full_forward as reference


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", dtype="float32")


def static_lm(tiny, **options) -> StaticCacheLanguageModel:
    lm = StaticCacheLanguageModel(tiny.model, tiny.tokenizer, vocab=tiny.vocab, **options)
    assert lm.static, lm.static_reason
    return lm


def dynamic_lm(tiny, **options) -> HFLanguageModel:
    return HFLanguageModel(tiny.model, tiny.tokenizer, vocab=tiny.vocab, **options)


def worst_against(lm, prompt, nodes) -> float:
    """Largest difference between `nodes` (path -> logprobs) and `lm` evaluating the same paths."""
    lm.set_prompt(prompt)
    return max(max_diff(logprobs, lm.next_logprobs(list(path))) for path, logprobs in nodes.items())


# -- the random walk ----------------------------------------------------------------------
def test_static_random_walk_equals_the_dynamic_path_and_fresh_passes(tiny):
    lm = static_lm(tiny)
    prompt = tiny.encode(PROMPT)
    nodes, switched = random_walk(lm, prompt, switches=220, seed=11)
    assert switched >= 200 and max(len(p) for p in nodes) >= 6
    assert lm.tokens_fed == len(prompt) + len(nodes) - 1  # one token per node, prompt once
    assert worst_against(dynamic_lm(tiny), prompt, nodes) <= TOLERANCE
    sample = list(nodes.items())[::7]
    worst = max(max_diff(logprobs, reference(lm, prompt + list(path))) for path, logprobs in sample)
    assert worst <= TOLERANCE, worst
    # the comparison is sensitive: a sibling's distribution is far from this one
    siblings = [p for p in nodes if len(p) == 1][:2]
    assert max_diff(nodes[siblings[0]], reference(lm, prompt + list(siblings[1]))) > 100 * TOLERANCE


@pytest.mark.parametrize("graph_steps", [False, True])
def test_without_the_node_store_branch_moves_refeed_and_stay_exact(tiny, graph_steps):
    lm = static_lm(tiny, max_node_cache_bytes=0, cuda_graphs=graph_steps)
    prompt = tiny.encode(PROMPT)
    nodes, _ = random_walk(lm, prompt, switches=40, seed=5)
    assert lm.tokens_fed > len(prompt) + len(nodes) - 1
    assert not lm._node_kv
    assert worst_against(dynamic_lm(tiny), prompt, nodes) <= TOLERANCE


def test_paths_beyond_the_bucket_move_to_a_larger_one(tiny):
    lm = static_lm(tiny)
    prompt = tiny.encode(PROMPT)
    lm.set_prompt(prompt, max_new_tokens=0)
    first = lm._current.capacity
    path: list[int] = []
    results = {}
    for _ in range(first - len(prompt) + 8):  # walk greedily past the first bucket
        logprobs = lm.next_logprobs(path)
        results[tuple(path)] = logprobs
        path.append(int(np.argmax(logprobs[: tiny.vocab.num_defined])))
    assert lm._current.capacity > first
    checked = [p for p in results if len(p) % 37 == 0 or len(p) > first - len(prompt) - 3]
    worst = max(max_diff(results[p], reference(lm, prompt + list(p))) for p in checked)
    assert worst <= TOLERANCE, worst


# -- batches ------------------------------------------------------------------------------
def test_a_batch_equals_one_by_one_calls_in_one_forward_pass(tiny):
    lm = static_lm(tiny)
    reference_lm = dynamic_lm(tiny)
    prompt = tiny.encode(PROMPT)
    lm.set_prompt(prompt)
    root = lm.next_logprobs([])
    top = [int(t) for t in np.argsort(-root)[:5]]
    # k samples' first steps: five children of the root in one forward pass
    calls, fed = lm.forward_calls, lm.tokens_fed
    first = lm.next_logprobs_batch([[t] for t in top])
    assert lm.forward_calls == calls + 1 and lm.tokens_fed == fed + 5
    # beam-like steps: children of different stored branches (ancestors from the node store),
    # of the current path, and the root (no forward pass)
    lm.next_logprobs([top[0], top[1]])  # the current path now ends at a depth-2 node
    paths = [[top[0], top[1], top[2]], [top[1], top[0]], [top[2], top[3]], [top[0], top[4]], [], [top[3], top[3]]]
    calls = lm.forward_calls
    second = lm.next_logprobs_batch(paths)
    assert lm.forward_calls == calls + 1
    reference_lm.set_prompt(prompt)
    for path, logprobs in zip([[t] for t in top] + paths, first + second):
        assert max_diff(logprobs, reference_lm.next_logprobs(path)) <= TOLERANCE, path
    # the batch stored its nodes: walking there afterwards feeds one token per new node
    fed = lm.tokens_fed
    assert (
        max_diff(lm.next_logprobs([top[2], top[3], top[0]]), reference_lm.next_logprobs([top[2], top[3], top[0]]))
        <= TOLERANCE
    )
    assert lm.tokens_fed == fed + 1


def test_batch_paths_without_stored_ancestors_go_one_by_one(tiny):
    lm = static_lm(tiny, max_node_cache_bytes=0)
    reference_lm = dynamic_lm(tiny)
    prompt = tiny.encode(PROMPT)
    lm.set_prompt(prompt)
    reference_lm.set_prompt(prompt)
    paths = [[11, 12, 13], [11, 14], [15], [16], [15, 17]]
    results = lm.next_logprobs_batch(paths)
    for path, logprobs in zip(paths, results):
        assert max_diff(logprobs, reference_lm.next_logprobs(path)) <= TOLERANCE, path
    with pytest.raises(ValueError, match="outside"):
        lm.next_logprobs_batch([[1], [tiny.vocab.size + 5]])


def test_large_batches_are_split_and_stay_exact(tiny):
    lm = static_lm(tiny)
    reference_lm = dynamic_lm(tiny)
    prompt = tiny.encode(PROMPT)
    lm.set_prompt(prompt)
    reference_lm.set_prompt(prompt)
    paths = [[t] for t in range(100, 120)]
    calls = lm.forward_calls
    results = lm.next_logprobs_batch(paths)
    assert lm.forward_calls == calls + 3  # 8 + 8 + 4 rows
    for path, logprobs in zip(paths, results):
        assert max_diff(logprobs, reference_lm.next_logprobs(path)) <= TOLERANCE, path


def test_the_graph_steps_run_eagerly_on_the_cpu_and_stay_exact(tiny):
    """The steps CUDA graphs replay (fixed inputs, padded rows writing the scratch slot)."""
    lm = static_lm(tiny, cuda_graphs=True)
    reference_lm = dynamic_lm(tiny)
    prompt = tiny.encode(PROMPT)
    nodes, _ = random_walk(lm, prompt, switches=60, seed=7)
    assert set(lm._current.graphs) == {1}
    lm.set_prompt(prompt)
    stored = [list(p) for p in nodes if len(p) >= 2][:3]
    paths = [p + [21] for p in stored] + [[30], [31]]  # 5 rows: padded to 8
    batch = lm.next_logprobs_batch(paths)
    batch += lm.next_logprobs_batch([[40], [41], [42]])  # 3 rows: padded to 4
    assert {1, 4, 8} <= set(lm._current.graphs)
    reference_lm.set_prompt(prompt)
    for path, logprobs in zip(paths + [[40], [41], [42]], batch):
        assert max_diff(logprobs, reference_lm.next_logprobs(path)) <= TOLERANCE, path
    assert worst_against(reference_lm, prompt, dict(list(nodes.items())[::5])) <= TOLERANCE
    # and the walk continues exactly after the padded batches
    assert max_diff(lm.next_logprobs(stored[0] + [21, 5]), reference_lm.next_logprobs(stored[0] + [21, 5])) <= TOLERANCE


# -- prompts ------------------------------------------------------------------------------
def test_prompt_reuse_across_edits_and_documents(tiny):
    lm = static_lm(tiny)
    prompt = tiny.encode(PROMPT)
    other = tiny.encode("import os\n\npath = os.path.join('a', 'b')\nos.")
    info = lm.set_prompt(prompt, max_new_tokens=8, cache_key="a.py")
    assert info.reused == 0
    random_walk(lm, prompt, switches=10, seed=1, cache_key="a.py")
    edited = prompt[:-3] + tiny.encode("value = np.")
    info = lm.set_prompt(edited, max_new_tokens=8, cache_key="a.py")
    assert info.reused == len(prompt) - 3
    assert max_diff(lm.next_logprobs([]), reference(lm, edited)) <= TOLERANCE
    fed = lm.tokens_fed
    assert lm.set_prompt(other, cache_key="b.py").reused == 0
    assert max_diff(lm.next_logprobs([5]), reference(lm, other + [5])) <= TOLERANCE
    info = lm.set_prompt(edited + [7], cache_key="a.py")  # back to the first document
    assert info.reused == len(edited)
    assert lm.tokens_fed == fed + len(other) + 1 + 1
    assert max_diff(lm.next_logprobs([9, 10]), reference(lm, edited + [7, 9, 10])) <= TOLERANCE
    # the same prompt again keeps the node store: [9] comes back from it, only 10 is fed
    fed = lm.tokens_fed
    assert lm.set_prompt(edited + [7], cache_key="a.py").reused == len(edited) + 1
    lm.next_logprobs([9, 10])
    assert lm.tokens_fed == fed + 1


def test_a_long_prompt_changes_bucket_and_prefills_in_chunks(tiny, monkeypatch):
    monkeypatch.setattr(static_cache, "PREFILL_CHUNK", 64)
    lm = static_lm(tiny)
    short = tiny.encode(PROMPT)
    long = (short * 12)[: BUCKET + 50]
    lm.set_prompt(short, max_new_tokens=16, cache_key="doc")
    small = lm._current.capacity
    calls = lm.forward_calls
    info = lm.set_prompt(long, max_new_tokens=16, cache_key="doc")
    assert lm._current.capacity > small == BUCKET
    assert info.reused == len(short)  # the short prompt is a prefix of the long one
    assert lm.forward_calls - calls == -(-(len(long) - len(short)) // 64)
    assert max_diff(lm.next_logprobs([3, 4]), reference(lm, long + [3, 4])) <= TOLERANCE


def test_bucket_capacity():
    assert bucket_capacity(10, None) == BUCKET
    assert bucket_capacity(BUCKET - 1, None) == BUCKET
    assert bucket_capacity(BUCKET, None) == 2 * BUCKET  # the scratch slot needs room
    assert bucket_capacity(100, 200) == 201


# -- decoders on the static path ----------------------------------------------------------
@pytest.mark.parametrize("decoder_name", ["adaptrack", "constrained", "exact"])
def test_decoders_give_the_same_samples_on_both_paths(tiny, decoder_name):
    from adaptrack_lsp.completion import decoders
    from adaptrack_lsp.evaluation import tasks

    decoder = decoders.get_decoder(decoder_name)
    eos = tiny.tokenizer.eos_token_id
    names = ["linalg.norm(x)", "linalg.svd(x)", "linalg.matrix_rank(x)", "fft.fft(x)", "zeros_like(x)"]
    valid = [tiny.encode(name) + [eos] for name in names]
    prompt = tiny.encode(PROMPT)
    outcomes = []
    for lm in (dynamic_lm(tiny), static_lm(tiny)):
        constraint = tasks.SequenceConstraint(tiny.vocab, valid)
        request = decoders.DecodeRequest(prompt_ids=prompt, num_samples=8, seed=0, max_new_tokens=16)
        result = decoder.decode(lm, constraint, request)
        assert result.counters.tokens_fed == len(prompt) + result.counters.lm_calls - 1
        outcomes.append([tuple(s.token_ids) for s in result.samples])
    # the same samples; the number of nodes explored may differ by a few, since a
    # perturbation of 2e-6 in the log-probabilities already moves AdapTrack's draws
    assert outcomes[0] == outcomes[1]


# -- settings and fallbacks ---------------------------------------------------------------
def test_kv_cache_setting_selects_the_path(tiny):
    assert use_static_cache("auto", torch.device("cuda")) is True
    assert use_static_cache("auto", torch.device("cpu")) is False
    assert use_static_cache("auto", torch.device("mps")) is False
    assert use_static_cache("dynamic", torch.device("cuda")) is False
    assert use_static_cache("static", torch.device("cpu")) is True
    with pytest.raises(ModelError, match="kv cache"):
        use_static_cache("fast", torch.device("cpu"))
    assert type(load_model("tiny", dtype="float32")) is HFLanguageModel  # auto on the CPU
    lm = load_model("tiny", dtype="float32", kv_cache="static")
    assert isinstance(lm, StaticCacheLanguageModel) and lm.static and not lm.cuda_graphs


def _small_qwen2(**config):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    base = dict(
        vocab_size=6016,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
    )
    return Qwen2ForCausalLM(Qwen2Config(**{**base, **config})).eval()


def test_sliding_window_models_fall_back_with_one_log_line(tiny, caplog):
    model = _small_qwen2(use_sliding_window=True, sliding_window=16, max_window_layers=0)
    with caplog.at_level(logging.INFO, logger=static_cache.__name__):
        lm = StaticCacheLanguageModel(model, tiny.tokenizer, vocab=tiny.vocab)
    assert not lm.static and "sliding" in lm.static_reason
    lines = [r.getMessage() for r in caplog.records if "static KV cache off" in r.getMessage()]
    assert len(lines) == 1 and "sliding" in lines[0]
    prompt = tiny.encode(PROMPT)
    lm.set_prompt(prompt)
    assert lm._current is None  # the dynamic path serves
    assert max_diff(lm.next_logprobs([3]), reference(lm, prompt + [3])) <= TOLERANCE


def test_custom_model_code_falls_back(tiny):
    from transformers import Qwen2ForCausalLM

    class CustomModel(Qwen2ForCausalLM):  # defined outside transformers, like remote code
        pass

    small = _small_qwen2()
    model = CustomModel(small.config).eval()
    lm = StaticCacheLanguageModel(model, tiny.tokenizer, vocab=tiny.vocab)
    assert not lm.static and "custom model code" in lm.static_reason
    assert static_cache.static_cache_unsupported(small) is None


def test_a_model_that_ignores_the_mask_fails_the_load_check(tiny, monkeypatch):
    lm = static_lm(tiny)
    original = lm.model.forward

    def forward_without_mask(*args, attention_mask=None, **kwargs):
        return original(*args, **kwargs)  # attends to every slot, stale ones included

    monkeypatch.setattr(lm.model, "forward", forward_without_mask)
    checked = StaticCacheLanguageModel(lm.model, tiny.tokenizer, vocab=tiny.vocab)
    assert not checked.static and "differs" in checked.static_reason


# -- CUDA ---------------------------------------------------------------------------------
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need an NVIDIA GPU (CI has none)")


@cuda
def test_cuda_graph_steps_equal_the_dynamic_path():
    tiny_cuda = load_model("tiny", device="cuda", dtype="float32", kv_cache="static")
    assert isinstance(tiny_cuda, StaticCacheLanguageModel) and tiny_cuda.cuda_graphs
    prompt = tiny_cuda.encode(PROMPT)
    nodes, _ = random_walk(tiny_cuda, prompt, switches=120, seed=11)
    assert tiny_cuda._current.graphs, "no graph was captured"
    assert tiny_cuda.cuda_graphs, "capture failed"
    reference_lm = HFLanguageModel(tiny_cuda.model, tiny_cuda.tokenizer, vocab=tiny_cuda.vocab)
    assert worst_against(reference_lm, prompt, nodes) <= TOLERANCE
    tiny_cuda.set_prompt(prompt)
    paths = [[t] for t in range(100, 105)] + [list(p) + [7] for p in list(nodes)[1:4]]
    batch = tiny_cuda.next_logprobs_batch(paths)
    reference_lm.set_prompt(prompt)
    for path, logprobs in zip(paths, batch):
        assert max_diff(logprobs, reference_lm.next_logprobs(path)) <= TOLERANCE
    assert {1, 8} <= set(tiny_cuda._current.graphs)


@cuda
def test_cuda_bf16_static_path_is_the_default_and_close_to_dynamic():
    lm = load_model("tiny", device="cuda")
    assert isinstance(lm, StaticCacheLanguageModel) and lm.static
    dynamic = load_model("tiny", device="cuda", kv_cache="dynamic")
    prompt = lm.encode(PROMPT)
    nodes, _ = random_walk(lm, prompt, switches=40, seed=3)
    dynamic.set_prompt(prompt)
    for path, logprobs in nodes.items():
        other = dynamic.next_logprobs(list(path))
        top = np.argsort(-other)[:50]
        assert np.abs(logprobs[top] - other[top]).max() <= 0.1  # bf16 rounding of two kernels


def test_out_of_memory_for_the_buffers_falls_back_to_the_dynamic_path(tiny, monkeypatch, caplog):
    lm = static_lm(tiny)

    def no_memory(capacity):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(lm, "_buffers_for", no_memory)
    prompt = tiny.encode(PROMPT)
    with caplog.at_level(logging.WARNING, logger=static_cache.__name__):
        info = lm.set_prompt(prompt)
    assert info.length == len(prompt) and not lm.static and "out of memory" in lm.static_reason
    assert any("static KV cache off (out of memory" in r.getMessage() for r in caplog.records)
    assert max_diff(lm.next_logprobs([3]), reference(lm, prompt + [3])) <= TOLERANCE


def test_nan_logits_raise_a_model_error_and_leave_no_state(tiny, monkeypatch):
    lm = static_lm(tiny)
    prompt = tiny.encode(PROMPT)
    lm.set_prompt(prompt)
    original = lm._forward_rows

    def nan_rows(*args, **kwargs):
        return original(*args, **kwargs) * float("nan")

    monkeypatch.setattr(lm, "_forward_rows", nan_rows)
    with pytest.raises(ModelError, match="NaN"):
        lm.next_logprobs([3])
    with pytest.raises(ModelError, match="set_prompt"):  # the cache was dropped
        lm.next_logprobs([3])
    monkeypatch.undo()
    lm.set_prompt(prompt)
    assert max_diff(lm.next_logprobs([3]), reference(lm, prompt + [3])) <= TOLERANCE


def test_requests_use_the_smallest_bucket_whose_steps_are_ready(tiny):
    lm = static_lm(tiny, cuda_graphs=True)
    prompt = tiny.encode(PROMPT)
    long = (prompt * 12)[: BUCKET + 50]
    lm.set_prompt(long, max_new_tokens=8, cache_key="long.py")
    lm.next_logprobs([3])  # the bucket's one-row step now exists
    ready = lm._current
    assert ready.capacity > BUCKET and set(ready.graphs) == {1}
    lm.set_prompt(prompt, max_new_tokens=8, cache_key="short.py")
    assert lm._current is ready  # not the smaller bucket without steps
    assert max_diff(lm.next_logprobs([3, 4]), reference(lm, prompt + [3, 4])) <= TOLERANCE
    lm.warm_up(1536, 48)  # no CUDA: nothing to capture
    assert set(lm._buffers) == {BUCKET, ready.capacity}


@cuda
def test_cuda_warm_up_captures_every_row_count_once():
    lm = load_model("tiny", device="cuda", dtype="float32")
    assert isinstance(lm, StaticCacheLanguageModel) and lm.static
    lm.warm_up(1536, 48)
    ready = [b for b in lm._buffers.values() if b.graphs]
    assert len(ready) == 1 and set(ready[0].graphs) == set(static_cache.GRAPH_ROWS)
    graphs = dict(ready[0].graphs)
    prompt = lm.encode(PROMPT)
    nodes, _ = random_walk(lm, prompt, switches=30, seed=2)
    assert lm._current is ready[0] and lm._current.graphs == graphs  # nothing captured per request
    assert worst_against(HFLanguageModel(lm.model, lm.tokenizer, vocab=lm.vocab), prompt, nodes) <= TOLERANCE
