"""Full-vocabulary masks for the Python syntax constraint (`PythonSyntax.token_mask`).

Walking the vocabulary's character trie with the lexer costs one check per trie node
(hundreds of thousands for a 150k vocabulary).  Instead, every token is lexed once per
vocabulary on its own (`SyntaxVocab`, the same lexer with a `_Recorder` in place of the
parser): what a token does from "between lexemes" is a sequence of terminals, the
brackets it closes that it did not open, and the lexeme it leaves pending.  Tokens with
the same sequence share a node of a trie over terminal sequences; a mask walks that
trie with the parser (feeding each terminal once per node, memoised on the stacks) and
sets whole groups of tokens at once.

States with a pending lexeme reduce to that: tokens that do not continue it end it
(feed its terminal, then the trie), tokens that continue it are lexed once more behind
a representative of the pending text (``=`` for a pending ``=``, ``"a`` for a string
body, ...) in a small trie of their own, cached per vocabulary.  A pending name is
continued by identifier tokens: their second trie reads the identifier as the rest of a
name.  At a line start, tokens are grouped by their leading whitespace: each width gives
the INDENT / DEDENT terminals once.  Tokens containing a newline are checked one by one.
Every answer equals `PythonSyntax.check` token by token (tests compare masks with the
brute-force mask).  The constraint hands itself in (`syntax`: its parser, terminals,
`check` and pending-lexeme paths); this module imports only the lexical vocabulary
(`python_lexemes`), so the constraint can import it.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import defaultdict

import numpy as np

from adaptrack_lsp.constrainers import python_lexemes as lx


class _Recorder:
    """Stands in for the parser while tokens are lexed on their own: every lexeme is
    accepted and recorded (the "stacks" are the terminal choices so far)."""

    def feed(self, stacks, terms):
        return (*stacks, terms)


_RECORDER = _Recorder()
#: unknown open brackets below the token (its closers may close them)
_UNKNOWN_BRACKETS = "?" * 64
#: a pending name no identifier can turn into a keyword or a string prefix
_PLAIN_NAME = "Q_"
#: texts that leave the lexer in each number automaton state
_NUMBER_TEXT = {
    "D": "1", "Z": "0", "U": "1_", "F": "1.", "FD": "1.5", "FU": "1.5_", "e": "1e", "E": "1E", "ES": "1e+",
    "ED": "1e5", "EU": "1e5_", "J": "1j", "X": "0x", "XD": "0x1", "XU": "0x1_", "O": "0o", "OD": "0o1",
    "OU": "0o1_", "B": "0b", "BD": "0b1", "BU": "0b1_",
}  # fmt: skip


class _Trie:
    """Tokens grouped by the terminal choices their text feeds, in a trie."""

    __slots__ = ("children", "groups")

    def __init__(self):
        self.children: dict[tuple[int, ...], _Trie] = {}
        #: (bracket suffix needed, pending paths) -> token ids
        self.groups: dict = defaultdict(list)

    def add(self, choices, key, token_id: int) -> None:
        node = self
        for choice in choices:
            child = node.children.get(choice)
            if child is None:
                child = node.children[choice] = _Trie()
            node = child
        node.groups[key].append(token_id)

    def freeze(self) -> None:
        stack = [self]
        while stack:
            node = stack.pop()
            node.groups = {key: np.asarray(ids, dtype=np.int64) for key, ids in node.groups.items()}
            stack.extend(node.children.values())


class SyntaxVocab:
    """What each token of one vocabulary does to the lexer, built once per vocabulary."""

    _cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    _lock = threading.Lock()

    @classmethod
    def of(cls, syntax, vocab) -> SyntaxVocab:
        with cls._lock:
            tables = cls._cache.get(vocab)
            if tables is None or tables.table is not syntax.table:
                tables = cls._cache[vocab] = cls(syntax, vocab)
            return tables

    def __init__(self, syntax, vocab):
        from adaptrack_lsp.constrainers.token_index import TokenTables

        self.table = syntax.table
        self.size = vocab.size
        self.texts = texts = vocab.texts
        ordinary = TokenTables.of(vocab).ordinary
        self.ordinary = ordinary
        terms = syntax.terms
        self._openers = {terms.operator[o]: o for o in lx.BRACKETS}
        self._closers = {terms.operator[c]: lx.CLOSERS[c] for c in lx.CLOSERS}
        #: pending text -> trie of the tokens that continue it (the token set follows from the text)
        self._representatives: dict[str, _Trie] = {}
        self._lock = threading.Lock()
        newline, ident_start, by_first, by_indent = [], np.zeros(vocab.size, dtype=bool), defaultdict(list), defaultdict(list)
        contains = {q: np.zeros(vocab.size, dtype=bool) for q in ("'", '"', "\\")}
        contains_after_first = {q: np.zeros(vocab.size, dtype=bool) for q in ("'", '"', "\\")}
        non_ascii = np.zeros(vocab.size, dtype=bool)
        line_free = np.zeros(vocab.size, dtype=bool)  # whitespace only, or a comment after it
        self.code = _Trie()
        self.name_continue = _Trie()
        for token_id in np.flatnonzero(ordinary).tolist():
            text = texts[token_id]
            if "\n" in text:
                newline.append(token_id)
                continue
            first = text[0]
            by_first[first].append(token_id)
            for quote in contains:
                if quote in text:
                    contains[quote][token_id] = True
                    contains_after_first[quote][token_id] = quote in text[1:]
            if not text.isascii():
                non_ascii[token_id] = True
            stripped = text.lstrip(" \t\f\r")
            if not stripped or stripped[0] == "#":
                line_free[token_id] = True
            else:
                by_indent[text[: len(text) - len(stripped)]].append(token_id)
            self._add(syntax, self.code, (), lx._CODE, None, text, token_id)
            if lx._IDENT_RUN.match(first) or (first > "\x7f" and ("a" + first).isidentifier()):  # as the lexer continues a name
                ident_start[token_id] = True
                self._add(syntax, self.name_continue, (), lx._NAME, _PLAIN_NAME, text, token_id)
        self.code.freeze()
        self.name_continue.freeze()
        self.newline_ids = np.asarray(newline, dtype=np.int64)
        self.ident_start = ident_start
        self.by_first = {char: np.asarray(ids, dtype=np.int64) for char, ids in by_first.items()}
        self.by_indent = {indent: np.asarray(ids, dtype=np.int64) for indent, ids in by_indent.items()}
        self.contains = contains
        self.contains_after_first = contains_after_first
        self.non_ascii = non_ascii
        self.line_free = line_free
        self.without_newline = ordinary.copy()
        self.without_newline[self.newline_ids] = False

    def _add(self, syntax, trie: _Trie, stacks, mode, data, text: str, token_id: int) -> None:
        """Lex `text` from a pending state (no parser) and file the token in `trie`."""
        start = (stacks, mode, data, _UNKNOWN_BRACKETS, ((0, 0),), True)
        state = syntax._run(start, text, None, None, _RECORDER)
        if state is None:
            return  # the lexer rejects it whatever the parser's state
        choices = state[0]
        needed: list[str] = []
        open_brackets: list[str] = []
        for choice in choices:
            term = choice[0]
            if term in self._openers:
                open_brackets.append(self._openers[term])
            elif term in self._closers:
                if open_brackets:
                    open_brackets.pop()
                else:
                    needed.append(self._closers[term])
        suffix = "".join(reversed(needed))
        trie.add(choices, (suffix, syntax.pending_paths(state[1], state[2])), token_id)

    def representative(self, syntax, text: str, ids: np.ndarray) -> _Trie:
        """The trie of tokens `ids` lexed after `text` (a pending lexeme), cached."""
        with self._lock:
            cached = self._representatives.get(text)
        if cached is not None:
            return cached
        trie = _Trie()
        for token_id in ids.tolist():
            self._add(syntax, trie, (), lx._CODE, None, text + self.texts[token_id], token_id)
        trie.freeze()
        with self._lock:
            self._representatives[text] = trie
        return trie


def token_mask(syntax, state, index) -> np.ndarray | None:
    """bool[vocab.size] for `state` (ordinary tokens only; the index sets EOS), or None
    to let the index walk the vocabulary trie (states where almost nothing is valid)."""
    stacks, mode, data, brackets, indents, content = state
    if mode == lx._FREE:
        return None
    if mode == lx._BACKSLASH:
        return None  # only a newline may follow: the trie walk stops at once
    tables = SyntaxVocab.of(syntax, index.vocab)
    walker = _Walker(syntax, tables)
    mask = np.zeros(tables.size, dtype=bool)
    parser = syntax.parser
    if mode == lx._CODE:
        walker.walk(tables.code, stacks, brackets, mask)
    elif mode == lx._COMMENT:
        mask |= tables.without_newline
    elif mode == lx._LINE:
        mask |= tables.line_free
        outcomes: dict[tuple, list[np.ndarray]] = {}
        for indent, ids in tables.by_indent.items():
            following, new_indents, problem = syntax._indent(stacks, indents, data + indent, parser)
            if not problem:
                outcomes.setdefault((following, new_indents), []).append(ids)
        for (following, _), groups in outcomes.items():
            part = np.zeros(tables.size, dtype=bool)
            walker.walk(tables.code, following, brackets, part)
            keep = np.zeros(tables.size, dtype=bool)
            keep[np.concatenate(groups)] = True
            mask |= part & keep
    elif mode == lx._NAME:
        _name_mask(syntax, tables, walker, state, mask, index)
    elif mode == lx._OP:
        continuing = [char for char in tables.by_first if (data + char) in lx._OPERATOR_PREFIXES or (data == "." and char in lx._DIGITS)]
        _pending_mask(syntax, tables, walker, state, mask, data, _first_char_ids(tables, continuing), _finish_operator(syntax, stacks, data))
    elif mode == lx._NUMBER:
        continuing = [char for char in tables.by_first if lx._number_step(data, char) is not None]
        continues = _first_char_ids(tables, continuing)
        if data in ("e", "E"):  # "1e" + "lse": the name "else" continues after the number
            continues = np.union1d(continues, np.flatnonzero(tables.ident_start))
        finished = None
        if data in ("e", "E"):
            finished = parser.feed(parser.feed(stacks, (syntax.terms.number,)), (syntax.terms.name,))
        elif data in lx._NUMBER_COMPLETE:
            finished = parser.feed(stacks, (syntax.terms.number,))
        _pending_mask(syntax, tables, walker, state, mask, _NUMBER_TEXT[data], continues, finished)
    elif mode == lx._STRING:
        _string_mask(syntax, tables, walker, state, mask)
    else:
        return None
    if tables.newline_ids.size:
        check = syntax.check
        texts = tables.texts
        for token_id in tables.newline_ids.tolist():
            mask[token_id] = check(state, texts[token_id]) is not None
    return mask


#: most walks kept by a shared parser per vocabulary (packed: a bit per token); full: cleared
MAX_KEPT_WALKS = 256
#: most (stacks, paths) verdicts kept the same way
MAX_KEPT_VERDICTS = 25_000


def pack_mask(mask: np.ndarray) -> np.ndarray:
    """A bool mask as bits (a shared parser keeps masks and walks packed: 19 KB for a
    152k vocabulary, not 152 KB); `unpack_mask` gives it back."""
    return np.packbits(mask)


def unpack_mask(packed: np.ndarray, size: int) -> np.ndarray:
    return np.unpackbits(packed, count=size).view(bool)


class _Walker:
    """Walks a token trie with the parser.  The answers are kept with the shared parser
    (`python_syntax.shared_parser`): a walk depends only on the trie, the stacks and the open brackets,
    which many states share (the siblings ``np.mod``, ``np.i``, ``np.ex`` all continue
    or end a name on the same stacks)."""

    def __init__(self, syntax, tables: SyntaxVocab):
        self.syntax = syntax
        self.feed = syntax.parser.feed
        self._walks, self._possible = syntax.mask_walks

    def possible(self, stacks, paths) -> bool:
        key = (stacks, paths)
        known = self._possible.get(key)
        if known is None:
            if len(self._possible) >= MAX_KEPT_VERDICTS:
                self._possible.clear()
            path_possible = self.syntax.path_possible
            known = self._possible[key] = not paths or any(path_possible(stacks, path) for path in paths)
        return known

    def walk(self, trie: _Trie, stacks, brackets: str, mask: np.ndarray) -> None:
        if not stacks:
            return
        key = (id(trie), stacks, brackets)
        packed = self._walks.get(key)
        if packed is None:
            found = np.zeros(mask.size, dtype=bool)
            self._walk(trie, stacks, brackets, found)
            if len(self._walks) >= MAX_KEPT_WALKS:
                self._walks.clear()
            self._walks[key] = pack_mask(found)
        else:
            found = unpack_mask(packed, mask.size)
        mask |= found

    def _walk(self, trie: _Trie, stacks, brackets: str, mask: np.ndarray) -> None:
        feed = self.feed
        pending = [(trie, stacks)]
        while pending:
            node, here = pending.pop()
            for (suffix, paths), ids in node.groups.items():
                if suffix and not brackets.endswith(suffix):
                    continue
                if self.possible(here, paths):
                    mask[ids] = True
            for choice, child in node.children.items():
                following = feed(here, choice)
                if following:
                    pending.append((child, following))


def _first_char_ids(tables: SyntaxVocab, chars) -> np.ndarray:
    found = [tables.by_first[char] for char in chars if char in tables.by_first]
    return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)


def _finish_operator(syntax, stacks, data: str):
    """The stacks once a pending operator ends as it is (None when it cannot)."""
    feed = syntax.parser.feed
    operator = syntax.terms.operator
    if data == "..":
        return feed(feed(stacks, (operator["."],)), (operator["."],))
    if data in operator:
        return feed(stacks, (operator[data],))
    return None


def _pending_mask(syntax, tables: SyntaxVocab, walker: _Walker, state, mask, representative: str, continues: np.ndarray, finished) -> None:
    """Tokens that continue the pending lexeme (lexed after `representative`), and the
    others once it ends (`finished`: the stacks after it, None when it cannot end)."""
    stacks, brackets = state[0], state[3]
    if continues.size:
        walker.walk(tables.representative(syntax, representative, continues), stacks, brackets, mask)
    if finished:
        part = np.zeros(tables.size, dtype=bool)
        walker.walk(tables.code, finished, brackets, part)
        part[continues] = False
        mask |= part


def _name_mask(syntax, tables: SyntaxVocab, walker: _Walker, state, mask, index) -> None:
    """A pending name: identifier tokens continue it, quotes may make it a string prefix,
    every other token ends it."""
    stacks, data, brackets = state[0], state[2], state[3]
    terms = syntax.terms
    feed = syntax.parser.feed
    special: list[np.ndarray] = []
    # identifier tokens: the name goes on; where name + lead may become a keyword or a
    # string prefix, each is checked on its own
    walker.walk(tables.name_continue, stacks, brackets, mask)
    leads = set()
    for word in lx.KEYWORDS | lx.SOFT_KEYWORDS:
        if word.startswith(data) and len(word) > len(data):
            rest = word[len(data) :]
            leads.update(rest[:k] for k in range(1, len(rest) + 1))
    for prefix in lx.STRING_PREFIXES:
        if prefix.startswith(data.lower()) and len(prefix) > len(data):
            rest = prefix[len(data) :]
            for k in range(1, len(rest) + 1):
                leads.update("".join(case) for case in itertools.product(*({c, c.upper()} for c in rest[:k])))
    if leads:
        main = index.tables.main
        for lead in leads:
            for group in (main.pure_ids_by_lead, main.mixed_free_ids_by_lead, main.mixed_check_ids_by_lead):
                ids = group.get(lead)
                if ids is not None and ids.size:
                    special.append(ids)
    quote_start = data.lower() in lx.STRING_PREFIXES
    if quote_start:
        special.extend(tables.by_first[q] for q in ("'", '"') if q in tables.by_first)
    # other tokens end the name
    finished = feed(stacks, terms.keyword.get(data) or (terms.name,))
    if finished:
        part = np.zeros(tables.size, dtype=bool)
        walker.walk(tables.code, finished, brackets, part)
        part &= ~tables.ident_start
        if quote_start:
            for q in ("'", '"'):
                if q in tables.by_first:
                    part[tables.by_first[q]] = False
        mask |= part
    if special:
        check = syntax.check
        texts = tables.texts
        for token_id in np.unique(np.concatenate(special)).tolist():
            if texts[token_id] and "\n" not in texts[token_id]:
                mask[token_id] = check(state, texts[token_id]) is not None


def _string_mask(syntax, tables: SyntaxVocab, walker: _Walker, state, mask) -> None:
    """Inside a string: tokens without the quote, a backslash or (in bytes) non-ASCII
    stay inside it; the others are lexed after a representative of the string so far."""
    stacks, data, brackets = state[0], state[2], state[3]
    phase, quote, is_bytes, escape, closing = data
    prefix = "b" if is_bytes else ""
    if phase == lx._OPEN2:  # "" or '': a third quote opens a triple-quoted string
        continues = tables.by_first.get(quote, np.zeros(0, dtype=np.int64))
        finished = syntax.parser.feed(stacks, (syntax.terms.string,))
        _pending_mask(syntax, tables, walker, state, mask, prefix + quote * 2, continues, finished)
        return
    if phase == lx._OPEN1:
        representative = prefix + quote
    elif phase == lx._BODY:
        representative = prefix + quote + "a" + ("\\" if escape else "")
    else:
        representative = prefix + quote * 3 + "a" + ("\\" if escape else "") + quote * closing
    contains = tables.contains_after_first if escape else tables.contains
    interacting = contains[quote] | contains["\\"]
    if is_bytes:
        interacting = interacting | tables.non_ascii
    if phase == lx._OPEN1 or closing:
        interacting = interacting.copy()
        if quote in tables.by_first:
            interacting[tables.by_first[quote]] = True
    mask |= tables.without_newline & ~interacting
    ids = np.flatnonzero(interacting & tables.without_newline)
    if ids.size:
        walker.walk(tables.representative(syntax, representative, ids), stacks, brackets, mask)
