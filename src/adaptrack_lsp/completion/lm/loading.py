"""Loading a causal LM: the built-in ``tiny``, a local folder or a hub id, on the
dynamic (`hf.HFLanguageModel`) or the static (`static_cache.StaticCacheLanguageModel`)
KV-cache path as the `kvCache` setting chooses.

Heavy imports (torch, transformers) happen when this module is imported.
"""

from __future__ import annotations

import os
from typing import Any

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


def load_model(
    name_or_path: str,
    device: str = "auto",
    dtype: str = "auto",
    trust_remote_code: bool = False,
    kv_cache: str = "auto",
    relative_to: str | os.PathLike | None = None,
    **options: Any,
) -> HFLanguageModel:
    """Load a causal LM: ``"tiny"`` (built-in), a local folder, or a hub id.

    `kv_cache`: ``auto`` (static buffers on CUDA, dynamic elsewhere), ``static`` or
    ``dynamic`` (see `static_cache`).  `relative_to`: the directory a relative model
    path resolves against (see `resolve_model_source`).  `options` go to `HFLanguageModel` (max_context,
    max_cached_prompts, ...).  Raises `ModelError` with a message naming the fix when
    the model cannot be loaded.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

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


def load_for_settings(settings, progress=None) -> HFLanguageModel:
    """The `transformers` backend (`lm.backends`): `settings.model` on its device, dtype
    and KV-cache path."""
    if progress is not None:
        progress(f"loading {settings.model}", 10)
    return load_model(
        settings.model,
        device=settings.device,
        dtype=settings.dtype,
        kv_cache=settings.kv_cache,
        trust_remote_code=settings.trust_remote_code,
    )
