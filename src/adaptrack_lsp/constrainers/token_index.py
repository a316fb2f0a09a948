"""`TokenIndex`: a text `Constrainer` plus a `Vocabulary` as a `TokenConstraint`.

- `advance(state, token_id)`: the constrainer's `check` on the token's text, cached per
  (state, token).
- `allowed(state, ids)`: lazy verdicts for the few tokens a decoder asks about.
- `mask(state)`: bool[vocab.size] for every id, cached per state (returned read-only).
  Constrainers that know their structure provide ``token_mask(state, index)`` (the API
  monitor does: it looks only at tokens that spell member-name prefixes, or that contain
  an alias followed by ``.``); others are walked jointly with the vocabulary's character
  trie, pruning dead branches; a constrainer may say a state is ``is_free`` (everything
  valid from here on) so the walk takes whole subtrees at once.  `AllOf` masks are the
  AND of their parts' masks.

`part_seconds` (the root index of an `AllOf`): seconds each part spent computing
masks, by the part's `label` (what the latency split reports per constraint).

EOS ids are valid iff the constrainer `is_complete` in the state (`advance` then returns
the terminal state `END`, after which nothing is valid); special ids other than EOS and
padding ids (>= vocab.num_defined) never; ordinary tokens with empty text always (they
do not change the text).

`TokenTables` holds the per-vocabulary precomputation (each token's leading identifier
run and remainder, the tokens that start with ``.``, an index of words followed by ``.``,
texts in sorted order); it is built once per `Vocabulary` and shared.
"""

from __future__ import annotations

import bisect
import re
import time
import weakref
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from adaptrack_lsp.constrainers.base import Constrainer, State, TokenConstraint
from adaptrack_lsp.constrainers.compose import AllOf

if TYPE_CHECKING:  # pragma: no cover - the vocabulary is passed in; only its type is named
    from adaptrack_lsp.vocab import Vocabulary

_LEAD = re.compile(r"\w*")
_DOT_LEAD = re.compile(r"[ \t]*\.")
_DOT_WORD = re.compile(r"(?<!\w)(\w+)[ \t]*\.")

_NO_IDS = np.zeros(0, dtype=np.int64)


class EndOfSequence:
    """The state after an EOS token: nothing may follow (one shared instance, `END`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "END"

    def __reduce__(self):
        return "END"


#: the state `TokenIndex.advance` returns for an EOS token where the text may end
END = EndOfSequence()


def _ids(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


class LeadTable:
    """Tokens grouped by their leading identifier run (``lead``) and what follows it."""

    def __init__(self):
        self.pure_ids_by_lead: dict[str, np.ndarray] = {}  # text is the lead alone
        self.mixed_free_ids_by_lead: dict[
            str, np.ndarray
        ] = {}  # rest does not start with [ \t]*"."
        self.mixed_check_ids_by_lead: dict[
            str, np.ndarray
        ] = {}  # rest starts with [ \t]*"."
        self.max_lead = 0

    def _finish(self, pure, free, check) -> None:
        self.pure_ids_by_lead = {k: _ids(v) for k, v in pure.items()}
        self.mixed_free_ids_by_lead = {k: _ids(v) for k, v in free.items()}
        self.mixed_check_ids_by_lead = {k: _ids(v) for k, v in check.items()}
        self.max_lead = max((len(k) for k in pure), default=0)


class DotTable(LeadTable):
    """Tokens that start with optional spaces and ``.``; grouped by the text after the dot."""

    def __init__(self):
        super().__init__()
        self.ids = _NO_IDS
        self.empty_rest_ids = _NO_IDS  # the token ends right after the dot
        self.rest_of: dict[int, str] = {}  # token id -> text after its first "."


class TokenTables:
    """Per-vocabulary tables for fast masks (see the module docstring)."""

    _cache: ClassVar[weakref.WeakKeyDictionary[Vocabulary, TokenTables]] = (
        weakref.WeakKeyDictionary()
    )

    @classmethod
    def of(cls, vocab: Vocabulary) -> TokenTables:
        tables = cls._cache.get(vocab)
        if tables is None:
            tables = cls._cache[vocab] = cls(vocab)
        return tables

    def __init__(self, vocab: Vocabulary):
        self.vocab = vocab
        self.size = vocab.size
        self.texts = vocab.texts
        special = vocab.special_ids
        ordinary = np.zeros(vocab.size, dtype=bool)
        empty, nonident_nondot = [], []
        pure, free, check = defaultdict(list), defaultdict(list), defaultdict(list)
        dot_ids, dot_empty, dot_rest = [], [], {}
        dot_pure, dot_free, dot_check = (
            defaultdict(list),
            defaultdict(list),
            defaultdict(list),
        )
        dot_words = defaultdict(list)
        lead_match, dot_match = _LEAD.match, _DOT_LEAD.match
        for token_id, text in enumerate(self.texts):
            if token_id in special:
                continue
            if not text:
                empty.append(token_id)
                continue
            ordinary[token_id] = True
            lead = lead_match(text).group()
            if lead:
                rest = text[len(lead) :]
                if not rest:
                    pure[lead].append(token_id)
                elif dot_match(rest):
                    check[lead].append(token_id)
                else:
                    free[lead].append(token_id)
            else:
                found = dot_match(text)
                if found is None:
                    nonident_nondot.append(token_id)
                else:
                    dot_ids.append(token_id)
                    rest = text[found.end() :]
                    dot_rest[token_id] = rest
                    if not rest:
                        dot_empty.append(token_id)
                    else:
                        lead2 = lead_match(rest).group()
                        if lead2:
                            rest2 = rest[len(lead2) :]
                            if not rest2:
                                dot_pure[lead2].append(token_id)
                            elif dot_match(rest2):
                                dot_check[lead2].append(token_id)
                            else:
                                dot_free[lead2].append(token_id)
            if "." in text:
                for word in set(_DOT_WORD.findall(text)):
                    dot_words[word].append(token_id)
        self.ordinary = ordinary
        self.ordinary.setflags(write=False)
        self.empty_ids = _ids(empty)
        self.eos_ids = _ids(sorted(vocab.eos_ids))
        self.nonident_nondot_ids = _ids(nonident_nondot)
        self.main = LeadTable()
        self.main._finish(pure, free, check)
        #: lead -> tokens whose rest starts with [ \t]*"." (the main table's check group)
        self.mixed_dot_ids_by_lead = self.main.mixed_check_ids_by_lead
        self.dot = DotTable()
        self.dot._finish(dot_pure, dot_free, dot_check)
        self.dot.ids = _ids(dot_ids)
        self.dot.empty_rest_ids = _ids(dot_empty)
        self.dot.rest_of = dot_rest
        #: word -> tokens in which `word` (a whole \w+ run) is followed by [ \t]*"."
        self.dot_word_ids = {k: _ids(v) for k, v in dot_words.items()}
        self._sorted: tuple[list[str], np.ndarray] | None = None

    def ids_starting_with(self, text: str) -> np.ndarray:
        """Ordinary tokens whose text starts with `text` (a range of the sorted texts)."""
        if self._sorted is None:
            order = sorted((t, i) for i, t in enumerate(self.texts) if self.ordinary[i])
            self._sorted = ([t for t, _ in order], _ids([i for _, i in order]))
        texts, ids = self._sorted
        if not text:
            return ids
        lo = bisect.bisect_left(texts, text)
        hi = bisect.bisect_left(texts, text + "\U0010ffff", lo)
        return ids[lo:hi]


class TokenIndex(TokenConstraint):
    """A `Constrainer` over a `Vocabulary`, as the token-level constraint decoders use."""

    def __init__(
        self,
        constrainer: Constrainer,
        vocab: Vocabulary,
        context: Any = None,
        tables: TokenTables | None = None,
    ):
        if not isinstance(constrainer, Constrainer):
            raise TypeError(
                f"TokenIndex needs a Constrainer, got {type(constrainer).__name__}"
            )
        self.constrainer = constrainer
        self.vocab = vocab
        self.context = context
        self.source = getattr(constrainer, "source", "")
        self.tables = tables if tables is not None else TokenTables.of(vocab)
        self._texts = vocab.texts
        self._num_defined = vocab.num_defined
        self._special = vocab.special_ids
        self._eos = vocab.eos_ids
        self._advance_cache: dict[tuple[State, int], State | None] = {}
        self._mask_cache: dict[State, np.ndarray] = {}
        self._children: dict[int, TokenIndex] = {}
        self._initial: tuple[State] | None = None
        #: per-constrainer mask machinery (e.g. the API monitor's), owned by the constrainer
        self.plan_cache: dict[Any, Any] = {}
        #: part label -> seconds spent computing that part's masks (an `AllOf`'s index)
        self.part_seconds: dict[str, float] = {}

    # -- construction helpers -------------------------------------------------------
    def child(self, position: int, constrainer: Constrainer) -> TokenIndex:
        index = self._children.get(position)
        if index is None or index.constrainer is not constrainer:
            index = self._children[position] = TokenIndex(
                constrainer, self.vocab, tables=self.tables
            )
        return index

    def clear_caches(self) -> None:
        """Forget cached transitions and masks (benchmarks measure fresh computations)."""
        self._advance_cache.clear()
        self._mask_cache.clear()
        self.plan_cache.clear()
        for index in self._children.values():
            index.clear_caches()

    # -- TokenConstraint --------------------------------------------------------------
    def resolved_chains(self, text: str) -> list[tuple[str, ...]]:
        return self.constrainer.resolved_chains(self.context, text)

    def initial_state(self) -> State:
        if self._initial is None:
            self._initial = (self.constrainer.start(self.context),)
        return self._initial[0]

    def advance(self, state: State, token_id: int) -> State | None:
        key = (state, token_id)
        cache = self._advance_cache
        if key in cache:
            return cache[key]
        if state is END:
            result = None
        elif token_id in self._eos:
            result = END if self.constrainer.is_complete(state) else None
        elif token_id in self._special or not 0 <= token_id < self._num_defined:
            result = None
        else:
            result = self.constrainer.check(state, self._texts[token_id])
        cache[key] = result
        return result

    def allowed(self, state: State, token_ids: Sequence[int]) -> np.ndarray:
        cached = self._mask_cache.get(state)
        ids = np.asarray(token_ids, dtype=np.int64)
        if cached is not None:
            return cached[ids]
        advance = self.advance
        verdicts = (advance(state, t) is not None for t in ids.tolist())
        return np.fromiter(verdicts, dtype=bool, count=len(ids))

    def mask(self, state: State) -> np.ndarray:
        cached = self._mask_cache.get(state)
        if cached is None:
            cached = self.compute_mask(state)
            cached.setflags(write=False)
            self._mask_cache[state] = cached
        return cached

    # -- mask computation ---------------------------------------------------------------
    def compute_mask(self, state: State) -> np.ndarray:
        """A fresh (uncached) mask for `state`."""
        if state is END:
            return np.zeros(self.vocab.size, dtype=bool)
        constrainer = self.constrainer
        if isinstance(constrainer, AllOf):
            mask = None
            seconds = self.part_seconds
            for position, (part, part_state) in enumerate(
                zip(constrainer.parts, state)
            ):
                started = time.perf_counter()
                part_mask = self.child(position, part).mask(part_state)
                label = part.label
                seconds[label] = seconds.get(label, 0.0) + time.perf_counter() - started
                mask = (
                    part_mask.copy()
                    if mask is None
                    else np.logical_and(mask, part_mask, out=mask)
                )
            if mask is None:
                mask = self.tables.ordinary.copy()
                mask[self.tables.eos_ids] = True
                mask[self.tables.empty_ids] = True
            return mask
        started = time.perf_counter()
        mask = constrainer.token_mask(state, self)
        if mask is None:
            mask = self.walk_mask(state)
        else:
            mask = np.array(mask, dtype=bool, copy=True)
        label = constrainer.label
        self.part_seconds[label] = self.part_seconds.get(label, 0.0) + time.perf_counter() - started
        mask[self.tables.eos_ids] = bool(constrainer.is_complete(state))
        mask[self.tables.empty_ids] = True
        return mask

    def walk_mask(self, state: State) -> np.ndarray:
        """Walk the vocabulary's character trie jointly with the constrainer."""
        constrainer = self.constrainer
        check = constrainer.check
        is_free = constrainer.is_free
        mask = np.zeros(self.vocab.size, dtype=bool)
        if is_free(state):
            mask[self.tables.ordinary] = True
            return mask
        found: list[int] = []
        stack = [(self.vocab.trie.root, state, "")]
        while stack:
            node, node_state, text = stack.pop()
            for char, child in node.children.items():
                next_state = check(node_state, char)
                if next_state is None:
                    continue
                child_text = text + char
                if is_free(next_state):
                    mask[self.tables.ids_starting_with(child_text)] = True
                    continue
                if child.token_ids:
                    found.extend(child.token_ids)
                if child.children:
                    stack.append((child, next_state, child_text))
        if found:
            mask[np.asarray(found, dtype=np.int64)] = True
        return mask

    def brute_force_mask(self, state: State) -> np.ndarray:
        """Every id checked one by one through `advance` (the reference for tests)."""
        mask = np.zeros(self.vocab.size, dtype=bool)
        if state is END:
            return mask
        check = self.constrainer.check
        for token_id in range(self._num_defined):
            if token_id in self._special:
                continue
            mask[token_id] = check(state, self._texts[token_id]) is not None
        mask[self.tables.eos_ids] = bool(self.constrainer.is_complete(state))
        return mask
