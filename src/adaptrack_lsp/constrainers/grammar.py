"""`GrammarConstraint`: any Lark grammar, regular expression or JSON schema as a
`TokenConstraint`, through llguidance (the token masks CARS uses).

- `GrammarSpec` says what the grammar is (``lark``, ``regex`` or ``json_schema``, its
  text and where it came from); `GrammarSpec.from_file` picks the kind from the suffix
  (``.lark``, ``.regex``/``.re``, ``.json``).
- `compile_grammar(spec, vocab)` checks and compiles it once per (vocabulary, grammar):
  a grammar that does not parse raises `GrammarError` naming the line and column; one
  whose language is empty compiles to a constraint without a start state (the tree's
  Q[root] = 0: "no valid completion"); one with rules that can never finish (every
  alternative recurses) is refused, naming them; a grammar larger than
  `MAX_GRAMMAR_CHARS` or slower to compile than `GrammarLimits.compile_timeout_s` is
  refused (compilation runs on a helper thread that releases the GIL, so nothing waits
  on it past the limit).
- `CompiledGrammar.constraint()` is a fresh `GrammarConstraint` per request.

The check is text-level and prefix-closed, like every constraint here: a token is
valid after a path iff the text so far plus the token's bytes is a prefix of some
string the grammar accepts (as llguidance's lexer and Earley parser decide it); EOS is
valid iff the text is itself accepted.  llguidance's "forced token" shortcut (allow
only the canonical token for bytes the grammar forces) would make validity depend on
how the text was tokenized, so it is switched off (``no_forcing``).  Special ids other
than EOS and padding ids are never valid; ordinary tokens with no bytes always are.

States are nodes of a token-path trie (`GrammarState`): immutable (a state is its
path), hashable by identity, so the prefix tree can hold many of them and come back to
any.  llguidance matchers are mutable, so the constraint keeps an LRU of matchers for
recently used states (`matcher_cache` of them); a state without one copies the nearest
ancestor's (`deep_copy`, about a microsecond) and consumes the tokens in between.
Masks, EOS verdicts and children are cached on the state.

Each mask computation is bounded by llguidance's fuel limits (`GrammarLimits`): a
pathological grammar raises `GrammarLimitError` (naming the limit) instead of running
on.  llguidance is imported only here.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptrack_lsp.constrainers.base import State, TokenConstraint
from adaptrack_lsp.constrainers.token_index import END

if TYPE_CHECKING:  # pragma: no cover
    from adaptrack_lsp.vocab import Vocabulary

log = logging.getLogger(__name__)

GRAMMAR_KINDS = ("lark", "regex", "json_schema")
#: file suffix -> grammar kind (`GrammarSpec.from_file`)
SUFFIX_KINDS = {".lark": "lark", ".regex": "regex", ".re": "regex", ".json": "json_schema"}
#: grammars longer than this are refused before compiling (llguidance's compile time
#: grows faster than linearly past ~40k alternatives)
MAX_GRAMMAR_CHARS = 256_000
#: matchers kept per request (about 6 KB each)
DEFAULT_MATCHER_CACHE = 2048
#: compiled grammars kept per vocabulary
COMPILED_CACHE = 16
#: appended to every grammar: validity must not depend on the tokenization (module doc)
_NO_FORCING = '\n%llguidance {"no_forcing": true}\n'
#: llguidance's location prefix: "at 3(7): ..." or "3(7): ..."
_LOCATION = re.compile(r"^(?:at )?(\d+)\((\d+)\):\s*")
#: llguidance's message when no token can follow (a dead end, not a failure)
_DEAD_END = "NoExtensionBias"


class GrammarError(ValueError):
    """A grammar that cannot be used; `line` and `column` (1-based) when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column


class GrammarLimitError(RuntimeError):
    """A mask computation hit one of llguidance's limits (the grammar is too complex
    for the text generated so far); the message names the limit."""


@dataclass(frozen=True)
class GrammarSpec:
    """A grammar: its kind (`GRAMMAR_KINDS`), its text, and where it came from."""

    kind: str
    text: str
    source: str = ""

    def __post_init__(self) -> None:
        if self.kind not in GRAMMAR_KINDS:
            raise GrammarError(f"unknown grammar kind {self.kind!r}; choose one of: {', '.join(GRAMMAR_KINDS)}")
        if not isinstance(self.text, str):
            raise GrammarError("the grammar text must be a string")

    @classmethod
    def from_file(cls, path: str | Path, kind: str | None = None) -> GrammarSpec:
        """Read a grammar file; the kind comes from the suffix unless given."""
        path = Path(path)
        if kind is None:
            kind = SUFFIX_KINDS.get(path.suffix.lower())
            if kind is None:
                known = ", ".join(f"{suffix} ({name})" for suffix, name in SUFFIX_KINDS.items())
                raise GrammarError(f"{path}: cannot tell the grammar kind from the suffix {path.suffix!r}; use one of {known}")
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise GrammarError(f"{path}: cannot read the grammar ({error.strerror or error})") from None
        except UnicodeDecodeError as error:
            raise GrammarError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
        if kind == "regex":
            text = text.rstrip("\r\n")
        return cls(kind, text, str(path))

    @property
    def label(self) -> str:
        return self.source or f"{self.kind} grammar"


@dataclass(frozen=True)
class GrammarLimits:
    """Bounds on llguidance's work (its `LLParserLimits`, defaults as llguidance's) and
    on compilation time.  Each mask costs at most `step_lexer_fuel` (~14k per ms) and
    `step_max_items` Earley items (~20k per ms)."""

    step_lexer_fuel: int = 200_000
    step_max_items: int = 50_000
    initial_lexer_fuel: int = 1_000_000
    max_items_in_row: int = 2_000
    max_lexer_states: int = 250_000
    max_grammar_size: int = 500_000
    compile_timeout_s: float = 10.0

    def llguidance(self):
        import llguidance

        return llguidance.LLParserLimits(
            max_items_in_row=self.max_items_in_row,
            initial_lexer_fuel=self.initial_lexer_fuel,
            step_lexer_fuel=self.step_lexer_fuel,
            step_max_items=self.step_max_items,
            max_lexer_states=self.max_lexer_states,
            max_grammar_size=self.max_grammar_size,
            verbose_errors=False,
        )


# ---------------------------------------------------------------------------------------
# the vocabulary as llguidance sees it
# ---------------------------------------------------------------------------------------
class _TokenizerView:
    """What `llguidance.TokenizerWrapper` reads: the bytes of every logits id (special,
    empty and padding ids as special tokens), the EOS id, and a greedy longest-match
    tokenizer (llguidance only tokenizes for forced tokens, which are switched off)."""

    def __init__(self, vocab: Vocabulary):
        size = vocab.size
        self.tokens: list[bytes] = list(vocab.token_bytes) + [b""] * (size - vocab.num_defined)
        self.eos_token_id = min(vocab.eos_ids)
        self.bos_token_id = None
        self.special_token_ids = sorted(
            set(vocab.special_ids) | set(range(vocab.num_defined, size)) | {i for i, data in enumerate(self.tokens) if not data}
        )
        special = set(self.special_token_ids)
        self._by_bytes = {data: i for i, data in enumerate(self.tokens) if data and i not in special}
        self._longest = max((len(data) for data in self._by_bytes), default=1)

    def __call__(self, text) -> list[int]:
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        ids, position = [], 0
        while position < len(data):
            for length in range(min(self._longest, len(data) - position), 0, -1):
                token = self._by_bytes.get(data[position : position + length])
                if token is not None:
                    ids.append(token)
                    position += length
                    break
            else:
                position += 1  # a byte no token spells: skipped (only used for forcing)
        return ids


_tokenizers: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_tokenizer_lock = threading.Lock()


def llguidance_tokenizer(vocab: Vocabulary):
    """The `llguidance.LLTokenizer` of `vocab` (built once per vocabulary)."""
    import llguidance

    with _tokenizer_lock:
        tokenizer = _tokenizers.get(vocab)
        if tokenizer is None:
            view = _TokenizerView(vocab)
            tokenizer = llguidance.LLTokenizer(
                llguidance.TokenizerWrapper(view), n_vocab=vocab.size, eos_token=sorted(vocab.eos_ids)
            )
            _tokenizers[vocab] = tokenizer
        return tokenizer


# ---------------------------------------------------------------------------------------
# compiling
# ---------------------------------------------------------------------------------------
def llguidance_grammar(spec: GrammarSpec) -> str:
    """The Lark text llguidance compiles for `spec` (forced tokens switched off)."""
    import llguidance

    if spec.kind == "lark":
        return spec.text + _NO_FORCING
    if spec.kind == "regex":
        return "start: /" + llguidance.regex_to_lark(spec.text) + "/" + _NO_FORCING
    return "start: %json " + spec.text + _NO_FORCING


def _grammar_error(spec: GrammarSpec, message: str) -> GrammarError:
    """llguidance's message as a `GrammarError` naming the line and column."""
    first, _, rest = message.strip().partition("\n")
    found = _LOCATION.match(first)
    if spec.kind == "json_schema":
        located = re.search(r"at line (\d+) column (\d+)", first)
        line, column = (int(located.group(1)), int(located.group(2))) if located else (None, None)
        text = _LOCATION.sub("", first)
        where = f"line {line}, column {column}: " if line is not None and "line" not in text else ""
        return GrammarError(f"{spec.label}: {where}not a usable JSON schema: {text}", line, column)
    detail = " ".join(part.strip() for part in rest.splitlines() if part.strip().startswith("error:"))
    if spec.kind == "regex":
        return GrammarError(f"{spec.label}: not a valid regular expression: {_LOCATION.sub('', first)} {detail}".rstrip())
    if found is None:
        return GrammarError(f"{spec.label}: {first} {detail}".rstrip())
    line, column = int(found.group(1)), int(found.group(2))
    return GrammarError(f"{spec.label}:{line}:{column}: {first[found.end():]} {detail}".rstrip(), line, column)


def _in_thread(function, timeout_s: float, name: str) -> tuple[bool, Any]:
    """(finished, result) of `function()` run on a daemon thread waited for at most
    `timeout_s`; an exception it raised is re-raised here."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = function()
        except BaseException as error:  # reported to the waiting thread
            box["error"] = error

    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return False, None
    if "error" in box:
        raise box["error"]
    return True, box["result"]


def _compile_with_timeout(tokenizer, text: str, limits: GrammarLimits, label: str):
    """`llguidance.LLMatcher(tokenizer, text)` on a helper thread, waited for at most
    `limits.compile_timeout_s` (llguidance releases the GIL while compiling)."""
    import llguidance

    try:
        finished, matcher = _in_thread(
            lambda: llguidance.LLMatcher(tokenizer, text, log_level=0, limits=limits.llguidance()),
            limits.compile_timeout_s,
            "adaptrack-grammar-compile",
        )
    except Exception as error:
        raise GrammarError(f"{label}: {error}") from None
    if not finished:
        raise GrammarError(
            f"{label}: the grammar did not compile within {limits.compile_timeout_s:g} s; "
            "make it smaller (fewer alternatives, simpler regular expressions)"
        )
    return matcher


@dataclass
class GrammarAnalysis:
    """What the static check of a Lark grammar found."""

    #: the start rule derives at least one finite text
    nonempty: bool = True
    #: rules reachable from start that derive no finite text
    unproductive: list[str] = field(default_factory=list)
    #: False when the grammar uses llguidance syntax the check does not read
    analysed: bool = True


def _display_rule(name: str) -> str:
    inner = re.match(r"^_*(\w+?)_(?:star|plus|opt)_\d+$", name)
    if inner and name.startswith("__"):
        return f"a repeated group in rule {inner.group(1)!r}"
    return repr(name.lstrip("_?") or name)


def analyse_lark(text: str) -> GrammarAnalysis:
    """Which rules derive no finite text (Lark's own grammar loader, then a fixed point
    over the rules); grammars using llguidance extensions are not analysed."""
    try:
        from lark.load_grammar import load_grammar

        grammar, _ = load_grammar(text, "<grammar>", [], False)
        _, rules, _ = grammar.compile(["start"], "*")
    except Exception as error:  # llguidance syntax lark does not know, e.g. %json or lazy lexemes
        log.debug("grammar not analysed by lark: %s", str(error).splitlines()[0] if str(error) else error)
        return GrammarAnalysis(analysed=False)
    # worklist fixed point: a rule is productive once every nonterminal it uses is
    missing = [sum(1 for symbol in rule.expansion if not symbol.is_term) for rule in rules]
    used_in: dict[str, dict[int, None]] = {}  # nonterminal -> the rules using it (each once)
    for position, rule in enumerate(rules):
        for symbol in rule.expansion:
            if not symbol.is_term:
                used_in.setdefault(symbol.name, {})[position] = None
    productive: set[str] = set()
    ready = [position for position, count in enumerate(missing) if count == 0]
    while ready:
        name = rules[ready.pop()].origin.name
        if name in productive:
            continue
        productive.add(name)
        for position in used_in.get(name, ()):
            missing[position] -= sum(1 for symbol in rules[position].expansion if not symbol.is_term and symbol.name == name)
            if missing[position] == 0:
                ready.append(position)
    names = dict.fromkeys(str(rule.origin.name) for rule in rules)
    if "start" not in productive:
        return GrammarAnalysis(nonempty=False, unproductive=[n for n in names if n not in productive])
    return GrammarAnalysis(nonempty=True, unproductive=[n for n in names if n not in productive])


class CompiledGrammar:
    """A checked, compiled grammar over one vocabulary; `constraint()` per request."""

    def __init__(self, spec: GrammarSpec, vocab: Vocabulary, limits: GrammarLimits, template, empty: bool, warnings: list[str]):
        self.spec = spec
        self.vocab = vocab
        self.limits = limits
        self.template = template
        #: the language is empty: every request ends with "no valid completion"
        self.empty = empty
        self.warnings = warnings
        size = vocab.size
        excluded = np.zeros(size, dtype=bool)
        excluded[vocab.num_defined :] = True
        excluded[list(vocab.special_ids)] = True
        lengths = np.zeros(size, dtype=np.int64)
        lengths[: vocab.num_defined] = [len(data) for data in vocab.token_bytes]
        #: ordinary ids without bytes: always valid, the state does not change
        self.empty_ids = np.flatnonzero((lengths == 0) & ~excluded)
        excluded[self.empty_ids] = True  # handled apart from llguidance
        self.eos_ids = np.asarray(sorted(vocab.eos_ids), dtype=np.int64)
        excluded[self.eos_ids] = True  # decided by is_accepting
        #: ids llguidance never decides
        self.excluded = excluded

    def constraint(self, matcher_cache: int = DEFAULT_MATCHER_CACHE) -> GrammarConstraint:
        return GrammarConstraint(self, matcher_cache=matcher_cache)


_compiled: weakref.WeakKeyDictionary[Any, OrderedDict] = weakref.WeakKeyDictionary()
_compiled_lock = threading.Lock()


def compile_grammar(spec: GrammarSpec, vocab: Vocabulary, limits: GrammarLimits | None = None) -> CompiledGrammar:
    """Check and compile `spec` for `vocab` (cached per vocabulary, grammar and limits);
    raises `GrammarError` for a grammar that cannot be used."""
    limits = limits or GrammarLimits()
    key = (spec, limits)
    with _compiled_lock:
        cache = _compiled.setdefault(vocab, OrderedDict())
        found = cache.get(key)
        if found is not None:
            cache.move_to_end(key)
            return found
    compiled = _compile(spec, vocab, limits)
    with _compiled_lock:
        cache = _compiled.setdefault(vocab, OrderedDict())
        cache[key] = compiled
        while len(cache) > COMPILED_CACHE:
            cache.popitem(last=False)
    return compiled


def _compile(spec: GrammarSpec, vocab: Vocabulary, limits: GrammarLimits) -> CompiledGrammar:
    from adaptrack_lsp.extras import MissingExtra, require

    try:
        require("grammar", f"{spec.label}: a grammar constraint")
    except MissingExtra as error:
        raise GrammarError(str(error)) from None
    if not spec.text.strip():
        raise GrammarError(f"{spec.label}: the grammar is empty")
    if len(spec.text) > MAX_GRAMMAR_CHARS:
        raise GrammarError(f"{spec.label}: the grammar has {len(spec.text):,} characters; the limit is {MAX_GRAMMAR_CHARS:,}")
    if spec.kind == "json_schema":
        import json

        try:
            json.loads(spec.text)
        except json.JSONDecodeError as error:
            raise GrammarError(
                f"{spec.label}:{error.lineno}:{error.colno}: not valid JSON ({error.msg})", error.lineno, error.colno
            ) from None
    deadline = time.monotonic() + limits.compile_timeout_s
    tokenizer = llguidance_tokenizer(vocab)
    template = _compile_with_timeout(tokenizer, llguidance_grammar(spec), limits, spec.label)
    if template.is_error():
        raise _grammar_error(spec, template.get_error())
    warnings = list(template.get_grammar_warnings())
    empty = False
    if spec.kind == "lark":
        # lark reads large grammars slowly (seconds at 200k characters): within what is
        # left of the compile budget, else the check is skipped (dead branches then cost
        # samples time, never exactness)
        finished, analysis = _in_thread(lambda: analyse_lark(spec.text), max(1.0, deadline - time.monotonic()), "adaptrack-grammar-check")
        if not finished:
            log.info("%s: the emptiness check did not finish within the compile budget; skipped", spec.label)
            analysis = GrammarAnalysis(analysed=False)
        if not analysis.nonempty:
            empty = True
        elif analysis.unproductive:
            rules = ", ".join(_display_rule(name) for name in analysis.unproductive)
            raise GrammarError(
                f"{spec.label}: rule(s) {rules} can never finish (every alternative needs the rule again), so "
                "the grammar would accept prefixes that no text completes; give each an alternative that ends, "
                "or remove it"
            )
    for warning in warnings:
        log.info("%s: %s", spec.label, warning)
    return CompiledGrammar(spec, vocab, limits, template, empty, warnings)


# ---------------------------------------------------------------------------------------
# the constraint
# ---------------------------------------------------------------------------------------
_UNKNOWN = object()


class GrammarState:
    """A token path (its parent and last token) with what is known after it."""

    __slots__ = ("parent", "token", "depth", "children", "mask", "accepting", "__weakref__")

    def __init__(self, parent: GrammarState | None, token: int | None):
        self.parent = parent
        self.token = token
        self.depth = 0 if parent is None else parent.depth + 1
        #: token id -> child state, or None when the token is invalid here
        self.children: dict[int, GrammarState | None] = {}
        self.mask: np.ndarray | None = None
        self.accepting: bool | None = None

    def path(self) -> list[int]:
        tokens, node = [], self
        while node.parent is not None:
            tokens.append(node.token)
            node = node.parent
        return tokens[::-1]

    def __repr__(self) -> str:
        return f"GrammarState(depth={self.depth})"


class GrammarConstraint(TokenConstraint):
    """A compiled grammar as the token-level constraint of one request (module doc)."""

    def __init__(self, compiled: CompiledGrammar, matcher_cache: int = DEFAULT_MATCHER_CACHE):
        self.compiled = compiled
        self.vocab = compiled.vocab
        self.source = f"grammar {compiled.spec.label}"
        self.matcher_cache = max(1, int(matcher_cache))
        self._root = GrammarState(None, None)
        self._root_matcher = compiled.template.deep_copy()
        self._matchers: OrderedDict[GrammarState, Any] = OrderedDict()
        self._eos = compiled.vocab.eos_ids
        self._excluded = compiled.excluded
        self._empty = set(compiled.empty_ids.tolist())
        self._lock = threading.RLock()
        #: matchers built by copying an ancestor's (a measure of cache misses)
        self.matchers_built = 0

    # -- matchers ------------------------------------------------------------------------
    def _matcher(self, state: GrammarState):
        if state is self._root:
            return self._root_matcher
        found = self._matchers.get(state)
        if found is not None:
            self._matchers.move_to_end(state)
            return found
        tokens, node = [], state
        while node is not self._root and node not in self._matchers:
            tokens.append(node.token)
            node = node.parent
        base = self._root_matcher if node is self._root else self._matchers[node]
        matcher = base.deep_copy()
        if not matcher.consume_tokens(tokens[::-1]):
            raise GrammarLimitError(f"{self.compiled.spec.label}: {_first_line(matcher.get_error())}")
        self.matchers_built += 1
        self._matchers[state] = matcher
        while len(self._matchers) > self.matcher_cache:
            self._matchers.popitem(last=False)
        return matcher

    def _forget(self, state: GrammarState) -> None:
        """Drop a matcher llguidance stopped (it can never be a base again)."""
        if state is self._root:
            self._root_matcher = self.compiled.template.deep_copy()
        else:
            self._matchers.pop(state, None)

    def _accepting(self, state: GrammarState) -> bool:
        if state.accepting is None:
            with self._lock:
                state.accepting = bool(self._matcher(state).is_accepting())
        return state.accepting

    def _limit_error(self, matcher) -> GrammarLimitError:
        return GrammarLimitError(
            f"{self.compiled.spec.label}: llguidance stopped: {_first_line(matcher.get_error())} "
            "(the grammar is too complex here; see GrammarLimits)"
        )

    # -- TokenConstraint ------------------------------------------------------------------
    def initial_state(self) -> State:
        return None if self.compiled.empty else self._root

    def advance(self, state: State, token_id: int) -> State | None:
        if state is END or state is None:
            return None
        token_id = int(token_id)
        if token_id in self._eos:
            return END if self._accepting(state) else None
        if not 0 <= token_id < self._excluded.shape[0]:
            return None
        if token_id in self._empty:
            return state
        if self._excluded[token_id]:
            return None
        child = state.children.get(token_id, _UNKNOWN)
        if child is not _UNKNOWN:
            return child
        if state.mask is not None:
            valid = bool(state.mask[token_id])
        else:
            with self._lock:
                matcher = self._matcher(state)
                valid = matcher.validate_tokens([token_id]) == 1
                if matcher.is_error():
                    raise self._limit_error(matcher)
        child = GrammarState(state, token_id) if valid else None
        state.children[token_id] = child
        return child

    def allowed(self, state: State, token_ids: Sequence[int]) -> np.ndarray:
        if state is not END and state is not None and state.mask is not None:
            return state.mask[np.asarray(token_ids, dtype=np.int64)]
        advance = self.advance
        return np.fromiter((advance(state, int(t)) is not None for t in token_ids), dtype=bool, count=len(token_ids))

    def mask(self, state: State) -> np.ndarray:
        if state is END or state is None:
            return np.zeros(self.vocab.size, dtype=bool)
        if state.mask is None:
            state.mask = self._compute_mask(state)
        return state.mask

    def _compute_mask(self, state: GrammarState) -> np.ndarray:
        accepting = self._accepting(state)  # first: an empty mask stops the matcher
        with self._lock:
            matcher = self._matcher(state)
            bits = matcher.compute_bitmask()
            if matcher.is_error():
                if not matcher.get_error().startswith(_DEAD_END):
                    error = self._limit_error(matcher)
                    self._forget(state)
                    raise error
                self._forget(state)  # no token can follow: a dead end (EOS decided below)
                bits = b""
        size = self.vocab.size
        mask = np.zeros(size, dtype=bool)
        if bits:
            unpacked = np.unpackbits(np.frombuffer(bits, dtype=np.uint8), bitorder="little")[:size]
            mask[: unpacked.shape[0]] = unpacked.astype(bool)
        mask[self._excluded] = False
        mask[self.compiled.empty_ids] = True
        mask[self.compiled.eos_ids] = accepting
        mask.setflags(write=False)
        return mask

    # -- helpers for tests and tools --------------------------------------------------------
    def accepts(self, token_ids: Sequence[int]) -> bool:
        """Whether the token sequence is a whole valid text (EOS may end it here)."""
        state = self.initial_state()
        for token_id in token_ids:
            if token_id in self._eos:
                return self.advance(state, token_id) is END
            state = self.advance(state, token_id)
            if state is None:
                return False
        return state is not None and self._accepting(state)


def _first_line(message: str) -> str:
    return message.strip().split("\n", 1)[0]


def grammar_constraint(vocab: Vocabulary, spec: GrammarSpec, limits: GrammarLimits | None = None) -> GrammarConstraint:
    """A fresh per-request constraint for `spec` over `vocab` (compiled once, cached)."""
    return compile_grammar(spec, vocab, limits).constraint()
