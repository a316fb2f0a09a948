"""Constraint protocols.

Two layers:

- `Constrainer` works on *text*: `start(context) -> state`, `check(state, text) ->
  next_state | None`, `is_complete(state)`.  States are immutable and hashable.  This is
  what the API monitor, whitelist and forced-prefix constraints implement.
- `TokenConstraint` works on *token ids* and is what decoders and the prefix tree use:
  `initial_state()`, `advance(state, token_id) -> state | None`, `allowed(state, ids)`
  (lazy, for the few tokens a decoder asks about) and `mask(state)` (every id).
  `constrainers.token_index.TokenIndex` turns a `Constrainer` plus a `Vocabulary` into
  a `TokenConstraint` (EOS allowed iff `is_complete`, special and padding ids never).
  Task files' sequence constraints implement `TokenConstraint` directly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

State = Hashable


class Constrainer(ABC):
    """A prefix-closed constraint on generated text."""

    #: where validity comes from, for display (e.g. "numpy 2.4.6")
    source: str = ""

    @property
    def label(self) -> str:
        """The part's name in timings (the latency split per constraint): its class name."""
        return type(self).__name__

    @abstractmethod
    def start(self, context: Any = None) -> State:
        """State before any generated text; `context` is the prompt context (document)."""

    @abstractmethod
    def check(self, state: State, text: str) -> State | None:
        """State after appending `text`, or None if no valid continuation can follow."""

    @abstractmethod
    def is_complete(self, state: State) -> bool:
        """May the generated text end here?"""

    # -- optional hooks (defaults: no shortcut) ------------------------------------------
    def is_free(self, state: State) -> bool:
        """True when every text is allowed from `state` on (masks skip the trie walk)."""
        return False

    def token_mask(self, state: State, index) -> np.ndarray | None:
        """bool[vocab.size] for `state` computed from the constrainer's own structure
        (`index` is the `TokenIndex` asking, with its vocabulary tables), or None to let
        the index walk the vocabulary trie."""
        return None

    def resolved_chains(self, context: Any, text: str) -> list[tuple[str, ...]]:
        """The attribute chains (module paths) this constrainer resolved and checked in
        `text` generated after `context`, e.g. ``[("numpy", "linalg", "norm")]``; [] for
        constrainers that check no chains.  Used to say which package validated an answer."""
        return []

    def rejection(self, state: State, text: str) -> str:
        """Why `check(state, text)` returned None, in words for a person (what
        `adaptrack-lsp explain` prints), e.g. "tf.placeholder does not exist in
        tensorflow 2.21".  Called only after `check` rejected `text`'s first character:
        `text` starts with the first rejected character and, when that character begins
        an identifier, goes on to the end of the word (so the reason can name it).  The
        default names the constrainer."""
        return f"{self.source or type(self).__name__} rejects {text[:1]!r} here"


class TokenConstraint(ABC):
    """A prefix-closed constraint on token-id sequences."""

    source: str = ""
    #: parts asked for that turned themselves off for this request, each
    #: ``"<part>: <reason>"`` (`constrainers.environment.token_constraint` sets it)
    off: tuple[str, ...] = ()

    @abstractmethod
    def initial_state(self) -> State: ...

    @abstractmethod
    def advance(self, state: State, token_id: int) -> State | None:
        """State after `token_id`, or None when the token is invalid here."""

    def allowed(self, state: State, token_ids: Sequence[int]) -> np.ndarray:
        """bool per id in `token_ids` (default: `advance` each)."""
        return np.fromiter((self.advance(state, int(t)) is not None for t in token_ids), dtype=bool, count=len(token_ids))

    @abstractmethod
    def mask(self, state: State) -> np.ndarray:
        """bool[vocab.size]: which ids are valid next."""

    def resolved_chains(self, text: str) -> list[tuple[str, ...]]:
        """The attribute chains the constraint resolved in generated `text` (see
        `Constrainer.resolved_chains`); [] by default."""
        return []


class Unconstrained(TokenConstraint):
    """Every token is valid (special tokens other than EOS and padding ids excepted)."""

    source = "unconstrained"

    def __init__(self, vocab):
        self.vocab = vocab
        base = np.zeros(vocab.size, dtype=bool)
        base[: vocab.num_defined] = True
        for i in vocab.special_ids:
            base[i] = False
        for i in vocab.eos_ids:
            base[i] = True
        self._mask = base

    def initial_state(self) -> State:
        return ()

    def advance(self, state: State, token_id: int) -> State | None:
        return () if self._mask[token_id] else None

    def allowed(self, state: State, token_ids: Sequence[int]) -> np.ndarray:
        return self._mask[np.asarray(token_ids, dtype=np.int64)]

    def mask(self, state: State) -> np.ndarray:
        return self._mask.copy()
