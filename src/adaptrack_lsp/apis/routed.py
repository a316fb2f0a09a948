"""`RoutedIndex`: one API index made of several, chosen by a path's top-level package.

A snapshot answers for its own package (the TensorFlow 2.21 snapshot bundled with
adaptrack-lsp for ``tensorflow``) and the live environment answers for every other one
(numpy, torch, the standard library), so a file that imports both is checked against
both.  `notes` names the packages a snapshot answered for (``tensorflow 2.21.0
snapshot``), for results that must say where validity came from.

`resolve_snapshot` turns ``--snapshot``'s value (a snapshot file, or the package name of
a bundled one) into a file; `not_installed` says which top-level packages an interpreter
cannot find (from its ``sys.path``, importing nothing); `snapshot_index_factory` gives
`ConstraintEnvironment` its index: the live environment with the given snapshots routed
in front of it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from adaptrack_lsp.apis.index import APIIndex, Member, Signature, key_path

logger = logging.getLogger(__name__)


class RoutedIndex(APIIndex):
    """Paths under a root of `routes` go to that root's index; all others to `base`
    (None: unknown).  The base's `problem` is the index's problem: an environment that
    fails leaves the completion unconstrained with its reason, as without routes."""

    def __init__(
        self,
        base: APIIndex | None,
        routes: Mapping[str, APIIndex],
        notes: Mapping[str, str] | None = None,
        source: str = "routed",
    ):
        """`source`: what a result names as the origin of validity (the constraint
        info's source, e.g. "snapshot"); `describe()` says which index answers for what."""
        self.source = source
        self.base = base
        self.routes = dict(routes)
        #: root -> how results name the index that answered for it ("tensorflow 2.21.0 snapshot")
        self.notes = dict(notes or {})

    def _index(self, path: Sequence[str]) -> APIIndex | None:
        path = key_path(path)  # a key of ready/prefetch names its path after a marker
        return self.routes.get(path[0], self.base) if path else self.base

    def submodules(self, path: tuple[str, ...]) -> frozenset[str] | None:
        """The base's listing; at the top level the routed packages are importable too."""
        index = self._index(path)
        found = index.submodules(path) if index is not None else None
        if not path and found is not None:
            found = frozenset(found) | frozenset(self.routes)
        return found

    def check_interpreter(self) -> str:
        check = getattr(self.base, "check_interpreter", None)
        return check() if check is not None else ""

    @property
    def problem(self) -> str:  # type: ignore[override]
        return getattr(self.base, "problem", "") or ""

    def describe(self) -> str:
        routed = ", ".join(f"{root} from the {self.notes.get(root) or 'snapshot'}" for root in sorted(self.routes))
        if self.base is None:
            return f"{routed}; other packages unchecked"
        describe = getattr(self.base, "describe", None)
        return f"{routed}; other packages from the {describe() if describe else self.base.source}"

    def members(self, path: tuple[str, ...]) -> Mapping[str, Member] | None:
        index = self._index(path)
        return index.members(path) if index is not None else None

    def signature(self, key: tuple[str, ...]) -> Signature | None:
        index = self._index(key)
        return index.signature(key) if index is not None else None

    def absence(self, path: tuple[str, ...], name: str, keyword: bool = False) -> str | None:
        index = self._index(path)
        return index.absence(path, name, keyword) if index is not None else None

    def lacking(self, path: tuple[str, ...], name: str, keyword: bool = False):
        index = self._index(path)
        return index.lacking(path, name, keyword) if index is not None else None

    def has_root(self, module: str) -> bool:
        index = self._index((module,))
        return index is not None and index.has_root(module)

    def ready(self, path: tuple[str, ...]) -> bool:
        index = self._index(path)
        return index is None or index.ready(path)

    def prefetch(self, path: tuple[str, ...]) -> None:
        index = self._index(path)
        if index is not None:
            index.prefetch(path)

    def wait_ready(self, paths, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        groups: dict[int, tuple[APIIndex, list]] = {}
        for path in paths:
            index = self._index(tuple(path))
            if index is not None:
                groups.setdefault(id(index), (index, []))[1].append(tuple(path))
        return all(index.wait_ready(group, max(0.0, deadline - time.monotonic())) for index, group in groups.values())

    def work_seconds(self) -> float:
        return sum(index.work_seconds() for index in self._indexes())

    def packages(self) -> dict[str, str]:
        found = dict(self.base.packages()) if self.base is not None else {}
        for root, index in self.routes.items():
            version = index.packages().get(root)
            if version:
                found[root] = version
            else:
                found.pop(root, None)
        return found

    def close(self) -> None:
        for index in self._indexes():
            try:
                index.close()
            except Exception:
                logger.debug("closing an API index failed", exc_info=True)

    def _indexes(self) -> list[APIIndex]:
        return [*self.routes.values(), *([self.base] if self.base is not None else [])]


def bundled_snapshot_names() -> list[str]:
    """Package names of the snapshots bundled with adaptrack-lsp (``["tensorflow"]``)."""
    from importlib import resources

    data = resources.files("adaptrack_lsp") / "data"
    if not data.is_dir():
        return []
    names = {entry.name.split("-", 1)[0] for entry in data.iterdir() if entry.name.endswith((".json", ".json.gz")) and "-" in entry.name}
    return sorted(names)


def resolve_snapshot(value: str) -> str:
    """The snapshot file `value` names: a file path as given, else the bundled snapshot
    of the package called `value`; FileNotFoundError saying what exists otherwise."""
    if Path(value).expanduser().is_file():
        return str(Path(value).expanduser())
    from adaptrack_lsp.apis.index import bundled_snapshot

    if value in bundled_snapshot_names():
        return bundled_snapshot(value)
    bundled = ", ".join(bundled_snapshot_names()) or "none"
    raise FileNotFoundError(f"{value}: no such snapshot file, and no bundled snapshot of that name (bundled: {bundled})")


def not_installed(
    roots: Iterable[str],
    python: str | None = None,
    workspace: str | None = None,
    trusted_workspace: bool = False,
    timeout_s: float = 20.0,
) -> list[str]:
    """Those top-level `roots` that the environment validating completions cannot import
    (the interpreter `JediIndex` would use for these settings): not a package, module or
    extension on its isolated ``sys.path``, asked once, time-limited, importing nothing.
    [] when the interpreter cannot be asked (not found, refused by jedi's safety check,
    no answer): the index then says why."""
    from adaptrack_lsp.apis.index_cache import EnvironmentProbeError, module_location, probe_environment
    from adaptrack_lsp.apis.jedi_index import FOUND_BY_SETTING, find_python

    found, found_by, problem = find_python(python, workspace, trusted_workspace)
    if problem or found is None:
        return []
    if found_by not in (FOUND_BY_SETTING, "server interpreter"):  # as JediIndex: run only a safe interpreter
        from jedi.api.environment import InvalidPythonEnvironment, _assert_safe

        try:
            _assert_safe(found, True)
        except (InvalidPythonEnvironment, OSError):
            return []
    try:
        facts = probe_environment(found, timeout_s)
    except EnvironmentProbeError as error:
        logger.info("cannot tell which packages %s has: %s", found, error)
        return []
    return [root for root in dict.fromkeys(roots) if not module_location((root,), facts.sys_path)]


def snapshot_note(index) -> str:
    """How a result names what a snapshot answered for: ``tensorflow 2.21.0 snapshot``."""
    return f"{index.package} {index.version} snapshot"


def snapshot_index_factory(snapshots: Sequence[str]):
    """An index factory for `ConstraintEnvironment`: the live environment the settings
    name (as without a factory), with each snapshot file of `snapshots` answering for
    its own package."""

    def factory(settings, workspace_root):
        from adaptrack_lsp.apis.jedi_index import JediIndex
        from adaptrack_lsp.apis.snapshot import SnapshotIndex

        routes: dict[str, APIIndex] = {}
        notes: dict[str, str] = {}
        for file in snapshots:
            snapshot = SnapshotIndex(file)
            routes[snapshot.root] = snapshot
            notes[snapshot.root] = snapshot_note(snapshot)
        live = JediIndex(
            python=settings.python_path,
            workspace=workspace_root,
            timeout_s=settings.timeout_ms / 1000.0,
            runtime_introspection=settings.runtime_introspection,
            trusted_workspace=settings.trusted_workspace,
        )
        return RoutedIndex(live, routes, notes, source="snapshot")

    return factory
