"""The API monitor: every attribute chain on an imported module names a real member.

`ApiMonitor` is a text-level `Constrainer`.  It takes root aliases from the document's
imports (`apis/imports.py`), lexes the generated Python character by character (strings, comments and f-strings never trigger
it) and constrains each attribute chain whose root resolves: every name after ``.`` must
be a member of the path so far (`APIIndex.members`), and a chain may end only on a
complete member name.  Unknown roots and paths (``members() is None``, or an index that
raises) are unconstrained.

States are small immutable tuples (see the ``_CODE``... mode constants).  `token_mask`
is the fast full-vocabulary mask used by `constrainers.token_index.TokenIndex`; its
tables live in `_ApiMasks`, which reads the lexer states of this module.  In-memory
indexes from dotted names are in `apis/static_index.py`.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from adaptrack_lsp.apis.imports import learn_roots
from adaptrack_lsp.apis.index import APIIndex, Member
from adaptrack_lsp.apis.static_index import StaticIndex
from adaptrack_lsp.constrainers.base import Constrainer

__all__ = ["ApiMonitor", "ConstraintContext", "FRESH_CODE", "StaticIndex", "learn_roots", "safe_lex_start"]

if TYPE_CHECKING:  # pragma: no cover
    from adaptrack_lsp.constrainers.token_index import TokenIndex

log = logging.getLogger(__name__)

# -- lexer modes (first element of every state tuple) -------------------------------------
_CODE = 0  # (_CODE, identifier_so_far, after_unknown_dot)
_NUMBER = 1  # (_NUMBER,)
_AFTER = (
    2  # (_AFTER, path): a complete name of a resolved chain (maybe trailing spaces)
)
_MEMBER = 3  # (_MEMBER, path, partial): reading a member name after "path."
_OPEN1 = 4  # (_OPEN1, quote): one quote seen at a string start
_OPEN2 = 5  # (_OPEN2, quote): two quotes seen (empty string or a triple-quote start)
_STRING = 6  # (_STRING, quote, triple, escape_pending, closing_quotes_seen)
_COMMENT = 7  # (_COMMENT,)

FRESH_CODE = (_CODE, "", False)
_WORD_RUN = re.compile(r"\w+").match
_NUMBER_RUN = re.compile(r"[\w.]+").match
_INLINE_SPACE = frozenset(" \t")
_NO_IDS = np.zeros(0, dtype=np.int64)
_ASCII_IDENT = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
)
_ASCII_IDENT_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")


def is_identifier_char(char: str) -> bool:
    """Identifier characters as the lexer sees them (the same set as regex ``\\w``)."""
    return char in _ASCII_IDENT or (char > "\x7f" and (char.isalnum() or char == "_"))


def _is_identifier_start(char: str) -> bool:
    return char in _ASCII_IDENT_START or (char > "\x7f" and char.isalpha())


@dataclass(frozen=True)
class ConstraintContext:
    """What a constrainer may know about the request: the whole document and the text
    before the cursor (the generated text continues `prefix`)."""

    document: str = ""
    prefix: str = ""


# -- prompt scanning -----------------------------------------------------------------------
_SCAN = re.compile(r"[#'\"\n]")


def _escaped(text: str, index: int) -> bool:
    """Whether the character at `index` is preceded by an odd run of backslashes."""
    count = 0
    index -= 1
    while index >= 0 and text[index] == "\\":
        count += 1
        index -= 1
    return count % 2 == 1


def safe_lex_start(prefix: str) -> int:
    """Start of the last line that begins in code (not inside a string or comment).

    Lexing `prefix` from there in fresh code mode gives the lexer state at its end.  Uses
    C-speed searches, so documents of any length cost little.
    """
    position, line_start, length = 0, 0, len(prefix)
    while position < length:
        match = _SCAN.search(prefix, position)
        if match is None:
            break
        char, index = match.group(), match.start()
        if char == "\n":
            line_start = position = index + 1
            continue
        if char == "#":
            end = prefix.find("\n", index)
            if end < 0:
                break
            line_start = position = end + 1
            continue
        if prefix.startswith(char * 3, index):
            closing, search = char * 3, index + 3
            while True:
                end = prefix.find(closing, search)
                if end < 0:
                    return line_start  # inside an open triple-quoted string
                if _escaped(prefix, end):
                    search = end + 1
                    continue
                position = end + 3
                break
            continue
        search = index + 1
        while True:
            quote = prefix.find(char, search)
            newline = prefix.find("\n", search)
            end = quote if newline < 0 or (0 <= quote < newline) else newline
            if end < 0:
                return line_start  # inside an open single-quoted string
            if _escaped(prefix, end):
                search = end + 1
                continue
            if end == newline:  # unterminated string: ends at the line break
                line_start = position = end + 1
            else:
                position = end + 1
            break
    return line_start


# -- per-path data ---------------------------------------------------------------------------
class _PathInfo:
    __slots__ = ("members", "prefixes", "sorted_names")

    def __init__(self, members: Mapping[str, Member] | None):
        self.members = None if members is None else frozenset(members)
        if self.members is None:
            self.prefixes = frozenset()
            self.sorted_names: list[str] = []
        else:
            self.prefixes = frozenset(
                name[:k] for name in self.members for k in range(1, len(name) + 1)
            )
            self.sorted_names = sorted(self.members)


def _near(info: _PathInfo, partial: str, limit: int = 6) -> str:
    """" (members starting with pr: prod, product, …)" for a message ("" when none)."""
    if not partial:
        return ""
    lo = bisect.bisect_left(info.sorted_names, partial)
    hi = bisect.bisect_left(info.sorted_names, partial + "\U0010ffff", lo)
    names = info.sorted_names[lo:hi]
    if not names:
        return ""
    shown = ", ".join(names[:limit]) + (", …" if len(names) > limit else "")
    return f" (members starting with {partial}: {shown})"


class ApiMonitor(Constrainer):
    """Attribute chains on resolvable roots must name real members of `index`.

    One instance serves one document: the first `start(context)` learns the roots from
    ``context.document`` unless `roots` were given.  A later `start` with a document that
    binds different roots raises ValueError (create a new monitor; they can share the
    index).  Lookups are cached per path; an index that raises counts as unknown.
    """

    def __init__(
        self, index: APIIndex, roots: Mapping[str, tuple[str, ...]] | None = None
    ):
        self.index = index
        self.source = getattr(index, "source", "") or type(index).__name__
        self._roots: dict[str, tuple[str, ...]] | None = (
            None if roots is None else {k: tuple(v) for k, v in roots.items()}
        )
        self._roots_from_document: str | None = None
        self._roots_version = 0
        self._paths: dict[tuple[str, ...], _PathInfo] = {}
        self.lookup_errors = 0

    # -- roots and lookups -------------------------------------------------------------
    @property
    def roots(self) -> dict[str, tuple[str, ...]]:
        return dict(self._roots or {})

    @property
    def roots_version(self) -> int:
        """Changes whenever the roots are (re)learned (mask caches key on it)."""
        return self._roots_version

    def _learn(self, document: str) -> None:
        if self._roots is not None and self._roots_from_document is None:
            return  # explicit roots
        if self._roots_from_document == document:
            return
        roots = learn_roots(document)
        if self._roots is not None and roots != self._roots:
            raise ValueError(
                "this ApiMonitor already serves a document with other imports; create a new one"
            )
        self._roots = roots
        self._roots_version += 1
        self._roots_from_document = document

    def path_info(self, path: tuple[str, ...]) -> _PathInfo:
        info = self._paths.get(path)
        if info is None:
            try:
                members = self.index.members(path)
            except Exception as error:  # noqa: BLE001 - an index failure means "unknown": unconstrained
                self.lookup_errors += 1
                log.warning("API index lookup of %s failed: %s", ".".join(path), error)
                members = None
            info = self._paths[path] = _PathInfo(members)
        return info

    def members(self, path: tuple[str, ...]) -> frozenset[str] | None:
        return self.path_info(path).members

    # -- Constrainer -----------------------------------------------------------------------
    def start(self, context=None):
        if context is None:
            return FRESH_CODE
        if isinstance(context, str):
            context = ConstraintContext(document=context, prefix=context)
        document = getattr(context, "document", "") or ""
        prefix = getattr(context, "prefix", "") or ""
        self._learn(document or prefix)
        start = safe_lex_start(prefix)
        state, _violation = self.lex(FRESH_CODE, prefix[start:], lenient=True)
        return state

    def check(self, state, text: str):
        return self.lex(state, text)[0]

    def is_complete(self, state) -> bool:
        if state[0] == _MEMBER:
            members = self.path_info(state[1]).members
            return members is not None and state[2] in members
        return True

    # -- explanations ------------------------------------------------------------------------
    def rejection(self, state, text: str) -> str:
        """Why `text` is rejected after `state`, naming the chain as the document writes
        it and the package version: "tf.placeholder does not exist in tensorflow 2.21.0"
        (when `text` holds the whole name), "no member of tf starts with pl in
        tensorflow 2.21.0 (…: pad, parallel_stack, …)" (when it stops at the first
        rejected character), "np.random.rand has no members"."""
        current = state
        for position, char in enumerate(text):
            following, _violation = self.lex(current, char)
            if following is None:
                if current[0] == _MEMBER:
                    rest = _WORD_RUN(text, position + 1)
                    return self._missing_member(current[1], current[2], char, rest.group() if rest else "")
                break
            current = following
        return super().rejection(state, text)

    def written(self, path: tuple[str, ...]) -> str:
        """`path` as the document writes it, through its longest import alias
        (``("tensorflow", "compat", "v1")`` -> ``tf.compat.v1``)."""
        best = None
        for alias, root in (self._roots or {}).items():
            if path[: len(root)] == root and (best is None or len(root) > len(best[1])):
                best = (alias, root)
        if best is None:
            return ".".join(path)
        return ".".join((best[0], *path[len(best[1]) :]))

    def _missing_member(self, path: tuple[str, ...], partial: str, char: str, rest: str) -> str:
        info = self.path_info(path)
        written = self.written(path)
        try:
            version = self.index.packages().get(path[0], "")
        except Exception:  # noqa: BLE001 - the version only decorates the message
            version = ""
        where = f" in {path[0]} {version}" if version and version != "unknown" else ""
        if not info.members:
            return f"{written} has no members{where}"
        if is_identifier_char(char):
            name = partial + char + rest
            absent = self._absence(path, name)
            if absent:  # version targets: missing from some versions only
                return f"{written}.{name}: {absent}"
            if rest:
                return f"{written}.{name} does not exist{where}"
            return f"no member of {written} starts with {name}{where}{_near(info, partial)}"
        absent = self._absence(path, partial)
        if absent:
            return f"{written}.{partial}: {absent}"
        return f"{written}.{partial} does not exist{where}{_near(info, partial)}"

    def _absence(self, path: tuple[str, ...], name: str) -> str:
        try:
            return self.index.absence(path, name) or ""
        except Exception:  # noqa: BLE001 - the note only decorates the message
            return ""

    # -- diagnostics -----------------------------------------------------------------------
    def resolved_chains(self, context, text: str) -> list[tuple[str, ...]]:
        """The resolved chains in `text` after `context`, each at its longest path
        (``np.linalg.norm(x)`` -> ``[("numpy", "linalg", "norm")]``)."""
        state = self.start(context)
        chains: list[tuple[str, ...]] = []
        current: tuple[str, ...] | None = None
        for char in text:
            state, _violation = self.lex(state, char, lenient=True)
            if state[0] == _AFTER:
                current = state[1]
            elif state[0] == _MEMBER:
                members = self.path_info(state[1]).members
                current = state[1] + (state[2],) if members is not None and state[2] in members else state[1]
            elif current is not None:
                chains.append(current)
                current = None
        if current is not None:
            chains.append(current)
        return list(dict.fromkeys(chains))

    @staticmethod
    def in_chain(state) -> bool:
        """Whether `state` is inside a constrained chain (after a resolved root/member)."""
        return state[0] in (_AFTER, _MEMBER)

    @staticmethod
    def chain_path(state) -> tuple[str, ...] | None:
        """The resolved path of a chain state (members are being chosen from it)."""
        return state[1] if state[0] in (_AFTER, _MEMBER) else None

    @staticmethod
    def describe(state) -> str:
        mode = state[0]
        if mode == _MEMBER:
            return f"member of {'.'.join(state[1])} starting {state[2]!r}"
        if mode == _AFTER:
            return f"after {'.'.join(state[1])}"
        if mode == _CODE:
            return f"code (identifier {state[1]!r})" if state[1] else "code"
        return {
            _NUMBER: "number",
            _OPEN1: "string",
            _OPEN2: "string",
            _STRING: "string",
            _COMMENT: "comment",
        }[mode]

    # -- the lexer ---------------------------------------------------------------------------
    def lex(self, state, text: str, lenient: bool = False):
        """(state after `text`, index of the first violating character or -1).

        Strict (default): a violation returns (None, index).  Lenient (prompt text, which
        the user wrote): the offending chain becomes unconstrained and lexing goes on.
        """
        roots = self._roots or {}
        violation = -1
        position = 0
        length = len(text)
        while position < length:
            char = text[position]
            mode = state[0]
            if mode == _CODE:
                identifier = state[1]
                if char in _ASCII_IDENT or (
                    char > "\x7f" and (char.isalnum() or char == "_")
                ):
                    end = _WORD_RUN(text, position).end()
                    if identifier:
                        state = (_CODE, identifier + text[position:end], state[2])
                    elif _is_identifier_start(char):
                        state = (_CODE, text[position:end], state[2])
                    else:
                        state = (_NUMBER,)
                    position = end
                    continue
                if identifier:
                    path = None if state[2] else roots.get(identifier)
                    state = (_AFTER, path) if path is not None else FRESH_CODE
                    continue  # re-process `char` in the new state
                if char == ".":
                    state = (_CODE, "", True)
                elif char in _INLINE_SPACE:
                    pass
                elif char == "#":
                    state = (_COMMENT,)
                elif char == "'" or char == '"':
                    state = (_OPEN1, char)
                elif state[2]:
                    state = FRESH_CODE
                position += 1
                continue
            if mode == _MEMBER:
                path, partial = state[1], state[2]
                info = self.path_info(path)
                if char in _ASCII_IDENT or (
                    char > "\x7f" and (char.isalnum() or char == "_")
                ):
                    end = _WORD_RUN(text, position).end()
                    extended = partial + text[position:end]
                    if (
                        extended in info.prefixes
                    ):  # prefix-closed: every shorter run is too
                        state = (_MEMBER, path, extended)
                        position = end
                        continue
                    if end > position + 1:  # find the first character that fails
                        extended = partial + char
                        if extended in info.prefixes:
                            state = (_MEMBER, path, extended)
                            position += 1
                            continue
                elif partial in info.members:
                    state = (_AFTER, path + (partial,))
                    continue
                # violation
                if not lenient:
                    return None, position
                if violation < 0:
                    violation = position
                state = (_CODE, partial, True)
                continue
            if mode == _AFTER:
                if char == ".":
                    info = self.path_info(state[1])
                    state = (
                        (_CODE, "", True)
                        if info.members is None
                        else (_MEMBER, state[1], "")
                    )
                    position += 1
                    continue
                if char in _INLINE_SPACE:
                    position += 1
                    continue
                state = FRESH_CODE
                continue
            if mode == _STRING:
                quote, triple, escape, closing = state[1], state[2], state[3], state[4]
                if escape:
                    state = (_STRING, quote, triple, False, 0)
                elif char == "\\":
                    state = (_STRING, quote, triple, True, 0)
                elif char == quote:
                    if not triple or closing == 2:
                        state = FRESH_CODE
                    else:
                        state = (_STRING, quote, True, False, closing + 1)
                elif char == "\n" and not triple:
                    state = FRESH_CODE  # unterminated single-quoted string
                elif closing:
                    state = (_STRING, quote, triple, False, 0)
                else:
                    # fast path: skip to the next character that matters
                    stop = position + 1
                    while stop < length:
                        following = text[stop]
                        if (
                            following == quote
                            or following == "\\"
                            or (following == "\n" and not triple)
                        ):
                            break
                        stop += 1
                    position = stop
                    continue
                position += 1
                continue
            if mode == _NUMBER:
                if (
                    char == "."
                    or char in _ASCII_IDENT
                    or (char > "\x7f" and (char.isalnum() or char == "_"))
                ):
                    position = _NUMBER_RUN(text, position).end()
                    continue
                state = FRESH_CODE
                continue
            if mode == _COMMENT:
                newline = text.find("\n", position)
                if newline < 0:
                    return state, violation
                state = FRESH_CODE
                position = newline + 1
                continue
            if mode == _OPEN1:
                quote = state[1]
                if char == quote:
                    state = (_OPEN2, quote)
                elif char == "\\":
                    state = (_STRING, quote, False, True, 0)
                elif char == "\n":
                    state = FRESH_CODE
                else:
                    state = (_STRING, quote, False, False, 0)
                position += 1
                continue
            if mode == _OPEN2:
                if char == state[1]:
                    state = (_STRING, state[1], True, False, 0)
                    position += 1
                    continue
                state = FRESH_CODE  # an empty string ended; re-process `char` in code
                continue
            raise ValueError(f"not an ApiMonitor state: {state!r}")
        return state, violation

    # -- fast full-vocabulary masks ------------------------------------------------------------
    def token_mask(self, state, index: TokenIndex) -> np.ndarray:
        """bool[vocab.size] for `state`, exact (equal to checking every token).

        Built from the vocabulary's identifier tables (`TokenTables`): in a chain only the
        tokens spelling prefixes of matching member names are looked at; elsewhere every
        token is valid except the few that contain an alias followed by ``.`` (checked
        one by one), so the cost does not grow with the vocabulary.
        """
        return _ApiMasks.of(self, index).mask(state)


class _ApiMasks:
    """Per (monitor, token index) mask machinery; see `ApiMonitor.token_mask`."""

    def __init__(self, monitor: ApiMonitor, index: TokenIndex):
        self.monitor = monitor
        self.index = index
        self.tables = index.tables
        tables = self.tables
        self.roots_seen = monitor.roots_version
        roots = monitor.roots
        self.roots = roots
        # tokens that may contain an alias root followed by "." (exact checks needed)
        alias_word_ids = [tables.dot_word_ids.get(alias) for alias in roots]
        alias_word_ids = [ids for ids in alias_word_ids if ids is not None]
        self.alias_word_ids = (
            np.unique(np.concatenate(alias_word_ids))
            if alias_word_ids
            else np.zeros(0, np.int64)
        )
        # tokens whose leading identifier run is an alias and whose rest begins with "."
        lead_ids = [tables.mixed_dot_ids_by_lead.get(alias) for alias in roots]
        lead_ids = [ids for ids in lead_ids if ids is not None]
        self.lead_alias_dot_ids = (
            np.unique(np.concatenate(lead_ids)) if lead_ids else np.zeros(0, np.int64)
        )
        self._base_fresh: np.ndarray | None = None
        self._base_after_dot: np.ndarray | None = None
        self._lead_after_dot_verdicts: np.ndarray | None = None
        self._unknown_dot_verdicts: np.ndarray | None = None
        #: (table, path) -> token groups of every member of the path (state right after ".")
        self._full_groups: dict = {}

    @classmethod
    def of(cls, monitor: ApiMonitor, index: TokenIndex) -> _ApiMasks:
        masks = index.plan_cache.get(id(monitor))
        if (
            masks is None
            or masks.monitor is not monitor
            or masks.roots_seen != monitor.roots_version
        ):
            masks = index.plan_cache[id(monitor)] = cls(monitor, index)
        return masks

    # -- helpers ------------------------------------------------------------------------
    def _exact(self, state, ids: np.ndarray) -> np.ndarray:
        advance = self.index.advance
        return np.fromiter(
            (advance(state, int(t)) is not None for t in ids),
            dtype=bool,
            count=len(ids),
        )

    def _set_exact(self, mask: np.ndarray, state, ids: np.ndarray) -> None:
        if len(ids):
            mask[ids] = self._exact(state, ids)

    def _with_eos(self, mask: np.ndarray, state) -> np.ndarray:
        mask[self.tables.eos_ids] = self.monitor.is_complete(state)
        return mask

    def generic(self, state) -> np.ndarray:
        """States without a pending identifier or chain: only alias words can fail."""
        mask = self.tables.ordinary.copy()
        self._set_exact(mask, state, self.alias_word_ids)
        return self._with_eos(mask, state)

    def base_fresh(self) -> np.ndarray:
        if self._base_fresh is None:
            self._base_fresh = self.generic(FRESH_CODE)
        return self._base_fresh

    def base_after_dot(self) -> np.ndarray:
        if self._base_after_dot is None:
            self._base_after_dot = self.generic((_CODE, "", True))
        return self._base_after_dot

    def lead_after_dot_verdicts(self) -> np.ndarray:
        if self._lead_after_dot_verdicts is None:
            self._lead_after_dot_verdicts = self.base_after_dot()[
                self.lead_alias_dot_ids
            ]
        return self._lead_after_dot_verdicts

    # -- the masks ------------------------------------------------------------------------
    def mask(self, state) -> np.ndarray:
        mode = state[0]
        if mode == _MEMBER:
            return self.member_mask(state)
        if mode == _AFTER:
            mask = self.base_fresh().copy()
            self.dot_overrides(mask, state[1])
            return self._with_eos(mask, state)
        if mode == _CODE:
            identifier, after_dot = state[1], state[2]
            if not identifier:
                return (
                    self.base_after_dot() if after_dot else self.base_fresh()
                ).copy()
            mask = self.base_fresh().copy()
            if len(self.lead_alias_dot_ids):
                mask[self.lead_alias_dot_ids] = self.lead_after_dot_verdicts()
            if not after_dot:
                tables = self.tables
                for alias in self.roots:
                    if len(alias) > len(identifier) and alias.startswith(identifier):
                        ids = tables.mixed_dot_ids_by_lead.get(alias[len(identifier) :])
                        if ids is not None:
                            self._set_exact(mask, state, ids)
                path = self.roots.get(identifier)
                if path is not None:
                    self.dot_overrides(mask, path)
            return self._with_eos(mask, state)
        return self.generic(state)

    def dot_overrides(self, mask: np.ndarray, path: tuple[str, ...]) -> None:
        """Set the verdicts of tokens starting with (spaces and) "." after a complete
        name whose path is `path`."""
        tables = self.tables
        dot = tables.dot
        ids = dot.ids
        if not len(ids):
            return
        info = self.monitor.path_info(path)
        if info.members is None:
            if self._unknown_dot_verdicts is None:
                self._unknown_dot_verdicts = self._unknown_dot()
            mask[ids] = self._unknown_dot_verdicts
            return
        mask[ids] = False
        mask[dot.empty_rest_ids] = True
        self._member_table(mask, dot, info, "", (_MEMBER, path, ""))

    def _unknown_dot(self) -> np.ndarray:
        """Verdicts of the dot tokens when the path before the dot is unknown: the dot
        starts an unconstrained attribute, so only alias words inside can fail."""
        dot = self.tables.dot
        verdicts = np.ones(len(dot.ids), dtype=bool)
        if len(self.alias_word_ids):
            position = {int(t): i for i, t in enumerate(dot.ids)}
            state = (_CODE, "", True)
            for token_id in self.alias_word_ids.tolist():
                i = position.get(token_id)
                if i is not None:
                    verdicts[i] = (
                        self.monitor.check(state, dot.rest_of[token_id]) is not None
                    )
        return verdicts

    def member_mask(self, state) -> np.ndarray:
        path, partial = state[1], state[2]
        info = self.monitor.path_info(path)
        mask = np.zeros(self.tables.size, dtype=bool)
        self._member_table(mask, self.tables.main, info, partial, state)
        if partial in info.members:
            # tokens starting with a non-identifier character end the name here
            tables = self.tables
            base = self.base_fresh()
            nonident = tables.nonident_nondot_ids
            mask[nonident] = base[nonident]
            self.dot_overrides(mask, path + (partial,))
        return self._with_eos(mask, state)

    def _member_table(self, mask, table, info: _PathInfo, partial: str, state) -> None:
        """Tokens of `table` (identifier run + rest) valid in (_MEMBER, path, partial)."""
        if partial:
            pure_ids, free_ids, check_ids = self._groups(table, info, partial)
        else:  # right after a dot: every member matches; the groups are kept per path
            key = (id(table), state[1])
            groups = self._full_groups.get(key)
            if groups is None:
                groups = self._full_groups[key] = self._groups(table, info, "")
            pure_ids, free_ids, check_ids = groups
        mask[pure_ids] = True
        if len(free_ids):
            # the rest after a complete name does not start with "."; it is lexed as code
            if table is self.tables.main:
                mask[free_ids] = self.base_fresh()[free_ids]
            else:
                mask[free_ids] = True
                self._fix_alias_words(mask, state, free_ids)
        if len(check_ids):
            self._set_exact_table(mask, table, state, check_ids)

    @staticmethod
    def _groups(table, info: _PathInfo, partial: str):
        """(pure ids, free ids, check ids): tokens whose identifier run continues a member
        name starting with `partial` (pure), or completes it exactly and then goes on with
        a rest not starting with "." (free) or starting with "." (check)."""
        names = info.sorted_names
        if partial:
            lo = bisect.bisect_left(names, partial)
            hi = bisect.bisect_left(names, partial + "\U0010ffff", lo)
            cut = len(partial)
            suffixes = [name[cut:] for name in names[lo:hi]]
        else:
            suffixes = names
        limit = table.max_lead
        pure = table.pure_ids_by_lead
        leads = {
            suffix[:k]
            for suffix in suffixes
            for k in range(1, min(len(suffix), limit) + 1)
        }
        found = [pure[lead] for lead in leads if lead in pure]
        free_table, check_table = (
            table.mixed_free_ids_by_lead,
            table.mixed_check_ids_by_lead,
        )
        free = [free_table[suffix] for suffix in suffixes if suffix in free_table]
        check = [check_table[suffix] for suffix in suffixes if suffix in check_table]
        join = lambda parts: np.concatenate(parts) if parts else _NO_IDS
        return join(found), join(free), join(check)

    def _fix_alias_words(self, mask, state, ids) -> None:
        if len(self.alias_word_ids):
            suspicious = np.intersect1d(ids, self.alias_word_ids, assume_unique=False)
            if len(suspicious):
                self._set_exact_table(mask, self.tables.dot, state, suspicious)

    def _set_exact_table(self, mask, table, state, ids) -> None:
        if table is self.tables.main:
            self._set_exact(mask, state, ids)
            return
        # dot-table tokens are checked from the state after the dot, on their rest
        check = self.monitor.check
        rests = table.rest_of
        for token_id in ids:
            mask[token_id] = check(state, rests[int(token_id)]) is not None
