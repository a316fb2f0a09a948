"""The Python syntax constraint: the document's text before the cursor plus the
completion must stay a prefix of some valid Python 3.11 program (SynCode's idea).

Owns the grammar's parse table, an incremental Python lexer with Python's indentation
rules, a GLR-style LALR recognizer, and where in the document a request starts parsing.

- **Grammar and table.**  `python_syntax.lark` (package data) is a Python 3.11 grammar
  in lark's syntax.  lark computes its LALR(1) automaton (`lark.parsers.lalr_analysis`);
  the table keeps every action of a conflict instead of resolving it, and is cached as
  JSON under the cache root (`syntax-table-<hash>`), so later processes load it in
  milliseconds without importing lark.
- **Recognizer.**  A state holds a set of LALR stacks (usually one).  Stacks are
  interned linked nodes (`_Stack`), so equal stacks are one object, states hash in
  O(1), and the result of feeding a terminal to a stack is memoised on the stack.  An
  ambiguous construct (`match (x)` as a call or a match statement) is followed on every
  reading until one fails; at most `MAX_PARSES` readings are kept.
- **Lexer.**  `check(state, text)` lexes `text` on from the state: NAME, NUMBER and
  STRING (prefixes, triple quotes, escapes, f-strings as whole strings), operators by
  longest match, comments, backslash continuation, brackets (newlines inside brackets
  are not NEWLINE), and INDENT / DEDENT from the indentation of each logical line
  (tabs to multiples of 8, checked for consistency as CPython does).  The state holds
  the stacks after the complete terminals plus the pending lexeme (a name, number,
  operator or string not finished yet); pending text is accepted iff it can still
  become a terminal that some stack accepts (``=`` may become ``==``; ``r`` a name or
  a string prefix; ``match`` a soft keyword or a name).
- **Where parsing starts.**  `PythonSyntax.prepare(prefix)` scans the prefix once (a
  regex pass for strings, comments, brackets and line structure, no parsing) and
  parses only a *skeleton*: for every block enclosing the cursor, the last statement
  group at that level (its clause headers, e.g. ``try:`` / ``except E:``, with
  ``pass`` as the body of closed clauses) and then the logical line at the cursor.  An
  LR parser's state after a run of statements is the same after any number of them, so
  this is the state the whole prefix would give, at a cost that does not grow with the
  file.  A syntax error in the skeleton (or an indentation error found by the scan)
  turns the constraint off for the request, with the reason (`SyntaxCheckOff`).
- **Where a completion may end** (`is_complete`, EOS): at the end of the document
  (only blank text or comments after the cursor), prefix + text must be a whole valid
  program.  Before more code, the completion ends an insertion: it must close every
  bracket and string it opened, and the rest of the cursor's line must still parse
  after it.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
import re
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from adaptrack_lsp.apis.document import common_prefix_length
from adaptrack_lsp.constrainers.base import Constrainer, State
from adaptrack_lsp.constrainers.python_lexemes import (
    _BACKSLASH,
    _BODY,
    _CODE,
    _COMMENT,
    _COMMENT_RUN,
    _DIGITS,
    _FREE,
    _IDENT_RUN,
    _INDENT_RUN,
    _LINE,
    _NAME,
    _NON_ASCII,
    _NUMBER,
    _NUMBER_COMPLETE,
    _OP,
    _OPEN1,
    _OPEN2,
    _OPERATOR_CHARS,
    _OPERATOR_PREFIXES,
    _SPACE_RUN,
    _STRING,
    _STRING_RUNS,
    _TRIPLE,
    BRACKETS,
    CLOSERS,
    KEYWORDS,
    OPERATORS,
    SOFT_KEYWORDS,
    STRING_PREFIXES,
    _number_step,
)

logger = logging.getLogger(__name__)

GRAMMAR_FILE = "python_syntax.lark"
#: what the grammar accepts, for display and the docs
GRAMMAR_VERSION = "Python 3.11"
#: bump when the table's JSON layout changes
TABLE_FORMAT = 1
#: most readings (LALR stacks) kept for one state; beyond it the check gives up
MAX_PARSES = 64
#: most reductions for one terminal on one stack (a guard; real input needs a few)
MAX_REDUCTIONS = 10_000
#: the setup of one request (scan + skeleton parse) gives up after this long
SETUP_LIMIT_S = 0.25


class SyntaxCheckOff(Exception):
    """The constraint cannot be used for this request; the message says why."""


# -- the parse table -------------------------------------------------------------------------
@dataclass
class SyntaxTable:
    """The LALR(1) automaton of the grammar, with conflicts kept, in integers."""

    terminals: dict[str, int]
    #: per state: terminal id -> actions (shift: target state >= 0; reduce: -(rule + 1))
    actions: list[dict[int, tuple[int, ...]]]
    #: per state: nonterminal id -> state
    gotos: list[dict[int, int]]
    #: rule -> (nonterminal id, length)
    rules: list[tuple[int, int]]
    start: int
    #: the state after the whole program (reached by a goto on $END)
    end: int
    #: terminal id -> its literal text ("if", "(") or a name for the kind ("NAME")
    display: dict[int, str]
    #: (state below the top, top state, terminal) -> top state after unit reductions
    unit_chains: dict[tuple[int, int, int], int] = field(default_factory=dict)


_table_lock = threading.Lock()
_table: SyntaxTable | None = None


def warm_up(vocab) -> None:
    """Load the parse table and lex the vocabulary's tokens for masks now (about a second
    for a 150k vocabulary) rather than at the first request; failures are logged only."""
    try:
        from adaptrack_lsp.constrainers.python_syntax_mask import SyntaxVocab

        SyntaxVocab.of(PythonSyntax(), vocab)
    except Exception:
        logger.warning("preparing the Python syntax constraint failed", exc_info=True)


def grammar_text() -> str:
    from importlib import resources

    return resources.files("adaptrack_lsp.constrainers").joinpath(GRAMMAR_FILE).read_text(encoding="utf-8")


def load_table() -> SyntaxTable:
    """The parse table: built once per grammar (about a second, with lark) and cached
    under the cache root; loaded from there afterwards."""
    global _table
    if _table is not None:
        return _table
    with _table_lock:
        if _table is None:
            _table = _load_or_build()
    return _table


#: stack nodes a shared parser interns before a fresh one replaces it (its memos and
#: masks go with it)
MAX_SHARED_NODES = 25_000
#: masks a shared parser keeps per vocabulary (packed: a bit per token); full: cleared
MAX_SHARED_MASKS = 256
#: whether a state ends the program, kept on the shared parser (states before it starts again)
MAX_SHARED_ENDS = 4096
_NO_MASK = object()
_shared_parsers: dict[int, _Parser] = {}
_shared_lock = threading.Lock()


def shared_parser(table: SyntaxTable) -> _Parser:
    """The parser every `PythonSyntax` of `table` uses: its interned stacks, reduction
    memos and masks carry over from one request to the next (typing meets the same
    states again).  Past `MAX_SHARED_NODES` interned stacks a fresh parser replaces it;
    requests under way keep the one they hold."""
    with _shared_lock:
        parser = _shared_parsers.get(id(table))
        if parser is None or parser.table is not table or parser.size > MAX_SHARED_NODES:
            parser = _shared_parsers[id(table)] = _Parser(table)
        return parser


def _load_or_build() -> SyntaxTable:
    from importlib.metadata import version

    text = grammar_text()
    digest = hashlib.sha256(f"{TABLE_FORMAT}\0{version('lark')}\0{text}".encode()).hexdigest()[:16]
    try:
        from adaptrack_lsp.cache import cached_build

        def build(folder) -> None:
            (folder / "table.json").write_text(json.dumps(build_table(text)), encoding="utf-8")

        folder = cached_build(f"syntax-table-{digest}", build, "table.json")
        data = json.loads((folder / "table.json").read_text(encoding="utf-8"))
    except OSError as error:  # a read-only cache: build in memory
        logger.warning("cannot cache the Python syntax table (%s); building it in memory", error)
        data = build_table(text)
    return _table_from_json(data)


def build_table(text: str) -> dict[str, Any]:
    """The grammar's LALR(1) automaton as JSON-ready data, every conflict kept."""
    from lark.common import ParserConf
    from lark.load_grammar import load_grammar
    from lark.parsers.lalr_analysis import LALR_Analyzer

    grammar, _ = load_grammar(text, GRAMMAR_FILE, [], False)
    terminal_defs, rules, _ = grammar.compile(["file_input"], set())
    analyzer = LALR_Analyzer(ParserConf(rules, {}, ["file_input"]))
    analyzer.compute_lr0_states()
    analyzer.compute_reads_relations()
    analyzer.compute_includes_lookback()
    analyzer.compute_lookaheads()
    itemsets = list(analyzer.lr0_itemsets)
    number = {itemset: i for i, itemset in enumerate(itemsets)}
    rule_number = {rule: i for i, rule in enumerate(rules)}
    literal = {d.name: d.pattern.value for d in terminal_defs if d.pattern.type == "str"}
    states = []
    end = None
    for itemset in itemsets:
        actions: dict[str, list[int]] = {}
        gotos: dict[str, int] = {}
        for symbol, target in itemset.transitions.items():
            if symbol.is_term:
                actions.setdefault(symbol.name, []).append(number[target])
            else:
                gotos[symbol.name] = number[target]
        for symbol, reduce_rules in itemset.lookaheads.items():
            for rule in sorted(reduce_rules, key=rule_number.get):
                actions.setdefault(symbol.name, []).append(-(rule_number[rule] + 1))
        for item in itemset.closure:
            if item.rule.origin.name == "$root_file_input" and item.is_satisfied:
                end = number[itemset]
        states.append({"actions": actions, "gotos": gotos})
    start = number[analyzer.lr0_start_states["file_input"]]
    return {
        "states": states,
        "rules": [[rule.origin.name, len(rule.expansion)] for rule in rules],
        "start": start,
        "end": end,
        "literals": literal,
    }


def _table_from_json(data: dict[str, Any]) -> SyntaxTable:
    terminals: dict[str, int] = {}
    nonterminals: dict[str, int] = {}

    def terminal(name: str) -> int:
        return terminals.setdefault(name, len(terminals))

    for name in ("$END", "NAME", "NUMBER", "STRING", "_NEWLINE", "_INDENT", "_DEDENT", *data["literals"]):
        terminal(name)
    actions, gotos = [], []
    for state in data["states"]:
        actions.append({terminal(name): tuple(moves) for name, moves in state["actions"].items()})
        gotos.append({nonterminals.setdefault(name, len(nonterminals)): target for name, target in state["gotos"].items()})
    rules = [(nonterminals.setdefault(name, len(nonterminals)), length) for name, length in data["rules"]]
    display = {i: data["literals"].get(name, name) for name, i in terminals.items()}
    return SyntaxTable(terminals, actions, gotos, rules, data["start"], data["end"], display)


# -- the recognizer ---------------------------------------------------------------------------
class _Stack:
    """One LALR stack as an interned linked node: equal stacks are the same object."""

    __slots__ = ("state", "parent", "after", "depth")

    def __init__(self, state: int, parent: _Stack | None):
        self.state = state
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        #: terminal id -> frozenset of stacks after it (memo)
        self.after: dict[int, frozenset] = {}


class _Parser:
    """GLR-style recognition over the table: feed terminals to sets of stacks.

    While reducing, the stack is a pair (interned node below the top, top state), so a
    reduction creates no node; chains of unit reductions (``atom: name``, ``expr:
    or_expr``...) depend only on the two top states and the terminal and are looked up
    in one step (`SyntaxTable.unit_chains`, shared by every parse)."""

    def __init__(self, table: SyntaxTable):
        self.table = table
        self._nodes: dict[tuple[int, int], _Stack] = {}
        self.root = self.push(None, table.start)
        self.start = frozenset((self.root,))
        #: mask key -> whether the state ends a whole program (`PythonSyntax.is_complete`)
        self.program_ends: dict = {}
        self._end_term = table.terminals["$END"]
        #: vocabulary -> (masks by `_mask_key`, mask walks, path verdicts): answers that
        #: depend only on this parser's stacks, kept while the parser is shared
        self._mask_stores: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @property
    def size(self) -> int:
        """Stack nodes interned so far."""
        return len(self._nodes)

    def mask_store(self, vocab) -> tuple[dict, dict, dict]:
        store = self._mask_stores.get(vocab)
        if store is None:
            store = self._mask_stores[vocab] = ({}, {}, {})
        return store

    def push(self, parent: _Stack | None, state: int) -> _Stack:
        key = (state, id(parent))
        node = self._nodes.get(key)
        if node is None or node.parent is not parent:
            node = self._nodes[key] = _Stack(state, parent)
        return node

    def _unit_chain(self, below: int, state: int, term: int) -> int:
        """The top state after the unit reductions `term` causes over `below`, `state`."""
        actions, gotos, rules = self.table.actions, self.table.gotos, self.table.rules
        for _ in range(MAX_REDUCTIONS):
            moves = actions[state].get(term)
            if not moves or len(moves) != 1 or moves[0] >= 0:
                return state
            lhs, length = rules[-moves[0] - 1]
            if length != 1:
                return state
            target = gotos[below].get(lhs)
            if target is None:
                return state
            state = target
        return state

    def _configurations(self, node: _Stack, term: int) -> list[tuple[_Stack | None, int]]:
        """Every (node below the top, top state) reached from `node` by reductions on
        `term`, including `node`'s own."""
        actions, gotos, rules = self.table.actions, self.table.gotos, self.table.rules
        chains = self.table.unit_chains
        reached: list[tuple[_Stack | None, int]] = []
        work = [(node.parent, node.state)]
        seen: set[tuple[int, int]] = set()
        steps = 0
        while work:
            below, state = work.pop()
            if below is not None:
                key = (below.state, state, term)
                chained = chains.get(key)
                if chained is None:
                    chained = chains[key] = self._unit_chain(below.state, state, term)
                state = chained
            mark = (id(below), state)
            if mark in seen:
                continue
            seen.add(mark)
            reached.append((below, state))
            for move in actions[state].get(term, ()):
                if move >= 0:
                    continue
                lhs, length = rules[-move - 1]
                if length == 0:
                    top = self.push(below, state)
                else:
                    top = below
                    for _ in range(length - 1):
                        top = top.parent
                target = gotos[top.state].get(lhs)
                if target is not None:
                    work.append((top, target))
            steps += 1
            if steps > MAX_REDUCTIONS:
                break
        return reached

    def feed_one(self, node: _Stack, term: int) -> frozenset:
        """The stacks after shifting `term` onto `node` (reductions first); memoised."""
        done = node.after.get(term)
        if done is not None:
            return done
        actions = self.table.actions
        shifted = []
        for below, state in self._configurations(node, term):
            for move in actions[state].get(term, ()):
                if move >= 0:
                    shifted.append(self.push(self.push(below, state), move))
        done = frozenset(shifted)
        node.after[term] = done
        return done

    def feed(self, stacks: frozenset, terms: tuple[int, ...]) -> frozenset:
        """Stacks after one lexeme that may be any of `terms` (soft keywords: two)."""
        if len(stacks) == 1 and len(terms) == 1:
            for node in stacks:
                return self.feed_one(node, terms[0])
        result: set = set()
        for node in stacks:
            for term in terms:
                result.update(self.feed_one(node, term))
        return frozenset(result)

    def accepts_end(self, stacks: frozenset) -> bool:
        """Whether the stacks are a whole program (reductions on $END reach the end state)."""
        end = self.table.end
        return any(state == end for node in stacks for _, state in self._configurations(node, self._end_term))

    def expected(self, stacks: frozenset) -> list[int]:
        """Terminals some stack accepts next (for messages)."""
        found = []
        for term in sorted({t for node in stacks for t in self.table.actions[node.state]}):
            if any(self.feed_one(node, term) for node in stacks):
                found.append(term)
        return found


#: pending names whose continuations may become a keyword or a string prefix: every other
#: pending name is continued and ended by the same tokens (one mask serves them all)
_NAME_SENSITIVE = frozenset(w[:i] for w in KEYWORDS | SOFT_KEYWORDS for i in range(1, len(w) + 1))
_NAME_SENSITIVE_LOWER = frozenset(p[:i] for p in STRING_PREFIXES for i in range(1, len(p) + 1))
#: the stand-in for such a pending name in mask keys
_ANY_NAME = object()

@dataclass(frozen=True)
class _Terms:
    """Terminal ids the lexer emits, looked up once per table."""

    name: int
    number: int
    string: int
    newline: int
    indent: int
    dedent: int
    keyword: dict[str, tuple[int, ...]]
    operator: dict[str, int]
    #: identifier prefix -> keyword terminals it may still become
    keyword_prefix: dict[str, tuple[int, ...]]
    #: operator prefix -> operator terminals it may still become
    operator_prefix: dict[str, tuple[int, ...]]

    @classmethod
    def of(cls, table: SyntaxTable) -> _Terms:
        ids = table.terminals
        by_text = {table.display[i]: i for name, i in ids.items() if table.display[i] != name}
        keyword: dict[str, tuple[int, ...]] = {}
        for word in KEYWORDS:
            keyword[word] = (by_text[word],)
        for word in SOFT_KEYWORDS:
            keyword[word] = (by_text[word], ids["NAME"])
        operator = {op: by_text[op] for op in OPERATORS | set(BRACKETS) | set(CLOSERS)}
        keyword_prefix: dict[str, list[int]] = {}
        for word in KEYWORDS | SOFT_KEYWORDS:
            for i in range(1, len(word) + 1):
                keyword_prefix.setdefault(word[:i], []).append(by_text[word])
        operator_prefix: dict[str, list[int]] = {}
        for op in OPERATORS:
            for i in range(1, len(op) + 1):
                operator_prefix.setdefault(op[:i], []).append(by_text[op])
        operator_prefix["."].append(ids["NUMBER"])  # ".5"
        return cls(
            ids["NAME"],
            ids["NUMBER"],
            ids["STRING"],
            ids["_NEWLINE"],
            ids["_INDENT"],
            ids["_DEDENT"],
            keyword,
            operator,
            {k: tuple(v) for k, v in keyword_prefix.items()},
            {k: tuple(v) for k, v in operator_prefix.items()},
        )


def _mask_key(state: State):
    """`state` for mask caching: a pending name that no continuation turns into a
    keyword or a string prefix is replaced by one stand-in (its mask does not depend on
    its text: identifier tokens continue it, every other token ends it as a NAME)."""
    if state[1] == _NAME:
        data = state[2]
        if data not in _NAME_SENSITIVE and data.lower() not in _NAME_SENSITIVE_LOWER:
            return (state[0], _NAME, _ANY_NAME, *state[3:])
    return state


def _width(indent: str) -> tuple[int, int]:
    """(column with tabs to multiples of 8, column with tabs as 1), as CPython measures
    indentation; a form feed resets the column."""
    col8 = col1 = 0
    for char in indent:
        if char == " ":
            col8 += 1
            col1 += 1
        elif char == "\t":
            col8 = (col8 // 8 + 1) * 8
            col1 += 1
        elif char == "\f":
            col8 = col1 = 0
    return col8, col1


# -- the constrainer -------------------------------------------------------------------------------
#: a state: (stacks, mode, data, open brackets, indentation stack, line has content)
_DOCUMENT_END = re.compile(r"(?:\s|#[^\n]*)*\Z")


class PythonSyntax(Constrainer):
    """Generated text keeps the document a prefix of a valid Python 3.11 program."""

    source = "Python syntax"

    def __init__(self, suffix: str = "", table: SyntaxTable | None = None):
        """`suffix`: the document after the cursor (decides where a completion may end)."""
        self.table = table or load_table()
        self.parser = shared_parser(self.table)
        self.terms = _Terms.of(self.table)
        self.suffix = suffix
        self.at_document_end = bool(_DOCUMENT_END.match(suffix))
        newline = suffix.find("\n")
        self.line_suffix = suffix if newline < 0 else suffix[:newline]
        self.empty = (self.parser.start, _LINE, "", "", ((0, 0),), False)
        self._prepared: tuple[str, State] | None = None
        #: this request's masks by `_mask_key` (a pending name that cannot become a keyword
        #: or a string prefix standing for all of them), for the vocabulary `_masks_for`;
        #: the shared parser keeps them packed for later requests (`_Parser.mask_store`)
        self._masks: dict = {}
        self._masks_for = None
        #: what mask walks found (`python_syntax_mask._Walker`): the parser's store for
        #: the vocabulary of the last mask
        self.mask_walks: tuple[dict, dict] = ({}, {})
        #: how long the last `prepare` took (seconds) and how many characters it parsed
        self.setup_seconds = 0.0
        self.setup_chars = 0

    # -- setup ----------------------------------------------------------------------------
    def prepare(self, prefix: str, limit_s: float = SETUP_LIMIT_S) -> State:
        """The state after `prefix`, parsed from its skeleton (see the module docstring);
        raises `SyntaxCheckOff` when the prefix has a syntax error or takes too long."""
        if self._prepared is not None and self._prepared[0] == prefix:
            return self._prepared[1]
        started = time.perf_counter()
        deadline = started + limit_s
        skeleton, segments = skeleton_of(prefix, deadline)
        why: list[str] = []
        state = self._run(self.empty, skeleton, why, deadline)
        self.setup_seconds = time.perf_counter() - started
        self.setup_chars = len(skeleton)
        if state is None:
            reason = why[0] if why else "the text does not parse"
            if reason == _TIMEOUT:
                raise SyntaxCheckOff(f"the statement at the cursor is too long to check within {limit_s * 1000:.0f} ms")
            line = _document_line(prefix, segments, why[1] if len(why) > 1 else len(skeleton))
            raise SyntaxCheckOff(f"syntax error before the cursor (line {line}): {reason}")
        self._prepared = (prefix, state)
        return state

    def start(self, context: Any = None) -> State:
        prefix = getattr(context, "prefix", "") if context is not None else ""
        try:
            return self.prepare(prefix)
        except SyntaxCheckOff as error:  # callers that need to know prepare() first
            logger.info("syntax constraint off: %s", error)
            return (self.parser.start, _FREE, None, "", ((0, 0),), False)

    # -- Constrainer ------------------------------------------------------------------------
    def check(self, state: State, text: str) -> State | None:
        if state[1] == _FREE:
            return state
        return self._run(state, text, None, None)

    def is_free(self, state: State) -> bool:
        return state[1] == _FREE

    def token_mask(self, state: State, index):
        """The mask from per-vocabulary token tables (`python_syntax_mask`), computed once
        per mask key: the states after ``np.mod`` and ``np.long`` (a pending name no
        continuation turns into a keyword or a string prefix) share one mask, so a search
        over the siblings of a wide node computes it once.  A mask depends on the state
        alone, so it is kept on the shared parser (`shared_parser`) for the requests
        that follow: the next keystroke meets the same states."""
        from adaptrack_lsp.constrainers.python_syntax_mask import pack_mask, token_mask, unpack_mask

        if index.vocab is not self._masks_for:
            self._masks, self._masks_for = {}, index.vocab
        key = _mask_key(state)
        found = self._masks.get(key, _NO_MASK)
        if found is not _NO_MASK:
            return found
        shared, walks, possible = self.parser.mask_store(index.vocab)
        packed = shared.get(key, _NO_MASK)
        if packed is not _NO_MASK:
            mask = None if packed is None else unpack_mask(packed, index.vocab.size)
        else:
            self.mask_walks = (walks, possible)
            mask = token_mask(self, state, index)
            if len(shared) >= MAX_SHARED_MASKS:
                shared.clear()
            shared[key] = None if mask is None else pack_mask(mask)
        if mask is not None:
            mask.setflags(write=False)  # shared by every state of the key
        self._masks[key] = mask
        return mask

    def is_complete(self, state: State) -> bool:
        if state[1] == _FREE:
            return True
        if self.at_document_end:
            # a state's ending depends on the state alone: kept on the shared parser, for
            # the siblings that share a mask key and the next keystroke's request
            ends = self.parser.program_ends
            key = _mask_key(state)
            found = ends.get(key)
            if found is None:
                found = self._ends_program(state)
                if len(ends) >= MAX_SHARED_ENDS:
                    ends.clear()
                ends[key] = found
            return found
        return self._ends_insertion(state)

    def rejection(self, state: State, text: str) -> str:
        if state[1] == _FREE:
            return super().rejection(state, text)
        why: list[str] = []
        if self._run(state, text, why, None) is not None:
            return super().rejection(state, text)
        return f"Python syntax: {why[0]}" if why else "Python syntax: the text does not parse here"

    # -- endings --------------------------------------------------------------------------------
    def _ends_program(self, state: State) -> bool:
        stacks, mode, data, brackets, indents, content = state
        stacks = self._finish_lexeme(state)
        if stacks is None or brackets:
            return False
        feed = self.parser.feed
        if content:
            stacks = feed(stacks, (self.terms.newline,))
        for _ in indents[1:]:
            if not stacks:
                return False
            stacks = feed(stacks, (self.terms.dedent,))
        return bool(stacks) and self.parser.accepts_end(stacks)

    def _ends_insertion(self, state: State) -> bool:
        start = self._prepared[1] if self._prepared is not None else self.empty
        mode = state[1]
        if mode == _BACKSLASH:
            return False
        if mode == _STRING and start[1] != _STRING:
            return False
        if len(state[3]) > len(start[3]):
            return False
        return self._run(state, self.line_suffix, None, None) is not None

    def _finish_lexeme(self, state: State):
        """The stacks once the pending lexeme ends here (None: it cannot end here)."""
        stacks, mode, data = state[0], state[1], state[2]
        terms = self.terms
        feed = self.parser.feed
        if mode in (_LINE, _CODE, _COMMENT):
            return stacks
        if mode == _NAME:
            result = feed(stacks, terms.keyword.get(data) or (terms.name,))
        elif mode == _NUMBER:
            if data in ("e", "E"):
                result = feed(feed(stacks, (terms.number,)), (terms.name,))
            elif data in _NUMBER_COMPLETE:
                result = feed(stacks, (terms.number,))
            else:
                return None
        elif mode == _OP:
            if data == "..":
                result = feed(feed(stacks, (terms.operator["."],)), (terms.operator["."],))
            elif data in terms.operator:
                result = feed(stacks, (terms.operator[data],))
            else:
                return None
        elif mode == _STRING:
            if data[0] != _OPEN2:
                return None
            result = feed(stacks, (terms.string,))
        else:
            return None
        return result or None

    # -- the lexer --------------------------------------------------------------------------------
    def _run(self, state: State, text: str, why: list | None, deadline: float | None, parser=None) -> State | None:
        """Lex `text` on from `state`, feeding complete terminals to the parser.  Returns
        the new state or None; with `why`, a reason (and the offset) is appended on None.
        `parser`: a `_Recorder` lexes without parsing (the masks' tables)."""
        stacks, mode, data, brackets, indents, content = state
        recording = parser is not None
        parser = parser or self.parser
        feed = parser.feed
        terms = self.terms
        i = 0
        n = len(text)
        steps = 0
        while i < n:
            if deadline is not None:
                steps += 1
                if steps & 1023 == 0 and time.perf_counter() > deadline:
                    if why is not None:
                        why.append(_TIMEOUT)
                    return None
            char = text[i]
            if mode == _CODE:
                if char in " \t\f\r":
                    match = _SPACE_RUN.match(text, i)
                    i = match.end()
                    continue
                if char == "\n":
                    i += 1
                    if brackets:
                        continue
                    if content:
                        stacks = feed(stacks, (terms.newline,))
                        if not stacks:
                            return _fail(why, "the line cannot end here", i - 1)
                    mode, data, content = _LINE, "", False
                    continue
                if char.isidentifier():
                    match = _IDENT_RUN.match(text, i)
                    mode, data = _NAME, match.group()
                    i = match.end()
                    continue
                if char in _DIGITS:
                    mode, data = _NUMBER, "Z" if char == "0" else "D"
                    i += 1
                    continue
                if char == '"' or char == "'":
                    mode, data = _STRING, (_OPEN1, char, False, False, 0)
                    i += 1
                    continue
                if char in BRACKETS:
                    before = stacks
                    stacks = feed(stacks, (terms.operator[char],))
                    if not stacks:
                        return _fail(why, self._unexpected(before, repr(char), parser), i)
                    brackets += char
                    i += 1
                    continue
                if char in CLOSERS:
                    if not brackets:
                        return _fail(why, f"{char!r} closes no open bracket", i)
                    if brackets[-1] != CLOSERS[char] and brackets[-1] != "?":  # "?": unknown (recording)
                        return _fail(why, f"{char!r} does not close {brackets[-1]!r}", i)
                    before = stacks
                    stacks = feed(stacks, (terms.operator[char],))
                    if not stacks:
                        return _fail(why, self._unexpected(before, repr(char), parser), i)
                    brackets = brackets[:-1]
                    i += 1
                    continue
                if char in _OPERATOR_CHARS:
                    mode, data = _OP, char
                    i += 1
                    continue
                if char == "#":
                    match = _COMMENT_RUN.match(text, i)
                    mode, data = _COMMENT, None
                    i = match.end()
                    continue
                if char == "\\":
                    mode, data = _BACKSLASH, None
                    i += 1
                    continue
                return _fail(why, f"invalid character {char!r} in Python code", i)
            if mode == _NAME:
                match = _IDENT_RUN.match(text, i)
                if match:
                    data += match.group()
                    i = match.end()
                    continue
                if char > "\x7f" and ("a" + char).isidentifier():  # e.g. combining marks
                    data += char
                    i += 1
                    continue
                if (char == '"' or char == "'") and data.lower() in STRING_PREFIXES:
                    mode, data = _STRING, (_OPEN1, char, "b" in data.lower(), False, 0)
                    i += 1
                    continue
                before = stacks
                stacks = feed(stacks, terms.keyword.get(data) or (terms.name,))
                if not stacks:
                    return _fail(why, self._unexpected(before, repr(data), parser), i - len(data))
                mode, data = _CODE, None
                continue
            if mode == _LINE:
                if char in " \t\f\r":
                    match = _INDENT_RUN.match(text, i)
                    data += match.group()
                    i = match.end()
                    continue
                if char == "\n":
                    data = ""
                    i += 1
                    continue
                if char == "#":
                    match = _COMMENT_RUN.match(text, i)
                    mode, data = _COMMENT, None
                    i = match.end()
                    continue
                # the first token of a logical line: INDENT / DEDENT from its indentation
                stacks, indents, problem = self._indent(stacks, indents, data, parser)
                if problem:
                    return _fail(why, problem, i)
                mode, data, content = _CODE, None, True
                continue
            if mode == _STRING:
                phase, quote, is_bytes, escape, closing = data
                if phase == _OPEN1:
                    if char == quote:
                        data = (_OPEN2, quote, is_bytes, False, 0)
                        i += 1
                        continue
                    data = (_BODY, quote, is_bytes, False, 0)
                    continue
                if phase == _OPEN2:
                    if char == quote:
                        data = (_TRIPLE, quote, is_bytes, False, 0)
                        i += 1
                        continue
                    before = stacks
                    stacks = feed(stacks, (terms.string,))
                    if not stacks:
                        return _fail(why, self._unexpected(before, "a string", parser), i)
                    mode, data = _CODE, None
                    continue
                triple = phase == _TRIPLE
                if escape:
                    if is_bytes and char > "\x7f":
                        return _fail(why, "bytes can only contain ASCII literal characters", i)
                    data = (phase, quote, is_bytes, False, 0)
                    i += 1
                    continue
                if char == "\\":
                    data = (phase, quote, is_bytes, True, 0)
                    i += 1
                    continue
                if char == quote:
                    if triple and closing < 2:
                        data = (phase, quote, is_bytes, False, closing + 1)
                        i += 1
                        continue
                    before = stacks
                    stacks = feed(stacks, (terms.string,))
                    if not stacks:
                        return _fail(why, self._unexpected(before, "a string", parser), i)
                    mode, data = _CODE, None
                    i += 1
                    continue
                if char == "\n" and not triple:
                    return _fail(why, "unterminated string literal", i)
                match = _STRING_RUNS[quote, triple].match(text, i)
                run = match.group() if match else char
                if is_bytes and _NON_ASCII.search(run):
                    return _fail(why, "bytes can only contain ASCII literal characters", i)
                data = (phase, quote, is_bytes, False, 0)
                i += len(run)
                continue
            if mode == _OP:
                candidate = data + char
                if candidate in _OPERATOR_PREFIXES:
                    data = candidate
                    i += 1
                    continue
                if data == "." and char in _DIGITS:
                    mode, data = _NUMBER, "FD"
                    i += 1
                    continue
                before = stacks
                if data == "..":
                    dot = (terms.operator["."],)
                    stacks = feed(feed(stacks, dot), dot)
                elif data in terms.operator:
                    stacks = feed(stacks, (terms.operator[data],))
                else:
                    return _fail(why, f"invalid syntax {data!r}", i - len(data))
                if not stacks:
                    return _fail(why, self._unexpected(before, repr(data), parser), i - len(data))
                mode, data = _CODE, None
                continue
            if mode == _NUMBER:
                following = _number_step(data, char)
                if following == "!":
                    return _fail(why, "invalid number literal", i)
                if following is not None:
                    data = following
                    i += 1
                    continue
                before = stacks
                if data in ("e", "E"):  # "1else": the number ends before the "e"
                    stacks = feed(stacks, (terms.number,))
                    if not stacks:
                        return _fail(why, self._unexpected(before, "a number", parser), i)
                    mode, data = _NAME, data
                    continue
                if data not in _NUMBER_COMPLETE:
                    return _fail(why, "invalid number literal", i)
                stacks = feed(stacks, (terms.number,))
                if not stacks:
                    return _fail(why, self._unexpected(before, "a number", parser), i)
                mode, data = _CODE, None
                continue
            if mode == _COMMENT:
                if char == "\n":
                    mode = _CODE if (content or brackets) else _LINE
                    data = None if mode == _CODE else ""
                    continue  # the newline is handled by that mode
                i = _COMMENT_RUN.match(text, i).end()
                continue
            if mode == _BACKSLASH:
                if char == "\r":
                    i += 1
                    continue
                if char != "\n":
                    return _fail(why, "unexpected character after line continuation character", i)
                mode, data = _CODE, None
                i += 1
                continue
            return _fail(why, "internal lexer state", i)
        new_state = (stacks, mode, data, brackets, indents, content)
        if recording:
            return new_state
        if len(stacks) > MAX_PARSES:
            logger.debug("syntax check: %d readings; giving up on this completion", len(stacks))
            return (parser.start, _FREE, None, "", ((0, 0),), False)
        if mode in (_NAME, _OP, _NUMBER, _STRING) and not self._pending_possible(new_state):
            return _fail(why, self._pending_reason(new_state), n)
        return new_state

    def _indent(self, stacks, indents, indentation: str, parser):
        """(stacks, indentation stack, problem) once a logical line starts with
        `indentation`: INDENT or DEDENTs fed; `problem` is "" or why it cannot start."""
        terms = self.terms
        width = _width(indentation.replace("\r", ""))
        top = indents[-1]
        if width[0] > top[0]:
            if width[1] <= top[1]:
                return stacks, indents, "inconsistent use of tabs and spaces in indentation"
            following = parser.feed(stacks, (terms.indent,))
            if not following:
                return stacks, indents, "unexpected indent"
            return following, (*indents, width), ""
        if width[0] < top[0]:
            following = stacks
            while width[0] < indents[-1][0]:
                indents = indents[:-1]
                following = parser.feed(following, (terms.dedent,))
                if not following:
                    return stacks, indents, self._unexpected(stacks, "a dedent", parser, dedent=True)
            if width != indents[-1]:
                return stacks, indents, "unindent does not match any outer indentation level"
            return following, indents, ""
        if width[1] != top[1]:
            return stacks, indents, "inconsistent use of tabs and spaces in indentation"
        return stacks, indents, ""

    def pending_paths(self, mode: int, data) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """The ways a pending lexeme can still end: each a sequence of terminal choices
        to feed (a pending ``..`` is ``.`` ``.`` or the start of ``...``); () when nothing
        is pending (always possible)."""
        terms = self.terms
        if mode == _NAME:
            paths = [((terms.name,),)] + [((term,),) for term in terms.keyword_prefix.get(data, ())]
            if data.lower() in STRING_PREFIXES:
                paths.append(((terms.string,),))
            return tuple(paths)
        if mode == _NUMBER:
            return (((terms.number,),),)
        if mode == _STRING:
            return (((terms.string,),),)
        if mode == _OP:
            paths = [((term,),) for term in terms.operator_prefix.get(data, ())]
            if data == "..":
                dot = (terms.operator["."],)
                paths.append((dot, dot))
            return tuple(paths)
        return ()

    def _pending_possible(self, state: State) -> bool:
        """Whether the pending lexeme can still become a terminal some stack accepts."""
        paths = self.pending_paths(state[1], state[2])
        return not paths or any(self.path_possible(state[0], path) for path in paths)

    def path_possible(self, stacks, path) -> bool:
        feed = self.parser.feed
        for choice in path:
            stacks = feed(stacks, choice)
            if not stacks:
                return False
        return True

    def _pending_reason(self, state: State) -> str:
        mode, data = state[1], state[2]
        what = {_NAME: repr(data), _NUMBER: "a number", _STRING: "a string"}.get(mode, repr(data))
        return self._unexpected(state[0], what, self.parser)

    def _unexpected(self, stacks, what: str, parser: _Parser, dedent: bool = False) -> str:
        expected = [self.table.display[t] for t in parser.expected(stacks)]
        shown = [_DISPLAY.get(name, repr(name)) for name in expected]
        if dedent:
            return "the block cannot end here" + (f"; expected {_one_of(shown)}" if shown else "")
        if shown:
            return f"{what} cannot come here; expected {_one_of(shown)}"
        return f"{what} cannot come here"


_TIMEOUT = "time limit"
_DISPLAY = {
    "NAME": "a name",
    "NUMBER": "a number",
    "STRING": "a string",
    "_NEWLINE": "the end of the line",
    "_INDENT": "an indented block",
    "_DEDENT": "a dedent",
    "$END": "the end of the file",
}


def _one_of(names: list[str], limit: int = 8) -> str:
    if len(names) == 1:
        return names[0]
    head = names[:limit]
    more = "" if len(names) <= limit else f" (and {len(names) - limit} more)"
    return "one of " + ", ".join(head) + more


def _fail(why: list | None, reason: str, offset: int):
    if why is not None:
        why.append(reason)
        why.append(offset)
    return None


# -- where parsing starts ------------------------------------------------------------------------
_STRING_ATOM = (
    r"(?:'''(?:[^'\\]|\\.|'(?!''))*+'''"
    r'|"""(?:[^"\\]|\\.|"(?!""))*+"""'
    r"|'(?:[^'\\\n]|\\.)*+'"
    r'|"(?:[^"\\\n]|\\.)*+")'
)
_ATOMS = _STRING_ATOM + r"|\#[^\n]*+|\\\r?\n"


def _logical_line_pattern(nesting: int) -> re.Pattern:
    """One whole logical line (blank and comment-only lines too) with brackets nested
    up to `nesting` deep; deeper lines fall back to `_scan_one`."""
    inside = r"[^'\"#\\()\[\]{}]++|" + _ATOMS
    group = rf"[(\[{{](?:{inside})*+[)\]}}]"
    for _ in range(nesting - 1):
        group = rf"[(\[{{](?:{inside}|{group})*+[)\]}}]"
    return re.compile(rf"[ \t\f]*+(?:[^'\"#\\\n()\[\]{{}}]++|{_ATOMS}|{group})*+\n", re.S)


#: possessive quantifiers (no backtracking) need Python 3.11's `re`; on 3.10 every line
#: is followed by `_scan_one` (the same answer, several times slower)
_LOGICAL_LINE = _logical_line_pattern(6) if sys.version_info >= (3, 11) else None
_SCAN = re.compile(r"\n|\#|'''|\"\"\"|'|\"|[(\[{]|[)\]}]|\\")
_STRING_END = {
    "'": re.compile(r"(?:[^'\\\n]|\\(?:\r\n|[\s\S]))*'"),
    '"': re.compile(r'(?:[^"\\\n]|\\(?:\r\n|[\s\S]))*"'),
    "'''": re.compile(r"(?:[^'\\]|\\[\s\S]|'(?!''))*'''"),
    '"""': re.compile(r'(?:[^"\\]|\\[\s\S]|"(?!""))*"""'),
}
_LINE_INDENT = re.compile(r"[ \t\f]*")
_CLAUSE = re.compile(r"(?:elif|else|except|finally)\b")


@dataclass
class _Line:
    """A logical line of the document: its span (from its first physical line's start)."""

    start: int
    end: int
    indent: str
    width: tuple[int, int]
    #: "clause" (elif/else/except/finally), "decorator" or ""
    kind: str
    #: in the skeleton, a closed block body follows it (``pass`` at this indentation)
    opens: str | None = None


#: (text, its spans, where its unfinished line starts) of the last `line_spans` call,
#: replaced as one object (threads share it)
_last_spans: tuple = ("", (), 0)
#: characters a span's scan may read past its end (``\r\n``); spans ending this close to
#: a changed character are scanned again
_SPAN_READ_AHEAD = 2


def line_spans(text: str, deadline: float | None = None) -> tuple[list[tuple[int, int]], int]:
    """The spans of the complete logical lines of `text` (blank and comment lines
    included) and where the unfinished one (the cursor's) starts.  One regex pass;
    lines nested deeper than the pattern knows are followed by `_scan_one`.

    The scan reads left to right, so the spans of the last call that end before the
    first changed character hold for `text` too: the next keystroke scans from there."""
    global _last_spans
    last_text, last_spans, last_tail = _last_spans
    if last_text == text:
        return list(last_spans), last_tail
    kept = 0
    if last_spans:
        reusable = common_prefix_length(last_text, text) - _SPAN_READ_AHEAD
        kept = bisect.bisect_right(last_spans, (reusable + 1,)) if reusable > 0 else 0
        while kept and last_spans[kept - 1][1] > reusable:
            kept -= 1
        kept = _stable_spans(last_text, last_spans, kept)
    spans = list(last_spans[:kept])
    tail = _scan_spans(text, spans[-1][1] if spans else 0, spans, deadline)
    _last_spans = (text, tuple(spans), tail)
    return spans, tail


def _stable_spans(text: str, spans: tuple[tuple[int, int], ...], kept: int) -> int:
    """How many of the first `kept` spans of `text` hold whatever text follows them.

    One case reads past a span's end: at a triple quote the pattern first tries a
    triple-quoted string, which reads on to its closing quotes; without any, it falls
    back to an empty string and a one-line string (``x = \"\"\"a"``), and closing quotes
    typed later would turn the line into the start of a longer one.  Such a try fails
    only at or after the last triple quote of its kind that no backslash precedes (an
    earlier try finds that one), so only the spans around it are checked: the span
    alone, closing quotes of both kinds after it, must still end where it ended."""
    if _LOGICAL_LINE is None:  # `_scan_one` alone: a forward scan, never past a span's end
        return kept
    for quotes in ('"""', "'''"):
        last = text.rfind(quotes)
        while last > 0 and text[last - 1] == "\\":
            last = text.rfind(quotes, 0, last + len(quotes) - 1)
        if last < 0:
            continue
        first = bisect.bisect_right(spans, (last - len(quotes) + 1,)) - 1
        for index in range(max(0, first), kept):
            start, end = spans[index]
            if start >= last + len(quotes):
                break
            alone = text[start:end]
            match = _LOGICAL_LINE.match(alone + '"""' + "'''\n")
            if match is None or match.end() != len(alone):
                kept = index
                break
    return kept


def _scan_spans(text: str, position: int, spans: list[tuple[int, int]], deadline: float | None) -> int:
    """Append the spans of the complete logical lines from `position` (a line start in
    code) on to `spans`; returns where the unfinished line starts."""
    matches = _LOGICAL_LINE.finditer if _LOGICAL_LINE is not None else (lambda text, position: [None])
    while True:
        gap = False
        for match in matches(text, position):
            if match is None:
                gap = True
                break
            start, end = match.span()
            if start != position:
                gap = True
                break
            spans.append((start, end))
            position = end
        if not gap:
            return position
        if deadline is not None and time.perf_counter() > deadline:
            raise SyntaxCheckOff("the document is too long to scan in time")
        end = _scan_one(text, position)
        if end < 0:
            return position
        spans.append((position, end))
        position = end


def _scan_one(text: str, position: int) -> int:
    """The end of the logical line starting at `position` (-1: it does not end in `text`)."""
    search = _SCAN.search
    n = len(text)
    depth = 0
    while True:
        found = search(text, position)
        if found is None:
            return -1
        token = found.group()
        position = found.end()
        if token == "\n":
            if depth == 0:
                return position
        elif token == "#":
            end = text.find("\n", position)
            if end < 0:
                return -1
            position = end
        elif token in _STRING_END:
            closing = _STRING_END[token].match(text, position)
            if closing is None:
                return -1
            position = closing.end()
        elif token in "([{":
            depth += 1
        elif token in ")]}":
            depth = max(0, depth - 1)
        elif position < n and text[position] == "\n":
            position += 1
        elif text.startswith("\r\n", position):
            position += 2


def _line_at(text: str, span: tuple[int, int]) -> _Line | None:
    """The logical line of a span, None for blank and comment-only lines."""
    start, end = span
    indent = _LINE_INDENT.match(text, start).group()
    first = start + len(indent)
    char = text[first] if first < end else "\n"
    if char in "#\r\n":
        return None
    kind = "decorator" if char == "@" else ("clause" if _CLAUSE.match(text, first) else "")
    return _Line(start, end, indent, _width(indent), kind)


def skeleton_of(prefix: str, deadline: float | None = None) -> tuple[str, list[tuple[int, int, int]]]:
    """The text to parse for a cursor after `prefix` (see the module docstring) and its
    segments (skeleton offset, document offset, length) for error positions.

    Walks back from the cursor over the logical lines: the last statement group at the
    cursor's level (a group: the clauses of one compound statement, or decorators and
    what they decorate), then the header of the enclosing block and its group, out to
    the top level.  Raises `SyntaxCheckOff` when the scan runs out of time."""
    spans, tail_start = line_spans(prefix, deadline)
    index = len(spans)

    def previous(limit: int) -> tuple[_Line | None, _Line | None]:
        """The previous logical line at most `limit` columns deep, and the deeper line
        right after it (when deeper lines were skipped)."""
        nonlocal index
        deeper = None
        while index > 0:
            index -= 1
            line = _line_at(prefix, spans[index])
            if line is None:
                continue
            if line.width[0] <= limit:
                return line, deeper
            deeper = line
        return None, deeper

    frames: list[list[_Line]] = []
    last, _ = previous(1 << 30)
    if last is not None:
        group = [last]
        while True:
            level = group[0].width[0]
            line, deeper = previous(level)
            while line is not None and line.width[0] == level and (group[0].kind == "clause" or line.kind == "decorator"):
                if deeper is not None:
                    line.opens = deeper.indent
                group.insert(0, line)
                line, deeper = previous(level)
            frames.append(group)
            if level == 0:
                break
            while line is not None and line.width[0] >= level:  # earlier statements of the block
                line, deeper = previous(level - 1)
            if line is None:
                break
            group = [line]
    parts: list[str] = []
    segments: list[tuple[int, int, int]] = []
    length = 0
    for group in reversed(frames):
        for line in group:
            segments.append((length, line.start, line.end - line.start))
            parts.append(prefix[line.start : line.end])
            length += line.end - line.start
            if line.opens is not None:
                body = f"{line.opens}pass\n"
                parts.append(body)
                length += len(body)
    segments.append((length, tail_start, len(prefix) - tail_start))
    parts.append(prefix[tail_start:])
    return "".join(parts), segments


def _document_line(prefix: str, segments, offset: int) -> int:
    """The document's 1-based line of a skeleton offset."""
    for skeleton_at, document_at, length in reversed(segments):
        if offset >= skeleton_at:
            return prefix.count("\n", 0, document_at + min(offset - skeleton_at, length)) + 1
    return 1
