"""Writing a Hugging Face model folder as a GGUF file that llama.cpp loads.

Owns the conversion of the two architectures the project builds and benchmarks
(`LlamaForCausalLM`: the built-in ``tiny`` model; `Qwen2ForCausalLM`: Qwen2.5-Coder
configs) with their byte-level BPE tokenizers: weights (f32, f16, or q8_0 quantized
here; k-quants such as q4_k_m through llama.cpp's own quantizer), hyper-parameters,
and the tokenizer metadata llama.cpp reads (tokens, token types, merges, the
pre-tokenizer name, EOS, FIM and padding ids).

llama.cpp's `convert_hf_to_gguf.py` recognises a BPE pre-tokenizer by a hash of sample
encodings and refuses tokenizers it has not seen, such as the project's own; the
pre-tokenizer is therefore named here from the tokenizer's definition (a plain
``ByteLevel`` with the GPT-2 regex is llama.cpp's ``gpt-2``), and a tokenizer whose
pre-tokenizer llama.cpp does not implement is refused rather than written wrong.  Tests
check that llama.cpp tokenizes a corpus exactly as the HF tokenizer does and that its
logits match the transformers forward pass.

Heavy imports (torch, transformers, gguf, safetensors) happen inside the functions.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

#: output types written directly; k-quants go through llama.cpp's quantizer
DIRECT_TYPES = ("f32", "f16", "q8_0")
#: llama.cpp k-quant names accepted by `--outtype` (need llama-cpp-python)
LLAMA_QUANT_TYPES = {"q4_k_m": "MOSTLY_Q4_K_M", "q5_k_m": "MOSTLY_Q5_K_M", "q6_k": "MOSTLY_Q6_K", "q4_0": "MOSTLY_Q4_0"}
OUT_TYPES = DIRECT_TYPES + tuple(LLAMA_QUANT_TYPES)

#: HF architecture -> (GGUF architecture name, q/k rows permuted to llama.cpp's rope layout)
ARCHITECTURES = {
    "LlamaForCausalLM": ("llama", True),
    "Qwen2ForCausalLM": ("qwen2", False),
}

#: the GPT-2 pre-tokenizer regex (HF ByteLevel with use_regex=True uses it)
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"""
#: Qwen2's pre-tokenizer regex, llama.cpp's ``qwen2``
QWEN2_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

#: FIM and file markers (Qwen2.5-Coder / StarCoder names) -> GGUF tokenizer key attribute
FIM_TOKENS = {
    "<|fim_prefix|>": "FIM_PRE_ID",
    "<|fim_suffix|>": "FIM_SUF_ID",
    "<|fim_middle|>": "FIM_MID_ID",
    "<|fim_pad|>": "FIM_PAD_ID",
    "<|repo_name|>": "FIM_REP_ID",
    "<|file_sep|>": "FIM_SEP_ID",
}


class ExportError(ValueError):
    """The folder cannot be written as GGUF; the message names why and what to do."""


@dataclass
class ExportResult:
    path: Path
    architecture: str
    outtype: str
    tensors: int
    vocab_size: int
    bytes: int


def pre_tokenizer_name(tokenizer_json: dict) -> str:
    """llama.cpp's name for the tokenizer's pre-tokenizer, or ExportError."""
    pre = tokenizer_json.get("pre_tokenizer") or {}
    kind = pre.get("type")
    if kind == "ByteLevel" and pre.get("use_regex", True):
        return "gpt-2"
    if kind == "Sequence":
        parts = pre.get("pretokenizers") or []
        splits = [p for p in parts if p.get("type") == "Split"]
        byte_level = [p for p in parts if p.get("type") == "ByteLevel"]
        if len(splits) == 1 and len(byte_level) == 1 and not byte_level[0].get("use_regex", True):
            pattern = (splits[0].get("pattern") or {}).get("Regex")
            if pattern == QWEN2_PATTERN:
                return "qwen2"
            if pattern == GPT2_PATTERN:
                return "gpt-2"
    raise ExportError(
        f"the tokenizer's pre-tokenizer ({json.dumps(pre)[:200]}) is not one llama.cpp implements here "
        "(a ByteLevel with the GPT-2 regex, or Qwen2's); use llama.cpp's convert_hf_to_gguf.py for this model"
    )


def _permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """HF's rotate-half q/k rows -> llama.cpp's interleaved rope rows (llama arch)."""
    shape = weights.shape
    return weights.reshape(heads, 2, shape[0] // heads // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def _rope_theta(config: dict) -> float:
    parameters = config.get("rope_parameters") or {}
    if isinstance(parameters, dict) and "rope_theta" in parameters:
        if parameters.get("rope_type", "default") not in ("default", None):
            raise ExportError(f"rope scaling {parameters.get('rope_type')!r} is not written by this exporter")
        return float(parameters["rope_theta"])
    if config.get("rope_scaling"):
        raise ExportError("rope scaling is not written by this exporter; use llama.cpp's convert_hf_to_gguf.py")
    return float(config.get("rope_theta", 10000.0))


def _eos_ids(folder: Path, config: dict) -> list[int]:
    ids: list[int] = []
    generation = folder / "generation_config.json"
    sources = [config]
    if generation.is_file():
        sources.append(json.loads(generation.read_text(encoding="utf-8")))
    for source in sources:
        value = source.get("eos_token_id")
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, int) and item not in ids:
                ids.append(item)
    return ids


def _tensors(folder: Path):
    """(name, float32 array) for every tensor of the folder's safetensors files, one at a
    time, so that a large model is never held in float32 as a whole."""
    from safetensors import safe_open

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ExportError(f"{folder} has no .safetensors weights (only safetensors are read)")
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            for name in handle.keys():
                yield name, handle.get_tensor(name).float().numpy()


def _tensor_names(folder: Path) -> set[str]:
    from safetensors import safe_open

    names: set[str] = set()
    for file in sorted(folder.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            names.update(handle.keys())
    return names


def _tensor_type(name: str, data: np.ndarray, outtype: str):
    """(array to write, GGMLQuantizationType) for one tensor."""
    import gguf

    if data.ndim == 1 or name.endswith("_norm.weight") or outtype == "f32":
        return data.astype(np.float32), gguf.GGMLQuantizationType.F32
    if outtype == "q8_0" and data.shape[-1] % gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q8_0][0] == 0:
        quantized = gguf.quants.quantize(data.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
        return quantized, gguf.GGMLQuantizationType.Q8_0
    return data.astype(np.float16), gguf.GGMLQuantizationType.F16


def export_gguf(
    folder: str | os.PathLike,
    out: str | os.PathLike,
    outtype: str = "f16",
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> ExportResult:
    """Write the model in `folder` (config.json, safetensors, tokenizer.json) as GGUF.

    The file is written to a temporary name beside `out` and renamed into place, so a
    failed export leaves no half-written GGUF.  k-quant `outtype`s (q4_k_m, ...) write
    an f16 GGUF first and quantize it with llama.cpp (llama-cpp-python).
    """
    import gguf

    folder = Path(folder)
    out = Path(out)
    if outtype not in OUT_TYPES:
        raise ExportError(f"unknown output type {outtype!r}; choose one of: {', '.join(OUT_TYPES)}")
    if outtype in LLAMA_QUANT_TYPES:
        return _export_llama_quantized(folder, out, outtype, name, progress)
    say = progress or (lambda message: log.info("%s", message))
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        tokenizer_json = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise ExportError(f"{folder} is not a model folder: {error.filename} is missing") from error
    except json.JSONDecodeError as error:
        raise ExportError(f"{folder}: unreadable JSON ({error})") from error
    architectures = config.get("architectures") or []
    architecture = next((a for a in architectures if a in ARCHITECTURES), None)
    if architecture is None:
        raise ExportError(
            f"architecture {architectures or config.get('model_type')!r} is not written by this exporter "
            f"(supported: {', '.join(ARCHITECTURES)}); use llama.cpp's convert_hf_to_gguf.py"
        )
    arch, permute = ARCHITECTURES[architecture]
    if config.get("hidden_act", "silu") != "silu":
        raise ExportError(f"hidden_act {config.get('hidden_act')!r} is not supported (silu only)")
    model = tokenizer_json.get("model") or {}
    if model.get("type") != "BPE":
        raise ExportError(f"only byte-level BPE tokenizers are written, not {model.get('type')!r}")
    pre = pre_tokenizer_name(tokenizer_json)
    if not any(folder.glob("*.safetensors")):
        raise ExportError(f"{folder} has no .safetensors weights (only safetensors are read)")

    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    hidden = int(config["hidden_size"])
    head_dim = int(config.get("head_dim") or hidden // heads)
    layers = int(config["num_hidden_layers"])
    logits = int(config["vocab_size"])

    # tokens in id order; ids the tokenizer leaves undefined (padded logits) are UNUSED
    tokens: list[str | None] = [None] * logits
    types = [gguf.TokenType.UNUSED] * logits
    for text, token_id in model.get("vocab", {}).items():
        if token_id >= logits:
            raise ExportError(f"token {text!r} has id {token_id}, beyond the model's {logits} logits")
        tokens[token_id] = text
        types[token_id] = gguf.TokenType.NORMAL
    by_content: dict[str, int] = {}
    for added in tokenizer_json.get("added_tokens", []):
        token_id = int(added["id"])
        if token_id >= logits:
            raise ExportError(f"added token {added['content']!r} has id {token_id}, beyond the model's {logits} logits")
        tokens[token_id] = added["content"]
        types[token_id] = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
        by_content[added["content"]] = token_id
    tokens = [t if t is not None else f"[PAD{i}]" for i, t in enumerate(tokens)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA if arch == "llama" else gguf.MODEL_ARCH.QWEN2, layers)
    tied = bool(config.get("tie_word_embeddings")) or "lm_head.weight" not in _tensor_names(folder)
    eos = _eos_ids(folder, config)
    if not eos:
        raise ExportError("the model names no eos_token_id (config.json or generation_config.json)")

    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    writer = gguf.GGUFWriter(str(partial), arch)
    try:
        writer.add_name(name or folder.name)
        writer.add_context_length(int(config.get("max_position_embeddings", 4096)))
        writer.add_embedding_length(hidden)
        writer.add_block_count(layers)
        writer.add_feed_forward_length(int(config["intermediate_size"]))
        writer.add_head_count(heads)
        writer.add_head_count_kv(kv_heads)
        if head_dim != hidden // heads:
            writer.add_key_length(head_dim)
            writer.add_value_length(head_dim)
        writer.add_rope_dimension_count(head_dim)
        writer.add_rope_freq_base(_rope_theta(config))
        writer.add_layer_norm_rms_eps(float(config.get("rms_norm_eps", 1e-6)))
        writer.add_vocab_size(logits)
        file_type = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}
        writer.add_file_type(file_type[outtype])
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)

        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre(pre)
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(merges)
        writer.add_eos_token_id(eos[0])
        bos = config.get("bos_token_id")
        writer.add_bos_token_id(int(bos) if isinstance(bos, int) else eos[0])
        writer.add_add_bos_token(False)
        pad = config.get("pad_token_id")
        if isinstance(pad, int):
            writer.add_pad_token_id(pad)
        for content, key in FIM_TOKENS.items():
            if content in by_content:
                writer.add_uint32(getattr(gguf.Keys.Tokenizer, key), by_content[content])
        if "<|endoftext|>" in by_content and by_content["<|endoftext|>"] != eos[0]:
            writer.add_eot_token_id(by_content["<|endoftext|>"])

        written = 0
        for hf_name, data in _tensors(folder):
            if hf_name == "lm_head.weight" and tied:
                continue
            if hf_name.endswith("rotary_emb.inv_freq"):
                continue
            gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
            if gguf_name is None:
                raise ExportError(f"tensor {hf_name!r} has no GGUF name for {arch}")
            if permute and hf_name.endswith("q_proj.weight"):
                data = _permute(data, heads)
            elif permute and hf_name.endswith("k_proj.weight"):
                data = _permute(data, kv_heads)
            array, kind = _tensor_type(gguf_name, data, outtype)
            writer.add_tensor(gguf_name, array, raw_dtype=kind)
            written += 1
        say(f"writing {written} tensors ({outtype}) to {out}")
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(partial, out)
    finally:
        writer.close()
        partial.unlink(missing_ok=True)
    return ExportResult(out, arch, outtype, written, logits, out.stat().st_size)


def _export_llama_quantized(folder: Path, out: Path, outtype: str, name: str | None, progress) -> ExportResult:
    """An f16 GGUF quantized by llama.cpp (`llama_model_quantize`) to a k-quant type."""
    try:
        import llama_cpp
    except ImportError as error:
        raise ExportError(
            f"--outtype {outtype} quantizes with llama.cpp: install llama-cpp-python "
            "(pip install 'adaptrack-lsp[llamacpp]'), or choose f32, f16 or q8_0"
        ) from error
    f16 = out.with_name(f".{out.name}.f16")
    try:
        result = export_gguf(folder, f16, "f16", name, progress)
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_{LLAMA_QUANT_TYPES[outtype]}")
        partial = out.with_name(f".{out.name}.partial")
        code = llama_cpp.llama_model_quantize(str(f16).encode(), str(partial).encode(), params)
        if code != 0:
            raise ExportError(f"llama.cpp could not quantize to {outtype} (code {code})")
        os.replace(partial, out)
    finally:
        f16.unlink(missing_ok=True)
    return ExportResult(out, result.architecture, outtype, result.tensors, result.vocab_size, out.stat().st_size)
