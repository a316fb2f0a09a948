"""API indexes: which attribute paths exist in an environment.

`APIIndex.members(path)` answers for a module-qualified path such as
``("numpy", "linalg")``: a mapping of member name -> `Member`, or None when unknown
(timeout, unresolvable, error) — unknown means *unconstrained*, never "empty".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Mapping


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

    @abstractmethod
    def members(self, path: tuple[str, ...]) -> Mapping[str, Member] | None:
        """Members of `path` (a module-qualified dotted path), None when unknown."""

    def packages(self) -> dict[str, str]:
        """Top-level package -> version for the packages this index has answered about."""
        return {}

    def has_root(self, module: str) -> bool:
        """Whether top-level `module` can be resolved (unresolvable roots are unconstrained)."""
        return self.members((module,)) is not None
