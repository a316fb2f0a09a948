"""`StaticIndex`: an in-memory API index from a list of dotted names (tests, task files,
evaluation, snapshots turned into names), with optional signatures."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from adaptrack_lsp.apis.index import APIIndex, Member, Signature, dotted


class StaticIndex(APIIndex):
    """An in-memory `APIIndex` from dotted names (``"numpy.linalg.norm"``).

    Every prefix of a name is a path with members; a path nobody names a member of is
    unknown (None) unless it is itself a listed name (then it has no members: ``{}``).
    `signatures` maps a dotted call (``"numpy.histogram()"``, or
    ``"sklearn.linear_model.LinearRegression().fit()"`` for a method of an instance) to
    its parameters in `Signature.to_list` notation (or a `Signature`); other calls are
    unknown.  `versions`: top-level package -> version (what `packages` says).
    `modules`: dotted package path -> the module names importable under it (``""``:
    the top level), what `submodules` answers; other paths are unknown.
    `deprecated`: dotted name -> deprecation message (`Member.deprecated`).
    """

    def __init__(
        self,
        names: Iterable[str],
        source: str = "static names",
        signatures: Mapping[str, Sequence[str] | Signature] | None = None,
        versions: Mapping[str, str] | None = None,
        modules: Mapping[str, Iterable[str]] | None = None,
        deprecated: Mapping[str, str] | None = None,
    ):
        self.source = source
        deprecated = dict(deprecated or {})
        self._members: dict[tuple[str, ...], dict[str, Member]] = {}
        self._leaves: set[tuple[str, ...]] = set()
        for name in names:
            parts = tuple(p for p in name.strip().split(".") if p)
            if not parts:
                continue
            self._leaves.add(parts)
            for depth in range(1, len(parts)):
                self._members.setdefault(parts[:depth], {})[parts[depth]] = Member(
                    parts[depth], "name", True, deprecated.get(".".join(parts[: depth + 1]), "")
                )
        self._signatures = {
            call.removesuffix("()") + "()": value if isinstance(value, Signature) else Signature.from_list(value)
            for call, value in (signatures or {}).items()
        }
        self._versions = dict(versions or {})
        self._modules = {
            tuple(p for p in key.split(".") if p): frozenset(names) for key, names in (modules or {}).items()
        }
        self.lookups = 0

    def members(self, path: tuple[str, ...]) -> Mapping[str, Member] | None:
        self.lookups += 1
        found = self._members.get(tuple(path))
        if found is not None:
            return found
        return {} if tuple(path) in self._leaves else None

    def signature(self, key: tuple[str, ...]) -> Signature | None:
        return self._signatures.get(dotted(key))

    def submodules(self, path: tuple[str, ...]) -> frozenset[str] | None:
        return self._modules.get(tuple(path))

    def packages(self) -> dict[str, str]:
        return dict(self._versions)
