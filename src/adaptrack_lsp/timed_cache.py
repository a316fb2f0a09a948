"""Answers that depend on the status of files, trusted for `STATUS_SECONDS`.

Typing asks the same questions on every keystroke (is this path a workspace file, which
files do these imports lead to, which files does this document lean on); each answer is
kept for `STATUS_SECONDS`, after which a new, removed or edited file is seen.  A cache
holds at most `size` answers and is emptied when full.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

#: seconds an answer that depends on the status of files is trusted
STATUS_SECONDS = 2.0

V = TypeVar("V")


class TimedCache(Generic[V]):
    """key -> (when computed, answer), bounded at `size` answers."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._answers: dict[Hashable, tuple[float, V]] = {}

    def get(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The answer kept for `key` if computed less than `STATUS_SECONDS` ago, else
        `compute()` (kept)."""
        now = time.monotonic()
        kept = self._answers.get(key)
        if kept is not None and now - kept[0] < STATUS_SECONDS:
            return kept[1]
        answer = compute()
        if len(self._answers) >= self.size:
            self._answers.clear()
        self._answers[key] = (now, answer)
        return answer

    def __len__(self) -> int:
        return len(self._answers)
