"""GGUF models through llama.cpp (llama-cpp-python's low-level API) as a `LanguageModel`.

Owns the `llamacpp` backend: the GGUF source (a ``.gguf`` file, or ``tiny`` exported to
GGUF in the cache), loading with clear `ModelError`s for bad files (missing, not GGUF,
corrupt or truncated, no tokenizer, a vocabulary that differs from the weights), the
vocabulary read from the GGUF's own tokenizer (exact token bytes, every end-of-generation
id, FIM and BOS ids for the prompt builder), and the KV state:

- One llama.cpp context with a **unified KV cache** whose cells can belong to several
  sequences.  Sequence 0 holds the prompt.  Every branch of the prefix tree the decoders
  explore lives in a *branch sequence* that shares the prompt's cells (and its
  ancestors' cells) by `llama_memory_seq_cp`, which copies no data.  Evaluating a node
  whose parent is the tip of a branch extends that branch by one token; a node whose
  parent is inside a branch starts a new branch sharing the parent's cells.  Each node
  therefore costs exactly one token through the network (`tokens_fed == prompt +
  distinct nodes evaluated`) while branches are held.  At most `max_sequences - 1`
  branches are held; the least recently used one is dropped (`llama_memory_seq_rm`)
  beyond that, or when the cache is full, and a node below it is then re-fed (still
  exact).  `next_logprobs_batch` decodes several new nodes in one `llama_decode`.
- Distributions of nodes evaluated under the current prompt are remembered (bounded), so
  a request that asks for the same nodes again (a fresh tree per sample) costs no token.
- `set_prompt` keeps the longest common token prefix with the previous prompt of the same
  `cache_key` (document) and feeds only the rest.  Documents other than the active one
  keep their prompt's KV state in host memory (`llama_state_seq_get_data`), restored
  when they come back, so that a second document neither re-feeds its prompt nor widens
  the attention of the active one.

llama.cpp's log goes to this module's logger (never to stdout or stderr; no file
descriptor is redirected, which in a language server would swallow protocol messages
written by other threads), and the last lines of a failed load are quoted in its error.

`llama_cpp` is imported on first use only (`adaptrack-lsp --help` stays fast).
"""

from __future__ import annotations

import collections
import ctypes
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adaptrack_lsp.completion.lm.base import LanguageModel, ModelError, PromptInfo
from adaptrack_lsp.vocab import Vocabulary

log = logging.getLogger(__name__)

#: after the install command when llama-cpp-python is missing
INSTALL_NOTE = "(compiles llama.cpp: minutes), or use backend transformers or server"
#: tokens of context (prompt + path) unless the GGUF's training context is shorter
DEFAULT_CONTEXT = 4096
#: KV cells beyond the context, for the branches of a decode's prefix tree
DEFAULT_TREE_CELLS = 2048
#: llama.cpp's limit on sequences in one context (LLAMA_MAX_SEQ)
MAX_SEQUENCES = 256
#: KV cache element types (llama.cpp's default is f16)
KV_TYPES = {"f16": "GGML_TYPE_F16", "f32": "GGML_TYPE_F32", "q8_0": "GGML_TYPE_Q8_0"}
#: below this many parameters a forward pass is faster on one thread than on a pool
SMALL_MODEL_PARAMETERS = 50_000_000
#: texts whose tokenization must round-trip through the vocabulary's bytes at load time
ROUND_TRIP_TEXTS = (
    "import numpy as np\nx = np.linalg.norm(a, ord=2)  # norm\n",
    "\tdef __init__(self, *args, **kwargs):\r\n        return {'é': \"日本\", 3.5e-3: None}\n",
)


# -- llama.cpp and its log ---------------------------------------------------------------
_lock = threading.Lock()
_llama = None
#: the last lines llama.cpp logged (level, text), quoted when a load fails
_recent_log: collections.deque[tuple[int, str]] = collections.deque(maxlen=400)
_log_serial = 0
_log_callback = None  # kept referenced: llama.cpp calls it from C


def llama_cpp_module():
    """The `llama_cpp` module, initialised once with its log routed to `log`; ModelError
    naming the install when it is missing."""
    global _llama, _log_callback
    with _lock:
        if _llama is not None:
            return _llama
        from adaptrack_lsp.extras import install_command, present

        if not present("llama_cpp"):
            raise ModelError(
                f"the llamacpp backend needs the llamacpp extra (llama-cpp-python not installed): "
                f"{install_command('llamacpp')} {INSTALL_NOTE}"
            )
        try:
            import llama_cpp
        except ImportError as error:  # installed but broken (a wheel for another Python, ...)
            raise ModelError(f"llama-cpp-python is installed but cannot be imported ({error}): reinstall it with {install_command('llamacpp')}") from error
        levels = {1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR, 4: logging.DEBUG}
        state = {"level": logging.DEBUG}

        @llama_cpp.llama_log_callback
        def route(level: int, text: bytes, user_data) -> None:  # pragma: no cover - called from C
            global _log_serial
            try:
                message = text.decode("utf-8", errors="replace") if text else ""
                if level != 5:  # 5: continuation of the previous message
                    state["level"] = levels.get(level, logging.DEBUG)
                _log_serial += 1
                _recent_log.append((state["level"], message))
                if log.isEnabledFor(logging.DEBUG):
                    log.debug("llama.cpp: %s", message.rstrip())
            except Exception:  # never raise into C
                pass

        _log_callback = route
        llama_cpp.llama_log_set(route, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        _llama = llama_cpp
        return llama_cpp


def _log_mark() -> int:
    return _log_serial


def _log_since(mark: int, minimum: int = logging.WARNING) -> str:
    """Warnings and errors llama.cpp logged since `mark`, joined (for error messages)."""
    count = _log_serial - mark
    entries = list(_recent_log)[-count:] if count > 0 else []
    lines = [text.strip() for level, text in entries if level >= minimum and text.strip()]
    return "; ".join(lines[-4:])


# -- sources -----------------------------------------------------------------------------
def tiny_gguf_path(outtype: str = "f32") -> Path:
    """The built-in ``tiny`` model written as GGUF (`outtype` weights), built once in the
    cache beside the model folder."""
    from adaptrack_lsp.cache import cached_build
    from adaptrack_lsp.completion.lm.gguf_export import export_gguf
    from adaptrack_lsp.completion.lm.tiny import tiny_model_path

    folder = tiny_model_path()

    def build(target: Path) -> None:
        export_gguf(folder, target / f"tiny-{outtype}.gguf", outtype, name="tiny")

    return cached_build(f"{folder.name}-gguf-{outtype}", build, marker=f"tiny-{outtype}.gguf") / f"tiny-{outtype}.gguf"


def resolve_gguf(name_or_path: str, relative_to: str | os.PathLike | None = None) -> Path:
    """The GGUF file a ``model`` setting names for the llamacpp backend, or ModelError."""
    if name_or_path == "tiny":
        return tiny_gguf_path()
    if name_or_path == "builtin":
        raise ModelError("the built-in model is count-based and has no GGUF form; use backend transformers for it")
    path = Path(name_or_path).expanduser()
    if not path.is_absolute():
        if relative_to is None:
            raise ModelError(
                f"model path {name_or_path!r} is relative; give an absolute path (or ~/...) to the .gguf file"
            )
        path = Path(relative_to).expanduser() / path
    if path.is_dir():
        raise ModelError(
            f"{path} is a folder; the llamacpp backend loads a .gguf file: write one with "
            f"`adaptrack-lsp export-gguf --model {path} OUT.gguf`, or use backend transformers for the folder"
        )
    if not path.exists():
        raise ModelError(
            f"GGUF file {str(path)!r} does not exist; give the path of a .gguf model file "
            "(`adaptrack-lsp export-gguf` writes one from a model folder), or model \"tiny\""
        )
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic != b"GGUF":
        raise ModelError(
            f"{path} is not a GGUF file (it does not start with the GGUF magic); give a .gguf model file, "
            "e.g. one written by `adaptrack-lsp export-gguf`"
        )
    return path


def _diagnose(path: Path, llama_said: str) -> str:
    """Why llama.cpp could not load `path`, from the file's own metadata where it tells."""
    try:
        import gguf

        reader = gguf.GGUFReader(str(path))
    except Exception as error:
        return f"{path} is corrupt or truncated ({type(error).__name__}: {error}); download or export it again"
    fields = reader.fields
    if "tokenizer.ggml.model" not in fields or "tokenizer.ggml.tokens" not in fields:
        return (
            f"{path} has no tokenizer (no tokenizer.ggml.* metadata); write the GGUF from a model folder that has "
            "its tokenizer.json (`adaptrack-lsp export-gguf`, or llama.cpp's convert_hf_to_gguf.py)"
        )
    tokens = len(fields["tokenizer.ggml.tokens"].data)
    for tensor in reader.tensors:
        if tensor.name in ("token_embd.weight", "output.weight"):
            rows = int(tensor.shape[-1]) if len(tensor.shape) > 1 else int(tensor.shape[0])
            if rows != tokens:
                return (
                    f"the vocabulary of {path} ({tokens} tokens in tokenizer.ggml.tokens) differs from its weights "
                    f"({tensor.name} has {rows} rows); the tokenizer and the model must come from the same model: "
                    "export the GGUF again from one model folder"
                )
    return f"llama.cpp could not load {path}: {llama_said or 'no reason given'}"


# -- the vocabulary ------------------------------------------------------------------------
def _piece(llama_cpp, vocab, token_id: int, buffer) -> bytes:
    length = llama_cpp.llama_token_to_piece(vocab, token_id, buffer, len(buffer), 0, False)
    if length < 0:
        buffer = ctypes.create_string_buffer(-length)
        length = llama_cpp.llama_token_to_piece(vocab, token_id, buffer, len(buffer), 0, False)
    return buffer.raw[:length]


@dataclass
class GGUFVocabulary:
    """What the GGUF's own tokenizer says: exact bytes, special and EOG ids, FIM, BOS."""

    vocab: Vocabulary
    fim_ids: tuple[int, int, int] | None
    fim_family: str
    bos_id: int | None
    adds_bos: bool


def read_vocabulary(llama_cpp, vocab) -> GGUFVocabulary:
    """The `Vocabulary` of a llama.cpp vocab: bytes per id (`llama_token_to_piece`, byte
    tokens and the byte-level alphabet resolved by llama.cpp), control / unknown / unused
    ids as specials with no text, trailing unused ids as padding, every id
    `llama_vocab_is_eog` names as EOS."""
    size = int(llama_cpp.llama_vocab_n_tokens(vocab))
    if size <= 0:
        raise ModelError("the GGUF's tokenizer has no tokens")
    textless = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
    buffer = ctypes.create_string_buffer(256)
    token_bytes: list[bytes] = []
    special: list[int] = []
    defined = 0
    for token_id in range(size):
        attr = int(llama_cpp.llama_vocab_get_attr(vocab, token_id))
        if attr == llama_cpp.LLAMA_TOKEN_ATTR_UNDEFINED or attr & llama_cpp.LLAMA_TOKEN_ATTR_UNUSED:
            token_bytes.append(b"")
            special.append(token_id)
            continue
        defined = token_id + 1
        if attr & textless:
            token_bytes.append(b"")
            special.append(token_id)
        else:
            token_bytes.append(_piece(llama_cpp, vocab, token_id, buffer))
    eog = [i for i in range(size) if llama_cpp.llama_vocab_is_eog(vocab, i)]
    if not eog:
        raise ModelError("the GGUF's tokenizer names no end-of-generation token (tokenizer.ggml.eos_token_id)")
    fim = tuple(int(f(vocab)) for f in (llama_cpp.llama_vocab_fim_pre, llama_cpp.llama_vocab_fim_suf, llama_cpp.llama_vocab_fim_mid))
    fim_ids = fim if all(0 <= i < size for i in fim) else None
    family = "gguf"
    if fim_ids is not None:
        from adaptrack_lsp.completion.context import FIM_TOKEN_NAMES

        text = llama_cpp.llama_vocab_get_text(vocab, fim_ids[0]) or b""
        name = text.decode("utf-8", errors="replace")
        family = next((f for f, prefix, _, _ in FIM_TOKEN_NAMES if prefix == name), "gguf")
    bos = int(llama_cpp.llama_vocab_bos(vocab))
    built = Vocabulary(token_bytes[:defined], eos_ids=eog, size=size, special_ids=[i for i in special if i < defined])
    return GGUFVocabulary(
        vocab=built,
        fim_ids=fim_ids,  # type: ignore[arg-type]
        fim_family=family,
        bos_id=bos if 0 <= bos < size else None,
        adds_bos=bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
    )


# -- the engine: model, context, batch ---------------------------------------------------
class _Engine:
    """The native llama.cpp objects (model, context, batch) and the calls on them."""

    def __init__(self, llama_cpp, path: Path, gpu_layers: int | None, repack: bool | None = None):
        self.llama_cpp = llama_cpp
        self.path = path
        self.model = None
        self.context = None
        self.batch = None
        params = llama_cpp.llama_model_default_params()
        if gpu_layers is None:
            params.n_gpu_layers = -1 if llama_cpp.llama_supports_gpu_offload() else 0
        else:
            params.n_gpu_layers = int(gpu_layers)
        self.repack = default_repack() if repack is None else bool(repack)
        params.use_extra_bufts = self.repack
        mark = _log_mark()
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode("utf-8"), params)
        if not self.model:
            self.model = None
            raise ModelError(_diagnose(path, _log_since(mark)))
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        if not self.vocab:
            self.close()
            raise ModelError(_diagnose(path, "the model has no vocabulary"))
        self.parameters = int(llama_cpp.llama_model_n_params(self.model))
        self.context_train = int(llama_cpp.llama_model_n_ctx_train(self.model))
        self.gpu_layers = int(params.n_gpu_layers)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self.threads = 0
        self.kv_cells = 0
        self.batch_tokens = 0

    def create_context(
        self, threads: int | None, kv_cells: int, batch_tokens: int, max_sequences: int, kv_type: str = "f16"
    ) -> None:
        """The context: a unified KV cache of `kv_cells` cells of `kv_type` shared by up
        to `max_sequences` sequences, and one batch of `batch_tokens` tokens."""
        llama_cpp = self.llama_cpp
        self.threads = int(threads) if threads is not None else default_threads(self.parameters)
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = int(kv_cells)
        params.n_batch = int(batch_tokens)
        params.n_ubatch = int(batch_tokens)
        params.n_seq_max = int(max_sequences)
        # llama.cpp reserves outputs for every sequence; fewer allowed would abort the process
        params.n_outputs_max = max(int(batch_tokens), int(max_sequences))
        params.kv_unified = True
        params.type_k = params.type_v = getattr(llama_cpp, KV_TYPES[kv_type])
        params.n_threads = self.threads
        params.n_threads_batch = self.threads
        params.no_perf = True
        mark = _log_mark()
        self.context = llama_cpp.llama_init_from_model(self.model, params)
        if not self.context:
            self.context = None
            raise ModelError(
                f"llama.cpp could not create a context of {kv_cells} cells for {self.path} "
                f"({_log_since(mark) or 'out of memory?'}); lower the context length or the GPU layers"
            )
        self.memory = llama_cpp.llama_get_memory(self.context)
        self.kv_cells = int(llama_cpp.llama_n_ctx(self.context))
        self.batch_tokens = int(batch_tokens)
        self.batch = llama_cpp.llama_batch_init(self.batch_tokens, 0, 1)

    def close(self) -> None:
        llama_cpp = self.llama_cpp
        if self.batch is not None:
            llama_cpp.llama_batch_free(self.batch)
            self.batch = None
        if self.context is not None:
            llama_cpp.llama_free(self.context)
            self.context = None
        if self.model is not None:
            llama_cpp.llama_model_free(self.model)
            self.model = None

    def __del__(self):  # pragma: no cover - interpreter shutdown order varies
        try:
            self.close()
        except Exception:
            pass

    # -- KV cache ------------------------------------------------------------------
    def seq_rm(self, seq: int, start: int = -1, end: int = -1) -> bool:
        return bool(self.llama_cpp.llama_memory_seq_rm(self.memory, seq, start, end))

    def seq_cp(self, source: int, target: int, end: int) -> None:
        self.llama_cpp.llama_memory_seq_cp(self.memory, source, target, 0, end)

    def clear(self) -> None:
        self.llama_cpp.llama_memory_clear(self.memory, False)

    def save(self, seq: int):
        size = int(self.llama_cpp.llama_state_seq_get_size(self.context, seq))
        buffer = (ctypes.c_uint8 * size)()
        written = int(self.llama_cpp.llama_state_seq_get_data(self.context, buffer, size, seq))
        return buffer if written == size else None

    def restore(self, buffer, seq: int) -> bool:
        return int(self.llama_cpp.llama_state_seq_set_data(self.context, buffer, len(buffer), seq)) > 0

    # -- forward -------------------------------------------------------------------
    def decode(self, tokens: Sequence[tuple[int, int, int, bool]]) -> int:
        """Decode (token, position, sequence, wants logits) entries; llama_decode's code."""
        batch = self.batch
        for index, (token, position, seq, output) in enumerate(tokens):
            batch.token[index] = token
            batch.pos[index] = position
            batch.n_seq_id[index] = 1
            batch.seq_id[index][0] = seq
            batch.logits[index] = 1 if output else 0
        batch.n_tokens = len(tokens)
        return int(self.llama_cpp.llama_decode(self.context, batch))

    def logits(self, index: int) -> np.ndarray:
        pointer = self.llama_cpp.llama_get_logits_ith(self.context, index)
        if not pointer:
            raise ModelError("llama.cpp returned no logits")
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).copy()

    def tokenize(self, data: bytes) -> list[int]:
        llama_cpp = self.llama_cpp
        capacity = len(data) + 16
        buffer = (llama_cpp.llama_token * capacity)()
        count = llama_cpp.llama_tokenize(self.vocab, data, len(data), buffer, capacity, False, False)
        if count < 0:
            capacity = -count
            buffer = (llama_cpp.llama_token * capacity)()
            count = llama_cpp.llama_tokenize(self.vocab, data, len(data), buffer, capacity, False, False)
            if count < 0:
                raise ModelError(f"llama.cpp could not tokenize {len(data)} bytes")
        return list(buffer[:count])

    def detokenize(self, ids: Sequence[int]) -> bytes:
        llama_cpp = self.llama_cpp
        array = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
        capacity = 16 * len(ids) + 16
        buffer = ctypes.create_string_buffer(capacity)
        length = llama_cpp.llama_detokenize(self.vocab, array, len(ids), buffer, capacity, False, False)
        if length < 0:
            buffer = ctypes.create_string_buffer(-length)
            length = llama_cpp.llama_detokenize(self.vocab, array, len(ids), buffer, -length, False, False)
        return buffer.raw[:length]


def cpu_has_amx() -> bool:
    """Whether this CPU has Intel AMX (Linux: the ``amx_int8`` flag in /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return "amx_int8" in line.split()
    except OSError:
        pass
    return False


def default_repack() -> bool:
    """Whether llama.cpp may repack weights into its extra CPU buffer types: not where the
    CPU has AMX, whose quantized matrix kernels crash llama.cpp 0.3.36's build (a segfault
    in ggml_backend_amx_mul_mat on Q8_0 and k-quants; ggml-org/llama.cpp#20824)."""
    return not cpu_has_amx()


def default_threads(parameters: int) -> int:
    """CPU threads when the setting is null: one for small models (pool hand-offs cost more
    than the math), else half the cores this process may use (llama.cpp's own default),
    at least one."""
    if parameters < SMALL_MODEL_PARAMETERS:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, cores // 2)


# -- the language model -----------------------------------------------------------------
class _PromptSlot:
    """One document's prompt: its tokens, root distribution, and (when not active) its
    saved KV state."""

    def __init__(self):
        self.ids: list[int] = []  # tokens whose KV state sequence 0 holds (or `state` saved)
        self.prompt: list[int] = []
        self.root_logprobs: np.ndarray | None = None
        self.state = None  # ctypes buffer of llama_state_seq_get_data, while inactive


class _KVFull(Exception):
    """llama_decode found no free cells for the batch."""


class LlamaCppLanguageModel(LanguageModel):
    """A GGUF model through llama.cpp behind the `LanguageModel` protocol."""

    PROMPT_SEQ = 0

    def __init__(
        self,
        engine: _Engine,
        gguf_vocab: GGUFVocabulary,
        name: str = "llamacpp",
        max_context: int | None = None,
        max_cached_prompts: int = 4,
        max_sequences: int | None = None,
        max_saved_prompt_bytes: int = 1 << 30,
        max_node_cache_bytes: int = 64 << 20,
    ):
        self.engine = engine
        self.vocab = gguf_vocab.vocab
        self.name = name
        if self.vocab.size != engine.n_vocab:
            raise ModelError(f"vocabulary size {self.vocab.size} does not match the model's {engine.n_vocab} logits")
        self.max_context = int(max_context) if max_context else engine.kv_cells
        self.max_cached_prompts = max(1, int(max_cached_prompts))
        self.max_saved_prompt_bytes = int(max_saved_prompt_bytes)
        self.max_node_cache_bytes = int(max_node_cache_bytes)
        #: distributions of nodes evaluated under the current prompt (LRU, bounded): a
        #: request that asks again for a node (a fresh tree per sample) costs no token
        self._node_logprobs: OrderedDict[tuple[int, ...], np.ndarray] = OrderedDict()
        self._node_bytes = 0
        sequences = int(max_sequences or 64)
        self._sequence_count = sequences
        #: branch sequences (1 .. sequences-1); sequence 0 is the prompt
        self._free = list(range(sequences - 1, 0, -1))
        self._branches: OrderedDict[int, list[int]] = OrderedDict()
        self._holder: dict[tuple[int, ...], int] = {}
        self._slots: OrderedDict[Hashable, _PromptSlot] = OrderedDict()
        self._active: _PromptSlot | None = None
        self.tokens_fed = 0
        #: seconds inside llama_decode and calls of it (for overhead measurements)
        self.forward_seconds = 0.0
        self.forward_calls = 0
        #: branches dropped to make room (each may cost re-fed tokens later)
        self.evictions = 0
        #: seconds in KV cache operations (sequence copies and removals) and branches
        #: started by a copy (a node whose parent is not a branch tip)
        self.kv_seconds = 0.0
        self.branch_switches = 0
        #: what the prompt builder needs from the GGUF's tokenizer
        if gguf_vocab.fim_ids is not None:
            from adaptrack_lsp.completion.context import FIMFormat

            self.fim_format = FIMFormat(gguf_vocab.fim_family, *gguf_vocab.fim_ids)
        else:
            self.fim_format = None
        self.bos_ids = (gguf_vocab.bos_id,) if gguf_vocab.adds_bos and gguf_vocab.bos_id is not None else ()
        self._start_id = gguf_vocab.bos_id if gguf_vocab.bos_id is not None else min(self.vocab.eos_ids)

    # -- prompt -------------------------------------------------------------------------
    def set_prompt(
        self, prompt_ids: Sequence[int], max_new_tokens: int = 0, cache_key: Hashable | None = None
    ) -> PromptInfo:
        """Feed the prompt, reusing the longest common prefix cached under `cache_key`."""
        ids, truncated = self._prompt_ids(prompt_ids, max_new_tokens)
        slot = self._slots.pop(cache_key, None)
        if slot is None:
            slot = _PromptSlot()
            while len(self._slots) >= self.max_cached_prompts:
                self._slots.popitem(last=False)
        self._slots[cache_key] = slot
        if slot is self._active and slot.prompt == ids and slot.root_logprobs is not None:
            # the same prompt again (a fresh tree per sample): the branches stay valid
            return PromptInfo(length=len(ids), truncated=truncated, reused=len(ids))
        try:
            self._drop_branches()
            self._clear_node_cache()
            if slot is not self._active:
                self._switch_to(slot)
                if slot.prompt == ids and slot.root_logprobs is not None and slot.ids == ids:
                    return PromptInfo(length=len(ids), truncated=truncated, reused=len(ids))  # restored whole
            keep = min(_common_prefix(slot.ids, ids), len(ids) - 1)
            if not self.engine.seq_rm(self.PROMPT_SEQ, keep, -1):
                self.engine.seq_rm(self.PROMPT_SEQ)
                keep = 0
            del slot.ids[keep:]
            slot.prompt, slot.root_logprobs = [], None
            logits = self._feed_prompt(slot, ids[keep:], keep)
            slot.prompt, slot.root_logprobs = ids, self._logprobs(logits)
        except BaseException:
            self.clear_cache()  # a failed or interrupted decode leaves no trustworthy state
            raise
        return PromptInfo(length=len(ids), truncated=truncated, reused=keep)

    def _prompt_ids(self, prompt_ids: Sequence[int], max_new_tokens: int) -> tuple[list[int], int]:
        ids = [int(i) for i in prompt_ids]
        self._check_ids(ids, "prompt")
        if not ids:  # condition on a document start: BOS, else the end-of-text separator
            ids = [int(self._start_id)]
        truncated = 0
        budget = self.max_context - max(0, int(max_new_tokens))
        if budget < 1:
            raise ValueError(f"max_new_tokens={max_new_tokens} leaves no room for a prompt in a context of {self.max_context}")
        if len(ids) > budget:
            truncated = len(ids) - budget
            ids = ids[truncated:]
        return ids, truncated

    def _switch_to(self, slot: _PromptSlot) -> None:
        """Make `slot` the document in sequence 0: save the active one's KV state to host
        memory, restore `slot`'s if it was saved."""
        engine = self.engine
        active = self._active
        self._active = None
        if active is not None and active.ids and any(kept is active for kept in self._slots.values()):
            active.state = engine.save(self.PROMPT_SEQ)
            if active.state is None:
                active.ids, active.prompt, active.root_logprobs = [], [], None
            self._bound_saved_states()
        engine.seq_rm(self.PROMPT_SEQ)
        if slot.state is not None and slot.ids and engine.restore(slot.state, self.PROMPT_SEQ):
            pass
        else:
            engine.seq_rm(self.PROMPT_SEQ)
            slot.ids, slot.prompt, slot.root_logprobs = [], [], None
        slot.state = None
        self._active = slot

    def _bound_saved_states(self) -> None:
        total = 0
        for slot in reversed(self._slots.values()):  # most recent first
            if slot.state is None:
                continue
            total += len(slot.state)
            if total > self.max_saved_prompt_bytes:
                slot.state, slot.ids, slot.prompt, slot.root_logprobs = None, [], [], None

    def _feed_prompt(self, slot: _PromptSlot, tokens: list[int], start: int) -> np.ndarray:
        """Decode `tokens` at positions start.. into sequence 0; logits of the last."""
        engine = self.engine
        logits = None
        for begin in range(0, len(tokens), engine.batch_tokens):
            part = tokens[begin : begin + engine.batch_tokens]
            last = begin + len(part) == len(tokens)
            entries = [(t, start + begin + i, self.PROMPT_SEQ, last and i == len(part) - 1) for i, t in enumerate(part)]
            try:
                self._decode(entries)
            except _KVFull:
                raise ModelError(f"the KV cache ({self.engine.kv_cells} cells) cannot hold the prompt; raise the context length") from None
            slot.ids.extend(part)
            if last:
                logits = engine.logits(len(part) - 1)
        if logits is None:
            raise ModelError("internal error: nothing to feed")
        return logits

    # -- distributions --------------------------------------------------------------------
    def next_logprobs(self, path: Sequence[int]) -> np.ndarray:
        return self.next_logprobs_batch([path])[0]

    def next_logprobs_batch(self, paths: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Distributions of several paths after the prompt; the new nodes go through one
        llama_decode (one token each while their parents are held)."""
        slot = self._active
        if slot is None or slot.root_logprobs is None:
            raise ModelError("set_prompt must be called before next_logprobs")
        prompt_length = len(slot.prompt)
        results: list[np.ndarray | None] = [None] * len(paths)
        pending: dict[tuple[int, ...], list[int]] = {}
        for index, path in enumerate(paths):
            key = tuple(int(t) for t in path)
            if not key:
                results[index] = slot.root_logprobs.copy()
                continue
            self._check_ids(key, "path")
            if prompt_length + len(key) > self.max_context:
                raise ModelError(f"prompt + path ({prompt_length + len(key)} tokens) exceeds the context of {self.max_context}")
            cached = self._node_logprobs.get(key)
            if cached is not None:
                self._node_logprobs.move_to_end(key)
                results[index] = cached.copy()
                continue
            pending.setdefault(key, []).append(index)
        keys = list(pending)
        limit = max(1, min(len(self._free) + len(self._branches), self.engine.batch_tokens // 2))
        try:
            for begin in range(0, len(keys), limit):
                group = keys[begin : begin + limit]
                for key, logprobs in zip(group, self._evaluate(group, prompt_length)):
                    self._remember(key, logprobs)
                    for index in pending[key]:
                        results[index] = logprobs.copy()
        except BaseException:
            self.clear_cache()
            raise
        return results  # type: ignore[return-value]

    def _evaluate(self, paths: list[tuple[int, ...]], prompt_length: int) -> list[np.ndarray]:
        """Place each path in a branch sequence (extend the branch whose tip is its held
        ancestor, or start one sharing that ancestor's cells), decode the missing tokens
        of all of them at once, and return their log-probabilities."""
        plan = []  # (path, sequence, tokens of the path already held)
        claimed: set[int] = set()  # sequences this batch reads or writes (never dropped)
        extended: set[int] = set()
        started: list[int] = []
        for path in paths:
            held = len(path) - 1
            while held > 0 and path[:held] not in self._holder:
                held -= 1
            source = self._holder[path[:held]] if held else self.PROMPT_SEQ
            if held and source not in extended and len(self._branches[source]) == held:
                self._branches.move_to_end(source)
                target = source
                extended.add(target)
            else:
                claimed.add(source)
                target = self._new_branch(keep=claimed)
                started_at = time.perf_counter()
                self.engine.seq_cp(source, target, prompt_length + held)
                self.kv_seconds += time.perf_counter() - started_at
                self.branch_switches += 1
                self._branches[target] = list(path[:held])
                started.append(target)
                extended.add(target)
            claimed.add(target)
            plan.append((path, target, held))
        entries = []
        outputs = []
        for path, seq, held in plan:
            for offset in range(held, len(path)):
                last = offset == len(path) - 1
                if last:
                    outputs.append(len(entries))
                entries.append((path[offset], prompt_length + offset, seq, last))
        while True:
            try:
                self._decode(entries)
                break
            except _KVFull:
                if self._evict(keep=claimed):
                    continue  # room made: the same batch again
                for seq in started:  # undo the new branches, then one path at a time
                    self._branches.pop(seq, None)
                    self.engine.seq_rm(seq)
                    self._free.append(seq)
                if len(paths) > 1:
                    return [logprobs for path in paths for logprobs in self._evaluate([path], prompt_length)]
                raise ModelError(
                    f"the KV cache ({self.engine.kv_cells} cells) is full with the prompt and one path; "
                    "raise the context length"
                ) from None
        results = []
        for (path, seq, held), output in zip(plan, outputs):
            self._branches[seq] = list(path)
            for depth in range(held + 1, len(path) + 1):
                self._holder[path[:depth]] = seq
            results.append(self._logprobs(self.engine.logits(output)))
        return results

    def _remember(self, key: tuple[int, ...], logprobs: np.ndarray) -> None:
        if logprobs.nbytes > self.max_node_cache_bytes:
            return
        self._node_logprobs[key] = logprobs
        self._node_bytes += logprobs.nbytes
        while self._node_bytes > self.max_node_cache_bytes:
            _, dropped = self._node_logprobs.popitem(last=False)
            self._node_bytes -= dropped.nbytes

    def _clear_node_cache(self) -> None:
        self._node_logprobs.clear()
        self._node_bytes = 0

    def _new_branch(self, keep: set[int]) -> int:
        """A free branch sequence; drops the least recently used branch when none is free."""
        if not self._free and not self._evict(keep):
            raise ModelError("internal error: no branch sequence can be freed")
        return self._free.pop()

    def _evict(self, keep: set[int]) -> bool:
        """Drop the least recently used branch not in `keep`; False when none can go."""
        victim = next((seq for seq in self._branches if seq not in keep), None)
        if victim is None:
            return False
        path = self._branches.pop(victim)
        started = time.perf_counter()
        self.engine.seq_rm(victim)
        self.kv_seconds += time.perf_counter() - started
        self._free.append(victim)
        self.evictions += 1
        # nodes the victim held stay held by another branch that shares them, if any
        best, best_length = None, 0
        for seq, other in self._branches.items():
            length = _common_prefix(other, path)
            if length > best_length:
                best, best_length = seq, length
        for depth in range(1, len(path) + 1):
            key = tuple(path[:depth])
            if self._holder.get(key) == victim:
                if depth <= best_length:
                    self._holder[key] = best  # type: ignore[assignment]
                else:
                    del self._holder[key]
        return True

    def _drop_branches(self) -> None:
        for seq in self._branches:
            self.engine.seq_rm(seq)
            self._free.append(seq)
        self._branches.clear()
        self._holder.clear()

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> None:
        started = time.perf_counter()
        code = self.engine.decode(entries)
        self.forward_seconds += time.perf_counter() - started
        self.forward_calls += 1
        if code == 1:
            raise _KVFull()
        if code != 0:
            raise ModelError(f"llama_decode failed (code {code}): {_log_since(_log_mark() - 8) or 'no reason given'}")
        self.tokens_fed += len(entries)

    def encode(self, text: str) -> list[int]:
        return self.engine.tokenize(text.encode("utf-8", errors="surrogatepass"))

    def detokenize(self, ids: Sequence[int]) -> bytes:
        """llama.cpp's own detokenization of `ids` (special tokens as no text; for some
        vocabularies it cleans up spaces before punctuation, as Hugging Face does)."""
        return self.engine.detokenize([int(i) for i in ids])

    def pieces(self, ids: Sequence[int]) -> bytes:
        """llama.cpp's pieces of `ids` joined (`llama_token_to_piece`: what it generates)."""
        buffer = ctypes.create_string_buffer(256)
        return b"".join(_piece(self.engine.llama_cpp, self.engine.vocab, int(i), buffer) for i in ids)

    def forget_nodes(self) -> None:
        """Drop every branch and remembered node distribution, keeping the prompts (the
        next request evaluates its nodes again; benchmarks use it to time real evaluations)."""
        self._drop_branches()
        self._clear_node_cache()

    def clear_cache(self) -> None:
        """Drop every cached prompt and branch."""
        self._branches.clear()
        self._holder.clear()
        self._clear_node_cache()
        self._free = list(range(self._sequence_count - 1, 0, -1))
        self._slots.clear()
        self._active = None
        self.engine.clear()

    def close(self) -> None:
        """Free llama.cpp's model and context now (they are freed on collection anyway)."""
        self.engine.close()

    # -- internals ------------------------------------------------------------------------
    def _check_ids(self, ids: Sequence[int], what: str) -> None:
        for token_id in ids:
            if not 0 <= token_id < self.vocab.num_defined:
                raise ValueError(f"{what} token id {token_id} is outside the tokenizer's {self.vocab.num_defined} ids")

    def _logprobs(self, logits: np.ndarray) -> np.ndarray:
        """log-softmax (float32 values, float64 sum) with padding ids (the ids past the
        tokenizer's, at the end) at -inf."""
        values = np.array(logits, dtype=np.float32)  # a copy: the caller's array stays as it was
        values[self.vocab.num_defined :] = -np.inf
        top = float(values.max())
        if not top < np.inf:  # NaN anywhere makes the maximum NaN
            raise ModelError("the model produced NaN or +inf logits")
        if top == -np.inf:
            raise ModelError("the model gave every token zero probability")
        values -= np.float32(top)
        total = float(np.exp(values).sum(dtype=np.float64))
        values -= np.float32(np.log(total))
        return values


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    limit = min(len(a), len(b))
    i = 0
    while i < limit and a[i] == b[i]:
        i += 1
    return i


# -- loading ------------------------------------------------------------------------------
def load_llamacpp(
    name_or_path: str,
    threads: int | None = None,
    gpu_layers: int | None = None,
    context_length: int | None = None,
    tree_cells: int = DEFAULT_TREE_CELLS,
    max_sequences: int = 64,
    batch_tokens: int = 512,
    kv_type: str = "f16",
    repack: bool | None = None,
    relative_to: str | os.PathLike | None = None,
    tokenizer: Any = None,
    **options: Any,
) -> LlamaCppLanguageModel:
    """Load a GGUF (``tiny``, or the path of a .gguf file) for the llamacpp backend.

    `threads`: CPU threads (None: `default_threads`); `gpu_layers`: layers offloaded to a
    GPU (None: all when llama.cpp was built with a GPU backend, else none);
    `context_length`: prompt + path tokens (None: the GGUF's training context, at most
    `DEFAULT_CONTEXT`); `kv_type`: the KV cache's element type (f16, llama.cpp's
    default; f32 computes each node exactly as a fresh pass would, up to summation
    order); `repack`: let llama.cpp repack weights for its CPU kernels (None:
    `default_repack`); `tokenizer`: an optional Hugging Face tokenizer (object, folder or
    hub id) that must tokenize as the GGUF does.  `options` go to `LlamaCppLanguageModel`.
    Raises `ModelError` naming the fix.
    """
    llama_cpp = llama_cpp_module()
    path = resolve_gguf(name_or_path, relative_to)
    if threads is not None and int(threads) < 1:
        raise ModelError(f"threads must be at least 1, got {threads}")
    if not 2 <= int(max_sequences) <= MAX_SEQUENCES:
        raise ModelError(f"max_sequences must be between 2 and {MAX_SEQUENCES}, got {max_sequences}")
    if int(batch_tokens) < 1:
        raise ModelError(f"batch_tokens must be at least 1, got {batch_tokens}")
    if kv_type not in KV_TYPES:
        raise ModelError(f"unknown KV cache type {kv_type!r}; choose one of {', '.join(KV_TYPES)}")
    engine = _Engine(llama_cpp, path, gpu_layers, repack)
    try:
        if context_length:
            context = int(context_length)
        else:
            context = min(DEFAULT_CONTEXT, engine.context_train) if engine.context_train > 0 else DEFAULT_CONTEXT
        engine.create_context(threads, context + int(tree_cells), batch_tokens, max_sequences, kv_type)
        gguf_vocab = read_vocabulary(llama_cpp, engine.vocab)
        lm = LlamaCppLanguageModel(
            engine, gguf_vocab, name=name_or_path, max_context=context, max_sequences=max_sequences, **options
        )
        mismatches = round_trip_mismatches(lm, ROUND_TRIP_TEXTS)
        if mismatches:
            text, got, detokenized = mismatches[0]
            raise ModelError(
                f"the tokenizer of {path} does not map to exact bytes: {text!r} -> {got!r} (llama.cpp: {detokenized!r})"
            )
        if tokenizer is not None:
            check_tokenizer_agrees(lm, tokenizer, path)
    except BaseException:
        engine.close()
        raise
    log.info(
        "llama.cpp model %s: %d parameters, %d threads, %d GPU layers, context %d, %d KV cells, weight repacking %s",
        path, engine.parameters, engine.threads, engine.gpu_layers, context, engine.kv_cells,
        "on" if engine.repack else "off (the CPU has AMX)" if repack is None else "off",
    )
    return lm


def load_from_settings(settings, progress=None) -> LlamaCppLanguageModel:
    """The llamacpp backend's loader for `Settings`: `model` (a .gguf path or ``tiny``),
    `threads`, `gpuLayers` (device ``cpu`` with no `gpuLayers` means none offloaded), and
    the `tokenizer` setting where one is given (checked against the GGUF's own)."""
    gpu_layers = settings.gpu_layers
    if gpu_layers is None and settings.device == "cpu":
        gpu_layers = 0
    return load_llamacpp(
        settings.model,
        threads=settings.threads,
        gpu_layers=gpu_layers,
        tokenizer=getattr(settings, "tokenizer", None) or None,
    )


def round_trip_mismatches(lm: LlamaCppLanguageModel, texts: Sequence[str]) -> list[tuple[str, bytes, bytes]]:
    """Texts whose token bytes differ from the text or from llama.cpp's detokenization:
    ``[(text, our bytes, llama.cpp's bytes)]`` (one leading space is expected where the
    tokenizer adds a SentencePiece dummy prefix)."""
    mismatches = []
    for text in texts:
        ids = lm.encode(text)
        got = lm.vocab.decode_bytes(ids)
        detokenized = lm.detokenize(ids)
        expected = text.encode("utf-8")
        if got == detokenized and (got == expected or got == b" " + expected):
            continue
        mismatches.append((text, got, detokenized))
    return mismatches


def check_tokenizer_agrees(lm: LlamaCppLanguageModel, tokenizer: Any, path: Path) -> None:
    """ModelError naming both when a Hugging Face tokenizer (object, folder or hub id)
    tokenizes the probe texts differently from the GGUF's own tokenizer."""
    name = tokenizer if isinstance(tokenizer, str) else getattr(tokenizer, "name_or_path", type(tokenizer).__name__)
    if isinstance(tokenizer, str):
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
        except Exception as error:
            raise ModelError(f"cannot load tokenizer {name!r}: {type(error).__name__}: {error}") from error
    for text in ROUND_TRIP_TEXTS:
        theirs = list(tokenizer.encode(text, add_special_tokens=False))
        ours = lm.encode(text)
        if theirs != ours:
            raise ModelError(
                f"tokenizer {name!r} does not match the vocabulary of {path}: {text[:30]!r} is "
                f"{theirs[:8]}... there and {ours[:8]}... in the GGUF; use the tokenizer of the model the GGUF was "
                "written from, or leave the tokenizer setting empty (the GGUF's own is used)"
            )
