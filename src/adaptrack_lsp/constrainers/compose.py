"""Composition of constraints: `AllOf` (AND of text constrainers), `TokenAllOf` (AND
of token constraints) and `ForcedPrefix` (token healing).

`AllOf(a, b, ...)`: text is valid iff every part accepts it; the state is the tuple of
the parts' states.  `TokenIndex` computes its masks as the AND of the parts' masks.

`TokenAllOf(a, b, ...)`: a token is valid iff every `TokenConstraint` part allows it
(e.g. the API monitor's `TokenIndex` AND a grammar); the state is the tuple of the
parts' states (None as soon as one part has none); masks are the AND of the parts'
masks, lazy checks ask each part only about the ids the parts before it allowed.

`ForcedPrefix(text)`: the generated text must start with `text`.  Token healing cuts the
prompt back to before a partial identifier (``np.lin|`` -> prompt ``np.``) and forces the
regenerated text to start with it (``lin``), so the model may pick any token that covers
the boundary.  Combine it with the API monitor: ``AllOf(ForcedPrefix("lin"), monitor)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptrack_lsp.constrainers.base import Constrainer, State, TokenConstraint


class AllOf(Constrainer):
    """Every part must accept the text (AND)."""

    def __init__(self, *parts: Constrainer):
        if not parts:
            raise ValueError("AllOf needs at least one constrainer")
        flat: list[Constrainer] = []
        for part in parts:
            if not isinstance(part, Constrainer):
                raise TypeError(
                    f"AllOf parts must be Constrainers, got {type(part).__name__}"
                )
            flat.extend(part.parts if isinstance(part, AllOf) else (part,))
        self.parts: tuple[Constrainer, ...] = tuple(flat)
        self.source = " + ".join(p.source for p in self.parts if p.source)

    def start(self, context: Any = None) -> State:
        return tuple(part.start(context) for part in self.parts)

    def check(self, state: State, text: str) -> State | None:
        result = []
        for part, part_state in zip(self.parts, state):
            next_state = part.check(part_state, text)
            if next_state is None:
                return None
            result.append(next_state)
        return tuple(result)

    def is_complete(self, state: State) -> bool:
        return all(part.is_complete(s) for part, s in zip(self.parts, state))

    def is_free(self, state: State) -> bool:
        return all(part.is_free(s) for part, s in zip(self.parts, state))

    def resolved_chains(self, context: Any, text: str) -> list[tuple[str, ...]]:
        return [chain for part in self.parts for chain in part.resolved_chains(context, text)]

    def rejection(self, state: State, text: str) -> str:
        """The reason of the first part that rejects `text`'s first character (`text`
        may carry the rest of the word, see `Constrainer.rejection`)."""
        for part, part_state in zip(self.parts, state):
            if part.check(part_state, text[:1]) is None:
                return part.rejection(part_state, text)
        for part, part_state in zip(self.parts, state):
            if part.check(part_state, text) is None:
                return part.rejection(part_state, text)
        return super().rejection(state, text)


class ForcedPrefix(Constrainer):
    """The generated text must start with `text`; the state is what is still owed."""

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError("ForcedPrefix needs a str")
        self.text = text
        self.source = f"forced prefix {text!r}" if text else ""

    def start(self, context: Any = None) -> State:
        return self.text

    def check(self, state: State, text: str) -> State | None:
        if not state:
            return state
        if len(text) >= len(state):
            return "" if text.startswith(state) else None
        return state[len(text) :] if state.startswith(text) else None

    def is_complete(self, state: State) -> bool:
        return not state

    def is_free(self, state: State) -> bool:
        """Once the prefix is written, every continuation is valid."""
        return not state

    def rejection(self, state: State, text: str) -> str:
        return f"the completion must start with {state!r} (the word before the cursor)"


class TokenAllOf(TokenConstraint):
    """Every token constraint must allow the token (AND at the token level)."""

    def __init__(self, *parts: TokenConstraint):
        if not parts:
            raise ValueError("TokenAllOf needs at least one token constraint")
        flat: list[TokenConstraint] = []
        for part in parts:
            if not isinstance(part, TokenConstraint):
                raise TypeError(f"TokenAllOf parts must be TokenConstraints, got {type(part).__name__}")
            flat.extend(part.parts if isinstance(part, TokenAllOf) else (part,))
        self.parts: tuple[TokenConstraint, ...] = tuple(flat)
        self.source = " + ".join(p.source for p in self.parts if p.source)
        self._masks: dict[State, np.ndarray] = {}

    def initial_state(self) -> State:
        states = tuple(part.initial_state() for part in self.parts)
        return None if any(s is None for s in states) else states

    def advance(self, state: State, token_id: int) -> State | None:
        if state is None:
            return None
        result = []
        for part, part_state in zip(self.parts, state):
            next_state = part.advance(part_state, token_id)
            if next_state is None:
                return None
            result.append(next_state)
        return tuple(result)

    def allowed(self, state: State, token_ids: Sequence[int]) -> np.ndarray:
        ids = np.asarray(token_ids, dtype=np.int64)
        if state is None:
            return np.zeros(ids.shape[0], dtype=bool)
        cached = self._masks.get(state)
        if cached is not None:
            return cached[ids]
        verdicts = np.ones(ids.shape[0], dtype=bool)
        for part, part_state in zip(self.parts, state):
            open_positions = np.flatnonzero(verdicts)
            if not open_positions.size:
                break
            verdicts[open_positions] = np.asarray(part.allowed(part_state, ids[open_positions]), dtype=bool)
        return verdicts

    def mask(self, state: State) -> np.ndarray:
        cached = self._masks.get(state)
        if cached is None:
            cached = None
            for part, part_state in zip(self.parts, state):
                part_mask = np.asarray(part.mask(part_state), dtype=bool)
                cached = part_mask.copy() if cached is None else np.logical_and(cached, part_mask, out=cached)
            cached.setflags(write=False)
            self._masks[state] = cached
        return cached

    def resolved_chains(self, text: str) -> list[tuple[str, ...]]:
        return [chain for part in self.parts for chain in part.resolved_chains(text)]

    @property
    def part_seconds(self) -> dict[str, float]:
        """Mask seconds per constraint part, over the parts that time theirs."""
        merged: dict[str, float] = {}
        for part in self.parts:
            for label, seconds in getattr(part, "part_seconds", {}).items():
                merged[label] = merged.get(label, 0.0) + seconds
        return merged
