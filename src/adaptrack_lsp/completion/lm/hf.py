"""Hugging Face causal LMs as a `LanguageModel`, with KV-cache path management.

Owns the model sources (local folder, hub id or the test model ``tiny``; safetensors only;
device/dtype selection; clear `ModelError`s naming the fix; `lm.loading.load_model`
puts them together) and the KV state:

- One `DynamicCache` follows the current path (prompt + generated tokens).  Moving to
  another branch crops it to the longest common prefix (`crop_cache`, the one place
  that calls ``Cache.crop``) and appends the missing tokens.
- The key/value vectors of every generated token fed are kept per tree node (path), so
  returning to a branch appends the stored vectors instead of recomputing them: each
  node costs exactly one token through the network (`tokens_fed == prompt + distinct
  nodes evaluated`).  The store is bounded (`max_node_cache_bytes`); beyond it tokens
  are re-fed.
- `set_prompt` reuses the longest common token prefix with the previous prompt of the
  same `cache_key` (document URI), keeping an LRU of a few prompt caches, so a small
  edit does not re-feed the file; prompts longer than the context are left-truncated.
- `next_logprobs_batch` of siblings (paths that differ only in their last token) is one
  forward pass: the cache is brought to the parent, the last tokens go in as one
  sequence with a 4D attention mask in which each sees the parent and itself only (tree
  attention, every one at the parent's length as position), their key/values go to the
  node store and the cache is cropped back.  The first such batch is checked against
  one-by-one evaluation; a model whose forward ignores the explicit mask (or fails on
  it) falls back to one path at a time, logged.

`lm.loading.load_model` returns the subclass `static_cache.StaticCacheLanguageModel`
(static buffers, CUDA graphs, batched steps) when the `kv_cache` option selects it (the
default on CUDA); this class stays the dynamic reference path.

Heavy imports (torch, transformers) happen when this module is imported, so import it
only where a real model is needed.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from adaptrack_lsp.completion.lm.base import (
    LanguageModel,
    ModelError,
    PromptInfo,
)
from adaptrack_lsp.completion.tokenizer_bytes import ROUND_TRIP_TEXTS  # noqa: F401  (loading.py's import)
from adaptrack_lsp.config import is_hub_id
from adaptrack_lsp.vocab import Vocabulary

log = logging.getLogger(__name__)

OFFLINE_FIX = (
    "use `--model builtin` (the default; `make demo` runs it) for the built-in offline model, "
    "or pass the path of a local model folder"
)


_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


#: largest difference of log-probabilities between a sibling batch and single forwards
#: (float32 rounding of another summation order is about 1e-5)
SIBLING_BATCH_TOLERANCE = 1e-3


class CacheCropError(RuntimeError):
    """The cache cannot be cropped to the requested length (e.g. a full sliding window)."""


# -- cache helpers (the only code that touches cache internals) ---------------------------
def crop_cache(cache, length: int) -> None:
    """Crop `cache` in place so that it holds exactly its first `length` tokens.

    transformers 5 ``Cache.crop`` takes the (negative) number of tokens to remove;
    negative values mean the same in transformers 4, so this works on both.
    """
    current = cache.get_seq_length()
    if length < 0 or length > current:
        raise CacheCropError(f"cannot crop a cache of {current} tokens to {length}")
    if length == current:
        return
    try:
        cache.crop(length - current)
    except (RuntimeError, ValueError) as error:
        raise CacheCropError(str(error)) from error
    if cache.get_seq_length() != length:
        raise CacheCropError(f"cache holds {cache.get_seq_length()} tokens after cropping to {length}")


def cache_keyword(model) -> str:
    """The name under which `model`'s forward takes the KV cache: ``cache`` in current
    transformers, ``past_key_values`` before (still accepted there, with a FutureWarning)."""
    import inspect

    try:
        parameters = inspect.signature(type(model).forward).parameters  # the class's: wrappers hide it
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in parameters else "past_key_values"


def returned_cache(output):
    """The KV cache a forward pass returned (``cache``, or ``past_key_values`` before)."""
    if "cache" in output:
        return output["cache"]
    return output.get("past_key_values")


def _layer_tensors(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [(layer.keys, layer.values) for layer in layers]
    return list(zip(cache.key_cache, cache.value_cache))  # transformers 4


def cache_supports_node_store(cache) -> bool:
    """Whether per-token key/values can be cut out and appended back (full attention only)."""
    layers = getattr(cache, "layers", None)
    if layers is None:
        return hasattr(cache, "key_cache")
    return all(type(layer).__name__ == "DynamicLayer" for layer in layers)


def last_tokens_kv(cache, count: int) -> torch.Tensor:
    """A copy of the last `count` tokens' key/values: [layers, 2, batch, heads, count, dim]."""
    return torch.stack([torch.stack((k[..., -count:, :], v[..., -count:, :])) for k, v in _layer_tensors(cache)])


def append_kv(cache, kv: torch.Tensor) -> None:
    """Append key/values produced by `last_tokens_kv` (or a concatenation of them)."""
    for layer_index in range(kv.shape[0]):
        cache.update(kv[layer_index, 0], kv[layer_index, 1], layer_index)


def _common_prefix(a: Sequence[int], b: Sequence[int], start: int = 0) -> int:
    limit = min(len(a), len(b))
    i = start
    while i < limit and a[i] == b[i]:
        i += 1
    return i


class _PromptSlot:
    """The KV cache of one prompt (plus whatever path it currently follows)."""

    def __init__(self, cache):
        self.cache = cache
        self.ids: list[int] = []  # tokens whose key/values the cache holds
        self.prompt: list[int] = []
        self.root_logprobs: np.ndarray | None = None


class HFLanguageModel(LanguageModel):
    """A transformers causal LM behind the `LanguageModel` protocol (batch size 1)."""

    def __init__(
        self,
        model,
        tokenizer,
        vocab: Vocabulary | None = None,
        name: str = "hf",
        max_context: int | None = None,
        max_cached_prompts: int = 4,
        max_node_cache_bytes: int = 1 << 30,
    ):
        self.model = model.eval()
        self._cache_keyword = cache_keyword(model)
        self.tokenizer = tokenizer
        self.name = name
        self.device = next(model.parameters()).device
        logits_size = _logits_size(model)
        if vocab is None:
            vocab = vocabulary_for(model, tokenizer)
        if vocab.size != logits_size:
            raise ModelError(f"vocabulary size {vocab.size} does not match the model's {logits_size} logits")
        self.vocab = vocab
        self.max_context = max_context if max_context is not None else _context_length(model, tokenizer)
        self.max_cached_prompts = max(1, int(max_cached_prompts))
        self.max_node_cache_bytes = int(max_node_cache_bytes)
        self.tokens_fed = 0
        #: seconds spent inside model forward passes (for overhead measurements)
        self.forward_seconds = 0.0
        self.forward_calls = 0
        #: seconds in KV cache work on the path (crops, stored key/values appended and
        #: cut out) and evaluations that cropped tokens of another branch
        self.kv_seconds = 0.0
        self.branch_switches = 0
        self._slots: OrderedDict[Hashable, _PromptSlot] = OrderedDict()
        self._active: _PromptSlot | None = None
        self._node_kv: dict[tuple[int, ...], torch.Tensor] = {}
        self._node_kv_bytes = 0
        self._node_store = True
        self._padding = np.arange(vocab.size) >= vocab.num_defined
        self._padding_mask = None  # the same as a torch tensor on the model's device
        #: siblings go through one forward pass (None: not checked yet; False: unsupported)
        self._sibling_batches: bool | None = None

    @property
    def batched_nodes(self) -> bool:
        """`next_logprobs_batch` of siblings costs about one forward pass."""
        return self._sibling_batches is not False

    # -- prompt -------------------------------------------------------------------------
    def set_prompt(
        self, prompt_ids: Sequence[int], max_new_tokens: int = 0, cache_key: Hashable | None = None
    ) -> PromptInfo:
        """Feed the prompt, reusing the longest common prefix cached under `cache_key`."""
        ids, truncated = self._prompt_ids(prompt_ids, max_new_tokens)

        slot = self._slots.pop(cache_key, None)
        if slot is None:
            slot = _PromptSlot(self._new_cache())
            while len(self._slots) >= self.max_cached_prompts:
                self._slots.popitem(last=False)
        self._slots[cache_key] = slot
        previous, self._active = self._active, slot
        if slot.prompt == ids and slot.root_logprobs is not None and slot is previous:
            # the same prompt again (e.g. a fresh tree per sample): nothing to feed, and the
            # stored node key/values stay valid
            try:
                crop_cache(slot.cache, len(ids))
                del slot.ids[len(ids) :]
                return PromptInfo(length=len(ids), truncated=truncated, reused=len(ids))
            except CacheCropError:
                pass
        self._clear_node_store()

        keep = min(_common_prefix(slot.ids, ids), len(ids) - 1)
        try:
            crop_cache(slot.cache, keep)
        except CacheCropError:
            slot.cache, keep = self._new_cache(), 0
        del slot.ids[keep:]
        slot.prompt, slot.root_logprobs = [], None
        try:
            root_logprobs = self._logprobs(self._feed(slot, ids[keep:]))
        except BaseException:
            self.clear_cache()  # a failed or interrupted forward leaves no trustworthy state
            raise
        slot.prompt, slot.root_logprobs = ids, root_logprobs
        return PromptInfo(length=len(ids), truncated=truncated, reused=keep)

    def _prompt_ids(self, prompt_ids: Sequence[int], max_new_tokens: int) -> tuple[list[int], int]:
        """The prompt as checked ids (a start token when empty), left-truncated to fit; dropped count."""
        ids = [int(i) for i in prompt_ids]
        self._check_ids(ids, "prompt")
        if not ids:  # condition on a document start: BOS, else the end-of-text separator
            start = self.tokenizer.bos_token_id
            if start is None:
                start = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else min(self.vocab.eos_ids)
            ids = [int(start)]
        truncated = 0
        if self.max_context is not None:
            budget = self.max_context - max(0, int(max_new_tokens))
            if budget < 1:
                raise ValueError(
                    f"max_new_tokens={max_new_tokens} leaves no room for a prompt in a context of {self.max_context}"
                )
            if len(ids) > budget:
                truncated = len(ids) - budget
                ids = ids[truncated:]
        return ids, truncated

    # -- distributions --------------------------------------------------------------------
    def _checked_length(self, path: list[int], prompt_length: int) -> int:
        """prompt + path length, after checking the path's ids and the model's context."""
        self._check_ids(path, "path")
        target_length = prompt_length + len(path)
        if self.max_context is not None and target_length > self.max_context:
            raise ModelError(f"prompt + path ({target_length} tokens) exceeds the context of {self.max_context}")
        return target_length

    def _stored_run(self, path: list[int], prompt_length: int, keep: int, target_length: int) -> tuple[list, int]:
        """Stored key/values of the path's nodes from position `keep` on, as long as they
        run unbroken (the last token is always fed); (key/values, first position not restored)."""
        restored = []
        position = keep
        while position < target_length - 1:
            kv = self._node_kv.get(tuple(path[: position - prompt_length + 1]))
            if kv is None:
                break
            restored.append(kv)
            position += 1
        return restored, position

    def next_logprobs(self, path: Sequence[int]) -> np.ndarray:
        slot = self._active
        if slot is None or slot.root_logprobs is None:
            raise ModelError("set_prompt must be called before next_logprobs")
        path = [int(t) for t in path]
        if not path:
            return slot.root_logprobs.copy()
        prompt_length = len(slot.prompt)
        target_length = self._checked_length(path, prompt_length)

        # tokens of the cache beyond the prompt that agree with the path
        common = prompt_length
        limit = min(len(slot.ids), target_length)
        while common < limit and slot.ids[common] == path[common - prompt_length]:
            common += 1
        keep = min(common, target_length - 1)  # the last token is always fed: its logits are needed
        started = time.perf_counter()
        if common < len(slot.ids):  # the cache holds tokens of another branch
            self.branch_switches += 1
        try:
            crop_cache(slot.cache, keep)
            del slot.ids[keep:]
        except CacheCropError:
            self.kv_seconds += time.perf_counter() - started
            self._rebuild(slot, prompt_length)
            started = time.perf_counter()
            keep = prompt_length

        # append stored key/values of nodes evaluated before, then feed the rest
        restored, position = self._stored_run(path, prompt_length, keep, target_length)
        if restored:
            append_kv(slot.cache, restored[0] if len(restored) == 1 else torch.cat(restored, dim=-2))
            slot.ids.extend(path[keep - prompt_length : position - prompt_length])
        self.kv_seconds += time.perf_counter() - started
        try:
            logits = self._feed(slot, path[position - prompt_length :], path_offset=position - prompt_length, path=path)
            return self._logprobs(logits)
        except BaseException:
            self.clear_cache()  # a failed or interrupted forward leaves no trustworthy state
            raise

    def next_logprobs_batch(self, paths: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Siblings (paths of one length that share all but their last token) in one
        forward pass (see the module docstring); other batches one path at a time."""
        paths = [[int(t) for t in path] for path in paths]
        if (
            len(paths) < 2
            or self._sibling_batches is False
            or not paths[0]
            or any(len(p) != len(paths[0]) or p[:-1] != paths[0][:-1] for p in paths)
        ):
            return [self.next_logprobs(p) for p in paths]
        parent = paths[0][:-1]
        tokens = [p[-1] for p in paths]
        try:
            results = self._siblings(parent, tokens)
        except ModelError:
            raise
        except Exception as error:  # an architecture that cannot take the explicit mask
            self.clear_cache()
            self._sibling_batches = False
            log.warning("sibling batches unavailable for %s (%s: %s); one path at a time", self.name, type(error).__name__, error)
            return [self.next_logprobs(p) for p in paths]
        if self._sibling_batches is None:  # first batch: checked against a plain forward
            reference = self.next_logprobs(paths[0])
            finite = np.isfinite(reference)
            same_support = np.array_equal(finite, np.isfinite(results[0]))
            difference = float(np.max(np.abs(reference[finite] - results[0][finite]))) if same_support and finite.any() else np.inf
            if not difference <= SIBLING_BATCH_TOLERANCE:
                self._sibling_batches = False
                self._clear_node_store()  # the batch's key/values are not trustworthy
                log.warning("sibling batches of %s differ from single forwards by %.3g; one path at a time", self.name, difference)
                return [reference] + [self.next_logprobs(p) for p in paths[1:]]
            self._sibling_batches = True
        return results

    def _siblings(self, parent: list[int], tokens: list[int]) -> list[np.ndarray]:
        slot = self._active
        if slot is None or slot.root_logprobs is None:
            raise ModelError("set_prompt must be called before next_logprobs_batch")
        prompt_length = len(slot.prompt)
        self._checked_length(parent + [tokens[0]], prompt_length)
        self._check_ids(tokens, "path")
        parent_length = prompt_length + len(parent)
        # the cache to exactly prompt + parent: crop to the common prefix, restore stored
        # key/values, feed what is missing
        common = prompt_length
        limit = min(len(slot.ids), parent_length)
        while common < limit and slot.ids[common] == parent[common - prompt_length]:
            common += 1
        try:
            crop_cache(slot.cache, common)
            del slot.ids[common:]
        except CacheCropError:
            self._rebuild(slot, prompt_length)
            common = prompt_length
        restored, position = self._stored_run(parent + [tokens[0]], prompt_length, common, parent_length + 1)
        try:
            if restored:
                append_kv(slot.cache, restored[0] if len(restored) == 1 else torch.cat(restored, dim=-2))
                slot.ids.extend(parent[common - prompt_length : position - prompt_length])
            if position < parent_length:
                self._feed(slot, parent[position - prompt_length :], path_offset=position - prompt_length, path=parent)
            count = len(tokens)
            dtype = self.model.dtype if self.model.dtype.is_floating_point else torch.float32
            mask = torch.full((1, 1, count, parent_length + count), torch.finfo(dtype).min, dtype=dtype, device=self.device)
            mask[..., :parent_length] = 0
            rows = torch.arange(count, device=self.device)
            mask[0, 0, rows, parent_length + rows] = 0
            with torch.inference_mode():
                started = time.perf_counter()
                output = self.model(
                    input_ids=torch.tensor([tokens], dtype=torch.long, device=self.device),
                    attention_mask=mask,
                    position_ids=torch.full((1, count), parent_length, dtype=torch.long, device=self.device),
                    use_cache=True,
                    **{self._cache_keyword: slot.cache},
                )
                logits = output.logits[0]
                if logits.device.type != "cpu":
                    logits = logits.float().cpu()
                self.forward_seconds += time.perf_counter() - started
                self.forward_calls += 1
                returned = returned_cache(output)
                if returned is not None and returned is not slot.cache:
                    slot.cache = returned
                self.tokens_fed += count
                if self._node_store and cache_supports_node_store(slot.cache):
                    kv = last_tokens_kv(slot.cache, count)
                    per_token = kv.element_size() * kv.numel() // count
                    for index, token in enumerate(tokens):
                        key = (*parent, token)
                        if key not in self._node_kv and self._node_kv_bytes + per_token <= self.max_node_cache_bytes:
                            self._node_kv[key] = kv[..., index : index + 1, :]
                            self._node_kv_bytes += per_token
                crop_cache(slot.cache, parent_length)  # the siblings are not on the path
            return [self._logprobs(logits[index]) for index in range(count)]
        except BaseException:
            self.clear_cache()  # a failed or interrupted forward leaves no trustworthy state
            raise

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def clear_cache(self) -> None:
        """Drop every cached prompt and node key/values."""
        self._slots.clear()
        self._active = None
        self._clear_node_store()

    # -- internals ------------------------------------------------------------------------
    def _new_cache(self):
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self.model.config)
        except TypeError:  # transformers 4
            return DynamicCache()

    def _check_ids(self, ids: Sequence[int], what: str) -> None:
        for token_id in ids:
            if not 0 <= token_id < self.vocab.num_defined:
                raise ValueError(f"{what} token id {token_id} is outside the tokenizer's {self.vocab.num_defined} ids")

    def _clear_node_store(self) -> None:
        self._node_kv.clear()
        self._node_kv_bytes = 0

    def _rebuild(self, slot: _PromptSlot, length: int) -> None:
        """Recompute the cache for the first `length` tokens from scratch (crop impossible)."""
        ids = slot.ids[:length]
        slot.cache = self._new_cache()
        slot.ids = []
        self._feed(slot, ids)

    def _feed(
        self,
        slot: _PromptSlot,
        tokens: Sequence[int],
        path_offset: int | None = None,
        path: Sequence[int] | None = None,
        chunk: int = 1024,
    ) -> torch.Tensor:
        """Push `tokens` through the model after the cache; logits of the last one.

        With `path` given, `tokens` are `path[path_offset:]` and their key/values are
        stored per node.
        """
        if not tokens:
            raise ModelError("internal error: nothing to feed")
        logits = None
        with torch.inference_mode():
            for begin in range(0, len(tokens), chunk):
                part = list(tokens[begin : begin + chunk])
                input_ids = torch.tensor([part], dtype=torch.long, device=self.device)
                started = time.perf_counter()
                output = self.model(
                    input_ids=input_ids, use_cache=True, logits_to_keep=1, **{self._cache_keyword: slot.cache}
                )
                logits = output.logits[0, -1]
                if logits.device.type != "cpu":
                    logits = logits.float().cpu()
                self.forward_seconds += time.perf_counter() - started
                self.forward_calls += 1
                returned = returned_cache(output)
                if returned is not None and returned is not slot.cache:  # models that return a new cache object
                    slot.cache = returned
                slot.ids.extend(part)
                self.tokens_fed += len(part)
            if path is not None and self._node_store:
                started = time.perf_counter()
                self._store_nodes(slot, path, path_offset, len(tokens))
                self.kv_seconds += time.perf_counter() - started
        return logits

    def _store_nodes(self, slot: _PromptSlot, path: Sequence[int], offset: int, count: int) -> None:
        if not cache_supports_node_store(slot.cache):
            self._node_store = False
            return
        kv = last_tokens_kv(slot.cache, count)
        per_token = kv.element_size() * kv.numel() // count
        for index in range(count):
            key = tuple(path[: offset + index + 1])
            if key in self._node_kv:
                continue
            if self._node_kv_bytes + per_token > self.max_node_cache_bytes:
                return
            self._node_kv[key] = kv[..., index : index + 1, :]
            self._node_kv_bytes += per_token

    def _logprobs(self, logits: torch.Tensor) -> np.ndarray:
        """log-softmax (float32, on the model's device) with padding ids at -inf."""
        values = logits.float()
        if self._padding_mask is None or self._padding_mask.device != values.device:
            self._padding_mask = torch.from_numpy(self._padding).to(values.device)
        values = values.masked_fill(self._padding_mask, -torch.inf)
        top = float(values.max())
        if not top < np.inf:  # NaN anywhere makes the maximum NaN
            raise ModelError("the model produced NaN or +inf logits")
        if top == -np.inf:
            raise ModelError("the model gave every token zero probability")
        return torch.log_softmax(values, dim=-1).cpu().numpy()


# -- loading ------------------------------------------------------------------------------
def _logits_size(model) -> int:
    output = model.get_output_embeddings()
    if output is not None and getattr(output, "weight", None) is not None:
        return int(output.weight.shape[0])
    return int(model.config.get_text_config().vocab_size)


def _context_length(model, tokenizer) -> int | None:
    config = model.config.get_text_config()
    limits = [getattr(config, "max_position_embeddings", None)]
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tokenizer_limit, int) and tokenizer_limit < 10_000_000:
        limits.append(tokenizer_limit)
    limits = [int(x) for x in limits if isinstance(x, int) and x > 0]
    return min(limits) if limits else None


def _as_id_list(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def vocabulary_for(model, tokenizer) -> Vocabulary:
    """The exact vocabulary of `tokenizer` at the model's logits width, all EOS ids included."""
    from adaptrack_lsp.completion.tokenizer_bytes import vocabulary_from_tokenizer

    extra = _as_id_list(getattr(model.config.get_text_config(), "eos_token_id", None))
    generation = getattr(model, "generation_config", None)
    if generation is not None:
        extra += _as_id_list(getattr(generation, "eos_token_id", None))
    return vocabulary_from_tokenizer(tokenizer, logits_size=_logits_size(model), extra_eos_ids=extra)


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        return torch.device(device)
    except RuntimeError as error:
        raise ModelError(f"unknown device {device!r}: {error}") from None


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise ModelError(f"unknown dtype {dtype!r}; choose auto, {', '.join(_DTYPES)}") from None


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


#: below this many parameters a CPU forward pass is faster on one thread than on a pool
SMALL_MODEL_PARAMETERS = 50_000_000


def _choose_cpu_threads(model, device) -> None:
    """Small models on the CPU: one torch thread (pool hand-offs cost more than the math,
    badly so on a busy machine).  `OMP_NUM_THREADS` set by the user always wins."""
    import torch

    if str(device) != "cpu" or "OMP_NUM_THREADS" in os.environ:
        return
    if sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMETERS:
        torch.set_num_threads(1)


#: files of a hub model that loading needs (weights are safetensors only)
HUB_MODEL_FILES = ("*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja")


def resolve_model_source(name_or_path: str, relative_to: str | os.PathLike | None = None) -> tuple[str, bool]:
    """(what to load, whether it is a local folder) for a model setting.

    ``tiny`` is the random test transformer (``builtin`` never reaches here: it is no
    transformers model, `loading.load_model` handles it); a hub id (`is_hub_id`) stays a hub id; anything else
    is a path.  A relative path resolves against `relative_to` (the directory the user's
    configuration is relative to, e.g. the shell's directory for a command-line
    argument), never against the server's working directory: without `relative_to` it
    is an error."""
    if name_or_path == "tiny":
        from adaptrack_lsp.completion.lm.tiny import tiny_model_path

        return str(tiny_model_path()), True
    if is_hub_id(name_or_path):
        return name_or_path, False
    path = Path(name_or_path).expanduser()
    if not path.is_absolute():
        if relative_to is None:
            raise ModelError(
                f"model path {name_or_path!r} is relative; give an absolute path (or ~/...) in the settings: "
                "relative paths are not resolved against the server's working directory"
            )
        path = Path(relative_to).expanduser() / path
    if not path.exists():
        raise ModelError(f"model path {str(path)!r} does not exist; {OFFLINE_FIX}")
    if path.is_file() and path.suffix.lower() == ".gguf":
        raise ModelError(f"{path} is a GGUF file: it runs on the llamacpp backend (setting backend \"llamacpp\", `--backend llamacpp`)")
    if not path.is_dir() or not (path / "config.json").is_file():
        raise ModelError(f"{path} is not a model folder (it has no config.json)")
    return str(path), True


def _hub_snapshot(repo_id: str, local_only: bool, trust_remote_code: bool) -> str:
    """The absolute folder of a hub model in the Hugging Face cache (downloaded unless
    `local_only`).  Loading from this folder, not from the id, is what keeps a folder
    named like the id in the working directory from being loaded instead."""
    from huggingface_hub import snapshot_download

    patterns = list(HUB_MODEL_FILES) + (["*.py"] if trust_remote_code else [])
    return snapshot_download(repo_id, allow_patterns=patterns, local_files_only=local_only)
