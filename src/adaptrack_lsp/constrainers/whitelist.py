"""Allowed-words constraint (difficulty-constrained-decoding §4.3, the word graph).

The text is a sequence of *words* (maximal runs of word characters: letters, digits,
``_`` and ``'``) separated by anything else (spaces, punctuation, newlines).  Every word
must be on the whitelist, in one of its case variants: as given, lower case, Title case
and UPPER case.  The paper also expands each word with a space-prefixed variant
(``" cat"``, tokenized ``" ca" + "t"``); here spaces are separators at the text level,
so tokens such as ``" cat"`` or ``" Ca"`` are accepted through the vocabulary trie walk
without listing them (`word_variants` gives the paper's six forms for reference).

State: the partial word being written (``""`` between words).  A partial word must be
a prefix of an allowed word; a separator may follow only a complete word.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from adaptrack_lsp.constrainers.base import Constrainer, State


def is_word_char(char: str) -> bool:
    return char.isalnum() or char in "_'"


def word_variants(word: str, space_prefix: str = " ") -> list[str]:
    """The paper's six variants: lower, Title, UPPER, each with and without a space prefix."""
    forms = []
    for form in (word.lower(), word[:1].upper() + word[1:].lower(), word.upper()):
        if form not in forms:
            forms.append(form)
    return forms + [space_prefix + form for form in forms]


class Whitelist(Constrainer):
    """Only whitelisted words (and their case variants) may be written."""

    def __init__(
        self,
        words: Iterable[str],
        case_variants: bool = True,
        source: str = "whitelist",
    ):
        allowed: set[str] = set()
        for word in words:
            word = word.strip()
            if not word:
                continue
            bad = [c for c in word if not is_word_char(c)]
            if bad:
                raise ValueError(
                    f"whitelist word {word!r} contains non-word characters {''.join(bad)!r}"
                )
            allowed.add(word)
            if case_variants:
                allowed.update(v for v in word_variants(word) if not v.startswith(" "))
        if not allowed:
            raise ValueError("a whitelist needs at least one word")
        self.words: frozenset[str] = frozenset(allowed)
        self.prefixes: frozenset[str] = frozenset(
            w[:k] for w in allowed for k in range(1, len(w) + 1)
        )
        self.source = source

    def start(self, context: Any = None) -> State:
        return ""

    def check(self, state: State, text: str) -> State | None:
        partial = state
        prefixes = self.prefixes
        for char in text:
            if char.isalnum() or char == "_" or char == "'":
                partial += char
                if partial not in prefixes:
                    return None
            elif partial:
                if partial not in self.words:
                    return None
                partial = ""
        return partial

    def is_complete(self, state: State) -> bool:
        return not state or state in self.words
