"""`CleanText`: generated text holds no control characters and only valid UTF-8.

Completions are inserted into the user's file by the editor, so a candidate must never
carry C0 control characters other than tab, line feed and carriage return, nor DEL, C1
controls (U+0080-U+009F) or U+FFFD.  Byte-level vocabularies have tokens for all of
them, and tokens that are pieces of one UTF-8 character: such pieces are only valid when
the following tokens complete the character (an incomplete or invalid sequence would
decode to U+FFFD).  Making these tokens invalid in the constraint, instead of editing
the text after decoding, keeps every decoder exact under the constraint.

Token texts reach constrainers with undecodable bytes as lone surrogates
(``surrogateescape``, see `vocab.py`).  The state is the UTF-8 decoder's:
``0`` between characters, else ``(bytes still owed, lowest, highest next byte)`` (plus
the lead ``EF``, which U+FFFD starts with); the
ranges also exclude overlong forms, surrogates, code points above U+10FFFF, C1 controls
(``C2 80``-``C2 9F``) and U+FFFD (``EF BF BD``).  The text may only end between
characters.  `token_mask` gives the mask of a state from a per-vocabulary cache (there
are eleven states), so adding this constraint to a request costs one AND per mask.
"""

from __future__ import annotations

import re
import weakref
from typing import Any

import numpy as np

from adaptrack_lsp.constrainers.base import Constrainer, State

#: characters never allowed in generated text (lone surrogates other than escaped bytes too)
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffd\ud800-\udc7f\udd00-\udfff]")
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_SUSPECT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffd\ud800-\udfff]")

_CONT = (1, 0x80, 0xBF)


def _lead(byte: int) -> State | None:
    """State after the first byte of a multi-byte character (None: not a valid lead)."""
    if byte == 0xC2:
        return (1, 0xA0, 0xBF)  # C2 80-9F would be C1 controls
    if 0xC3 <= byte <= 0xDF:
        return _CONT
    if byte == 0xE0:
        return (2, 0xA0, 0xBF)
    if byte == 0xED:
        return (2, 0x80, 0x9F)  # no UTF-16 surrogates
    if byte == 0xEF:
        return (2, 0x80, 0xBF, 0xEF)  # remembered: EF BF BD is U+FFFD
    if 0xE1 <= byte <= 0xEE:
        return (2, 0x80, 0xBF)
    if byte == 0xF0:
        return (3, 0x90, 0xBF)
    if 0xF1 <= byte <= 0xF3:
        return (3, 0x80, 0xBF)
    if byte == 0xF4:
        return (3, 0x80, 0x8F)
    return None  # continuation bytes, C0/C1 (overlong), F5-FF


def _escaped_byte(state: State, byte: int) -> State | None:
    if state == 0:
        return _lead(byte)
    owed, low, high = state[:3]
    if not low <= byte <= high:
        return None
    if owed == 1:
        return 0
    if len(state) == 4 and byte == 0xBF:
        return (1, 0x80, 0xBC)  # EF BF BD is U+FFFD
    return (owed - 1, 0x80, 0xBF)


class CleanText(Constrainer):
    """No control characters (except tab, LF, CR), no U+FFFD, only valid UTF-8."""

    source = ""

    _masks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def start(self, context: Any = None) -> State:
        return 0

    def check(self, state: State, text: str) -> State | None:
        if not text:
            return state
        if state == 0 and _SUSPECT.search(text) is None:
            return 0
        if _FORBIDDEN.search(text) is not None:
            return None
        for char in text:
            if _ESCAPED_BYTE.match(char):
                state = _escaped_byte(state, ord(char) - 0xDC00)
                if state is None:
                    return None
            elif state != 0:
                return None  # a character in the middle of an unfinished one
        return state

    def is_complete(self, state: State) -> bool:
        return state == 0

    def token_mask(self, state: State, index) -> np.ndarray:
        """Every token's verdict in `state`, cached per vocabulary (see module doc)."""
        vocab = index.vocab
        per_vocab = self._masks.get(vocab)
        if per_vocab is None:
            per_vocab = self._masks[vocab] = {}
        mask = per_vocab.get(state)
        if mask is None:
            mask = np.zeros(vocab.size, dtype=bool)
            texts, special = vocab.texts, vocab.special_ids
            for token_id in range(vocab.num_defined):
                if token_id not in special and texts[token_id]:
                    mask[token_id] = self.check(state, texts[token_id]) is not None
            mask.setflags(write=False)
            per_vocab[state] = mask
        return mask
