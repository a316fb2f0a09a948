"""`StaticIndex`: an in-memory API index from a list of dotted names (tests, task files,
evaluation, snapshots turned into names)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from adaptrack_lsp.constrainers.api_index import APIIndex, Member


class StaticIndex(APIIndex):
    """An in-memory `APIIndex` from dotted names (``"numpy.linalg.norm"``).

    Every prefix of a name is a path with members; a path nobody names a member of is
    unknown (None) unless it is itself a listed name (then it has no members: ``{}``).
    """

    def __init__(self, names: Iterable[str], source: str = "static names"):
        self.source = source
        self._members: dict[tuple[str, ...], dict[str, Member]] = {}
        self._leaves: set[tuple[str, ...]] = set()
        for dotted in names:
            parts = tuple(p for p in dotted.strip().split(".") if p)
            if not parts:
                continue
            self._leaves.add(parts)
            for depth in range(1, len(parts)):
                self._members.setdefault(parts[:depth], {})[parts[depth]] = Member(
                    parts[depth], "name", True
                )
        self.lookups = 0

    def members(self, path: tuple[str, ...]) -> Mapping[str, Member] | None:
        self.lookups += 1
        found = self._members.get(tuple(path))
        if found is not None:
            return found
        return {} if tuple(path) in self._leaves else None
