"""Encoding the prompt's text again after a keystroke without tokenizing all of it.

Consecutive requests tokenize texts that differ by a small edit near the cursor: the
window of the current file starts at the same line and grows by a character.  An
`EditedTextEncoder` keeps the last few texts it encoded with their ids; for a new
text it keeps the ids of the longest recent text up to a cut some way before the first
changed byte and encodes only the rest.  The cut is used only when encoding from a
second, earlier cut gives the same tokens from the cut on (the tokenizer's split does
not reach across it); otherwise, and for a text whose tokens do not spell it byte for
byte (a tokenizer that adds a leading space, a special token's name), the whole text
is encoded.  The
result equals ``encode(text)`` (tests/unit/test_edited_text.py: random edits of
real files, two real tokenizers).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from adaptrack_lsp.apis.document import common_prefix_length

#: bytes between the first changed byte and the cut, and between the two cuts
MARGIN_BYTES = 64
#: recent texts kept (documents edited in turn each find their own)
KEPT_TEXTS = 4


class EditedTextEncoder:
    """``encode(text)`` for texts that differ from recent ones by local edits.

    `encode(text) -> ids` must not add special tokens; `byte_lengths[id]` is the length
    of the token's bytes.  Not thread-safe: one caller at a time (the model's lock).
    `encoded_bytes` counts the bytes given to `encode`, for tests and benchmarks."""

    def __init__(self, encode: Callable[[str], list[int]], byte_lengths: np.ndarray):
        self._encode = encode
        self._byte_lengths = np.asarray(byte_lengths, dtype=np.int64)
        #: (text bytes, ids int64, byte end of each token), most recent last
        self._recent: list[tuple[bytes, np.ndarray, np.ndarray]] = []
        self.encoded_bytes = 0

    def __call__(self, text: str) -> list[int]:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: the tokenizer decides
            return self._whole(text, None)
        best, common = None, 0
        for entry in self._recent:
            length = common_prefix_length(entry[0], data)
            if best is None or length > common:
                best, common = entry, length
        if best is None:
            return self._whole(text, data)
        old, ids, ends = best
        if common == len(old) == len(data):
            self._recent.remove(best)
            self._recent.append(best)
            return ids.tolist()
        cut_token = int(np.searchsorted(ends, common - MARGIN_BYTES, side="right")) - 1
        if cut_token < 0:
            return self._whole(text, data)
        cut = int(ends[cut_token])
        early_token = int(np.searchsorted(ends, cut - MARGIN_BYTES, side="right")) - 1
        if early_token < 0 or not _starts_character(data, cut) or not _starts_character(data, int(ends[early_token])):
            return self._whole(text, data)
        early = int(ends[early_token])
        rest = self._encode_bytes(data[cut:])
        check = self._encode_bytes(data[early:])
        if not self._cut_holds(ids[early_token + 1 : cut_token + 1], rest, check):
            return self._whole(text, data)
        if int(self._byte_lengths[np.asarray(rest, dtype=np.int64)].sum()) != len(data) - cut:
            return self._whole(text, data)  # the rest does not spell its text: a kept text must
        result = np.concatenate((ids[: cut_token + 1], np.asarray(rest, dtype=np.int64)))
        self._remember(data, result)
        return result.tolist()

    @staticmethod
    def _cut_holds(kept: np.ndarray, rest: list[int], check: list[int]) -> bool:
        """Whether the encoding from the earlier cut (`check`) is the kept ids between
        the two cuts followed by the encoding from the cut (`rest`)."""
        return len(check) == len(kept) + len(rest) and np.array_equal(check[: len(kept)], kept) and check[len(kept) :] == rest

    def _encode_bytes(self, data: bytes) -> list[int]:
        self.encoded_bytes += len(data)
        return list(self._encode(data.decode("utf-8")))

    def _whole(self, text: str, data: bytes | None) -> list[int]:
        ids = list(self._encode(text))
        if data is None:
            return ids
        self.encoded_bytes += len(data)
        array = np.asarray(ids, dtype=np.int64)
        spelled = int(self._byte_lengths[array].sum()) if len(array) else 0
        if spelled != len(data):
            return ids  # the tokenizer rewrote this text (a special token's name, a leading space): no cuts in it
        self._remember(data, array)
        return ids

    def _remember(self, data: bytes, ids: np.ndarray) -> None:
        ends = np.cumsum(self._byte_lengths[ids]) if len(ids) else np.zeros(0, dtype=np.int64)
        self._recent = [entry for entry in self._recent if entry[0] != data][-(KEPT_TEXTS - 1) :]
        self._recent.append((data, ids, ends))


def _starts_character(data: bytes, offset: int) -> bool:
    """Whether byte `offset` of UTF-8 `data` starts a character (or is the end)."""
    return offset >= len(data) or (data[offset] & 0xC0) != 0x80
