"""API indexes: which attribute paths exist in an environment.

`APIIndex.members(path)` answers for a module-qualified path such as
``("numpy", "linalg")``: a mapping of member name -> `Member`, or None when unknown
(timeout, unresolvable, error) — unknown means *unconstrained*, never "empty".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Member:
    name: str
    #: "module", "class", "function", "instance", "statement", "keyword", ... (jedi's types)
    kind: str
    #: whether the member can have members of its own (modules, classes, instances)
    has_members: bool = True


class APIIndex(ABC):
    """Members of dotted paths in one environment or snapshot."""

    #: human-readable origin, e.g. "numpy 2.4.6" or "snapshot tensorflow 2.21.0"
    source: str = ""
    #: why this index cannot constrain ("" when it can); then every path is unknown
    problem: str = ""

    @abstractmethod
    def members(self, path: tuple[str, ...]) -> Mapping[str, Member] | None:
        """Members of `path` (a module-qualified dotted path), None when unknown."""

    def packages(self) -> dict[str, str]:
        """Top-level package -> version for the packages this index has answered about."""
        return {}

    def ready(self, path: tuple[str, ...]) -> bool:
        """Whether `members(path)` answers now, without waiting (indexes that compute
        answers in the background say False while `path` is being computed)."""
        return True

    def prefetch(self, path: tuple[str, ...]) -> None:  # noqa: B027 - an optional hook
        """Start computing `path` in the background (no-op where answers are immediate)."""

    def wait_ready(self, paths, timeout_s: float) -> bool:
        """Wait until every path of `paths` is `ready` (at most `timeout_s`)."""
        return True

    def work_seconds(self) -> float:
        """Seconds this index has spent computing answers in the background (0 where
        answers are immediate)."""
        return 0.0

    def has_root(self, module: str) -> bool:
        """Whether top-level `module` can be resolved (unresolvable roots are unconstrained)."""
        return self.members((module,)) is not None

    def close(self) -> None:  # noqa: B027 - an optional hook: most indexes hold nothing to stop
        """Stop background work and subprocesses (nothing by default)."""


def path_exists(index: APIIndex, path: tuple[str, ...] | list[str]) -> bool | None:
    """Whether the dotted chain `path` (``("numpy", "prod")``) is valid in `index`.

    True: every name after the root is a member of the path before it.  False: some
    name is known not to be one (or follows a member without members, a function).
    None: unknown somewhere along the chain (unconstrained).  This is how the chain
    monitor reads `members()`.
    """
    path = tuple(path)
    if not path:
        raise ValueError("empty path")
    if len(path) == 1:
        return True if index.members(path) is not None else None
    for depth in range(1, len(path)):
        members = index.members(path[:depth])
        if members is None:
            return None
        member = members.get(path[depth])
        if member is None:
            return False
        if depth + 1 < len(path) and not member.has_members:
            return False
    return True


def bundled_snapshot(package: str) -> str:
    """Path of the API snapshot shipped with adaptrack-lsp for `package`."""
    from importlib import resources

    data = resources.files("adaptrack_lsp") / "data"
    candidates = sorted(
        (entry for entry in data.iterdir() if entry.name.startswith(package + "-") and entry.name.endswith((".json", ".json.gz"))),
        key=lambda entry: entry.name,
    ) if data.is_dir() else []
    if not candidates:
        available = sorted(entry.name for entry in data.iterdir()) if data.is_dir() else []
        raise FileNotFoundError(f"no bundled API snapshot for {package!r} (available: {', '.join(available) or 'none'})")
    return str(candidates[-1])


# Implementations live in sibling modules and are re-exported here lazily (those modules
# import this one, and none of them imports anything heavy at module level).
_EXPORTS = {
    "JediIndex": "jedi_index",
    "default_cache_dir": "jedi_index",
    "module_snapshot": "snapshot",
    "find_python": "jedi_index",
    "RuntimeIntrospector": "introspection",
    "SnapshotError": "snapshot",
    "SnapshotIndex": "snapshot",
    "compat_v1_as_root": "snapshot",
    "read_snapshot": "snapshot",
    "tensorflow_v1_setting": "snapshot",
    "write_snapshot": "snapshot",
}

__all__ = [  # noqa: PLE0604 - the lazily exported names are strings too
    "APIIndex",
    "Member",
    "bundled_snapshot",
    "path_exists",
    *_EXPORTS,
]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"adaptrack_lsp.constrainers.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
