"""Token ids <-> exact bytes/text, EOS and special ids, and the token trie.

A `Vocabulary` is what decoders and constrainers know of a tokenizer:

- `token_bytes[i]`: the exact bytes token ``i`` contributes to the text (byte-level
  BPE alphabet and SentencePiece ``▁`` / ``<0xNN>`` byte fallback resolved),
  ``b""`` for special tokens and ids the tokenizer does not define;
- `size`: the width of the model's logits (may exceed the tokenizer, e.g. Qwen2 pads
  151,643 tokens to 151,936 logits); ids beyond the tokenizer are never valid;
- `eos_ids`: every id that ends a sequence;
- `special_ids`: ids that never appear in generated text (never valid, except EOS).

`TokenTrie` is the character trie over token texts that constrainers walk jointly with
their own state to build a full-vocabulary mask without checking every token.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property


def token_text(data: bytes) -> str:
    """Decode token bytes to text; undecodable bytes (partial UTF-8) become lone surrogates.

    ``surrogateescape`` keeps the mapping lossless: ``token_text(b).encode("utf-8",
    "surrogateescape") == b``.  Constrainers see such characters as non-identifier
    characters.
    """
    return data.decode("utf-8", errors="surrogateescape")


@dataclass
class TrieNode:
    """One character position in the token trie."""

    children: dict[str, TrieNode] = field(default_factory=dict)
    token_ids: list[int] = field(default_factory=list)  # tokens whose text ends here


class TokenTrie:
    """Character trie over the texts of the ordinary (non-special, non-empty) tokens."""

    def __init__(self, texts: Sequence[str], excluded: Iterable[int] = ()):
        excluded = set(excluded)
        self.root = TrieNode()
        self.num_tokens = 0
        for token_id, text in enumerate(texts):
            if token_id in excluded or not text:
                continue
            node = self.root
            for char in text:
                child = node.children.get(char)
                if child is None:
                    child = node.children[char] = TrieNode()
                node = child
            node.token_ids.append(token_id)
            self.num_tokens += 1


class Vocabulary:
    """Token id -> bytes/text for one tokenizer and one logits width."""

    def __init__(
        self,
        token_bytes: Sequence[bytes],
        eos_ids: Iterable[int],
        size: int | None = None,
        special_ids: Iterable[int] = (),
    ):
        self.token_bytes: list[bytes] = list(token_bytes)
        self.size: int = len(self.token_bytes) if size is None else int(size)
        if self.size < len(self.token_bytes):
            raise ValueError(
                f"logits size {self.size} is smaller than the tokenizer's {len(self.token_bytes)} tokens"
            )
        self.eos_ids: frozenset[int] = frozenset(int(i) for i in eos_ids)
        if not self.eos_ids:
            raise ValueError("a vocabulary needs at least one EOS id")
        for i in self.eos_ids:
            if not 0 <= i < self.size:
                raise ValueError(f"EOS id {i} is outside the vocabulary (size {self.size})")
        self.special_ids: frozenset[int] = frozenset(int(i) for i in special_ids) | self.eos_ids
        self.texts: list[str] = [token_text(b) for b in self.token_bytes]

    # -- construction -------------------------------------------------------------
    @classmethod
    def from_strings(cls, tokens: Sequence[str], eos: Iterable[str] | str) -> Vocabulary:
        """A vocabulary of literal strings (tabular LMs, task files)."""
        eos_names = [eos] if isinstance(eos, str) else list(eos)
        index = {t: i for i, t in enumerate(tokens)}
        if len(index) != len(tokens):
            raise ValueError("vocabulary tokens must be distinct")
        missing = [e for e in eos_names if e not in index]
        if missing:
            raise ValueError(f"EOS token(s) {missing} are not in the vocabulary")
        eos_ids = [index[e] for e in eos_names]
        data = [b"" if i in eos_ids else t.encode("utf-8") for i, t in enumerate(tokens)]
        vocab = cls(data, eos_ids)
        vocab.names = list(tokens)
        return vocab

    def with_eos_ids(self, extra: Iterable[int]) -> Vocabulary:
        """This vocabulary with `extra` ids ending sequences too (a new object: tables
        built for this one stay valid for it)."""
        vocab = Vocabulary(self.token_bytes, self.eos_ids | {int(i) for i in extra}, self.size, self.special_ids)
        names = getattr(self, "names", None)
        if names is not None:
            vocab.names = names
        return vocab

    # -- queries ------------------------------------------------------------------
    def __len__(self) -> int:
        return self.size

    @property
    def num_defined(self) -> int:
        """Ids the tokenizer defines (ids in [num_defined, size) are padding)."""
        return len(self.token_bytes)

    def is_special(self, token_id: int) -> bool:
        return token_id in self.special_ids or token_id >= len(self.token_bytes)

    def text(self, token_id: int) -> str:
        if token_id >= len(self.texts):
            return ""
        return self.texts[token_id]

    def name(self, token_id: int) -> str:
        """Human-readable token name (literal name for string vocabularies)."""
        names = getattr(self, "names", None)
        if names is not None:
            return names[token_id]
        return self.text(token_id) if token_id < len(self.texts) else f"<pad:{token_id}>"

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        return b"".join(self.token_bytes[i] for i in ids if i < len(self.token_bytes))

    def decode(self, ids: Iterable[int]) -> str:
        """Text of a token sequence (invalid UTF-8 replaced), special tokens dropped."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    @cached_property
    def byte_lengths(self):
        """int32[size]: bytes each id contributes to the text (0 for special/padding ids)."""
        import numpy as np

        lengths = np.zeros(self.size, dtype=np.int32)
        lengths[: len(self.token_bytes)] = [len(b) for b in self.token_bytes]
        return lengths

    @cached_property
    def trie(self) -> TokenTrie:
        return TokenTrie(self.texts, excluded=self.special_ids)
