"""`adaptrack-lsp export-gguf --model M OUT.gguf`: a model folder written as GGUF.

`--model` is ``tiny`` (the built-in test transformer), a local model folder, or a hub
id already in the local Hugging Face cache.  The file is what llama.cpp loads (the
`llamacpp` backend, llama-server, Ollama's GGUF import).
"""

from __future__ import annotations

import sys

from adaptrack_lsp.config import model_argument

HELP = "write a model folder (the built-in 'tiny' included) as a GGUF file for llama.cpp"


def add_arguments(parser) -> None:
    from adaptrack_lsp.completion.lm.gguf_export import OUT_TYPES

    parser.add_argument("out", metavar="OUT.gguf", help="the GGUF file to write")
    parser.add_argument("--model", required=True, type=model_argument, help="'tiny', a local model folder, or a cached hub id")
    parser.add_argument("--outtype", default="f16", choices=OUT_TYPES, help="weight type (default f16; k-quants need llama-cpp-python)")
    parser.add_argument("--name", default=None, help="general.name written into the file (default: the folder's name)")


def model_folder(model: str) -> str:
    """The folder of `model`: the built tiny model, a local folder, or a cached hub snapshot."""
    if model == "tiny":
        from adaptrack_lsp.completion.lm.tiny import tiny_model_path

        return str(tiny_model_path())
    if model == "builtin":
        raise ValueError(
            "the built-in model is a count-based model, not a transformer: it has no GGUF form; "
            "export 'tiny' or a model folder"
        )
    from adaptrack_lsp.completion.lm.hf import _hub_snapshot, _offline, resolve_model_source

    source, local = resolve_model_source(model)
    return source if local else _hub_snapshot(source, _offline(), trust_remote_code=False)


def run(args) -> int:
    from adaptrack_lsp.extras import MissingExtra, require

    try:  # reading safetensors weights goes through torch; writing GGUF through gguf
        require("transformers", "export-gguf", only=("torch", "transformers"))
        require("llamacpp", "export-gguf", only=("gguf",))
    except MissingExtra as error:
        print(f"adaptrack-lsp export-gguf: error: {error}", file=sys.stderr)
        return 2
    from adaptrack_lsp.completion.lm.base import ModelError
    from adaptrack_lsp.completion.lm.gguf_export import ExportError, export_gguf

    try:
        folder = model_folder(args.model)
        result = export_gguf(folder, args.out, args.outtype, name=args.name, progress=lambda m: print(m, file=sys.stderr))
    except (ExportError, ModelError, ValueError) as error:
        print(f"adaptrack-lsp export-gguf: error: {error}", file=sys.stderr)
        return 2
    print(
        f"{result.path}: {result.architecture}, {result.outtype}, {result.tensors} tensors, "
        f"{result.vocab_size} tokens, {result.bytes / 1e6:.1f} MB"
    )
    return 0
