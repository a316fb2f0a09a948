"""`ReadyOnlyIndex`: an API index view for decoding, which never waits for a lookup.

Decoding runs under a time budget (`timeoutMs`); an index lookup that is still being
computed (the first members of a big package take seconds) must not eat it.  The view
answers what its index has ready (members of paths and signatures of calls alike),
starts the lookup of anything else in the background,
answers "unknown" for it and records it in `pending`.  The caller stops the decode as
soon as `pending` is not empty (see `completion.pipeline.run`), waits for or reports
the pending paths, and decodes again once they are ready.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from adaptrack_lsp.apis.index import APIIndex, Member, Signature, members_key, modules_key


class ReadyOnlyIndex(APIIndex):
    """What `index` has ready now; the rest is unknown and listed in `pending`."""

    def __init__(self, index: APIIndex, unknown=(), wait_optional: bool = False):
        """`unknown`: paths answered "unknown" without being listed as pending (the
        caller gave up waiting for them).  `wait_optional`: answers a check may go
        without (`optional_ready`: what a call on a chain returns) are pending too (a
        caller that waits, such as ``explain``, gets the same verdict every time)."""
        self.wait_optional = wait_optional
        self.index = index
        self.source = index.source
        self.unknown = frozenset(tuple(p) for p in unknown)
        self.pending: list[tuple[str, ...]] = []
        self._lock = threading.Lock()

    def members(self, path: tuple[str, ...]) -> Mapping[str, Member] | None:
        path = tuple(path)
        return self.index.members(path) if self._ready(members_key(path)) else None

    def signature(self, key: tuple[str, ...]) -> Signature | None:
        """The signature of call `key` when ready; else unknown, and `key` is pending."""
        key = tuple(key)
        return self.index.signature(key) if self._ready(key) else None

    def submodules(self, path: tuple[str, ...]) -> frozenset[str] | None:
        """The modules importable under `path` when ready; else unknown, and pending."""
        path = tuple(path)
        return self.index.submodules(path) if self._ready(modules_key(path)) else None

    def _ready(self, key: tuple[str, ...]) -> bool:
        """Whether `key`'s answer is there; if not, its look-up starts and, unless the
        caller gave up on it, it is listed in `pending`."""
        if self.index.ready(key):
            return True
        if key in self.unknown:
            return False
        self.index.prefetch(key)
        with self._lock:
            if key not in self.pending:
                self.pending.append(key)
        return False

    def optional_ready(self, key: tuple[str, ...]) -> bool:
        """Whether `key`'s answer is there; if not, it is looked up in the background and,
        only with `wait_optional`, listed in `pending` (a check may do without it)."""
        key = tuple(key)
        if self.wait_optional:
            return self._ready(key)
        if self.index.ready(key):
            return True
        self.index.prefetch(key)
        return False

    def has_pending(self) -> bool:
        """Whether some answer was not ready (the decode should stop)."""
        return bool(self.pending)

    def ready(self, path: tuple[str, ...]) -> bool:
        return self.index.ready(path)

    def prefetch(self, path: tuple[str, ...]) -> None:
        self.index.prefetch(path)

    def wait_ready(self, paths, timeout_s: float) -> bool:
        return self.index.wait_ready(paths, timeout_s)

    def work_seconds(self) -> float:
        return self.index.work_seconds()

    def packages(self) -> dict[str, str]:
        return self.index.packages()

    def absence(self, path: tuple[str, ...], name: str, keyword: bool = False) -> str | None:
        return self.index.absence(path, name, keyword) if self.index.ready(tuple(path)) else None
