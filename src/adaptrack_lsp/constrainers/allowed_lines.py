"""Allowed texts: the generated text must be exactly one of a list (`sample --allowed FILE`).

While the text grows it must be a prefix of an allowed one; it may end (EOS) only where
it equals one.  With `TokenIndex` a sample is therefore one of the texts followed by the
model's end-of-sequence token, so its probability includes P(eos | text), and every
tokenization of a text is its own sequence (exactness is over token sequences).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from adaptrack_lsp.constrainers.base import Constrainer, State


class AllowedTexts(Constrainer):
    """The text is one of `texts` (a prefix of one while it is being written)."""

    def __init__(self, texts: Iterable[str], source: str = "allowed texts"):
        self.texts = frozenset(t for t in texts if t)
        if not self.texts:
            raise ValueError("no allowed text: give at least one non-empty line")
        self._sorted = sorted(self.texts)
        self.source = source

    def _prefixes_one(self, text: str) -> bool:
        index = bisect.bisect_left(self._sorted, text)
        return index < len(self._sorted) and self._sorted[index].startswith(text)

    def start(self, context=None) -> State:
        return ""

    def check(self, state: State, text: str) -> State | None:
        grown = state + text
        return grown if self._prefixes_one(grown) else None

    def is_complete(self, state: State) -> bool:
        return state in self.texts

    def rejection(self, state: State, text: str) -> str:
        return f"no allowed text starts with {(state + text)[-40:]!r}"


def read_allowed_lines(path) -> list[str]:
    """The allowed texts of a file: one per line, the line break removed (blank lines skipped)."""
    with open(path, encoding="utf-8") as handle:
        return [line.rstrip("\r\n") for line in handle if line.rstrip("\r\n")]


def allowed_lines_constraint(vocab, texts: Iterable[str], source: str = "allowed texts"):
    """The token-level constraint for `texts` over `vocab` (EOS allowed exactly at a complete text)."""
    from adaptrack_lsp.constrainers.token_index import TokenIndex

    return TokenIndex(AllowedTexts(texts, source), vocab)
