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
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from adaptrack_lsp.apis.imports import imported_modules, learn_roots
from adaptrack_lsp.apis.index import CALL, APIIndex, Member, dotted, members_key
from adaptrack_lsp.apis.introspect_worker import ANY_ATTRIBUTE
from adaptrack_lsp.apis.static_index import StaticIndex
from adaptrack_lsp.constrainers.base import Constrainer
from adaptrack_lsp.constrainers.call_arguments import statement_start
from adaptrack_lsp.constrainers.python_lexemes import code_starts

__all__ = ["ApiMonitor", "ConstraintContext", "FRESH_CODE", "LINE_START", "StaticIndex", "learn_roots", "safe_lex_start"]

if TYPE_CHECKING:  # pragma: no cover
    from adaptrack_lsp.constrainers.token_index import TokenIndex

log = logging.getLogger(__name__)

# -- lexer modes (first element of every state tuple) -------------------------------------
_CODE = 0  # (_CODE, identifier_so_far, after_unknown_dot)
_NUMBER = 1  # (_NUMBER,)
#: _AFTER and _MEMBER states of a chain that began its statement end in True (``(_AFTER,
#: path, True)``): the chain may be an assignment's target (see _TARGET)
_AFTER = 2  # (_AFTER, path[, True]): a complete name of a resolved chain (maybe trailing spaces)
_MEMBER = 3  # (_MEMBER, path, partial[, True]): reading a member name after "path."
_OPEN1 = 4  # (_OPEN1, quote): one quote seen at a string start
_OPEN2 = 5  # (_OPEN2, quote): two quotes seen (empty string or a triple-quote start)
_STRING = 6  # (_STRING, quote, triple, escape_pending, closing_quotes_seen)
_COMMENT = 7  # (_COMMENT,)
_VALUE = 8  # (_VALUE, name, spaced, path): an attribute the data proxy `path` serves: no call
_LINE = 9  # (_LINE,): code at the start of a statement (only indentation so far)
_STMT = 10  # (_STMT, word): the first word of a statement (``import``/``from`` start imports)
_IMPORT = 11  # (_IMPORT, kind, module, partial, stage, paren, checked, pending): an import statement
_SCOPED = 12  # (_SCOPED, learned, frames, state): `state` with names bound by imports written
#: so far (`learned`) and the calls open on chains whose result type is known (`frames`:
#: (result path, bracket depth) pairs, innermost last)
_TARGET = 13  # (_TARGET, name, stage, path): a name `path` lacks, at the start of a statement,
#: on an instance that keeps a ``__dict__``: only an assignment may follow (stage 0: the name,
#: 1: spaces after it, 2: after "=", where a second "=" would make it a comparison)

_LINE_START = (_LINE,)
_OPENERS = frozenset("([{")
_CLOSERS = frozenset(")]}")
#: the state at the start of a statement (a document starts with one)
LINE_START = _LINE_START
#: import-statement stages (see `ApiMonitor._lex_import`)
_I_MODULE, _I_AFTER_MODULE, _I_WORD, _I_ALIAS = "module", "after-module", "word", "alias"
_I_NAMES, _I_AFTER_NAME, _I_NAME_WORD, _I_NAME_ALIAS, _I_FREE = "names", "after-name", "name-word", "name-alias", "free"
_STATEMENT_END = frozenset("\n;")

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
    """What a constrainer may know about the request: the whole document, the text
    before the cursor (the generated text continues `prefix`) and the document's
    analysis (`apis.document.DocumentAnalysis`, built once per request; None: read from
    `document` on demand)."""

    document: str = ""
    prefix: str = ""
    analysis: object = None

    def document_analysis(self, text: str):
        """The analysis of `text` (the document, or the prefix where there is none): the
        request's when it is of that text, else the one kept for the text."""
        from adaptrack_lsp.apis.document import analysis_of

        return analysis_of(text, self.analysis)


def _inner(state):
    """`state` without the scope of names bound by imports in the generated text."""
    return state[3] if state[0] == _SCOPED else state


# -- prompt scanning -----------------------------------------------------------------------
def safe_lex_start(prefix: str) -> int:
    """Start of the last line of `prefix` that begins in code (not inside a string or
    comment): lexing `prefix` from there in fresh code mode gives the lexer state at its
    end (`python_lexemes.code_starts`)."""
    return code_starts(prefix)[0]


def _misspelling(written: str, name: str) -> bool:
    """Whether `written` is `name` with a letter's case, or one edit (two for names of
    eight or more characters: an insertion, a deletion, a substitution, two neighbours
    swapped) away from it."""
    if written == name:
        return False
    if written.lower() == name.lower():
        return True
    limit = 2 if len(name) >= 8 else 1
    if abs(len(written) - len(name)) > limit or min(len(written), len(name)) < 3:
        return False
    previous2, previous = None, list(range(len(name) + 1))
    for i in range(1, len(written) + 1):
        current = [i] + [0] * len(name)
        for j in range(1, len(name) + 1):
            cost = written[i - 1] != name[j - 1]
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and written[i - 1] == name[j - 2] and written[i - 2] == name[j - 1]:
                current[j] = min(current[j], previous2[j - 2] + 1)
        if min(current) > limit:
            return False
        previous2, previous = previous, current
    return previous[-1] <= limit


# -- per-path data ---------------------------------------------------------------------------
class _PathInfo:
    """The members of one path as the lexer needs them.  An index answer with the
    ``"*"`` entry (`introspect_worker.ANY_ATTRIBUTE`): kind ``"any"`` -> unknown (any
    attribute may exist); ``"values"`` -> `open_values` (unlisted names are data, e.g.
    a DataFrame's columns: they may be read but not called)."""

    __slots__ = ("groups", "members", "open_values", "prefixes", "sorted_names")

    def __init__(self, members: Mapping[str, Member] | None, extra: frozenset[str] = frozenset()):
        self.open_values = False
        #: (token table, partial) -> the table's token groups for members starting with
        #: partial (`_ApiMasks._groups`), kept with the names they were computed from
        self.groups: dict = {}
        if members is not None and ANY_ATTRIBUTE in members:
            if members[ANY_ATTRIBUTE].kind != "values":
                members = None
            else:
                self.open_values = True
                members = {name: member for name, member in members.items() if name != ANY_ATTRIBUTE}
        self.members = None if members is None else frozenset(members) | extra
        if self.members is None:
            self.prefixes = frozenset()
            self.sorted_names: list[str] = []
        else:
            self.prefixes = frozenset(
                name[:k] for name in self.members for k in range(1, len(name) + 1)
            )
            self.sorted_names = sorted(self.members)


#: `_PathInfo`s by (id of the index's answer, extra names, open): one document's requests
#: ask for the same paths keystroke after keystroke, and a path's name set with every
#: name's prefixes costs as much to build as a mask.  Each entry holds the answer itself,
#: so the id cannot be reused while it is cached; indexes answer with new objects, never
#: by changing an answer in place.
_PATH_INFOS: dict[tuple[int, frozenset[str], bool], tuple[Mapping[str, Member], _PathInfo]] = {}
#: entries kept before the cache starts again (an entry holds every prefix of the names)
PATH_INFO_LIMIT = 64
#: token groups kept per path (one per table and partial name), the least recently used
#: dropped first: a search and the next keystrokes' meet the same partial names again
#: (about 150 over the tables for ``np.`` in `benchmarks/lsp_latency.py`; emptying the
#: whole set at 128 had each computed again 17 times in 140 requests)
GROUPS_PER_PATH = 256


def _shared_path_info(members: Mapping[str, Member] | None, extra: frozenset[str], opened: bool) -> _PathInfo:
    """The `_PathInfo` of an index answer with the document's `extra` names; `opened`: the
    path is ``self`` / ``cls`` of a class that may still grow (a new attribute, not a call)."""
    if members is None:
        return _PathInfo(None, extra)
    key = (id(members), extra, opened)
    found = _PATH_INFOS.get(key)
    if found is not None and found[0] is members:
        return found[1]
    info = _PathInfo(members, extra)
    if opened and info.members is not None:
        info.open_values = True  # self.total = 0: a new attribute, not a call
    if len(_PATH_INFOS) >= PATH_INFO_LIMIT:
        _PATH_INFOS.clear()
    _PATH_INFOS[key] = (members, info)
    return info


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
        self,
        index: APIIndex,
        roots: Mapping[str, tuple[str, ...]] | None = None,
        local_modules: frozenset[str] = frozenset(),
        assigned_attributes: frozenset[str] = frozenset(),
    ):
        self.index = index
        #: attribute names the document assigns on objects (members of every instance)
        self.assigned_attributes = frozenset(assigned_attributes)
        #: paths (``self`` / ``cls`` of the document's classes) whose unlisted names may be
        #: written (a new attribute) but not called (`receivers.AssignedNames`)
        self.open_paths = frozenset(getattr(assigned_attributes, "open_paths", ()))
        #: the cursor's class may still grow: on `open_paths` an unlisted name may be
        #: called unless it misspells a listed one (`receivers.AssignedNames.class_open`)
        self.class_open = bool(getattr(assigned_attributes, "class_open", False))
        #: top-level module names beside the document (a script's own modules)
        self.local_modules = frozenset(local_modules)
        self.source = getattr(index, "source", "") or type(index).__name__
        self._roots: dict[str, tuple[str, ...]] | None = (
            None if roots is None else {k: tuple(v) for k, v in roots.items()}
        )
        self._roots_from_document: str | None = None
        self._roots_version = 0
        self._paths: dict[tuple[str, ...], _PathInfo] = {}
        self._module_edges: dict[tuple[str, ...], frozenset[str]] = {}
        self._scoped_roots: dict[tuple, dict[str, tuple[str, ...]]] = {}
        self._modules_from_document: str | None = None
        self.lookup_errors = 0

    # -- roots and lookups -------------------------------------------------------------
    @property
    def roots(self) -> dict[str, tuple[str, ...]]:
        return dict(self._roots or {})

    @property
    def roots_version(self) -> int:
        """Changes whenever the roots are (re)learned (mask caches key on it)."""
        return self._roots_version

    def _learn(self, document: str, analysis=None) -> None:
        if self._roots is not None and self._roots_from_document is None:
            return  # explicit roots
        if self._roots_from_document == document:
            return
        roots = analysis.roots if analysis is not None else learn_roots(document)
        if self._roots is not None and roots != self._roots:
            raise ValueError(
                "this ApiMonitor already serves a document with other imports; create a new one"
            )
        self._roots = roots
        self._roots_version += 1
        self._roots_from_document = document

    def _learn_imported_modules(self, document: str, analysis=None) -> None:
        """Submodules the document imports explicitly are members of their parents
        (``import sympy.physics.quantum`` makes ``sympy.physics`` exist at run time)."""
        if document == self._modules_from_document:
            return
        edges: dict[tuple[str, ...], set[str]] = {}
        for module in analysis.modules if analysis is not None else imported_modules(document):
            for depth in range(1, len(module)):
                edges.setdefault(module[:depth], set()).add(module[depth])
        self._module_edges = {path: frozenset(names) for path, names in edges.items()}
        self._modules_from_document = document
        self._paths.clear()

    def path_info(self, path: tuple[str, ...]) -> _PathInfo:
        info = self._paths.get(path)
        if info is None:
            try:
                members = self.index.members(path)
            except Exception as error:  # noqa: BLE001 - an index failure means "unknown": unconstrained
                self.lookup_errors += 1
                log.warning("API index lookup of %s failed: %s", ".".join(path), error)
                members = None
            extra = self._module_edges.get(path, frozenset())
            if CALL in path or path in self.open_paths:  # an instance (or `cls`): the document may give it attributes
                extra = extra | self.assigned_attributes
            info = self._paths[path] = _shared_path_info(members, extra, path in self.open_paths)
        return info

    def _may_be_written_later(self, path: tuple[str, ...], name: str) -> bool:
        """Whether `name`, absent from ``self`` / ``cls`` (`path`) of a class that runs to
        the end of the document, may be a method still to be written: yes, unless it
        misspells a name the class has (one edit away, two for longer names)."""
        if not self.class_open or path not in self.open_paths:
            return False
        members = self.path_info(path).members or frozenset()
        return not any(_misspelling(name, member) for member in members)

    def members(self, path: tuple[str, ...]) -> frozenset[str] | None:
        return self.path_info(path).members

    def takes_new_attributes(self, path: tuple[str, ...]) -> bool:
        """Whether an assignment at the start of a statement may give `path`, an instance
        (a call's result), a name its class lacks: its class keeps an instance
        ``__dict__`` (``__dict__`` is one of the members ``dir`` lists)."""
        if CALL not in path:
            return False
        members = self.path_info(path).members
        return members is not None and "__dict__" in members


    # -- import statements written in the generated text ----------------------------------
    def _roots_with(self, learned: tuple) -> dict[str, tuple[str, ...]]:
        """The roots plus the names imports in the generated text bound (`learned`)."""
        roots = self._roots or {}
        if not learned:
            return roots
        found = self._scoped_roots.get(learned)
        if found is None:
            found = self._scoped_roots[learned] = {**roots, **dict(learned)}
        return found

    @staticmethod
    def _scoped(learned: tuple, frames: tuple, state):
        return (_SCOPED, learned, frames, state) if learned or frames else state

    def _call_result(self, path: tuple[str, ...]) -> tuple[str, ...] | None:
        """The path of what calling `path` returns, when the index knows its members now
        (``np.zeros`` -> ``("numpy", "zeros", "()")``); else None (looked up in the
        background, and the call's result stays unchecked this time)."""
        if CALL in path[-1:] or len(path) == 1:  # a root of one name is a module: not called
            return None
        result = (*path, CALL)
        key = members_key(result)
        optional = getattr(self.index, "optional_ready", None)
        try:
            ready = optional(key) if optional is not None else self.index.ready(key)
        except Exception:  # noqa: BLE001 - unknown
            return None
        if not ready:
            return None
        return result if self.path_info(result).members is not None else None

    def module_names(self, path: tuple[str, ...]) -> _PathInfo | None:
        """The modules importable under `path` (``()``: top level) as a `_PathInfo`
        (names and their prefixes), or None when the index does not know them."""
        key = ("<modules>", *path)
        info = self._paths.get(key)
        if info is None:
            try:
                names = self.index.submodules(path)
            except Exception as error:  # noqa: BLE001 - unknown, unconstrained
                self.lookup_errors += 1
                log.warning("API index: modules under %s failed: %s", ".".join(path), error)
                names = None
            if names is not None and not path:
                names = frozenset(names) | self.local_modules
            info = self._paths[key] = _PathInfo(None if names is None else {n: Member(n, "module") for n in names})
        return info if info.members is not None else None

    def import_names(self, module: tuple[str, ...]) -> _PathInfo | None:
        """What ``from module import NAME`` may name: its members and its submodules;
        None when either is unknown."""
        key = ("<import from>", *module)
        info = self._paths.get(key)
        if info is None:
            members = self.path_info(module)
            modules = self.module_names(module)
            if members.members is None or modules is None or members.open_values:
                info = _PathInfo(None)
            else:
                names = {n: Member(n, "module") for n in modules.members}
                names.update({n: Member(n, "name") for n in members.members})
                info = _PathInfo(names)
            self._paths[key] = info
        return info if info.members is not None else None

    def _lex_import(self, state, char: str):
        """One character of an import statement: (next state or None for a violation,
        whether `char` was consumed, a binding (alias, path) the statement completed or
        None).  The grammar read: ``import a.b [as c], ...`` and ``from a.b import c [as
        d], ...`` (parenthesised and multi-line too); a module path must be importable
        (`APIIndex.submodules`), a name imported from it one of its members or submodules.
        Relative imports, ``*`` and anything unexpected leave the rest of the statement
        unchecked (its syntax is the syntax check's business)."""
        _, kind, module, partial, stage, paren, checked, pending = state

        def with_(**changes):
            values = {"kind": kind, "module": module, "partial": partial, "stage": stage, "paren": paren, "checked": checked, "pending": pending}
            values.update(changes)
            return (_IMPORT, values["kind"], values["module"], values["partial"], values["stage"], values["paren"], values["checked"], values["pending"])

        def binding_of_module(path):
            return (path[0], path[:1]) if len(path) == 1 else None

        # a backslash line continuation (``from a.b \\`` + newline + ``import c``): the
        # line break after it is a space (`paren` holds "\\" until it comes)
        if paren == "\\":
            if char == "\r":
                return state, True, None
            state = with_(paren=False)
            if char == "\n":
                return self._lex_import(state, " ")
            return self._lex_import(state, char)
        if char == "\\" and not paren:
            # valid where a space is, and as a space is (it may end a name or an alias)
            current, binding = state, None
            while True:
                following, consumed, produced = self._lex_import(current, " ")
                if following is None:
                    return None, False, None
                binding = binding or produced
                if consumed or following[0] != _IMPORT:
                    break
                current = following
            if following[0] != _IMPORT:
                return following, True, binding
            return (*following[:5], "\\", *following[6:]), True, binding

        ident = is_identifier_char(char)
        if stage == _I_FREE:
            if char in _STATEMENT_END and (char == ";" or not paren):
                return _LINE_START, True, None
            if char == "#":
                return (_COMMENT,), True, None
            if char == "(":
                return with_(paren=True), True, None
            if char == ")":
                return with_(paren=False), True, None
            return state, True, None
        if stage == _I_MODULE:
            if ident:
                if partial == "" and not _is_identifier_start(char):
                    return with_(stage=_I_FREE), True, None
                extended = partial + char
                if checked:
                    info = self.module_names(module)
                    if info is None:
                        return with_(partial=extended, checked=False), True, None
                    if extended not in info.prefixes:
                        return None, False, None
                return with_(partial=extended), True, None
            complete = not checked or self._module_complete(module, partial)
            if char in _INLINE_SPACE:
                if not partial:
                    return (state if not module else with_(stage=_I_FREE)), True, None
                if not complete:
                    return None, False, None
                return with_(module=module + (partial,), partial="", stage=_I_AFTER_MODULE), True, None
            if char == ".":
                if not partial:
                    return with_(stage=_I_FREE), True, None  # a relative import
                if not complete:
                    return None, False, None
                return with_(module=module + (partial,), partial=""), True, None
            if partial and not complete:
                return None, False, None
            full = module + ((partial,) if partial else ())
            return with_(module=full, partial="", stage=_I_AFTER_MODULE), False, None
        if stage == _I_AFTER_MODULE:
            if char in _INLINE_SPACE:
                return state, True, None
            if _is_identifier_start(char):
                return with_(partial=char, stage=_I_WORD), True, None
            if kind == "import" and char == ",":
                return (_IMPORT, kind, (), "", _I_MODULE, paren, True, None), True, binding_of_module(module) if module else None
            if char in _STATEMENT_END:
                return _LINE_START, True, binding_of_module(module) if kind == "import" and module else None
            if char == "#":
                return (_COMMENT,), True, binding_of_module(module) if kind == "import" and module else None
            return with_(stage=_I_FREE), True, None
        if stage == _I_WORD:
            if ident:
                return with_(partial=partial + char), True, None
            if kind == "import" and partial == "as":
                return with_(partial="", stage=_I_ALIAS), False, None
            if kind == "from" and partial == "import":
                return with_(partial="", stage=_I_NAMES), False, None
            return with_(stage=_I_FREE), False, None
        if stage == _I_ALIAS:
            if ident and (partial or _is_identifier_start(char)):
                return with_(partial=partial + char), True, None
            if not partial and char in _INLINE_SPACE:
                return state, True, None
            binding = (partial, module) if partial and module else None
            return (_IMPORT, kind, (), "", _I_AFTER_MODULE, paren, checked, None), False, binding
        if stage == _I_NAMES:
            if ident:
                if partial == "" and not _is_identifier_start(char):
                    return with_(stage=_I_FREE), True, None
                extended = partial + char
                if checked:
                    info = self.import_names(module)
                    if info is None:
                        return with_(partial=extended, checked=False), True, None
                    if extended not in info.prefixes:
                        return None, False, None
                return with_(partial=extended), True, None
            if not partial:
                if char in _INLINE_SPACE or (char == "\n" and paren) or char == ",":
                    return state, True, None
                if char == "(" and not paren:
                    return with_(paren=True), True, None
                if char == "*":
                    return with_(stage=_I_AFTER_NAME, pending=None), True, None
                if char == ")" and paren:
                    return with_(stage=_I_AFTER_NAME, paren=False, pending=None), True, None
                if char in _STATEMENT_END or char == "#":
                    return with_(stage=_I_FREE), False, None
                return with_(stage=_I_FREE), True, None
            if checked and not self._name_complete(module, partial):
                return None, False, None
            return with_(partial="", stage=_I_AFTER_NAME, pending=partial, checked=True), False, None
        if stage == _I_AFTER_NAME:
            binding = (pending, module + (pending,)) if pending else None
            if char in _INLINE_SPACE or (char == "\n" and paren):
                return state, True, None
            if _is_identifier_start(char) and pending:
                return with_(partial=char, stage=_I_NAME_WORD), True, None
            if char == ",":
                return with_(partial="", stage=_I_NAMES, pending=None), True, binding
            if char == ")" and paren:
                return with_(paren=False, pending=None), True, binding
            if char in _STATEMENT_END:
                return _LINE_START, True, binding
            if char == "#":
                return (_COMMENT,), True, binding
            return with_(stage=_I_FREE), True, None
        if stage == _I_NAME_WORD:
            if ident:
                return with_(partial=partial + char), True, None
            if partial == "as":
                return with_(partial="", stage=_I_NAME_ALIAS), False, None
            return with_(stage=_I_FREE), False, None
        if stage == _I_NAME_ALIAS:
            if ident and (partial or _is_identifier_start(char)):
                return with_(partial=partial + char), True, None
            if not partial and char in _INLINE_SPACE:
                return state, True, None
            binding = (partial, module + (pending,)) if partial and pending else None
            return with_(partial="", stage=_I_AFTER_NAME, pending=None), False, binding
        raise ValueError(f"not an import stage: {stage!r}")

    def _module_complete(self, module: tuple[str, ...], name: str) -> bool:
        info = self.module_names(module)
        return info is None or name in info.members

    def _name_complete(self, module: tuple[str, ...], name: str) -> bool:
        info = self.import_names(module)
        return info is None or name in info.members

    # -- Constrainer -----------------------------------------------------------------------
    def start(self, context=None):
        if context is None:
            return FRESH_CODE
        if isinstance(context, str):
            context = ConstraintContext(document=context, prefix=context)
        document = getattr(context, "document", "") or ""
        prefix = getattr(context, "prefix", "") or ""
        analysis = context.document_analysis(document or prefix) if isinstance(context, ConstraintContext) else None
        self._learn(document or prefix, analysis)
        self._learn_imported_modules(document or prefix, analysis)
        # from the start of the cursor's statement (a multi-line import is read whole)
        start = statement_start(prefix)
        state, _violation = self.lex(_LINE_START, prefix[start:], lenient=True)
        return state

    def check(self, state, text: str):
        return self.lex(state, text)[0]

    def is_complete(self, state) -> bool:
        state = _inner(state)
        if state[0] == _IMPORT:
            _, _, module, partial, stage, _, checked, _ = state
            if not partial or not checked:
                return True
            if stage == _I_MODULE:
                return self._module_complete(module, partial)
            if stage == _I_NAMES:
                return self._name_complete(module, partial)
            return True
        if state[0] == _MEMBER:
            info = self.path_info(state[1])
            return info.members is not None and (state[2] in info.members or (info.open_values and bool(state[2])))
        if state[0] == _TARGET:
            return state[2] == 2
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
                current = _inner(current)
                rest = _WORD_RUN(text, position + 1)
                rest = rest.group() if rest else ""
                if current[0] == _IMPORT:
                    return self._import_problem(current, char + (rest if is_identifier_char(char) else ""))
                if current[0] == _VALUE:
                    return self._not_callable(current[3], current[1])
                if current[0] == _TARGET:
                    missing = self._missing_member(current[3], current[1], " ", "")
                    return f"{missing}; only an assignment (`= value`) may give it to the instance"
                if current[0] == _MEMBER:
                    return self._missing_member(current[1], current[2], char, rest)
                break
            current = following
        return super().rejection(state, text)

    def _import_problem(self, state, word: str) -> str:
        """Why an import statement's text is rejected: the module path or the name."""
        _, kind, module, partial, stage, _, _, _ = state
        root = (module or (partial + (word if is_identifier_char(word[:1] or " ") else ""),))[0]
        try:
            version = self.index.packages().get(root, "")
        except Exception:  # noqa: BLE001 - the version only decorates the message
            version = ""
        where = f" in {root} {version}" if version and version != "unknown" else ""
        if stage == _I_NAMES:
            name = partial + (word if is_identifier_char(word[:1] or " ") else "")
            info = self.import_names(module)
            return f"cannot import {name} from {'.'.join(module)}{where}{_near(info, partial) if info else ''}"
        name = partial + (word if is_identifier_char(word[:1] or " ") else "")
        info = self.module_names(module)
        under = f" under {'.'.join(module)}" if module else ""
        return f"no module {'.'.join((*module, name))} can be imported{where}{_near(info, partial) if info and module else ''}" + (
            "" if module else " (not installed)" if under == "" else ""
        )

    def _not_callable(self, path: tuple[str, ...], name: str) -> str:
        try:
            version = self.index.packages().get(path[0], "")
        except Exception:  # noqa: BLE001
            version = ""
        where = f" in {path[0]} {version}" if version and version != "unknown" else ""
        return f"{self.written(path)}.{name} is not a method{where} (other attributes are data, such as columns, and cannot be called)"

    def written(self, path: tuple[str, ...]) -> str:
        """`path` as the document writes it, through its longest import alias
        (``("tensorflow", "compat", "v1")`` -> ``tf.compat.v1``)."""
        best = None
        for alias, root in (self._roots or {}).items():
            if path[: len(root)] == root and (best is None or len(root) > len(best[1])):
                best = (alias, root)
        if best is None:
            return dotted(path)
        return dotted((best[0], *path[len(best[1]) :]))

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
            inner = _inner(state)
            if inner[0] == _AFTER:
                current = inner[1]
            elif inner[0] == _MEMBER:
                members = self.path_info(inner[1]).members
                current = inner[1] + (inner[2],) if members is not None and inner[2] in members else inner[1]
            elif current is not None:
                chains.append(current)
                current = None
        if current is not None:
            chains.append(current)
        return list(dict.fromkeys(chains))

    @staticmethod
    def in_chain(state) -> bool:
        """Whether `state` is inside a constrained chain (after a resolved root/member)."""
        return _inner(state)[0] in (_AFTER, _MEMBER)

    @staticmethod
    def chain_path(state) -> tuple[str, ...] | None:
        """The resolved path of a chain state (members are being chosen from it)."""
        state = _inner(state)
        return state[1] if state[0] in (_AFTER, _MEMBER) else None

    @staticmethod
    def describe(state) -> str:
        state = _inner(state)
        mode = state[0]
        if mode == _IMPORT:
            return f"{state[1]} statement ({state[4]}{' ' + repr(state[3]) if state[3] else ''})"
        if mode == _LINE:
            return "statement start"
        if mode == _STMT:
            return f"statement start (word {state[1]!r})"
        if mode == _MEMBER:
            return f"member of {'.'.join(state[1])} starting {state[2]!r}"
        if mode == _AFTER:
            return f"after {'.'.join(state[1])}"
        if mode == _CODE:
            return f"code (identifier {state[1]!r})" if state[1] else "code"
        if mode == _VALUE:
            return f"data attribute {state[1]!r}"
        if mode == _TARGET:
            return f"new attribute {state[1]!r} of {'.'.join(state[3])} (an assignment must follow)"
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
        learned: tuple = ()
        frames: tuple = ()
        if state[0] == _SCOPED:
            learned, frames, state = state[1], state[2], state[3]
        roots = self._roots_with(learned)
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
                elif frames and char in _OPENERS:
                    frames = (*frames[:-1], (frames[-1][0], frames[-1][1] + 1))
                    state = FRESH_CODE
                elif frames and char in _CLOSERS:
                    result, depth = frames[-1]
                    if depth > 1:
                        frames = (*frames[:-1], (result, depth - 1))
                        state = FRESH_CODE
                    else:  # the call on a known chain closed: its result's members follow
                        frames = frames[:-1]
                        state = (_AFTER, result)
                elif char in _STATEMENT_END:
                    state = FRESH_CODE if frames else _LINE_START
                elif char == "#":
                    state = (_COMMENT,)
                elif char == "'" or char == '"':
                    state = (_OPEN1, char)
                elif state[2]:
                    state = FRESH_CODE
                position += 1
                continue
            if mode == _LINE:
                if char in _INLINE_SPACE:
                    position += 1
                    continue
                state = (_STMT, "") if _is_identifier_start(char) else FRESH_CODE
                continue
            if mode == _STMT:
                if is_identifier_char(char):
                    end = _WORD_RUN(text, position).end()
                    state = (_STMT, state[1] + text[position:end])
                    position = end
                    continue
                word = state[1]
                if word == "import" or word == "from":
                    state = (_IMPORT, word, (), "", _I_MODULE, False, True, None)
                else:
                    path = roots.get(word)  # a chain that begins the statement may be assigned to
                    state = (_AFTER, path, True) if path is not None else (_CODE, word, False)
                continue
            if mode == _IMPORT:
                following, consumed, binding = self._lex_import(state, char)
                if following is None:
                    if not lenient:
                        return None, position
                    if violation < 0:
                        violation = position
                    following, consumed = (_IMPORT, *state[1:4], _I_FREE, *state[5:]), True
                if binding is not None:
                    learned = tuple(sorted({**dict(learned), binding[0]: binding[1]}.items()))
                    roots = self._roots_with(learned)
                state = following
                if consumed:
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
                        state = (_MEMBER, path, extended, *state[3:])
                        position = end
                        continue
                    if info.open_values:  # not a member: data (a column), any name
                        state = (_VALUE, extended, False, path)
                        position = end
                        continue
                    if len(state) > 3 and self.takes_new_attributes(path):  # a new attribute, if assigned
                        state = (_TARGET, extended, 0, path)
                        position = end
                        continue
                    if end > position + 1:  # find the first character that fails
                        extended = partial + char
                        if extended in info.prefixes:
                            state = (_MEMBER, path, extended, *state[3:])
                            position += 1
                            continue
                elif partial in info.members:
                    state = (_AFTER, path + (partial,), *state[3:])
                    continue
                elif info.open_values and partial:
                    state = (_VALUE, partial, False, path)
                    continue
                elif partial and len(state) > 3 and self.takes_new_attributes(path):
                    state = (_TARGET, partial, 0, path)
                    continue
                # violation
                if not lenient:
                    return None, position
                if violation < 0:
                    violation = position
                state = (_CODE, partial, True)
                continue
            if mode == _VALUE or mode == _TARGET:
                following, advanced = self._open_name_step(state, text, position)
                if following is not None:
                    state, position = following, advanced
                    continue
                if not lenient:
                    return None, position
                if violation < 0:
                    violation = position
                state = FRESH_CODE
                continue
            if mode == _AFTER:
                if char == "(":
                    result = self._call_result(state[1])
                    if result is not None:
                        frames = (*frames, (result, 1))
                        state = FRESH_CODE
                        position += 1
                        continue
                if char == ".":
                    info = self.path_info(state[1])
                    state = (
                        (_CODE, "", True)
                        if info.members is None
                        else (_MEMBER, state[1], "", *state[2:])
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
                    state = _LINE_START  # unterminated single-quoted string
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
                    return self._scoped(learned, frames, state), violation
                state = _LINE_START
                position = newline + 1
                continue
            if mode == _OPEN1:
                quote = state[1]
                if char == quote:
                    state = (_OPEN2, quote)
                elif char == "\\":
                    state = (_STRING, quote, False, True, 0)
                elif char == "\n":
                    state = _LINE_START
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
        return self._scoped(learned, frames, state), violation

    def _open_name_step(self, state, text: str, position: int):
        """(next state, next position) in a name no member list holds, or (None, position)
        for a violation: ``(_VALUE, name, spaced, path)``, an attribute the data proxy
        `path` serves, is not called; ``(_TARGET, name, stage, path)``, a new attribute at
        a statement's start, must be assigned (``=``, not ``==``)."""
        char = text[position]
        if state[0] == _VALUE:
            if not state[2] and is_identifier_char(char):
                end = _WORD_RUN(text, position).end()
                return (_VALUE, state[1] + text[position:end], False, state[3]), end
            if char in _INLINE_SPACE:
                return (_VALUE, state[1], True, state[3]), position + 1
            if char == "(":
                if self._may_be_written_later(state[3], state[1]):
                    return (_CODE, "", True), position  # the call is code's business
                return None, position
            if char == ".":
                return (_CODE, "", True), position + 1
            return FRESH_CODE, position
        stage = state[2]
        if stage == 2:  # after "=": a second one makes a comparison (a read)
            return (None, position) if char == "=" else (FRESH_CODE, position)  # the value is code
        if stage == 0 and is_identifier_char(char):
            end = _WORD_RUN(text, position).end()
            return (_TARGET, state[1] + text[position:end], 0, state[3]), end
        if char in _INLINE_SPACE or char == "=":
            return (_TARGET, state[1], 2 if char == "=" else 1, state[3]), position + 1
        return None, position

    # -- fast full-vocabulary masks ------------------------------------------------------------
    def token_mask(self, state, index: TokenIndex) -> np.ndarray:
        """bool[vocab.size] for `state`, exact (equal to checking every token).

        Built from the vocabulary's identifier tables (`TokenTables`): in a chain only the
        tokens spelling prefixes of matching member names are looked at; elsewhere every
        token is valid except the few that contain an alias followed by ``.`` (checked
        one by one), so the cost does not grow with the vocabulary.
        """
        inner = _inner(state)
        if inner[0] in (_VALUE, _TARGET) or (
            inner[0] == _MEMBER and (self.path_info(inner[1]).open_values or (len(inner) > 3 and self.takes_new_attributes(inner[1])))
        ):
            return None  # open names (a data proxy's, a new attribute's): the index walks the vocabulary
        if inner[0] == _IMPORT and inner[5] == "\\":
            return None  # right after a line-continuing backslash (rare): the index walks the vocabulary
        if inner[0] == _IMPORT:
            return _ImportMasks.of(self, index).mask(inner, state)
        if inner[0] == _STMT and inner[1] in ("import", "from"):
            return _ImportMasks.of(self, index).after_keyword(state)
        if state[0] != _SCOPED:
            return _ApiMasks.of(self, index).mask(state)
        learned, frames = state[1], state[2]
        masks = _ApiMasks.of(self, index, learned)
        if not frames:
            return masks.mask(state)
        # inside a call on a known chain: as without it, except where a closing bracket
        # leads on to the call's result (``).ptp``) or a line break is no statement start
        mask = masks.mask(self._scoped(learned, (), inner)).copy()
        risky = _frame_risky_ids(index.tables)
        if len(risky):
            advance = index.advance
            mask[risky] = np.fromiter((advance(state, int(t)) is not None for t in risky), dtype=bool, count=len(risky))
        return mask


_IMPORT_WORD = re.compile(r"(?<!\w)(?:import|from)(?!\w)")
_IMPORT_WORD_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


_FRAME_RISK = re.compile(r"[)\]}][ \t]*\.|(?<!\w)(?:import|from)(?!\w)")
_FRAME_RISKY_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _frame_risky_ids(tables) -> np.ndarray:
    """Tokens whose verdict inside an open call can differ from outside it: a closing
    bracket then a dot, or the words import/from (a line break there starts no statement)."""
    found = _FRAME_RISKY_IDS.get(tables)
    if found is None:
        found = _FRAME_RISKY_IDS[tables] = np.asarray(
            [i for i, text in enumerate(tables.texts) if tables.ordinary[i] and _FRAME_RISK.search(text)], dtype=np.int64
        )
    return found


def _import_word_ids(tables) -> np.ndarray:
    """Ids of the ordinary tokens whose text holds the word ``import`` or ``from``."""
    found = _IMPORT_WORD_IDS.get(tables)
    if found is None:
        found = _IMPORT_WORD_IDS[tables] = np.asarray(
            [i for i, text in enumerate(tables.texts) if tables.ordinary[i] and ("mport" in text or "rom" in text) and _IMPORT_WORD.search(text)],
            dtype=np.int64,
        )
    return found


class _ApiMasks:
    """Per (monitor, token index) mask machinery; see `ApiMonitor.token_mask`."""

    def __init__(self, monitor: ApiMonitor, index: TokenIndex, learned: tuple = ()):
        self.monitor = monitor
        self.index = index
        self.tables = index.tables
        tables = self.tables
        self.roots_seen = monitor.roots_version
        #: names bound by imports in the generated text (states are `_SCOPED` with them)
        self.learned = learned
        roots = monitor._roots_with(learned)
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
        # tokens with the word import or from: they may start an import statement
        self.import_word_ids = _import_word_ids(tables)
        self._risky_ids = np.union1d(self.alias_word_ids, self.import_word_ids)
        self._base_line: np.ndarray | None = None
        self._base_fresh: np.ndarray | None = None
        self._base_after_dot: np.ndarray | None = None
        self._lead_after_dot_verdicts: np.ndarray | None = None
        self._unknown_dot_verdicts: np.ndarray | None = None

    @classmethod
    def of(cls, monitor: ApiMonitor, index: TokenIndex, learned: tuple = ()) -> _ApiMasks:
        key = (id(monitor), learned)
        masks = index.plan_cache.get(key)
        if (
            masks is None
            or masks.monitor is not monitor
            or masks.roots_seen != monitor.roots_version
        ):
            masks = index.plan_cache[key] = cls(monitor, index, learned)
        return masks

    def wrap(self, inner):
        """`inner` in this mask set's scope (the state the exact checks start from)."""
        return (_SCOPED, self.learned, (), inner) if self.learned else inner

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
        """States without a pending identifier or chain: only tokens with an alias word
        or an import word can fail."""
        mask = self.tables.ordinary.copy()
        self._set_exact(mask, state, self._risky_ids)
        return self._with_eos(mask, state)

    def base_fresh(self) -> np.ndarray:
        if self._base_fresh is None:
            self._base_fresh = self.generic(self.wrap(FRESH_CODE))
        return self._base_fresh

    def base_after_dot(self) -> np.ndarray:
        if self._base_after_dot is None:
            self._base_after_dot = self.generic(self.wrap((_CODE, "", True)))
        return self._base_after_dot

    def base_line(self) -> np.ndarray:
        if self._base_line is None:
            self._base_line = self.generic(self.wrap(_LINE_START))
        return self._base_line

    def lead_after_dot_verdicts(self) -> np.ndarray:
        if self._lead_after_dot_verdicts is None:
            self._lead_after_dot_verdicts = self.base_after_dot()[
                self.lead_alias_dot_ids
            ]
        return self._lead_after_dot_verdicts

    # -- the masks ------------------------------------------------------------------------
    def mask(self, state) -> np.ndarray:
        inner = _inner(state)
        mode = inner[0]
        if mode == _MEMBER:
            return self.member_mask(inner, state)
        if mode == _AFTER:
            mask = self.base_fresh().copy()
            self.dot_overrides(mask, inner[1], inner[2:])
            return self._with_eos(mask, state)
        if mode == _LINE:
            return self.base_line().copy()
        if mode == _STMT:
            # like the word as plain code, except where the word grows into import/from
            # and where a chain begins the statement (it may be assigned to)
            mask = self.mask(self.wrap((_CODE, inner[1], False)))
            word = inner[1]
            ids = [self.import_word_ids]
            for keyword in ("import", "from"):
                rest = keyword[len(word):]
                if keyword.startswith(word) and rest:
                    main = self.tables.main
                    ids += [found for found in (main.pure_ids_by_lead.get(rest), main.mixed_free_ids_by_lead.get(rest), main.mixed_check_ids_by_lead.get(rest)) if found is not None]
            for alias in self.roots:
                if len(alias) > len(word) and alias.startswith(word):
                    found = self.tables.mixed_dot_ids_by_lead.get(alias[len(word) :])
                    if found is not None:
                        ids.append(found)
            path = self.roots.get(word)
            if path is not None:
                self.dot_overrides(mask, path, (True,))
            self._set_exact(mask, state, np.unique(np.concatenate(ids)))
            return self._with_eos(mask, state)
        if mode == _CODE:
            identifier, after_dot = inner[1], inner[2]
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

    def dot_overrides(self, mask: np.ndarray, path: tuple[str, ...], lead: tuple = ()) -> None:
        """Set the verdicts of tokens starting with (spaces and) "." after a complete
        name whose path is `path` (`lead`: ``(True,)`` where the chain began its statement)."""
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
        after_dot = self.wrap((_MEMBER, path, "", *lead))
        if info.open_values or (lead and self.monitor.takes_new_attributes(path)):  # any name may follow: every dot token is checked
            self._set_exact_table(mask, dot, after_dot, ids)
            return
        mask[ids] = False
        mask[dot.empty_rest_ids] = True
        self._member_table(mask, dot, info, "", after_dot, path)

    def _unknown_dot(self) -> np.ndarray:
        """Verdicts of the dot tokens when the path before the dot is unknown: the dot
        starts an unconstrained attribute, so only alias words inside can fail."""
        dot = self.tables.dot
        verdicts = np.ones(len(dot.ids), dtype=bool)
        if len(self.alias_word_ids):
            position = {int(t): i for i, t in enumerate(dot.ids)}
            state = self.wrap((_CODE, "", True))
            for token_id in self._risky_ids.tolist():
                i = position.get(token_id)
                if i is not None:
                    verdicts[i] = (
                        self.monitor.check(state, dot.rest_of[token_id]) is not None
                    )
        return verdicts

    def member_mask(self, inner, state) -> np.ndarray:
        path, partial = inner[1], inner[2]
        info = self.monitor.path_info(path)
        mask = np.zeros(self.tables.size, dtype=bool)
        self._member_table(mask, self.tables.main, info, partial, state, path)
        if partial in info.members:
            # tokens starting with a non-identifier character end the name here
            tables = self.tables
            base = self.base_fresh()
            nonident = tables.nonident_nondot_ids
            mask[nonident] = base[nonident]
            self.dot_overrides(mask, path + (partial,), inner[3:])
        return self._with_eos(mask, state)

    def _member_table(self, mask, table, info: _PathInfo, partial: str, state, path: tuple[str, ...]) -> None:
        """Tokens of `table` (identifier run + rest) valid in (_MEMBER, path, partial)."""
        # kept with the path's names: the search's siblings, its backtracking and the next
        # keystroke's request ask again
        key = (table, partial)
        kept = info.groups
        groups = kept.pop(key, None)
        if groups is None:
            if len(kept) >= GROUPS_PER_PATH:
                del kept[next(iter(kept))]  # the least recently used
            groups = self._groups(table, info, partial)
        kept[key] = groups  # (again) the most recently used
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


class _ImportTables:
    """Per-vocabulary groups for import-statement masks: tokens split into leading
    spaces, a leading identifier run and the rest; and the tokens whose verdict can
    change after the point they start at (``,``, a line break, ``;``, the words import
    and from)."""

    _cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, tables) -> _ImportTables:
        found = cls._cache.get(tables)
        if found is None:
            found = cls._cache[tables] = cls(tables)
        return found

    def __init__(self, tables):
        from adaptrack_lsp.constrainers.token_index import LeadTable

        split = re.compile(r"([ \t]*)(\w*)(.*)", re.S).match
        spaced_pure, spaced_free, spaced_check = {}, {}, {}
        spaced_lead, plain_lead, space_only, spaced_other, other = [], [], [], [], []
        other_first: dict[str, list[int]] = {}
        spaced_other_first: dict[str, list[int]] = {}
        risky = []
        for token_id, text in enumerate(tables.texts):
            if not tables.ordinary[token_id]:
                continue
            if any(c in text for c in ",\n\r;"):
                risky.append(token_id)
            spaces, lead, rest = split(text).groups()
            if spaces:
                if lead:
                    spaced_lead.append(token_id)
                    group = spaced_pure if not rest else spaced_check if _DOT_REST.match(rest) else spaced_free
                    group.setdefault(lead, []).append(token_id)
                elif rest:
                    spaced_other.append(token_id)
                    spaced_other_first.setdefault(rest[0], []).append(token_id)
                else:
                    space_only.append(token_id)
            elif lead:
                plain_lead.append(token_id)
            else:
                other.append(token_id)
                other_first.setdefault(text[0], []).append(token_id)
        self.spaced = LeadTable()
        self.spaced._finish(spaced_pure, spaced_free, spaced_check)
        ids = lambda values: np.asarray(values, dtype=np.int64)
        self.spaced_lead_ids, self.plain_lead_ids = ids(spaced_lead), ids(plain_lead)
        self.space_only_ids, self.spaced_other_ids, self.other_ids = ids(space_only), ids(spaced_other), ids(other)
        self.other_first = {k: ids(v) for k, v in other_first.items()}
        self.spaced_other_first = {k: ids(v) for k, v in spaced_other_first.items()}
        self.risky_ids = np.union1d(ids(risky), _import_word_ids(tables))

    def first_in(self, chars: str, spaced: bool) -> np.ndarray:
        table = self.spaced_other_first if spaced else self.other_first
        found = [table[c] for c in chars if c in table]
        return np.concatenate(found) if found else _NO_IDS


_DOT_REST = re.compile(r"[ \t]*\.")


class _ImportMasks:
    """Full-vocabulary masks inside import statements without walking the vocabulary:
    identifier runs are matched against the importable names by prefix (the member
    tables' way), every other token takes the verdict of a few cheap rules, and the
    tokens those rules cannot decide (listed by `_ImportTables`: they reach a later
    checked position) are checked one by one.  Exact: equal to checking every token."""

    def __init__(self, monitor: ApiMonitor, index: TokenIndex):
        self.monitor = monitor
        self.index = index
        self.tables = index.tables
        self.imports = _ImportTables.of(index.tables)

    @classmethod
    def of(cls, monitor: ApiMonitor, index: TokenIndex) -> _ImportMasks:
        key = ("imports", id(monitor))
        found = index.plan_cache.get(key)
        if found is None or found.monitor is not monitor:
            found = index.plan_cache[key] = cls(monitor, index)
        return found

    def _exact(self, mask, state, ids) -> None:
        if len(ids):
            advance = self.index.advance
            mask[ids] = np.fromiter((advance(state, int(t)) is not None for t in ids), dtype=bool, count=len(ids))

    def after_keyword(self, state) -> np.ndarray:
        """The first word of a statement is ``import`` or ``from``, not ended yet."""
        mask = self.tables.ordinary.copy()
        imports = self.imports
        # a token continuing the word makes another word (code); one ending it opens the
        # statement: only those whose text goes on past the spaces can be rejected
        ends = [imports.spaced_lead_ids, imports.other_ids, imports.spaced_other_ids, imports.risky_ids]
        # a longer word is code: only an alias it might spell can be checked there
        word = _inner(state)[1]
        roots = self.monitor._roots_with(state[1] if state[0] == _SCOPED else ())
        main = self.tables.main
        for root in roots:
            if root.startswith(word) and len(root) > len(word):
                ends += [ids for ids in (main.mixed_free_ids_by_lead.get(root[len(word):]), main.mixed_check_ids_by_lead.get(root[len(word):])) if ids is not None]
        self._exact(mask, state, np.unique(np.concatenate(ends)))
        return mask

    def mask(self, inner, state) -> np.ndarray:
        _, kind, module, partial, stage, paren, checked, _ = inner
        tables, imports = self.tables, self.imports
        mask = tables.ordinary.copy()
        exact = [imports.risky_ids]
        if stage == _I_WORD and kind == "from" and partial == "import":
            # the keyword is whole: a token that ends it starts the imported names
            following = (_IMPORT, kind, module, "", _I_NAMES, paren, True, None)
            mask = self.mask(following, (*state[:3], following) if state[0] == _SCOPED else following).copy()
            mask[imports.plain_lead_ids] = True  # the word goes on ("imports"): not the keyword
            self._exact(mask, state, np.intersect1d(imports.plain_lead_ids, imports.risky_ids))
            return mask
        if stage in (_I_WORD, _I_NAME_WORD):
            keyword = "as" if stage == _I_NAME_WORD or kind == "import" else "import"
            if keyword.startswith(partial) and len(keyword) > len(partial):
                rest = keyword[len(partial):]
                exact += [found for found in (tables.main.mixed_free_ids_by_lead.get(rest), tables.main.mixed_check_ids_by_lead.get(rest)) if found is not None]
        elif stage in (_I_MODULE, _I_NAMES):
            monitor = self.monitor
            info = None
            if checked:
                info = monitor.module_names(module) if stage == _I_MODULE else monitor.import_names(module)
            at_start = stage == _I_NAMES or not module
            if partial:
                complete = info is None or partial in info.members
                self._identifiers(mask, exact, info, partial, imports.plain_lead_ids, tables.main)
                for ids in (imports.spaced_lead_ids, imports.space_only_ids, imports.spaced_other_ids, imports.other_ids):
                    if not complete:
                        mask[ids] = False
                if complete and stage == _I_MODULE:
                    exact.append(tables.dot.ids)  # "." goes on to the next module name
            else:
                self._identifiers(mask, exact, info, "", imports.plain_lead_ids, tables.main)
                if at_start:  # spaces are skipped before the name
                    self._identifiers(mask, exact, info, "", imports.spaced_lead_ids, imports.spaced)
                    # a first character that keeps the statement's names checked: decide one by one
                    keep = "(,*)\n\r" if stage == _I_NAMES else ",\n\r;"
                    exact += [imports.first_in(keep, False), imports.first_in(keep, True)]
        exact = [ids for ids in exact if len(ids)]
        if exact:
            self._exact(mask, state, np.unique(np.concatenate(exact)))
        return mask

    def _identifiers(self, mask, exact, info: _PathInfo | None, partial: str, lead_ids, table) -> None:
        """Tokens of `table` whose identifier run continues a checked name from
        `partial`: a prefix of a name is valid, a completed name followed by more text is
        checked one by one, anything else is rejected."""
        if info is None:  # an unchecked name: whatever follows it is decided by the rules
            mask[lead_ids] = True
            return
        mask[lead_ids] = False
        pure, free, check = _ApiMasks._groups(table, info, partial)
        mask[pure] = True
        exact += [free, check]
        if not partial:  # a digit cannot start a name: the statement is not checked further
            for group in (table.pure_ids_by_lead, table.mixed_free_ids_by_lead, table.mixed_check_ids_by_lead):
                for lead, ids in group.items():
                    if lead[:1].isdigit() or not _is_identifier_start(lead[:1]):
                        mask[ids] = True
