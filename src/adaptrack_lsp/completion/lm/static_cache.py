"""The static-KV-cache path of the Hugging Face backend (default on CUDA).

Owns `StaticCacheLanguageModel`, an `HFLanguageModel` whose key/values live in
fixed-size buffers instead of a growing `DynamicCache`:

- **Buffers and buckets.**  One tensor ``[layers, 2, 1, kv_heads, capacity, head_dim]``
  holds every key/value.  The capacity is prompt + ``max_new_tokens`` + a margin,
  rounded up to a bucket (a multiple of `BUCKET`), so prompts of similar length share
  buffers; the last slot of every buffer is a scratch slot that padded batch rows write.
- **Slots, not positions.**  Every forward pass writes its tokens at given slots and
  attends through an explicit mask over all slots (`SlotCache`); the rotary position
  of each token is passed separately.  The current path (prompt + path tokens) sits
  at slots ``0 .. len-1``, so moving to another branch of the prefix tree is a move of
  the write position (stale slots beyond it are masked), never a crop.  A stored
  node's key/values (the per-node store of `HFLanguageModel`) are copied into the
  buffers when its branch is visited again.
- **Batches of one-token steps** (`next_logprobs_batch`): several paths after the same
  prompt are evaluated in one forward pass, one query row each.  Each row sees the
  prompt, its own ancestors (in place on the current path, or copied from the node
  store into free slots after it) and itself: tree attention over one buffer, so the
  prompt is never copied per row.
- **CUDA graphs.**  On CUDA the one-token step (and padded batches of 2, 4, 8 rows)
  is captured with ``torch.cuda.CUDAGraph`` once per buffer bucket and row count,
  at the first use of the bucket, and replayed for every node.  The graph includes
  the padding mask and the log-softmax, so the logits never leave the device: one
  copy of the log-probabilities to the host per forward pass is the only host sync.
  Elsewhere (CPU, the tests) the same step runs eagerly.
- **Prompt reuse.**  ``set_prompt`` keeps the longest common prefix with the previous
  prompt of the same ``cache_key``; the prompts of other keys are kept as copies
  (an LRU) and copied back when their key returns.  Prefill is chunked.

Architectures that cannot use it (sliding-window or non-attention layers, custom
model code, attention implementations that ignore an explicit mask) fall back to the
dynamic path with one log line (`static_cache_unsupported`); so does a model whose
static forward disagrees with its plain forward at load time.  A CUDA-graph capture
that fails (out of memory included) leaves the static path running eagerly, logged.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Hashable, Sequence

import numpy as np
import torch

from adaptrack_lsp.completion.lm.base import ModelError, PromptInfo
from adaptrack_lsp.completion.lm.hf import HFLanguageModel, _common_prefix
from adaptrack_lsp.config import KV_CACHES as KV_CACHE_MODES

log = logging.getLogger(__name__)

#: buffer capacities are multiples of this many tokens
BUCKET = 512
#: tokens of room beyond prompt + max_new_tokens (batch ancestors, token healing)
MARGIN = 64
#: row counts of the captured batch steps (larger batches are split)
GRAPH_ROWS = (1, 2, 4, 8)
#: prompt tokens per prefill forward pass
PREFILL_CHUNK = 512
#: attention implementations that honour an explicit 4-D mask
MASKED_ATTENTION = ("sdpa", "eager")


def use_static_cache(mode: str, device: torch.device) -> bool:
    """Whether the `kvCache` setting selects the static path on `device`."""
    if mode not in KV_CACHE_MODES:
        raise ModelError(f"unknown kv cache mode {mode!r}; choose {', '.join(KV_CACHE_MODES)}")
    if mode == "auto":
        return device.type == "cuda"
    return mode == "static"


def static_cache_unsupported(model) -> str | None:
    """Why `model` cannot run on the static path, or None when it can."""
    module = type(model).__module__
    if not module.startswith("transformers."):
        return f"{type(model).__name__} is custom model code ({module})"
    config = model.config.get_text_config()
    layer_types = getattr(config, "layer_types", None)
    if layer_types and any(kind != "full_attention" for kind in layer_types):
        return f"its layers are not all full attention ({', '.join(sorted(set(layer_types)))})"
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        return f"it uses sliding-window attention (window {config.sliding_window})"
    implementation = getattr(config, "_attn_implementation", None) or "eager"
    if implementation not in MASKED_ATTENTION:
        return f"attention implementation {implementation!r} takes no explicit mask"
    return None


def bucket_capacity(tokens: int, limit: int | None) -> int:
    """Slots for `tokens` tokens plus the scratch slot, rounded up to a bucket."""
    capacity = -(-(tokens + 1) // BUCKET) * BUCKET
    if limit is not None:
        capacity = min(capacity, limit + 1)
    return max(capacity, tokens + 1)


# -- the cache object handed to the model ---------------------------------------------------
class _WriteSlots:
    """The slot indices the next forward pass writes (one per input token)."""

    def __init__(self) -> None:
        self.slots: torch.Tensor | None = None
        self.length = 0


def _slot_cache(kv: torch.Tensor, writes: _WriteSlots):
    """A transformers `Cache` over the buffer `kv` that writes each forward at `writes.slots`."""
    from transformers.cache_utils import Cache, CacheLayerMixin

    class SlotLayer(CacheLayerMixin):
        is_compileable = True
        is_sliding = False

        def __init__(self, keys: torch.Tensor, values: torch.Tensor):
            super().__init__()
            self.keys, self.values = keys, values
            self.dtype, self.device = keys.dtype, keys.device
            self.is_initialized = True

        def lazy_initialization(self, *args, **kwargs) -> None:
            return None

        def update(self, key_states, value_states, *args, **kwargs):
            slots = writes.slots
            if self.device.type == "mps":  # no index_copy_ there
                self.keys[:, :, slots] = key_states
                self.values[:, :, slots] = value_states
            else:
                self.keys.index_copy_(2, slots, key_states)
                self.values.index_copy_(2, slots, value_states)
            return self.keys, self.values

        def get_mask_sizes(self, *args, **kwargs):
            return self.keys.shape[-2], 0

        def get_seq_length(self, *args, **kwargs) -> int:
            return writes.length

        def get_max_length(self) -> int:
            return self.keys.shape[-2]

    return Cache(layers=[SlotLayer(kv[index, 0], kv[index, 1]) for index in range(kv.shape[0])])


class _Buffers:
    """Static key/value buffers of one capacity, the cache over them and their graphs."""

    def __init__(self, kv: torch.Tensor):
        self.kv = kv
        self.capacity = kv.shape[-2]
        self.writes = _WriteSlots()
        self.cache = _slot_cache(kv, writes=self.writes)
        self.graphs: dict[int, _StepGraph] = {}

    @property
    def scratch(self) -> int:
        return self.capacity - 1


class _StepGraph:
    """A CUDA graph of one forward pass of `rows` one-token rows, with its static inputs."""

    def __init__(self, lm: StaticCacheLanguageModel, buffers: _Buffers, rows: int):
        device = lm.device
        self.rows = rows
        self.buffers = buffers
        self.lm = lm
        self.ints = torch.zeros(3, rows, dtype=torch.long, device=device)  # ids, positions, slots
        self.visible = torch.zeros(rows, buffers.capacity, dtype=torch.bool, device=device)
        self.host_ints = torch.zeros(3, rows, dtype=torch.long)
        self.host_visible = torch.zeros(rows, buffers.capacity, dtype=torch.bool)
        if device.type == "cuda":  # page-locked, so the copies to the device are asynchronous
            self.host_ints, self.host_visible = self.host_ints.pin_memory(), self.host_visible.pin_memory()
        self.output: torch.Tensor | None = None
        self.graph = None

    def _compute(self) -> torch.Tensor:
        return self.lm._forward_rows(self.buffers, self.ints[0], self.ints[1], self.ints[2], self.visible)

    def capture(self) -> None:
        scratch = self.buffers.scratch
        self.ints.zero_()
        self.ints[2].fill_(scratch)  # warm-up passes write only the scratch slot
        self.visible.zero_()
        self.visible[:, scratch] = True
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._compute()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.output = self._compute()
        self.graph = graph

    def run(self, ids: np.ndarray, positions: np.ndarray, slots: np.ndarray, visible: np.ndarray) -> torch.Tensor:
        count = len(ids)
        self.host_ints[0, :count] = torch.from_numpy(ids)
        self.host_ints[1, :count] = torch.from_numpy(positions)
        self.host_ints[2, :count] = torch.from_numpy(slots)
        self.host_visible[:count] = torch.from_numpy(visible)
        if count < self.rows:  # padding rows: write and see only the scratch slot
            self.host_ints[:, count:] = 0
            self.host_ints[2, count:] = self.buffers.scratch
            self.host_visible[count:] = False
            self.host_visible[count:, self.buffers.scratch] = True
        self.ints.copy_(self.host_ints, non_blocking=True)
        self.visible.copy_(self.host_visible, non_blocking=True)
        if self.graph is None:  # no CUDA: the same padded step with the same inputs, eagerly
            self.output = self._compute()
        else:
            self.graph.replay()
        return self.output[:count]


class _SavedPrompt:
    """A prompt of another cache key: its ids and a copy of its key/values."""

    def __init__(self, ids: list[int], kv: torch.Tensor):
        self.ids = ids
        self.kv = kv


class StaticCacheLanguageModel(HFLanguageModel):
    """`HFLanguageModel` on static key/value buffers (see the module docstring).

    `cuda_graphs` None: capture graphs when the model is on CUDA.  Forced on elsewhere,
    the steps the graphs would replay (fixed input tensors, rows padded to 1, 2, 4 or
    8) run eagerly, so the CPU tests exercise them.  When the model
    cannot use a static cache, every method runs the inherited dynamic path
    (`static_reason` says why).
    """

    def __init__(self, model, tokenizer, *, cuda_graphs: bool | None = None, **options):
        super().__init__(model, tokenizer, **options)
        self.cuda_graphs = (self.device.type == "cuda") if cuda_graphs is None else bool(cuda_graphs)
        self.static_reason = static_cache_unsupported(model)
        self._buffers: dict[int, _Buffers] = {}
        self._current: _Buffers | None = None
        self._ids: list[int] = []  # tokens at slots 0..len-1 of the current buffers
        self._prompt: list[int] = []
        self._prompt_key: Hashable | None = None
        self._root: np.ndarray | None = None
        self._saved: OrderedDict[Hashable, _SavedPrompt] = OrderedDict()
        self._shape: tuple[int, int, int] | None = None  # layers, key/value heads, head width (from `_probe`)
        self._dtype: torch.dtype | None = None
        self._device_padding = torch.from_numpy(self._padding).to(self.device)
        if self.static_reason is None:
            self.static_reason = self._self_check()
        if self.static_reason is not None:
            log.info("%s: static KV cache off (%s); using the dynamic cache", self.name, self.static_reason)

    @property
    def batched_nodes(self) -> bool:
        """Batches are rows of one forward pass on the static path only (the dynamic
        fallback evaluates them one by one)."""
        return self.static

    @property
    def static(self) -> bool:
        """Whether this model runs on the static path."""
        return self.static_reason is None

    # -- prompt -------------------------------------------------------------------------
    @torch.inference_mode()
    def set_prompt(
        self, prompt_ids: Sequence[int], max_new_tokens: int = 0, cache_key: Hashable | None = None
    ) -> PromptInfo:
        if not self.static:
            return super().set_prompt(prompt_ids, max_new_tokens, cache_key)
        ids, truncated = self._prompt_ids(prompt_ids, max_new_tokens)
        needed = len(ids) + max(0, int(max_new_tokens)) + MARGIN
        if (
            cache_key == self._prompt_key
            and self._root is not None
            and ids == self._prompt
            and self._current is not None
            and self._current.capacity >= bucket_capacity(needed, self.max_context)
        ):
            del self._ids[len(ids) :]  # a fresh tree over the same prompt: node store stays valid
            return PromptInfo(length=len(ids), truncated=truncated, reused=len(ids))
        self._clear_node_store()
        try:
            keep = self._load_prefix(ids, cache_key, needed)
            logprobs = self._prefill(ids, keep)
        except torch.cuda.OutOfMemoryError:
            self._give_up_static("out of memory for the static buffers")
            return super().set_prompt(prompt_ids, max_new_tokens, cache_key)
        except BaseException:
            self.clear_cache()  # a failed or interrupted forward leaves no trustworthy state
            raise
        self._prompt, self._prompt_key, self._root = ids, cache_key, logprobs
        return PromptInfo(length=len(ids), truncated=truncated, reused=keep)

    def _give_up_static(self, reason: str) -> None:
        """Serve from the dynamic cache from now on (the buffers and graphs are freed)."""
        log.warning("%s: static KV cache off (%s); using the dynamic cache", self.name, reason)
        self.clear_cache()
        self._buffers.clear()
        self.static_reason = reason
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def _load_prefix(self, ids: list[int], cache_key: Hashable | None, needed: int) -> int:
        """Put the longest reusable prefix of `ids` into buffers of the right bucket; its length."""
        buffers = self._buffers_for(bucket_capacity(needed, self.max_context))
        if cache_key != self._prompt_key or self._current is None:
            self._save_current()
            saved = self._saved.pop(cache_key, None)
            source_ids, source_kv = (saved.ids, saved.kv) if saved is not None else ([], None)
        else:
            source_ids = self._ids
            source_kv = None if self._current is buffers else self._current.kv
        keep = min(_common_prefix(source_ids, ids), len(ids) - 1)
        if source_kv is not None and keep:
            buffers.kv[..., :keep, :].copy_(source_kv[..., :keep, :])
        self._current, self._ids = buffers, list(ids[:keep])
        self._prompt, self._prompt_key, self._root = [], cache_key, None
        return keep

    def _save_current(self) -> None:
        if self._current is None or self._root is None or not self._prompt:
            return
        length = len(self._prompt)
        self._saved[self._prompt_key] = _SavedPrompt(list(self._prompt), self._current.kv[..., :length, :].clone())
        self._saved.move_to_end(self._prompt_key)
        while len(self._saved) > max(0, self.max_cached_prompts - 1):
            self._saved.popitem(last=False)

    def _prefill(self, ids: list[int], keep: int) -> np.ndarray:
        buffers = self._current
        logprobs = None
        for begin in range(keep, len(ids), PREFILL_CHUNK):
            part = ids[begin : begin + PREFILL_CHUNK]
            logprobs = self._feed_run(buffers, part, begin)
        return self._host(logprobs)[0]

    def _feed_run(self, buffers: _Buffers, tokens: Sequence[int], start: int) -> torch.Tensor:
        """Feed `tokens` at slots (= positions) start.. after the current slots; last row's log-probs."""
        count = len(tokens)
        slots = np.arange(start, start + count)
        visible = np.arange(buffers.capacity)[None, :] <= slots[:, None]
        logprobs = self._run_rows(buffers, np.asarray(tokens, dtype=np.int64), slots, slots, visible, last_only=True)
        self._ids.extend(int(t) for t in tokens)
        return logprobs

    # -- distributions --------------------------------------------------------------------
    @torch.inference_mode()
    def next_logprobs(self, path: Sequence[int]) -> np.ndarray:
        if not self.static:
            return super().next_logprobs(path)
        if self._root is None:
            raise ModelError("set_prompt must be called before next_logprobs")
        path = [int(t) for t in path]
        if not path:
            return self._root.copy()
        prompt_length = len(self._prompt)
        target_length = self._checked_length(path, prompt_length)
        try:
            self._ensure_capacity(target_length + 1)
            return self._host(self._walk_to(path))[0]
        except BaseException:
            self.clear_cache()  # a failed or interrupted forward leaves no trustworthy state
            raise

    def _walk_to(self, path: list[int]) -> torch.Tensor:
        """Move the current path to `path` (restoring stored nodes) and feed what is missing."""
        buffers = self._current
        prompt_length = len(self._prompt)
        target_length = prompt_length + len(path)
        common = prompt_length + _common_prefix(self._ids[prompt_length:], path)
        keep = min(common, target_length - 1)  # the last token is always fed: its logits are needed
        del self._ids[keep:]  # the move: later slots are stale and masked from now on
        restored, position = self._stored_run(path, prompt_length, keep, target_length)
        if restored:
            buffers.kv[..., keep:position, :].copy_(restored[0] if len(restored) == 1 else torch.cat(restored, dim=-2))
            self._ids.extend(path[keep - prompt_length : position - prompt_length])
        tokens = path[position - prompt_length :]
        logprobs = self._feed_run(buffers, tokens, position)
        if self._node_store:
            self._store_slots([tuple(path[: position - prompt_length + i + 1]) for i in range(len(tokens))], position)
        return logprobs

    @torch.inference_mode()
    def next_logprobs_batch(self, paths: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Distributions of several paths after the current prompt, in few forward passes.

        Paths whose ancestors are all on the current path or in the node store become
        rows of one forward pass (up to `GRAPH_ROWS[-1]` rows each); the others go one
        by one through `next_logprobs`.  The current path does not move.
        """
        if not self.static or len(paths) < 2:
            return [self.next_logprobs(p) for p in paths]
        if self._root is None:
            raise ModelError("set_prompt must be called before next_logprobs_batch")
        paths = [[int(t) for t in p] for p in paths]
        results: list[np.ndarray | None] = [None] * len(paths)
        rows: list[int] = []
        for index, path in enumerate(paths):
            if not path:
                results[index] = self._root.copy()
                continue
            self._check_ids(path, "path")
            if self.max_context is not None and len(self._prompt) + len(path) > self.max_context:
                raise ModelError(
                    f"prompt + path ({len(self._prompt) + len(path)} tokens) exceeds the context of {self.max_context}"
                )
            if self._batchable(path):
                rows.append(index)
        alone = [i for i, r in enumerate(results) if r is None and i not in set(rows)]
        try:
            for begin in range(0, len(rows), GRAPH_ROWS[-1]):
                group = rows[begin : begin + GRAPH_ROWS[-1]]
                if len(group) == 1:
                    alone.append(group[0])
                    continue
                for index, logprobs in zip(group, self._batch_rows([paths[i] for i in group])):
                    results[index] = logprobs
            for index in alone:
                results[index] = self.next_logprobs(paths[index])
        except BaseException:
            self.clear_cache()
            raise
        return results  # type: ignore[return-value]

    def _batchable(self, path: list[int]) -> bool:
        prompt_length = len(self._prompt)
        on_path = _common_prefix(self._ids[prompt_length:], path[:-1])
        return all(tuple(path[: depth + 1]) in self._node_kv for depth in range(on_path, len(path) - 1))

    def _batch_rows(self, paths: list[list[int]]) -> list[np.ndarray]:
        """One forward pass: one row per path (distinct paths, ancestors available)."""
        prompt_length = len(self._prompt)
        longest = max(len(p) for p in paths)
        self._ensure_capacity(len(self._ids) + len(paths) * longest + 1)
        buffers = self._current
        start = len(self._ids)
        copied: dict[tuple[int, ...], int] = {}
        restore: list[torch.Tensor] = []
        visible = np.zeros((len(paths), buffers.capacity), dtype=bool)
        visible[:, :prompt_length] = True
        for row, path in enumerate(paths):
            on_path = _common_prefix(self._ids[prompt_length:], path[:-1])
            visible[row, prompt_length : prompt_length + on_path] = True
            for depth in range(on_path, len(path) - 1):
                key = tuple(path[: depth + 1])
                if key not in copied:
                    copied[key] = start + len(restore)
                    restore.append(self._node_kv[key])
                visible[row, copied[key]] = True
        if restore:
            buffers.kv[..., start : start + len(restore), :].copy_(torch.cat(restore, dim=-2))
        first_new = start + len(restore)
        slots = np.arange(first_new, first_new + len(paths))
        visible[np.arange(len(paths)), slots] = True
        ids = np.array([p[-1] for p in paths], dtype=np.int64)
        positions = np.array([prompt_length + len(p) - 1 for p in paths], dtype=np.int64)
        logprobs = self._run_rows(buffers, ids, positions, slots, visible, last_only=False)
        if self._node_store:
            self._store_slots([tuple(p) for p in paths], first_new)
        return list(self._host(logprobs))

    # -- forward passes -------------------------------------------------------------------
    def _run_rows(
        self,
        buffers: _Buffers,
        ids: np.ndarray,
        positions: np.ndarray,
        slots: np.ndarray,
        visible: np.ndarray,
        last_only: bool,
        eager: bool = False,
    ) -> torch.Tensor:
        """Forward `ids` (one row each) written at `slots`; log-probs on the device."""
        count = len(ids)
        started = time.perf_counter()
        graph = None if eager else self._graph(buffers, count)
        with torch.inference_mode():
            if graph is not None:
                logprobs = graph.run(ids, positions, slots, visible)
            else:
                device = self.device
                logprobs = self._forward_rows(
                    buffers,
                    torch.from_numpy(ids).to(device),
                    torch.from_numpy(positions).to(device),
                    torch.from_numpy(slots).to(device),
                    torch.from_numpy(visible).to(device),
                    keep=1 if last_only else 0,
                )
        if last_only:
            logprobs = logprobs[-1:]
        if logprobs.device.type == "cuda":
            # the launch returns at once: wait here, so that the forward's time is counted
            # as the forward's, not where the log-probabilities are copied to the host
            torch.cuda.synchronize(logprobs.device)
        buffers.writes.length = len(self._ids)
        self.forward_seconds += time.perf_counter() - started
        self.forward_calls += 1
        self.tokens_fed += count
        return logprobs

    def _forward_rows(
        self,
        buffers: _Buffers,
        ids: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        visible: torch.Tensor,
        keep: int = 0,
    ) -> torch.Tensor:
        """The model on one sequence of rows with an explicit slot mask; log-softmax rows."""
        buffers.writes.slots = slots
        mask = torch.zeros(visible.shape, dtype=self._dtype, device=visible.device)
        mask = mask.masked_fill(~visible, torch.finfo(self._dtype).min)[None, None]
        output = self.model(
            input_ids=ids.view(1, -1),
            position_ids=positions.view(1, -1),
            attention_mask=mask,
            use_cache=True,
            **{self._cache_keyword: buffers.cache},
            logits_to_keep=keep,
        )
        values = output.logits[0].float().masked_fill(self._device_padding, -torch.inf)
        return torch.log_softmax(values, dim=-1)

    def _graph(self, buffers: _Buffers, count: int) -> _StepGraph | None:
        """The captured step for `count` rows (padded to a captured size), or None (eager)."""
        if not self.cuda_graphs or count > GRAPH_ROWS[-1]:
            return None
        rows = next(r for r in GRAPH_ROWS if r >= count)
        graph = buffers.graphs.get(rows)
        if graph is None and self.device.type != "cuda":  # `cuda_graphs` forced on elsewhere (tests)
            graph = buffers.graphs[rows] = _StepGraph(self, buffers, rows)
        elif graph is None:
            graph = _StepGraph(self, buffers, rows)
            try:
                with torch.inference_mode(), torch.cuda.device(self.device):  # cuda:N included
                    graph.capture()
            except Exception as error:  # out of memory included: keep serving, eagerly
                self.cuda_graphs = False
                try:
                    torch.cuda.synchronize(self.device)
                    torch.cuda.empty_cache()
                except RuntimeError:
                    log.debug("synchronizing after a failed capture", exc_info=True)
                kind = "out of memory" if isinstance(error, torch.cuda.OutOfMemoryError) else type(error).__name__
                log.warning(
                    "%s: capturing the decoding step as a CUDA graph failed (%s: %s); running it without graphs",
                    self.name,
                    kind,
                    str(error).splitlines()[0] if str(error) else "",
                )
                return None
            buffers.graphs[rows] = graph
        return graph

    def warm_up(self, max_prompt_tokens: int, max_new_tokens: int) -> None:
        """Capture the steps of the largest bucket such requests need; smaller prompts use
        it too (see `_buffers_for`), so no request waits for a capture."""
        self.capture_graphs(max_prompt_tokens, max_new_tokens, rows=GRAPH_ROWS)

    @torch.inference_mode()
    def capture_graphs(self, prompt_tokens: int, max_new_tokens: int, rows: Sequence[int] = (1,)) -> bool:
        """Allocate the bucket for such requests and capture its steps now (warm-up)."""
        if not self.static or not self.cuda_graphs or self.device.type != "cuda":
            return False
        buffers = self._buffers_for(bucket_capacity(prompt_tokens + max_new_tokens + MARGIN, self.max_context))
        return all(self._graph(buffers, count) is not None for count in rows)

    def _host(self, logprobs: torch.Tensor) -> np.ndarray:
        """The one host copy of a forward pass; NaN/+inf logits become a `ModelError`."""
        values = logprobs.cpu().numpy()
        top = values.max(axis=-1)
        if not np.isfinite(top).all():
            raise ModelError("the model produced NaN or +inf logits, or gave every token zero probability")
        return values

    # -- buffers --------------------------------------------------------------------------
    def _probe(self) -> None:
        """Key/value shapes and dtype of every layer, from one token through a DynamicCache."""
        if self._shape is not None:
            return
        cache = self._new_cache()
        token = min(self.vocab.eos_ids, default=0)
        with torch.inference_mode():
            self.model(
                input_ids=torch.tensor([[int(token)]], device=self.device), use_cache=True, **{self._cache_keyword: cache}
            )
        from adaptrack_lsp.completion.lm.hf import _layer_tensors

        tensors = _layer_tensors(cache)
        shapes = {(k.shape[1], k.shape[-1], v.shape[-1]) for k, v in tensors}
        if len(shapes) != 1 or len(tensors) == 0:
            raise ModelError(f"layers with different key/value shapes {sorted(shapes)}")
        heads, key_dim, value_dim = shapes.pop()
        if key_dim != value_dim:
            raise ModelError("keys and values of different widths")
        self._shape = (len(tensors), heads, key_dim)
        self._dtype = tensors[0][0].dtype

    def _buffers_for(self, capacity: int) -> _Buffers:
        """Buffers of at least `capacity` slots: the smallest existing ones with graphs
        (attention over a few unused slots costs far less than a capture), else exactly
        `capacity`."""
        captured = [b for b in self._buffers.values() if b.capacity >= capacity and b.graphs]
        if captured:
            return min(captured, key=lambda b: b.capacity)
        buffers = self._buffers.get(capacity)
        if buffers is None:
            self._probe()
            layers, heads, dim = self._shape
            kv = torch.zeros(layers, 2, 1, heads, capacity, dim, dtype=self._dtype, device=self.device)
            buffers = self._buffers[capacity] = _Buffers(kv)
        return buffers

    def _ensure_capacity(self, slots: int) -> None:
        """Move to a larger bucket when the current buffers hold fewer than `slots` + scratch."""
        if slots < self._current.capacity:
            return
        bigger = self._buffers_for(bucket_capacity(slots, None))
        length = len(self._ids)
        bigger.kv[..., :length, :].copy_(self._current.kv[..., :length, :])
        self._current = bigger

    def _store_slots(self, keys: list[tuple[int, ...]], first: int) -> None:
        """Copy the key/values at slots first, first+1, ... into the node store under `keys`.

        One slice copy on the device (no index tensor, so no host round trip); keys
        already stored and keys beyond the store's bound are skipped.
        """
        kv = self._current.kv
        per_token = kv[..., :1, :].numel() * kv.element_size()
        room = max(0, (self.max_node_cache_bytes - self._node_kv_bytes) // max(per_token, 1))
        if room == 0 or all(key in self._node_kv for key in keys):
            return
        copied = kv[..., first : first + len(keys), :].clone()
        for offset, key in enumerate(keys):
            if room == 0:
                break
            if key in self._node_kv:
                continue
            self._node_kv[key] = copied[..., offset : offset + 1, :]
            self._node_kv_bytes += per_token
            room -= 1

    def clear_cache(self) -> None:
        super().clear_cache()
        self._current = None
        self._ids = []
        self._prompt, self._prompt_key, self._root = [], None, None
        self._saved.clear()

    # -- load-time check ------------------------------------------------------------------
    def _self_check(self) -> str | None:
        """None when a short static forward matches the plain forward (else why not).

        The tokens go to scattered slots of buffers full of noise, so a model that
        ignores the explicit mask or the write slots fails.
        """
        defined = self.vocab.num_defined
        ids = [min(self.vocab.eos_ids, default=0) % defined] + [(7919 * k + 13) % defined for k in range(1, 8)]
        slots = np.array([12, 5, 9, 20, 7, 30, 6, 15])
        try:
            with torch.inference_mode():
                plain = self.model(input_ids=torch.tensor([ids], device=self.device)).logits[0].float()
                plain = torch.log_softmax(plain.masked_fill(self._device_padding, -torch.inf), dim=-1)
                buffers = self._buffers_for(BUCKET)
                noise = torch.Generator(device="cpu").manual_seed(0)
                buffers.kv.copy_(4 * torch.randn(buffers.kv.shape, generator=noise).to(buffers.kv))
                self._current, self._ids = buffers, []
                visible = np.zeros((len(ids), buffers.capacity), dtype=bool)
                for row in range(len(ids)):
                    visible[row, slots[: row + 1]] = True
                positions = np.arange(len(ids))
                static = self._run_rows(buffers, np.array(ids), positions, slots, visible, last_only=False, eager=True)
                self.tokens_fed -= len(ids)
                self.forward_calls -= 1
                buffers.kv.zero_()
        except Exception as error:  # an architecture whose forward rejects the slot cache
            return f"its forward pass does not accept the slot cache ({type(error).__name__}: {error})"
        finally:
            self._current, self._ids = None, []
        tolerance = 1e-3 if self._dtype == torch.float32 else 0.25
        difference = float((static - plain).abs().nan_to_num(0.0).max())
        if not difference <= tolerance:
            return f"its static forward differs from the plain one by {difference:.3g}"
        return None
