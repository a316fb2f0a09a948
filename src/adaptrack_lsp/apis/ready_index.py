"""`ReadyOnlyIndex`: an API index view for decoding, which never waits for a lookup.

Decoding runs under a time budget (`timeoutMs`); an index lookup that is still being
computed (the first members of a big package take seconds) must not eat it.  The view
answers what its index has ready (members of paths and signatures of calls alike),
starts the lookup of anything else in the background,
answers "unknown" for it and records it in `pending`.  The caller stops the decode as
soon as `pending` is not empty (see `completion.pipeline.run`), waits for or reports
the pending paths, and decodes again once they are ready.

`answer_now` (ghost text): a path not computed yet is answered as having no members
(nothing may follow it after a ``.``) and a call whose signature is not computed yet as
taking no keyword, instead of "unknown": the decode goes on without them and never
writes an unchecked member; the paths are still looked up and listed in `pending`, so
the caller can say what is being indexed and answer better once they are ready.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import MappingProxyType

from adaptrack_lsp.apis.index import APIIndex, Member, Signature, members_key, modules_key

#: `answer_now`: the members of a path not computed yet, and the signature of such a call
NO_MEMBERS: Mapping[str, Member] = MappingProxyType({})
NO_KEYWORDS = Signature(())


class ReadyOnlyIndex(APIIndex):
    """What `index` has ready now; the rest is unknown and listed in `pending`."""

    def __init__(self, index: APIIndex, unknown=(), answer_now: bool = False, wait_optional: bool = False):
        """`unknown`: paths answered "unknown" without being listed as pending (the
        caller gave up waiting for them).  `answer_now`: paths not computed yet count as
        having no members, calls as taking no keyword (see the module docstring).
        `wait_optional`: answers a check may go without (`optional_ready`: what a call on
        a chain returns) are pending too (a caller that waits, such as ``explain``, gets
        the same verdict every time)."""
        self.wait_optional = wait_optional
        self.index = index
        self.source = index.source
        self.unknown = frozenset(tuple(p) for p in unknown)
        self.answer_now = bool(answer_now)
        self.pending: list[tuple[str, ...]] = []
        self._lock = threading.Lock()

    def members(self, path: tuple[str, ...]) -> Mapping[str, Member] | None:
        path = tuple(path)
        if self._ready(members_key(path)):
            return self.index.members(path)
        return NO_MEMBERS if self.answer_now and members_key(path) not in self.unknown else None

    def signature(self, key: tuple[str, ...]) -> Signature | None:
        """The signature of call `key` when ready; else unknown, and `key` is pending."""
        key = tuple(key)
        if self._ready(key):
            return self.index.signature(key)
        return NO_KEYWORDS if self.answer_now and key not in self.unknown else None

    def submodules(self, path: tuple[str, ...]) -> frozenset[str] | None:
        """The modules importable under `path` when ready; else unknown (none with
        `answer_now`), and pending."""
        path = tuple(path)
        if self._ready(modules_key(path)):
            return self.index.submodules(path)
        return frozenset() if self.answer_now and modules_key(path) not in self.unknown else None

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

    def progress(self, root: str) -> tuple[int, int] | None:
        return self.index.progress(root)

    def packages(self) -> dict[str, str]:
        return self.index.packages()

    def absence(self, path: tuple[str, ...], name: str, keyword: bool = False) -> str | None:
        return self.index.absence(path, name, keyword) if self.index.ready(tuple(path)) else None

    def lacking(self, path: tuple[str, ...], name: str, keyword: bool = False):
        return self.index.lacking(path, name, keyword) if self.index.ready(tuple(path)) else None

    def deprecated_in(self, path: tuple[str, ...], name: str):
        return self.index.deprecated_in(path, name) if self.index.ready(members_key(path)) else None
