"""Composition of text constrainers: `AllOf` (AND) and `ForcedPrefix` (token healing).

`AllOf(a, b, ...)`: text is valid iff every part accepts it; the state is the tuple of
the parts' states.  `TokenIndex` computes its masks as the AND of the parts' masks.

`ForcedPrefix(text)`: the generated text must start with `text`.  Token healing cuts the
prompt back to before a partial identifier (``np.lin|`` -> prompt ``np.``) and forces the
regenerated text to start with it (``lin``), so the model may pick any token that covers
the boundary.  Combine it with the API monitor: ``AllOf(ForcedPrefix("lin"), monitor)``.
"""

from __future__ import annotations

from typing import Any

from adaptrack_lsp.constrainers.base import Constrainer, State


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
        """The reason of the first part that rejects `text`."""
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
