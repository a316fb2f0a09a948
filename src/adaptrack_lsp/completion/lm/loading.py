"""Loading a language model by name: the built-in ``builtin`` (n-gram, no torch) and
``tiny`` (random transformer for tests), a local folder or a hub id.

Transformers models go on the dynamic (`hf.HFLanguageModel`) or the static
(`static_cache.StaticCacheLanguageModel`) KV-cache path as the `kvCache` setting chooses.
torch and transformers are imported only when such a model is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from adaptrack_lsp.completion.lm.base import LanguageModel
from adaptrack_lsp.config import BUILTIN_MODEL


def load_model(
    name_or_path: str,
    device: str = "auto",
    dtype: str = "auto",
    trust_remote_code: bool = False,
    kv_cache: str = "auto",
    relative_to: str | os.PathLike | None = None,
    progress: Callable[[str, int | None], None] | None = None,
    **options: Any,
) -> LanguageModel:
    """Load a language model: ``"builtin"`` (the offline n-gram model, built on first use
    with `progress`), ``"tiny"`` (a random transformer for tests), a local folder, or a hub id.

    The built-in model runs on the CPU without torch: `device`, `dtype`, `kv_cache` and
    `options` do not apply to it.

    `kv_cache`: ``auto`` (static buffers on CUDA, dynamic elsewhere), ``static`` or
    ``dynamic`` (see `static_cache`).  `relative_to`: the directory a relative model
    path resolves against (see `resolve_model_source`).  `options` go to `HFLanguageModel` (max_context,
    max_cached_prompts, ...).  Raises `ModelError` with a message naming the fix when
    the model cannot be loaded.
    """
    if name_or_path == BUILTIN_MODEL:
        from adaptrack_lsp.completion.lm.builtin import load_builtin_model

        return load_builtin_model(progress)
    return _load_transformers_model(name_or_path, device, dtype, trust_remote_code, kv_cache, relative_to, **options)


def _load_transformers_model(
    name_or_path: str,
    device: str,
    dtype: str,
    trust_remote_code: bool,
    kv_cache: str,
    relative_to: str | os.PathLike | None,
    **options: Any,
):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from adaptrack_lsp.completion.lm.hf import (
        OFFLINE_FIX,
        ROUND_TRIP_TEXTS,
        HFLanguageModel,
        ModelError,
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
