"""GGUF export: the file's metadata and tensors, its refusals, and llama.cpp reading it as
transformers does (same token ids on a corpus, same next-token distribution)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from adaptrack_lsp.completion.lm.gguf_export import ExportError, export_gguf, pre_tokenizer_name
from adaptrack_lsp.completion.lm.tiny import tiny_model_path


@pytest.fixture(scope="module")
def tiny_folder() -> Path:
    return tiny_model_path()


@pytest.fixture(scope="module")
def tiny_f32(tiny_folder, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gguf") / "tiny-f32.gguf"
    export_gguf(tiny_folder, out, "f32")
    return out


def _field(reader, key):
    field = reader.fields[key]
    if len(field.data) == 1:
        value = field.parts[field.data[0]]
        return bytes(value).decode() if value.dtype == np.uint8 else value[0]
    return [bytes(field.parts[i]).decode() for i in field.data]


def test_the_tiny_model_is_written_with_its_tokenizer_and_fim_markers(tiny_folder, tiny_f32):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_folder))
    config = json.loads((tiny_folder / "config.json").read_text())
    reader = gguf.GGUFReader(str(tiny_f32))
    assert _field(reader, "general.architecture") == "llama"
    assert _field(reader, "tokenizer.ggml.model") == "gpt2"
    assert _field(reader, "tokenizer.ggml.pre") == "gpt-2"
    tokens = _field(reader, "tokenizer.ggml.tokens")
    assert len(tokens) == config["vocab_size"] == 6016  # padded logits are UNUSED tokens
    assert tokens[: len(tokenizer)] == tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    assert tokens[-1] == "[PAD6015]"
    assert _field(reader, "tokenizer.ggml.eos_token_id") == tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert _field(reader, "tokenizer.ggml.fim_pre_token_id") == tokenizer.convert_tokens_to_ids("<|fim_prefix|>")
    assert _field(reader, "tokenizer.ggml.fim_suf_token_id") == tokenizer.convert_tokens_to_ids("<|fim_suffix|>")
    assert _field(reader, "tokenizer.ggml.fim_mid_token_id") == tokenizer.convert_tokens_to_ids("<|fim_middle|>")
    assert _field(reader, "llama.block_count") == config["num_hidden_layers"]
    names = {t.name for t in reader.tensors}
    assert {"token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight", "blk.1.ffn_down.weight"} <= names
    assert "output.weight" not in names  # tied embeddings: llama.cpp reuses token_embd


def test_q8_0_quantizes_matrices_and_keeps_norms_in_f32(tiny_folder, tmp_path):
    out = tmp_path / "tiny-q8_0.gguf"
    result = export_gguf(tiny_folder, out, "q8_0")
    kinds = {t.name: t.tensor_type for t in gguf.GGUFReader(str(out)).tensors}
    assert kinds["blk.0.attn_q.weight"] == gguf.GGMLQuantizationType.Q8_0
    assert kinds["blk.0.attn_norm.weight"] == gguf.GGMLQuantizationType.F32
    assert result.bytes < (tiny_folder / "model.safetensors").stat().st_size / 2


def test_refusals_name_the_problem(tiny_folder, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ExportError, match="config.json is missing"):
        export_gguf(empty, tmp_path / "x.gguf")
    no_weights = tmp_path / "no-weights"
    shutil.copytree(tiny_folder, no_weights, ignore=shutil.ignore_patterns("*.safetensors"))
    with pytest.raises(ExportError, match="no .safetensors"):
        export_gguf(no_weights, tmp_path / "x.gguf")
    other = tmp_path / "other-arch"
    shutil.copytree(tiny_folder, other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "architectures": ["GPTNeoXForCausalLM"]}))
    with pytest.raises(ExportError, match="convert_hf_to_gguf.py"):
        export_gguf(other, tmp_path / "x.gguf")
    with pytest.raises(ExportError, match="unknown output type"):
        export_gguf(tiny_folder, tmp_path / "x.gguf", "q3_xs")
    assert not list(tmp_path.glob("*.gguf")) and not list(tmp_path.glob(".*partial"))
    with pytest.raises(ExportError, match="pre-tokenizer"):
        pre_tokenizer_name({"pre_tokenizer": {"type": "Metaspace"}})


def test_the_command_writes_a_file_and_refuses_the_count_based_builtin(tmp_path):
    out = tmp_path / "t.gguf"
    done = subprocess.run(
        [sys.executable, "-m", "adaptrack_lsp", "export-gguf", "--model", "tiny", "--outtype", "q8_0", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 1_000_000 and "llama, q8_0" in done.stdout
    done = subprocess.run(
        [sys.executable, "-m", "adaptrack_lsp", "export-gguf", "--model", "builtin", str(tmp_path / "b.gguf")],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2 and "no GGUF form" in done.stderr


def _corpus(limit: int = 12) -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = []
    for name in ("json/decoder.py", "textwrap.py", "argparse.py", "string.py", "fractions.py", "csv.py",
                 "heapq.py", "bisect.py", "colorsys.py", "dataclasses.py", "shlex.py", "difflib.py"):
        path = stdlib / name
        if path.is_file():
            texts.append(path.read_text(encoding="utf-8"))
    texts.append("x = 'é日本' + \"\\t\" * 3  # ünïcödé\r\n\n\n    \t pass\n")
    return texts[:limit]


def test_llama_cpp_tokenizes_a_corpus_exactly_as_transformers(tiny_folder, tiny_f32):
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is built by .ci/install-llama-cpp")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_folder))
    model = llama_cpp.Llama(model_path=str(tiny_f32), vocab_only=True, verbose=False)
    compared = 0
    for text in _corpus():
        expected = tokenizer.encode(text, add_special_tokens=False)
        got = model.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        assert got == expected, f"first difference at token {next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)}"
        compared += len(expected)
    assert compared > 20_000


def test_llama_cpp_gives_the_transformers_distribution(tiny_folder, tiny_f32):
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is built by .ci/install-llama-cpp")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_folder))
    ids = tokenizer.encode("import numpy as np\n\ndef norm(a):\n    return np.linalg.", add_special_tokens=False)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_folder)).eval()
    with torch.no_grad():
        expected = torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].double(), -1).numpy()
    llm = llama_cpp.Llama(model_path=str(tiny_f32), n_ctx=256, n_threads=1, verbose=False)
    llm.eval(ids)
    # the last position's logits from llama.cpp itself (`Llama.scores` is filled only with logits_all)
    logits = np.array(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),)), dtype=np.float64)
    got = logits - (logits.max() + np.log(np.exp(logits - logits.max()).sum()))
    assert got.shape == expected.shape
    # llama.cpp's CPU flash attention rounds to f16: unlikely tokens move by a few 1e-3
    assert np.abs(got - expected).max() < 2e-2
    assert 0.5 * np.abs(np.exp(got) - np.exp(expected)).sum() < 2e-3
