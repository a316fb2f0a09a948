"""The Hugging Face backend: loading (tiny, errors), logprobs, truncation, prompt reuse."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from adaptrack_lsp.completion.lm.base import ModelError
from adaptrack_lsp.completion.lm.hf import (
    HFLanguageModel,
    resolve_device,
    resolve_dtype,
)
from adaptrack_lsp.completion.lm.loading import load_model
from adaptrack_lsp.completion.lm.tiny import tiny_model_path

from hf_support import full_forward, max_diff

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
def tiny():
    return load_model("tiny")


# -- loading ------------------------------------------------------------------------------
def test_tiny_loads_through_from_pretrained(tiny):
    folder = tiny_model_path()
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    config = json.loads((folder / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and config["model_type"] == "llama"
    assert tiny.device.type in ("cpu", "cuda", "mps")
    assert tiny.vocab.size == config["vocab_size"] > tiny.vocab.num_defined == len(tiny.tokenizer)
    assert tiny.max_context == config["max_position_embeddings"]
    eos = tiny.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    file_sep = tiny.tokenizer.convert_tokens_to_ids("<|file_sep|>")
    assert {eos, file_sep} <= tiny.vocab.eos_ids
    assert tiny.tokenizer.convert_tokens_to_ids("<|fim_prefix|>") in tiny.vocab.special_ids
    text = "x = np.linalg.norm(a)\n"
    assert tiny.vocab.decode_bytes(tiny.encode(text)) == text.encode()


def test_tiny_is_deterministic(tiny):
    # the same recipe gives the same weights: compare with a second load
    again = load_model("tiny")
    for (name, a), (_, b) in zip(tiny.model.state_dict().items(), again.model.state_dict().items()):
        assert torch.equal(a, b), name
    assert tiny_model_path().name.startswith("tiny-")


def test_device_and_dtype_resolution():
    cpu = torch.device("cpu")
    assert resolve_dtype("auto", cpu) == torch.float32
    assert resolve_dtype("auto", torch.device("cuda")) == torch.bfloat16
    assert resolve_dtype("bf16", cpu) == torch.bfloat16
    with pytest.raises(ModelError, match="unknown dtype"):
        resolve_dtype("float8", cpu)
    expected = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu").type == "cpu"


def test_missing_local_path_is_a_clear_error(tmp_path):
    with pytest.raises(ModelError, match="does not exist.*--model builtin"):
        load_model(str(tmp_path / "no-such-model"))


def test_folder_without_config_is_a_clear_error(tmp_path):
    with pytest.raises(ModelError, match="not a model folder"):
        load_model(str(tmp_path))


def test_corrupt_model_folder_is_a_clear_error(tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_path(), broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(ModelError, match="cannot load the model in"):
        load_model(str(broken))
    (broken / "config.json").write_text("{ not json")
    with pytest.raises(ModelError, match="cannot load the model in"):
        load_model(str(broken))


def test_unreachable_hub_id_names_the_fix(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError) as error:
        load_model("adaptrack-test-org/no-such-model-anywhere")
    message = str(error.value)
    assert "offline" in message and "--model builtin" in message and "local model folder" in message


# -- distributions ------------------------------------------------------------------------
def test_logprobs_match_a_fresh_forward_and_padding_is_impossible(tiny):
    prompt = tiny.encode(SOURCE)
    info = tiny.set_prompt(prompt)
    assert info.length == len(prompt) and info.truncated == 0
    root = tiny.next_logprobs([])
    assert root.dtype == np.float32 and root.shape == (tiny.vocab.size,)
    assert np.isneginf(root[tiny.vocab.num_defined :]).all()
    assert np.isfinite(root[: tiny.vocab.num_defined]).all()
    assert abs(float(np.exp(root.astype(np.float64)).sum()) - 1.0) < 1e-4
    assert max_diff(root, full_forward(tiny, prompt)) <= 1e-4
    path = tiny.encode("norm(values)")
    assert max_diff(tiny.next_logprobs(path), full_forward(tiny, prompt + path)) <= 1e-4


def test_nan_and_inf_logits_raise_model_error(tiny):
    for bad in (float("nan"), float("inf")):
        tiny.set_prompt(tiny.encode("x = 1\n"))
        handle = tiny.model.lm_head.register_forward_hook(lambda module, args, output, bad=bad: output.fill_(bad))
        try:
            with pytest.raises(ModelError, match="NaN"):
                tiny.next_logprobs(tiny.encode("y"))
            with pytest.raises(ModelError, match="set_prompt"):  # the failed state is dropped
                tiny.next_logprobs(tiny.encode("y"))
            with pytest.raises(ModelError, match="NaN"):
                tiny.set_prompt(tiny.encode("z = 2\n"))
        finally:
            handle.remove()
    tiny.set_prompt(tiny.encode("x = 1\n"))
    assert np.isfinite(tiny.next_logprobs(tiny.encode("y"))[: tiny.vocab.num_defined]).all()


def test_bad_calls(tiny):
    fresh = HFLanguageModel(tiny.model, tiny.tokenizer, vocab=tiny.vocab)
    with pytest.raises(ModelError, match="set_prompt"):
        fresh.next_logprobs([5])
    fresh.set_prompt(tiny.encode("a = 1"))
    with pytest.raises(ValueError, match="outside"):
        fresh.next_logprobs([tiny.vocab.num_defined])  # a padding id cannot be fed
    with pytest.raises(ValueError, match="outside"):
        fresh.set_prompt([-1])
    with pytest.raises(ValueError, match="no room"):
        fresh.set_prompt([5], max_new_tokens=fresh.max_context)


def test_empty_prompt_conditions_on_a_document_start(tiny):
    info = tiny.set_prompt([])
    assert info.length == 1
    start = tiny.tokenizer.eos_token_id  # the tiny tokenizer has no BOS
    assert max_diff(tiny.next_logprobs([]), full_forward(tiny, [start])) <= 1e-4


def test_long_prompts_are_left_truncated(tiny):
    short = HFLanguageModel(tiny.model, tiny.tokenizer, vocab=tiny.vocab, max_context=40)
    prompt = tiny.encode(SOURCE)
    assert len(prompt) > 40
    info = short.set_prompt(prompt, max_new_tokens=8)
    assert info.length == 32 and info.truncated == len(prompt) - 32
    assert short.tokens_fed == 32
    kept = prompt[-32:]
    assert max_diff(short.next_logprobs([]), full_forward(tiny, kept)) <= 1e-4
    path = tiny.encode("abc(")
    assert max_diff(short.next_logprobs(path), full_forward(tiny, kept + path)) <= 1e-4
    with pytest.raises(ModelError, match="exceeds the context"):
        short.next_logprobs([5] * 9)


# -- prompt reuse across requests ---------------------------------------------------------
def test_small_edit_reuses_the_prompt_cache(tiny):
    lm = HFLanguageModel(tiny.model, tiny.tokenizer, vocab=tiny.vocab)
    first = tiny.encode(SOURCE)
    info = lm.set_prompt(first, cache_key="file:///a.py")
    assert info.reused == 0 and lm.tokens_fed == len(first)
    # a decode wandered down a path; then the user typed 5 characters
    lm.next_logprobs(tiny.encode("svd(x"))
    second = tiny.encode(SOURCE + "norm(")
    before = lm.tokens_fed
    info = lm.set_prompt(second, cache_key="file:///a.py")
    fed = lm.tokens_fed - before
    assert info.length == len(second)
    assert info.reused >= len(first) - 2
    assert fed == len(second) - info.reused and fed <= 8
    assert max_diff(lm.next_logprobs([]), full_forward(tiny, second)) <= 1e-4
    path = tiny.encode("x)")
    assert max_diff(lm.next_logprobs(path), full_forward(tiny, second + path)) <= 1e-4


def test_identical_prompt_feeds_nothing_and_keeps_node_states(tiny):
    lm = HFLanguageModel(tiny.model, tiny.tokenizer, vocab=tiny.vocab)
    prompt = tiny.encode(SOURCE)
    lm.set_prompt(prompt)
    path = tiny.encode("norm(x)")
    for end in range(1, len(path) + 1):
        lm.next_logprobs(path[:end])
    assert lm.tokens_fed == len(prompt) + len(path)
    info = lm.set_prompt(prompt)
    assert info.reused == len(prompt) and lm.tokens_fed == len(prompt) + len(path)
    assert max_diff(lm.next_logprobs([]), full_forward(tiny, prompt)) <= 1e-4
    # a sibling of a stored node: its ancestors come from the node store, one token is fed
    sibling = path[:-1] + tiny.encode("y")[:1]
    assert max_diff(lm.next_logprobs(sibling), full_forward(tiny, prompt + sibling)) <= 1e-4
    assert lm.tokens_fed == len(prompt) + len(path) + 1
    # a different prompt drops the node store
    lm.set_prompt(prompt + tiny.encode(" "))
    fed = lm.tokens_fed
    lm.next_logprobs(path[:3])
    assert lm.tokens_fed == fed + 3


def test_prompt_caches_are_kept_per_document_in_an_lru(tiny):
    lm = HFLanguageModel(tiny.model, tiny.tokenizer, vocab=tiny.vocab, max_cached_prompts=2)
    a, b, c = (tiny.encode(f"# document {name}\n" + SOURCE) for name in "abc")
    lm.set_prompt(a, cache_key="a")
    lm.set_prompt(b, cache_key="b")
    info = lm.set_prompt(a + tiny.encode("x"), cache_key="a")
    assert info.reused == len(a)  # b did not evict a's cache
    assert max_diff(lm.next_logprobs([]), full_forward(tiny, a + tiny.encode("x"))) <= 1e-4
    lm.set_prompt(c, cache_key="c")  # evicts b (least recently used)
    x = tiny.encode("x")
    assert lm.set_prompt(a + x, cache_key="a").reused == len(a + x) - 1  # a kept; last token re-fed
    assert lm.set_prompt(a + x, cache_key="a").reused == len(a + x)  # same prompt again: nothing fed
    assert lm.set_prompt(b, cache_key="b").reused == 0  # b was evicted (and now c is)
    assert lm.set_prompt(c, cache_key="c").reused == 0
    lm.clear_cache()
    assert lm.set_prompt(c, cache_key="c").reused == 0


# -- the build cache ----------------------------------------------------------------------
def test_cached_build_builds_once_under_concurrent_first_use(tmp_path, monkeypatch):
    import threading
    import time

    from adaptrack_lsp import cache as cache_module

    monkeypatch.setenv("ADAPTRACK_CACHE", str(tmp_path))
    builds = []

    def build(folder):
        builds.append(folder)
        time.sleep(0.2)
        (folder / "weights.bin").write_bytes(b"x" * 100)
        (folder / "done.json").write_text("{}")

    # an interrupted earlier build left a folder without its marker
    (tmp_path / "artifact").mkdir()
    (tmp_path / "artifact" / "weights.bin").write_bytes(b"partial")
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(cache_module.cached_build("artifact", build, marker="done.json")))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1
    assert results == [tmp_path / "artifact"] * 4
    assert (tmp_path / "artifact" / "weights.bin").read_bytes() == b"x" * 100
    assert sorted(p.name for p in tmp_path.iterdir()) == [".artifact.lock", "artifact"]  # no temporary folders left

    def failing(folder):
        (folder / "half").write_text("")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        cache_module.cached_build("other", failing, marker="done.json")
    assert not (tmp_path / "other").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".artifact.lock", ".other.lock", "artifact"]


def test_cache_root_follows_the_environment(tmp_path, monkeypatch):
    from adaptrack_lsp.config import cache_root

    monkeypatch.setenv("ADAPTRACK_CACHE", str(tmp_path / "explicit"))
    assert cache_root() == tmp_path / "explicit"
    monkeypatch.delenv("ADAPTRACK_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "adaptrack-lsp"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "adaptrack-lsp"
