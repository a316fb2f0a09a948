"""Keyword arguments: inside a call whose callee resolves, ``name=`` names a parameter.

`KeywordArguments` is a text-level `Constrainer`, composed with the API monitor by
`AllOf` (`constrainers.environment.token_constraint`).  It lexes generated Python like
the monitor (strings, comments and f-strings never trigger it), keeps the stack of open
brackets, and resolves callees the way the monitor resolves chains: a chain on an
import alias (``tf.nn.dropout(``, ``LinearRegression(`` after ``from sklearn.linear_model
import LinearRegression``), or a method on a name whose type the document states where the
generation starts (``model = LinearRegression()`` ... ``model.fit(``: the typed receivers
of the document's analysis, `apis.receivers`, the ones the API monitor resolves; the type
of what the call returns is the index's business: a class gives its instances, a
function's result type comes from jedi).  The callee's parameters come from
`APIIndex.signature` (call keys, see `api_index`).

In the argument list of a resolved call, at the start of an argument (after ``(`` or a
top-level ``,``), ``name`` followed by ``=`` and then by anything but another ``=`` (so
``name == x`` stays a comparison) is a keyword; it is rejected when

- the signature has no parameter ``name`` and no ``**kwargs``,
- ``name`` is positional-only (and there is no ``**kwargs``),
- the same call already has ``name=`` (in the generated text or the document), or
- a positional argument of the call already binds ``name`` (unknown after ``*args``).

Unknown signatures (no signature, C functions without one, unresolvable callees, an
index that raises) allow every name; a signature not computed yet is "pending" through
the index (`ReadyOnlyIndex`), never waited for.  Lambdas inside an argument list
(``key=lambda a, b=1: a``), nested brackets, ``def``/``class`` headers and strings are
not keywords of the call.

The check is prefix-closed (a text is rejected only at the first character after the
``=`` of a bad keyword), so the exact samplers stay exact.  `token_mask` builds
full-vocabulary masks without walking the vocabulary: only tokens that contain ``=``
followed by another character can be rejected (and, right after ``bad_name=``, every
token that does not start with ``=``); those few are checked one by one, and where no
resolved call is open only those that also contain ``(``.
"""

from __future__ import annotations

import logging
import re
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from adaptrack_lsp.apis.document import analysis_of
from adaptrack_lsp.apis.index import CALL, APIIndex, Signature, call_key, dotted
from adaptrack_lsp.apis.receivers import receivers_at
from adaptrack_lsp.constrainers.base import Constrainer
from adaptrack_lsp.constrainers.python_lexemes import code_starts

if TYPE_CHECKING:  # pragma: no cover
    from adaptrack_lsp.constrainers.token_index import TokenIndex

log = logging.getLogger(__name__)

__all__ = [
    "KeywordArguments",
    "KeywordChoice",
    "statement_start",
]

# -- lexer modes (first element of every state; every state is (mode, a, b, arg, frames)) --
_FRESH = 0  # code, nothing pending
_WORD = 1  # (_WORD, word so far, context): reading an identifier
_CHAIN = 2  # (_CHAIN, path): a resolved chain ended (maybe trailing spaces)
_DOT = 3  # (_DOT, path or _UNRESOLVED): right after "."
_CAND = 4  # (_CAND, word, path or None): a keyword candidate ended right here
_CAND_SPACED = 11  # (_CAND_SPACED, word, path or None): ... and spaces followed it
_KWEQ = 5  # (_KWEQ, word): "word =" seen at an argument start; the next character decides
_NUMBER = 6
_OPEN1 = 7  # (_OPEN1, quote)
_OPEN2 = 8  # (_OPEN2, quote)
_STRING = 9  # (_STRING, quote + ("3" if triple), -1 after a backslash else closing quotes seen)
_COMMENT = 10

# word contexts (b of _WORD; a of _DOT)
_UNRESOLVED = "?"  # after the dot of something unresolved
_DEFINED = "def"  # the name after def/class (a definition, not a callee)

# where the text is in the argument list of the innermost frame when it is a resolved
# call (else None); the frame counts the positional arguments before it
_ARG_START = 0  # after "(" or a top-level ","
_POSITIONAL = 1  # inside a positional argument
_KEYWORD = 2  # inside the value of a keyword argument
_UNPACKING = 3  # inside *args / **kwargs (the positional count is unknown after it)
_LAMBDA_POSITIONAL = 4  # a lambda's parameters: "," and "name=" are not the call's
_LAMBDA_KEYWORD = 5  # the same, as the value of a keyword argument
_AFTER_COLON = {_LAMBDA_POSITIONAL: _POSITIONAL, _LAMBDA_KEYWORD: _KEYWORD}
_LAMBDA_OF = {_ARG_START: _LAMBDA_POSITIONAL, _POSITIONAL: _LAMBDA_POSITIONAL, _UNPACKING: _LAMBDA_POSITIONAL, _KEYWORD: _LAMBDA_KEYWORD}

_NO_FRAMES: tuple = ()
FRESH = (_FRESH, None, None, None, _NO_FRAMES)

_WORD_RUN = re.compile(r"\w+").match
_NUMBER_RUN = re.compile(r"[\w.]+").match
_SPACE = frozenset(" \t\f")
_BRACKET_SPACE = frozenset(" \t\f\r\n\\")  # inside brackets line breaks are spaces too
_ASCII_IDENT = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_ASCII_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_DEFINING = frozenset(("def", "class"))


def _is_ident_start(char: str) -> bool:
    return char in _ASCII_START or (char > "\x7f" and char.isalpha())


class Rejected(Exception):
    """Internal: a keyword was rejected (carries the reason for `rejection`)."""

    def __init__(self, position: int, reason: tuple):
        super().__init__(position)
        self.position = position
        self.reason = reason


# -- the document: where the cursor's statement starts --------------------------------------
def statement_start(prefix: str) -> int:
    """Start of the last line of `prefix` that begins in code, outside every bracket (and
    not continued by a backslash): lexing from there with an empty bracket stack gives
    the brackets open at the end of `prefix` (`python_lexemes.code_starts`)."""
    return code_starts(prefix)[1]


class KeywordArguments(Constrainer):
    """Keyword names in resolved calls must be parameters of the installed signature.

    One instance serves one document (like `ApiMonitor`): the first `start(context)`
    learns the roots (the document's import aliases) and the bindings (the names typed at
    the end of ``context.prefix``, `apis.receivers.receivers_at`) from the document's
    analysis.  Given `roots` are every name the caller resolved (`CompletionRequest.
    bound_names`: the typed receivers too), so no bindings are learned beside them.
    Signature and member look-ups are cached per instance; an index that raises counts
    as unknown (every keyword allowed), with the reason logged at debug level.
    """

    def __init__(
        self,
        index: APIIndex | None,
        roots: Mapping[str, tuple[str, ...]] | None = None,
        bindings: Mapping[str, tuple[str, ...]] | None = None,
    ):
        self.index = index
        self.source = (getattr(index, "source", "") or type(index).__name__) if index is not None else "keyword arguments"
        self._roots: dict[str, tuple[str, ...]] | None = None if roots is None else {k: tuple(v) for k, v in roots.items()}
        if bindings is None and roots is not None:
            bindings = {}  # the caller's roots hold its typed names
        self._bindings: dict[str, tuple[str, ...]] | None = None if bindings is None else dict(bindings)
        self._explicit_roots = roots is not None
        self._explicit_bindings = bindings is not None
        self._document: str | None = None
        self._signatures: dict[tuple[str, ...], Signature | None] = {}
        self._callable: dict[tuple[str, ...], bool] = {}
        self.lookup_errors = 0

    # -- roots, bindings, look-ups ------------------------------------------------------
    @property
    def roots(self) -> dict[str, tuple[str, ...]]:
        return dict(self._roots or {})

    @property
    def bindings(self) -> dict[str, tuple[str, ...]]:
        return dict(self._bindings or {})

    def _learn(self, document: str, prefix: str, analysis=None) -> None:
        if self._document == document:
            return
        if analysis is None:
            analysis = analysis_of(document)
        if not self._explicit_roots:
            roots = analysis.roots
            if self._document is not None and roots != self._roots:
                raise ValueError("this KeywordArguments already serves a document with other imports; create a new one")
            self._roots = roots
        if not self._explicit_bindings:
            # the names typed where the generation starts (the end of the prefix)
            offset = len(prefix) if document.startswith(prefix) else len(document)
            self._bindings = receivers_at(analysis, offset, analysis.roots)
        self._document = document

    def signature(self, key: tuple[str, ...]) -> Signature | None:
        """The signature of call `key`, None when unknown (cached)."""
        if key in self._signatures:
            return self._signatures[key]
        signature = None
        if self.index is not None and self._is_callable_member(key):
            try:
                signature = self.index.signature(key)
            except Exception as error:  # noqa: BLE001 - a failing index means "unknown"
                self.lookup_errors += 1
                log.debug("signature of %s failed to load: %s: %s", dotted(key), type(error).__name__, error)
                signature = None
            if signature is None:
                log.debug("no signature for %s: its keywords are not constrained", dotted(key))
        self._signatures[key] = signature
        return signature

    def _is_callable_member(self, key: tuple[str, ...]) -> bool:
        """Whether the callee of `key` is a known member of a known path (a plain call
        key); a callee the index does not know is not looked up at all."""
        callee = key[:-1]
        if CALL in callee:  # a method of a call's result: the index resolves the type
            return True
        if len(callee) < 2:
            return True  # a top-level module is not callable, but let the index say so
        cached = self._callable.get(callee)
        if cached is None:
            try:
                members = self.index.members(callee[:-1])
            except Exception as error:  # noqa: BLE001
                log.debug("members of %s failed to load: %s", dotted(callee[:-1]), error)
                members = None
            member = members.get(callee[-1]) if members is not None else None
            cached = self._callable[callee] = member is not None and member.kind != "module"
            if member is None:
                log.debug("%s is not a known member: its keywords are not constrained", dotted(callee))
        return cached

    def keyword_problem(self, key: tuple[str, ...], given: tuple[str, ...], word: str, positional: int = 0) -> str | None:
        """None when ``word=`` may be written in call `key` after keywords `given` and
        `positional` positional arguments (-1: unknown, after ``*args``); else "given",
        "positional" (bound by a positional argument), "positional-only" or "unknown"."""
        if word in given:
            return "given"
        signature = self.signature(key)
        if signature is None:
            return None
        if word in bound_by_position(signature, positional):
            return "positional"
        return signature.keyword_problem(word)

    # -- Constrainer --------------------------------------------------------------------
    def start(self, context: Any = None):
        if context is None:
            if self._roots is None:
                self._roots = {}
            if self._bindings is None:
                self._bindings = {}
            return FRESH
        analysis = None
        if isinstance(context, str):
            document = prefix = context
        else:
            document = getattr(context, "document", "") or ""
            prefix = getattr(context, "prefix", "") or ""
            read = getattr(context, "document_analysis", None)  # a `ConstraintContext`
            analysis = read(document or prefix) if read is not None else None
        self._learn(document or prefix, prefix, analysis)
        return self.lex_prompt(prefix)

    def lex_prompt(self, prefix: str):
        """The state at the end of `prefix` (lenient: the user's keywords are recorded,
        never rejected)."""
        if self._roots is None:
            self._roots = {}
        if self._bindings is None:
            self._bindings = {}
        state, _ = self.lex(FRESH, prefix[statement_start(prefix) :], lenient=True)
        return state

    def check(self, state, text: str):
        return self.lex(state, text)[0]

    def is_complete(self, state) -> bool:
        if state[0] == _KWEQ and state[4] and state[4][-1][0] is not None:
            key, given, _, positional = state[4][-1]
            return self.keyword_problem(key, given, state[1], positional) is None
        return True

    def is_free(self, state) -> bool:
        """Nothing can be constrained from here: no alias, no binding, no resolved call open."""
        return not self._roots and not self._bindings and not any(frame[0] for frame in state[4])

    def keywords_at(self, state) -> tuple[str, list[str]] | None:
        """At the start of an argument of a resolved call whose signature is known:
        (the callee as written, with its package version, the keyword names it still
        takes, in the signature's order); else None."""
        frames = state[4]
        if state[0] not in (_FRESH, _COMMENT) or state[3] != _ARG_START or not frames or frames[-1][0] is None:
            return None
        key, given, _, positional = frames[-1]
        signature = self.signature(key)
        if signature is None:
            return None
        taken = set(given) | bound_by_position(signature, positional)
        names = [name for name, _ in signature.parameters if name in signature.keywords and name not in taken]
        if not names:
            return None
        version = self.package_version(key)
        return f"{self.written(key)}" + (f" ({version})" if version else ""), names

    # -- explanations ---------------------------------------------------------------------
    def rejection(self, state, text: str) -> str:
        try:
            self.lex(state, text, explain=True)
        except Rejected as rejected:
            kind, key, word, given, positional = rejected.reason
            callee = self.written(key)
            version = self.package_version(key)
            where = f" in {version}" if version else ""
            if kind == "given":
                return f"{callee}: keyword {word} is already given"
            if kind == "positional":
                return f"{callee}: {word} is already given as a positional argument ({positional} given)"
            signature = self.signature(key)
            parameters = ""
            if signature is not None:
                parameters = f" (parameters: {signature.parameter_list()})" if signature.parameters else " (it takes no parameters)"
            try:  # version targets: a keyword missing from some versions only
                absent = self.index.absence(key, word, keyword=True) if self.index is not None else None
            except Exception:  # noqa: BLE001 - the note only decorates the message
                absent = None
            if absent:
                return f"{callee}: keyword {word} {absent}"
            if kind == "positional-only":
                return f"{callee}: {word} is positional-only{where}{parameters}"
            return f"{callee} takes no keyword {word}{where}{parameters}"
        return super().rejection(state, text)

    def written(self, key: tuple[str, ...]) -> str:
        """The callee of call key `key` as the document would write it (through its
        aliases and bindings): ``tf.nn.dropout``, ``model.fit``."""
        callee = list(key[:-1])
        for name, bound in sorted((self._bindings or {}).items()):
            if CALL in callee and tuple(callee[: len(bound)]) == bound:
                return dotted((name, *callee[len(bound) :]))
        best = None
        for alias, path in (self._roots or {}).items():
            if tuple(callee[: len(path)]) == path and (best is None or len(path) > len(best[1])):
                best = (alias, path)
        if best is not None:
            return dotted((best[0], *callee[len(best[1]) :]))
        return dotted(callee)

    def package_version(self, key: tuple[str, ...]) -> str:
        """"tensorflow 2.21.0" for a call key under tensorflow ("" when unknown)."""
        if self.index is None:
            return ""
        try:
            version = self.index.packages().get(key[0], "")
        except Exception:  # noqa: BLE001
            version = ""
        return f"{key[0]} {version}" if version and version != "unknown" else ""

    # -- the lexer ------------------------------------------------------------------------
    def lex(self, state, text: str, lenient: bool = False, explain: bool = False):
        """(state after `text`, index of the first rejected character or -1).

        Strict: a rejected keyword returns (None, index) (`explain`: raises `Rejected`
        with the reason).  Lenient (the document before the cursor): keywords are
        recorded, never rejected."""
        mode, a, b, arg, frames = state
        roots = self._roots or {}
        bindings = self._bindings or {}
        position, length = 0, len(text)
        while position < length:
            char = text[position]
            if mode == _FRESH:
                if char in _ASCII_IDENT or (char > "\x7f" and (char.isalnum() or char == "_")):
                    if _is_ident_start(char):
                        end = _WORD_RUN(text, position).end()
                        mode, a, b = _WORD, text[position:end], None
                        position = end
                        continue
                    mode = _NUMBER
                    if arg == _ARG_START:
                        arg = _POSITIONAL
                    continue
                position += 1
                if char in _SPACE or char == "\n" or char == "\r" or char == "\\":
                    continue
                if char == "(" or char == "[" or char == "{":
                    frames = (*frames, (None, (), _resume(arg), 0))
                    arg = None
                elif char == ")" or char == "]" or char == "}":
                    if frames:
                        arg = frames[-1][2]
                        frames = frames[:-1]
                elif char == ",":
                    if arg == _POSITIONAL or arg == _UNPACKING:
                        key, given, resume, positional = frames[-1]
                        count = positional + 1 if arg == _POSITIONAL and positional >= 0 else -1
                        frames = (*frames[:-1], (key, given, resume, count))
                        arg = _ARG_START
                    elif arg == _KEYWORD:
                        arg = _ARG_START
                elif char == ":":
                    if arg == _LAMBDA_POSITIONAL or arg == _LAMBDA_KEYWORD:
                        arg = _AFTER_COLON[arg]
                elif char == ".":
                    mode, a = _DOT, _UNRESOLVED
                elif char == "#":
                    mode = _COMMENT
                elif char == "'" or char == '"':
                    mode, a = _OPEN1, char
                    if arg == _ARG_START:
                        arg = _POSITIONAL
                elif arg == _ARG_START:
                    arg = _UNPACKING if char == "*" else _POSITIONAL
                continue
            if mode == _WORD:
                if char in _ASCII_IDENT or (char > "\x7f" and (char.isalnum() or char == "_")):
                    end = _WORD_RUN(text, position).end()
                    a = a + text[position:end]
                    position = end
                    continue
                # the word ended: decide what it is, then re-process `char`
                word, context = a, b
                if context is None:
                    if word in _DEFINING:
                        mode, a, b = _DOT, _DEFINED, None  # the next name defines, not calls
                        if char in _SPACE:
                            position += 1
                            continue
                        mode = _FRESH
                        continue
                    if word == "lambda" and arg is not None:
                        arg = _LAMBDA_OF.get(arg, arg)
                        mode, a = _FRESH, None
                        continue
                    path = roots.get(word)
                    if path is None:
                        path = bindings.get(word)
                    if arg == _ARG_START:
                        mode, a, b = _CAND, word, path
                        continue
                    if path is not None:
                        mode, a, b = _CHAIN, path, None
                    else:
                        mode, a, b = _FRESH, None, None
                    continue
                if context is _UNRESOLVED or context is _DEFINED:
                    mode, a, b = _FRESH, None, None
                    continue
                mode, a, b = _CHAIN, (*context, word), None
                continue
            if mode == _CHAIN:
                if char == "(":
                    frames = (*frames, (call_key(a), (), _resume(arg), 0))
                    mode, a, b, arg = _FRESH, None, None, _ARG_START
                    position += 1
                    continue
                if char == ".":
                    mode, b = _DOT, None
                    position += 1
                    continue
                if char in _SPACE:
                    position += 1
                    continue
                mode, a, b = _FRESH, None, None
                continue
            if mode == _DOT:
                if _is_ident_start(char):
                    end = _WORD_RUN(text, position).end()
                    mode, a, b = _WORD, text[position:end], a
                    position = end
                    continue
                if a is _DEFINED and char in _SPACE:
                    position += 1
                    continue
                mode, a, b = _FRESH, None, None
                continue
            if mode == _CAND or mode == _CAND_SPACED:
                if char == "=":
                    if mode == _CAND and frames and frames[-1][0] is not None and not lenient:
                        # "name=" written as a keyword (no space: "name==x" is not how a
                        # comparison is written) is judged at its "="
                        key, given, resume, positional = frames[-1]
                        problem = self.keyword_problem(key, given, a, positional)
                        if problem is not None:
                            if explain:
                                raise Rejected(position, (problem, key, a, given, positional))
                            return None, position
                    mode, b = _KWEQ, None
                    position += 1
                    continue
                if char in _BRACKET_SPACE:
                    mode = _CAND_SPACED
                    position += 1
                    continue
                arg = _POSITIONAL
                if b is not None and (char == "(" or char == "."):
                    mode, a, b = _CHAIN, b, None
                    continue
                if char == ".":
                    mode, a, b = _DOT, _UNRESOLVED, None
                    position += 1
                    continue
                mode, a, b = _FRESH, None, None
                continue
            if mode == _KWEQ:
                if char == "=":  # "name ==": a comparison
                    mode, a, arg = _FRESH, None, _POSITIONAL
                    position += 1
                    continue
                word = a
                if frames and frames[-1][0] is not None:
                    key, given, resume, positional = frames[-1]
                    if not lenient:
                        problem = self.keyword_problem(key, given, word, positional)
                        if problem is not None:
                            if explain:
                                raise Rejected(position, (problem, key, word, given, positional))
                            return None, position
                    if word not in given:
                        frames = (*frames[:-1], (key, (*given, word), resume, positional))
                mode, a, arg = _FRESH, None, _KEYWORD
                continue
            if mode == _STRING:
                quote_info, closing = a, b
                quote = quote_info[0]
                triple = len(quote_info) > 1
                if closing == -1:
                    b = 0
                elif char == "\\":
                    b = -1
                elif char == quote:
                    if not triple or closing == 2:
                        mode, a, b = _FRESH, None, None
                    else:
                        b = closing + 1
                elif char == "\n" and not triple:
                    mode, a, b = _FRESH, None, None
                elif closing:
                    b = 0
                else:
                    stop = position + 1
                    while stop < length:
                        following = text[stop]
                        if following == quote or following == "\\" or (following == "\n" and not triple):
                            break
                        stop += 1
                    position = stop
                    continue
                position += 1
                continue
            if mode == _NUMBER:
                if char == "." or char in _ASCII_IDENT or (char > "\x7f" and (char.isalnum() or char == "_")):
                    position = _NUMBER_RUN(text, position).end()
                    continue
                mode = _FRESH
                continue
            if mode == _COMMENT:
                newline = text.find("\n", position)
                if newline < 0:
                    return (mode, a, b, arg, frames), -1
                mode = _FRESH
                position = newline + 1
                continue
            if mode == _OPEN1:
                quote = a
                if char == quote:
                    mode = _OPEN2
                elif char == "\\":
                    mode, a, b = _STRING, quote, -1
                elif char == "\n":
                    mode, a = _FRESH, None
                else:
                    mode, a, b = _STRING, quote, 0
                position += 1
                continue
            if mode == _OPEN2:
                if char == a:
                    mode, a, b = _STRING, a + "3", 0
                    position += 1
                    continue
                mode, a = _FRESH, None  # an empty string ended; re-process `char`
                continue
            raise ValueError(f"not a KeywordArguments state: {state!r}")
        return (mode, a, b, arg, frames), -1

    # -- fast full-vocabulary masks ---------------------------------------------------------
    def token_mask(self, state, index: TokenIndex) -> np.ndarray:
        """bool[vocab.size] for `state`, exact (equal to checking every token); see the
        module docstring."""
        tables = KeywordTables.of(index.tables)
        if self.is_free(state):
            return tables.ordinary.copy()
        advance = index.advance
        if state[0] == _KWEQ and not self.is_complete(state):
            mask = np.zeros(tables.size, dtype=bool)
            ids = tables.equals_start_ids  # only "==" can follow a bad "name ="
        else:
            mask = tables.ordinary.copy()
            # without a resolved call open, a token can only be rejected if it opens one
            quiet = not any(frame[0] for frame in state[4])
            ids = tables.risky_paren_ids if quiet else tables.risky_ids
            if state[0] in (_WORD, _CAND) and not quiet:  # "=" right after a name judges it
                ids = np.union1d(ids, tables.equals_start_ids)
        if len(ids):
            mask[ids] = np.fromiter((advance(state, token) is not None for token in ids.tolist()), dtype=bool, count=len(ids))
        return mask


def _resume(arg):
    """Where the enclosing frame's argument list is once a bracket opened inside it
    closes (a bracket at an argument start begins a positional argument)."""
    return _POSITIONAL if arg == _ARG_START else arg


def bound_by_position(signature: Signature, positional: int) -> set[str]:
    """The names of the parameters that `positional` positional arguments bind
    (positional-only names excluded: those can still go to ``**kwargs``)."""
    if positional <= 0:
        return set()
    bound = set()
    for name, kind in signature.parameters[:positional]:
        if kind == "var_positional" or kind not in ("positional_only", "positional_or_keyword"):
            break
        if kind == "positional_or_keyword":
            bound.add(name)
    return bound


_RISKY = re.compile(r"=[^=]|\w=")  # "=" then more text, or "name=" (judged at its "=")


class KeywordTables:
    """Per-vocabulary token groups for `KeywordArguments.token_mask`."""

    _cache: ClassVar[weakref.WeakKeyDictionary] = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, token_tables) -> KeywordTables:
        found = cls._cache.get(token_tables)
        if found is None:
            found = cls._cache[token_tables] = cls(token_tables)
        return found

    def __init__(self, token_tables):
        self.size = token_tables.size
        self.ordinary = token_tables.ordinary
        texts = token_tables.texts
        ordinary = token_tables.ordinary
        risky, risky_paren = [], []
        for token_id, text in enumerate(texts):
            if not ordinary[token_id] or "=" not in text:
                continue
            if _RISKY.search(text):
                risky.append(token_id)
                if "(" in text:
                    risky_paren.append(token_id)
        #: tokens with "=" followed by another character, or right after a name (only these can be rejected)
        self.risky_ids = np.asarray(risky, dtype=np.int64)
        #: those that also open a bracket (the only risk where no resolved call is open)
        self.risky_paren_ids = np.asarray(risky_paren, dtype=np.int64)
        #: tokens starting with "=" (the only candidates right after a bad "name =")
        self.equals_start_ids = token_tables.ids_starting_with("=")


class KeywordChoice(Constrainer):
    """The text starts with one of ``name=`` for `names` (completion-list keyword items;
    a name may carry leading spaces); anything may follow the ``=``."""

    def __init__(self, names):
        self.choices = frozenset(f"{name}=" for name in names)
        if not self.choices:
            raise ValueError("KeywordChoice needs at least one name")
        self.prefixes = frozenset(choice[:k] for choice in self.choices for k in range(len(choice) + 1))
        self.source = "keyword names"

    def start(self, context: Any = None):
        return ""

    def check(self, state, text: str):
        if state in self.choices:
            return state
        for char in text:
            state += char
            if state in self.choices:
                return state
            if state not in self.prefixes:
                return None
        return state

    def is_complete(self, state) -> bool:
        return state in self.choices

    def is_free(self, state) -> bool:
        return state in self.choices
