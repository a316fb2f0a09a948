"""Exact bytes for every id of a Hugging Face tokenizer.

Owns the mapping token id -> the bytes that id contributes to the text, computed once
from the tokenizer's vocabulary (never from per-token ``decode()``, which loses
SentencePiece leading spaces and splits multi-byte characters):

- byte-level BPE (GPT-2, Qwen2, StarCoder, Llama 3): each character of the token string
  is one byte through the GPT-2 byte alphabet (`bytes_to_unicode`);
- SentencePiece-style (Llama 2, CodeLlama, Mistral): ``▁`` is a space and ``<0xNN>``
  byte-fallback tokens are the single byte ``NN``;
- added tokens: special ones (``<|endoftext|>``, FIM markers, ...) contribute ``b""``
  and are listed in `Vocabulary.special_ids`; added non-special tokens contribute their
  text;
- logits ids at or beyond ``len(tokenizer)`` (Qwen2 pads 151,643 tokens to 151,936
  logits) are padding: no bytes, never valid.

Several ids may end a sequence: the tokenizer's EOS, the generation config's EOS ids
(passed as ``extra_eos_ids``) and the end markers llama.cpp names end-of-generation
when present as special tokens (`END_OF_SEQUENCE_TOKENS`).
`round_trip_mismatches` checks ``decode_bytes(encode(text)) == text`` on sample texts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from adaptrack_lsp.vocab import Vocabulary

#: special tokens that end a completion when the tokenizer defines them: the names
#: llama.cpp ends generation at (`llama_vocab_is_eog`: end-of-text and end-of-turn
#: markers, and the FIM pad, repository and file-separator markers), so that a model
#: ends its sequences at the same ids whichever engine runs it
END_OF_SEQUENCE_TOKENS = (
    "<|endoftext|>",
    "<|im_end|>",
    "<|file_sep|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|eom_id|>",
    "<end_of_turn>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|end|>",
    "<|EOT|>",
    "\u2581<EOT>",  # CodeLlama: ends an infill (fill-in-the-middle)
    "<EOT>",
    "</s>",
    "<eos>",
)

#: texts whose tokenization must round-trip through the vocabulary's bytes at load time
ROUND_TRIP_TEXTS = (
    "import numpy as np\nx = np.linalg.norm(a, ord=2)  # norm\n",
    "\tdef __init__(self, *args, **kwargs):\r\n        return {'é': \"日本\", 3.5e-3: None}\n",
)

SENTENCEPIECE_SPACE = "\u2581"  # ▁
_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """The GPT-2 byte alphabet: byte value -> printable character."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    characters = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            characters.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in characters)))


@lru_cache(maxsize=1)
def unicode_to_bytes() -> dict[str, int]:
    return {char: byte for byte, char in bytes_to_unicode().items()}


def _backend(tokenizer: Any):
    """The `tokenizers.Tokenizer` behind a HF tokenizer (or the object itself)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return backend
    if type(tokenizer).__module__.startswith("tokenizers"):
        return tokenizer
    raise ValueError(
        f"{type(tokenizer).__name__} has no fast (`tokenizers`) backend; only tokenizers with a "
        "tokenizer.json (byte-level BPE or SentencePiece-style BPE/Unigram) are supported"
    )


def _components(spec: dict | None) -> list[dict]:
    """Flatten a (possibly `Sequence`) decoder / normalizer / pre-tokenizer spec."""
    if not spec:
        return []
    if spec.get("type") == "Sequence":
        items = spec.get("decoders") or spec.get("normalizers") or spec.get("pretokenizers") or []
        return [part for item in items for part in _components(item)]
    return [spec]


def tokenizer_spec(tokenizer: Any) -> dict:
    """The tokenizer's ``tokenizer.json`` content as a dict."""
    return json.loads(_backend(tokenizer).to_str())


def tokenizer_scheme(tokenizer: Any, spec: dict | None = None) -> str:
    """``"byte_level"`` or ``"sentencepiece"``: how token strings map to bytes."""
    spec = tokenizer_spec(tokenizer) if spec is None else spec
    decoder_types = {part.get("type") for part in _components(spec.get("decoder"))}
    pre_types = {part.get("type") for part in _components(spec.get("pre_tokenizer"))}
    if "ByteLevel" in decoder_types or ("ByteLevel" in pre_types and not decoder_types):
        return "byte_level"
    if decoder_types & {"Metaspace", "ByteFallback"}:
        return "sentencepiece"
    for part in _components(spec.get("decoder")):
        if part.get("type") == "Replace" and SENTENCEPIECE_SPACE in json.dumps(part.get("pattern")):
            return "sentencepiece"
    raise ValueError(
        f"unsupported tokenizer decoder {sorted(t for t in decoder_types if t)} "
        "(expected byte-level BPE or a SentencePiece-style decoder)"
    )


def adds_dummy_prefix(tokenizer: Any, spec: dict | None = None) -> bool:
    """Whether encoding prepends ``▁`` to the text (SentencePiece ``add_dummy_prefix``)."""
    spec = tokenizer_spec(tokenizer) if spec is None else spec
    for part in _components(spec.get("normalizer")):
        if part.get("type") == "Prepend" and part.get("prepend") == SENTENCEPIECE_SPACE:
            return True
    for part in _components(spec.get("pre_tokenizer")):
        if part.get("type") == "Metaspace":
            scheme = part.get("prepend_scheme", "always" if part.get("add_prefix_space", True) else "never")
            if scheme in ("always", "first"):
                return True
    return False


def _tokenizer_length(tokenizer: Any) -> int:
    backend = _backend(tokenizer)
    if backend is tokenizer:
        return backend.get_vocab_size(with_added_tokens=True)
    return len(tokenizer)


def vocabulary_from_tokenizer(
    tokenizer: Any,
    logits_size: int | None = None,
    extra_eos_ids: Iterable[int] = (),
) -> Vocabulary:
    """Exact `Vocabulary` for `tokenizer` (a HF fast tokenizer or a `tokenizers.Tokenizer`).

    `logits_size` is the width of the model's output (``config.vocab_size``), which may
    exceed the tokenizer; the extra ids are padding.  `extra_eos_ids` adds EOS ids (the
    generation config's).  Raises ValueError for tokenizers whose token strings cannot
    be mapped to bytes exactly, or when no EOS id exists.
    """
    backend = _backend(tokenizer)
    spec = tokenizer_spec(tokenizer)
    scheme = tokenizer_scheme(tokenizer, spec)
    count = _tokenizer_length(tokenizer)
    if logits_size is not None and logits_size < count:
        raise ValueError(f"logits size {logits_size} is smaller than the tokenizer's {count} tokens")
    model_spec = spec.get("model") or {}
    byte_fallback = bool(model_spec.get("byte_fallback", False))
    unk_token = model_spec.get("unk_token")
    if model_spec.get("type") == "Unigram" and model_spec.get("unk_id") is not None:
        unk_token = backend.id_to_token(int(model_spec["unk_id"]))

    added: dict[int, tuple[str, bool]] = {}
    for token_id, token in backend.get_added_tokens_decoder().items():
        added[int(token_id)] = (token.content, bool(token.special))
    special_ids: set[int] = set()
    for token_id in getattr(tokenizer, "all_special_ids", ()) or ():
        if token_id is not None and 0 <= token_id < count:
            special_ids.add(int(token_id))

    alphabet = unicode_to_bytes()
    token_bytes: list[bytes] = []
    for token_id in range(count):
        if token_id in added:
            content, special = added[token_id]
            if special or token_id in special_ids:
                special_ids.add(token_id)
                token_bytes.append(b"")
            else:
                token_bytes.append(content.encode("utf-8"))
            continue
        token = backend.id_to_token(token_id)
        if token is None:  # a hole in the id space: never valid
            special_ids.add(token_id)
            token_bytes.append(b"")
            continue
        if token_id in special_ids or (unk_token is not None and token == unk_token):
            special_ids.add(token_id)
            token_bytes.append(b"")
            continue
        if scheme == "byte_level":
            try:
                token_bytes.append(bytes(alphabet[char] for char in token))
            except KeyError as error:
                raise ValueError(
                    f"token {token_id} ({token!r}) has a character outside the byte-level alphabet: {error}"
                ) from None
        else:
            match = _BYTE_FALLBACK.match(token) if byte_fallback else None
            if match:
                token_bytes.append(bytes([int(match.group(1), 16)]))
            else:
                token_bytes.append(token.replace(SENTENCEPIECE_SPACE, " ").encode("utf-8"))

    eos_ids: set[int] = {int(i) for i in extra_eos_ids if i is not None}
    eos_id = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos_id, int):
        eos_ids.add(eos_id)
    for name in END_OF_SEQUENCE_TOKENS:
        token_id = backend.token_to_id(name)
        if token_id is not None and token_id in special_ids:
            eos_ids.add(int(token_id))
    if not eos_ids:
        raise ValueError("the tokenizer defines no end-of-sequence token; pass extra_eos_ids")
    size = count if logits_size is None else int(logits_size)
    for token_id in eos_ids:
        if not 0 <= token_id < size:
            raise ValueError(f"EOS id {token_id} is outside the vocabulary (size {size})")
    return Vocabulary(token_bytes, eos_ids=sorted(eos_ids), size=size, special_ids=special_ids)


def encode_ids(tokenizer: Any, text: str) -> list[int]:
    """The ids of `text` without special tokens (a HF tokenizer or a `tokenizers.Tokenizer`)."""
    if _backend(tokenizer) is tokenizer:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)
    return list(tokenizer.encode(text, add_special_tokens=False))


def load_fast_tokenizer(folder: str) -> tuple[Any, list[int]]:
    """(`tokenizers.Tokenizer`, EOS ids its tokenizer_config.json names) from a folder's
    tokenizer.json, without transformers (the light core's `server` backend)."""
    import os

    from tokenizers import Tokenizer

    path = os.path.join(folder, "tokenizer.json")
    if not os.path.isfile(path):
        raise ValueError(f"{folder} has no tokenizer.json (other tokenizer formats need transformers)")
    tokenizer = Tokenizer.from_file(path)
    eos_ids: list[int] = []
    try:
        with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        config = {}
    eos = config.get("eos_token") if isinstance(config, dict) else None
    if isinstance(eos, dict):
        eos = eos.get("content")
    if isinstance(eos, str) and tokenizer.token_to_id(eos) is not None:
        eos_ids.append(int(tokenizer.token_to_id(eos)))
    return tokenizer, eos_ids


def round_trip_mismatches(tokenizer: Any, vocab: Vocabulary, texts: Sequence[str]) -> list[tuple[str, bytes]]:
    """Texts whose token bytes do not concatenate back to the text: ``[(text, got)]``.

    With a SentencePiece dummy prefix the encoding of ``text`` is that of ``" " + text``,
    so one leading space is expected there.
    """
    dummy_prefix = adds_dummy_prefix(tokenizer)
    mismatches = []
    for text in texts:
        got = vocab.decode_bytes(encode_ids(tokenizer, text))
        expected = text.encode("utf-8")
        if got == expected or (dummy_prefix and got == b" " + expected):
            continue
        mismatches.append((text, got))
    return mismatches
