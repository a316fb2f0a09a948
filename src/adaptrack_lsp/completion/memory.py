"""Giving memory that finished requests used back, over a long session.

A request builds a prefix tree whose nodes link parent and children and hold arrays the
size of the vocabulary.  The tree breaks those cycles when its decode ends
(`PrefixTree.close`), so reference counting frees it at once.  What other code leaves in
cycles is freed only by a full garbage collection, which CPython runs when the objects
that survived the last one grew by 25%: with the API index's jedi trees in memory
(hundreds of thousands of objects) that is rare.  After a request's answer (next on the
model thread, so that its time is not the request's) the service calls
`FreeMemoryReleaser.after_request`,
which at most once per `interval_s` runs a full collection and asks glibc to return the
free pages (``malloc_trim``; nothing elsewhere).  The first collection also freezes
(`gc.freeze`) what is alive then (the loaded model, the parsed modules), so that later
collections only walk objects created since; that collection costs up to a second once,
the later ones milliseconds to a few hundred.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import sys
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

#: seconds between two collections after requests
DEFAULT_INTERVAL_S = 10.0


def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (e.g. musl)
        return None


class FreeMemoryReleaser:
    """A full collection plus ``malloc_trim(0)``, at most once per `interval_s`."""

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, clock: Callable[[], float] = time.monotonic):
        self.interval_s = float(interval_s)
        self._clock = clock
        self._trim = _malloc_trim()
        self._last: float | None = None
        self._frozen = False
        self.collections = 0

    def after_request(self) -> None:
        now = self._clock()
        if self._last is None:
            self._last = now  # the first requests warm caches: start counting from here
            return
        if now - self._last < self.interval_s:
            return
        self._last = now
        try:
            gc.collect()
            if not self._frozen:
                gc.freeze()
                self._frozen = True
            if self._trim is not None:
                self._trim(0)
            self.collections += 1
        except Exception:  # never let housekeeping fail a request
            logger.debug("releasing memory failed", exc_info=True)
