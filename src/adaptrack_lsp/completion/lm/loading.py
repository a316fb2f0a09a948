"""Loading a language model: the engine (backend) a model runs on, and the in-process
loader by name: the built-in ``builtin`` (the offline n-gram model, no torch), ``tiny``
(a random transformer for tests), a local folder or a hub id; transformers models go on
the dynamic (`hf.HFLanguageModel`) or the static (`static_cache.StaticCacheLanguageModel`)
KV-cache path as the `kvCache` setting chooses.

`BACKENDS` maps a backend name to the function that loads a model from `Settings`
(adding an engine is one module and one line there); `load_for_settings` picks one.
torch and transformers are imported only when a transformers model loads; without them
(the light core) such a model stops with the `transformers` extra's install command.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

from adaptrack_lsp.completion.lm.base import LanguageModel, ModelError
from adaptrack_lsp.config import BUILTIN_MODEL

#: progress(message, percent or None) while a model loads (the built-in model's build)
Progress = Callable[[str, "int | None"], None]

#: backend name -> "module:function" loading a `LanguageModel` from `Settings` (called
#: as function(settings, progress=...))
BACKENDS: dict[str, str] = {
    "transformers": "adaptrack_lsp.completion.lm.loading:load_from_settings",
    "llamacpp": "adaptrack_lsp.completion.lm.llamacpp:load_from_settings",
    "server": "adaptrack_lsp.completion.lm.server:load_from_settings",
}


def backend_for(settings) -> str:
    """The backend `settings` name (the `backend` setting); where none is named, a
    ``.gguf`` model file runs on llama.cpp and anything else in process (transformers,
    or the built-in model)."""
    named = getattr(settings, "backend", None)
    if named and named != "auto":
        return str(named)
    return "llamacpp" if str(settings.model).lower().endswith(".gguf") else "transformers"


def load_for_settings(settings, progress: Progress | None = None) -> LanguageModel:
    """The model of `settings` on its backend; ModelError naming the fix when it cannot load."""
    backend = backend_for(settings)
    target = BACKENDS.get(backend)
    if target is None:
        raise ModelError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    module_name, function = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ModelError(f"the {backend} backend is not available: {error}") from error
    return getattr(module, function)(settings, progress=progress)


def load_from_settings(settings, progress: Progress | None = None) -> LanguageModel:
    """The in-process loader for `Settings` (transformers models and the built-in one)."""
    return load_model(
        settings.model,
        device=settings.device,
        dtype=settings.dtype,
        kv_cache=settings.kv_cache,
        trust_remote_code=settings.trust_remote_code,
        threads=getattr(settings, "threads", None),
        progress=progress,
    )


def load_model(
    name_or_path: str,
    device: str = "auto",
    dtype: str = "auto",
    trust_remote_code: bool = False,
    kv_cache: str = "auto",
    relative_to: str | os.PathLike | None = None,
    progress: Progress | None = None,
    threads: int | None = None,
    **options: Any,
) -> LanguageModel:
    """Load a language model: ``"builtin"`` (the offline n-gram model, built on first use
    with `progress`), ``"tiny"`` (a random transformer for tests), a local folder, or a hub id.

    The built-in model runs on the CPU without torch: `device`, `dtype`, `kv_cache` and
    `options` do not apply to it.

    `kv_cache`: ``auto`` (static buffers on CUDA, dynamic elsewhere), ``static`` or
    ``dynamic`` (see `static_cache`).  `relative_to`: the directory a relative model
    path resolves against (see `resolve_model_source`).  `threads`: torch's CPU threads
    (None: `_choose_cpu_threads`).  `options` go to `HFLanguageModel` (max_context,
    max_cached_prompts, ...).  Raises `ModelError` with a message naming the fix when
    the model cannot be loaded.
    """
    if name_or_path == BUILTIN_MODEL:
        from adaptrack_lsp.completion.lm.builtin import load_builtin_model

        return load_builtin_model(progress)
    return _load_transformers_model(name_or_path, device, dtype, trust_remote_code, kv_cache, relative_to, threads, **options)


def _load_transformers_model(
    name_or_path: str,
    device: str,
    dtype: str,
    trust_remote_code: bool,
    kv_cache: str,
    relative_to: str | os.PathLike | None,
    threads: int | None,
    **options: Any,
):
    from adaptrack_lsp.extras import MissingExtra, require

    try:  # the light core has no torch: say which extra to install, before any import fails
        require("transformers", f"model {name_or_path!r}")
    except MissingExtra as error:
        raise ModelError(str(error)) from None
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from adaptrack_lsp.completion.lm.hf import (
        OFFLINE_FIX,
        ROUND_TRIP_TEXTS,
        HFLanguageModel,
        _choose_cpu_threads,
        _hub_snapshot,
        _offline,
        resolve_device,
        resolve_dtype,
        resolve_model_source,
        vocabulary_for,
    )
    from adaptrack_lsp.completion.lm.static_cache import StaticCacheLanguageModel, use_static_cache

    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    static = use_static_cache(kv_cache, torch_device)
    local_only = _offline()
    source, local = resolve_model_source(name_or_path, relative_to)
    try:
        if not local:
            source = _hub_snapshot(source, local_only, trust_remote_code)
        tokenizer = AutoTokenizer.from_pretrained(
            source, trust_remote_code=trust_remote_code, local_files_only=True
        )
        model = AutoModelForCausalLM.from_pretrained(
            source,
            use_safetensors=True,
            trust_remote_code=trust_remote_code,
            dtype=torch_dtype,
            local_files_only=True,
        )
    except ModelError:
        raise
    except Exception as error:
        if local:
            raise ModelError(f"cannot load the model in {source}: {type(error).__name__}: {error}") from error
        raise ModelError(
            f"cannot load model {name_or_path!r} from the Hugging Face hub "
            f"({'offline mode' if local_only else 'not reachable or not found'}: {type(error).__name__}); {OFFLINE_FIX}"
        ) from error
    model = model.to(torch_device).eval()
    if threads is not None:
        import torch

        torch.set_num_threads(int(threads))
    else:
        _choose_cpu_threads(model, torch_device)
    try:
        vocab = vocabulary_for(model, tokenizer)
    except ValueError as error:
        raise ModelError(f"unsupported tokenizer for {name_or_path!r}: {error}") from error
    from adaptrack_lsp.completion.tokenizer_bytes import round_trip_mismatches

    mismatches = round_trip_mismatches(tokenizer, vocab, ROUND_TRIP_TEXTS)
    if mismatches:
        text, got = mismatches[0]
        raise ModelError(f"the tokenizer of {name_or_path!r} does not map to exact bytes: {text!r} -> {got!r}")
    if static:
        return StaticCacheLanguageModel(model, tokenizer, vocab=vocab, name=name_or_path, **options)
    return HFLanguageModel(model, tokenizer, vocab=vocab, name=name_or_path, **options)
