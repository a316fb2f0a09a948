"""`SnapshotIndex`: an API index read from a JSON snapshot of dotted names.

Format (``.json`` or ``.json.gz``)::

    {"package": "tensorflow", "version": "2.21.0", "root": "tensorflow",
     "names": ["tensorflow.compat.v1.losses.mean_pairwise_squared_error", ...],
     "kinds": {"tensorflow.compat.v1.losses": "module", ...},
     "signatures": {"tensorflow.nn.dropout()": ["x", "rate", "noise_shape", "seed", "name"], ...}}

``signatures`` (optional; snapshots written before it have none, and then no call's
keywords are constrained) maps a dotted call to its parameters in Python's notation
(`api_index.Signature.to_list`: ``"/"``, ``"*"``, ``"*args"``, ``"**kwargs"``); a
callable the walk found no signature for is left out (any keyword allowed).

Typed receivers (written by walks since format 2; optional)::

     "classes": {"numpy.ndarray": {"members": {"sum": "function", "T": "instance", ...},
                                   "dynamic": null}, ...},
     "class_paths": {"numpy.ndarray": "numpy.ndarray", "pandas.DataFrame": "pandas.core.frame.DataFrame"},
     "returns": {"pandas.read_excel": "pandas.core.frame.DataFrame", ...},
     "signatures": {"numpy.ndarray().sum()": ["axis", "dtype", "out", "**kwargs"], ...}

Deprecations (written by walks since format 3; optional)::

     "deprecated": {"numpy.chararray": "`np.chararray` is deprecated and will be ...", ...},
     "classes": {"pandas.Timestamp": {"members": {...}, "deprecated": {"utcnow": "..."}}}

map a dotted name (or, per class, a member name) to the message of a member that
announces its deprecation (`introspect_worker.deprecation_of`); `Member.deprecated`
carries it.

``classes`` holds what an instance of each class reachable from the public names has
(keyed by where the class is defined, ``module.QualName``; "dynamic" is "any" when
instances take any attribute, "values" for a data proxy whose unlisted attributes are
not callable), ``class_paths`` where each public class name is defined, ``returns`` the
class a call returns where one is known (functions and, as ``"<class>().<method>"``,
methods), and the signatures of methods called on an instance are keyed
``"<class>().<method>()"``.  ``members(path + ("()",))`` answers from them: the members
of an instance of the class `path` names or returns, with a ``"*"`` member (kind
"any" or "values") when there are others.  ``roots`` (optional) lists every top-level
module the snapshot walked when a distribution installs several; ``modules`` (format 4)
every module walked, ``skipped_modules`` the public submodules that did not import there
(name -> the error), which `SnapshotIndex.unchecked` reports, and ``environment`` what
the walk's environment held (a target's: see `targets.target_snapshot`).

``members(path)`` lists the children of `path` among the names.  A path that has no
children in the snapshot (a class, a function, a module the snapshot did not walk) or
that is not in it at all is *unknown* (None): the snapshot only constrains what it
walked.  `tensorflow_v1_setting` gives the paper's TF v1 setting: the
``tensorflow.compat.v1.X`` names of a TF 2.x snapshot as ``tensorflow.X``.

Snapshot files come from outside (a setting, a file in a repository), so reading one is
bounded: at most `MAX_SNAPSHOT_BYTES` of JSON text (after gzip decompression, read in
chunks, so a gzip bomb stops at the cap) and at most `MAX_SNAPSHOT_NAMES` names; past
either limit `read_snapshot` raises `SnapshotError` naming the limit.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from adaptrack_lsp.apis.index import CALL, APIIndex, Member, Signature, dotted

#: the member name standing for "instances have other attributes too" (see
#: `introspect_worker.ANY_ATTRIBUTE`)
ANY_ATTRIBUTE = "*"

#: deepest name walked, in dotted parts after the package
DEFAULT_MAX_DEPTH = 8
#: longest a walk may take (importing tensorflow and walking it takes minutes)
DEFAULT_WALK_TIMEOUT_S = 1800.0

#: largest snapshot read, in bytes of JSON text (decompressed); the bundled TensorFlow
#: 2.21 snapshot is about 1 MB
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
#: most dotted names in one snapshot (the bundled TensorFlow 2.21 snapshot has ~10,000)
MAX_SNAPSHOT_NAMES = 1_000_000
_CHUNK = 1024 * 1024


class SnapshotError(ValueError):
    """A snapshot file that cannot be read or does not have the snapshot format."""


def _read_capped(handle, limit: int, path: Path) -> bytes:
    """At most `limit` bytes from `handle`; SnapshotError when there is more."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = handle.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise SnapshotError(
                f"snapshot {path} is larger than {limit // (1024 * 1024)} MiB of JSON"
                f"{' once decompressed' if path.name.endswith('.gz') else ''}; not read "
                "(a snapshot of one package is a few MB)"
            )


def read_snapshot(
    path: str | os.PathLike, *, max_bytes: int = MAX_SNAPSHOT_BYTES, max_names: int = MAX_SNAPSHOT_NAMES,
    check_signatures: bool = True,
) -> dict[str, Any]:
    """The snapshot in `path` (``.json`` or ``.json.gz``), validated and within the caps
    (`check_signatures=False`: one this program wrote into its cache; the notation of its
    signatures is not gone through again)."""
    path = Path(path)
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as handle:
                raw = _read_capped(handle, max_bytes, path)
        else:
            with open(path, "rb") as handle:
                raw = _read_capped(handle, max_bytes, path)
        data = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise SnapshotError(f"snapshot not found: {path}") from None
    except (OSError, ValueError, EOFError) as error:
        raise SnapshotError(f"cannot read snapshot {path}: {error}") from None
    validate_snapshot(data, str(path), max_names=max_names, check_signatures=check_signatures)
    return data


def validate_snapshot(data: Any, origin: str = "snapshot", *, max_names: int = MAX_SNAPSHOT_NAMES, check_signatures: bool = True) -> None:
    if not isinstance(data, dict):
        raise SnapshotError(f"{origin}: expected a JSON object")
    for field in ("package", "root"):
        if not isinstance(data.get(field), str) or not data[field]:
            raise SnapshotError(f"{origin}: missing string field {field!r}")
    names = data.get("names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SnapshotError(f"{origin}: 'names' must be a list of dotted names")
    if len(names) > max_names:
        raise SnapshotError(f"{origin}: {len(names):,} names, more than the limit of {max_names:,}; not read")
    kinds = data.get("kinds", {})
    if not isinstance(kinds, dict):
        raise SnapshotError(f"{origin}: 'kinds' must be an object")
    for field in ("classes", "class_paths", "returns"):
        if not isinstance(data.get(field, {}), dict):
            raise SnapshotError(f"{origin}: {field!r} must be an object")
    for path, entry in (data.get("classes") or {}).items():
        if not isinstance(entry, dict) or not isinstance(entry.get("members", {}), dict):
            raise SnapshotError(f"{origin}: class {path!r} must be an object with 'members'")
        _validate_messages(entry.get("deprecated", {}), f"{origin}: class {path!r}: 'deprecated'")
    _validate_messages(data.get("deprecated", {}), f"{origin}: 'deprecated'")
    roots = data.get("roots", [])
    if not isinstance(roots, list) or not all(isinstance(r, str) and r for r in roots):
        raise SnapshotError(f"{origin}: 'roots' must be a list of module names")
    modules = data.get("modules", [])
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise SnapshotError(f"{origin}: 'modules' must be a list of module names")
    _validate_messages(data.get("skipped_modules", {}), f"{origin}: 'skipped_modules'")
    signatures = data.get("signatures", {})
    if not isinstance(signatures, dict):
        raise SnapshotError(f"{origin}: 'signatures' must be an object (dotted call -> list of parameters)")
    for call, items in signatures.items() if check_signatures else ():
        # the notation only (a quick pass: a target set reads tens of thousands); the
        # rules of `Signature.from_list` apply where one is used
        problem = ""
        if not isinstance(call, str) or not call.endswith("()"):
            problem = "the key must end in ()"
        elif isinstance(items, str) or not isinstance(items, list):
            problem = "a signature is a list of parameter strings"
        else:
            for item in items:
                if not isinstance(item, str):
                    problem = "a signature is a list of parameter strings"
                elif item not in ("/", "*") and not item.lstrip("*").isidentifier():
                    problem = f"parameter {item!r} is not an identifier"
                if problem:
                    break
        if problem:
            raise SnapshotError(f"{origin}: signature of {call!r}: {problem}")


def _validate_messages(messages: Any, where: str) -> None:
    if not isinstance(messages, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in messages.items()):
        raise SnapshotError(f"{where} must be an object of name -> message")


def write_snapshot(data: Mapping[str, Any], path: str | os.PathLike) -> None:
    """Write `data` as JSON (gzip when the name ends in .gz), stable and compact."""
    text = json.dumps(data, indent=None, separators=(",", ":"), sort_keys=True) + "\n"
    path = Path(path)
    if path.name.endswith(".gz"):
        # mtime=0: the same snapshot gives the same bytes
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as handle:
            handle.write(text.encode("utf-8"))
    else:
        path.write_text(text, encoding="utf-8")


class SnapshotIndex(APIIndex):
    """Members of dotted paths from a snapshot file (or an in-memory snapshot dict)."""

    def __init__(self, path: str | os.PathLike | None = None, *, data: Mapping[str, Any] | None = None, validated: bool = False):
        """`validated`: `data` came from `read_snapshot` (it is not checked twice)."""
        if (path is None) == (data is None):
            raise ValueError("give exactly one of path or data")
        if data is None:
            data = read_snapshot(path)
        elif not validated:
            validate_snapshot(data)
        self.path = str(path) if path is not None else None
        self.package: str = data["package"]
        self.version: str = str(data.get("version") or "unknown")
        self.root: str = data["root"]
        self.source = f"snapshot {self.package} {self.version}"
        kinds: Mapping[str, str] = data.get("kinds") or {}
        deprecated: Mapping[str, str] = data.get("deprecated") or {}
        children: dict[tuple[str, ...], dict[str, Member]] = {}
        for name_path in data["names"]:
            parts = tuple(name_path.split("."))
            for depth in range(1, len(parts)):
                parent, name = parts[:depth], parts[depth]
                child = ".".join(parts[: depth + 1])
                kind = kinds.get(child, "module" if depth + 1 < len(parts) else "unknown")
                members = children.setdefault(parent, {})
                if name not in members or members[name].kind == "unknown":
                    members[name] = Member(name, kind, kind not in ("function", "keyword"), deprecated.get(child, ""))
        self._children = children
        self.names: list[str] = list(data["names"])
        self.roots: tuple[str, ...] = tuple(dict.fromkeys([self.root, *(data.get("roots") or ())]))
        self._signature_items: Mapping[str, list[str]] = data.get("signatures") or {}
        self._signatures: dict[str, Signature] = {}
        self._classes: Mapping[str, Mapping[str, Any]] = data.get("classes") or {}
        self._class_paths: Mapping[str, str] = data.get("class_paths") or {}
        self._returns: Mapping[str, str] = data.get("returns") or {}
        self._instances: dict[str, dict[str, Member]] = {}
        #: the modules the walk went through, and those it could not import (name -> why)
        self.modules: frozenset[str] = frozenset(data.get("modules") or ())
        self.skipped_modules: Mapping[str, str] = dict(data.get("skipped_modules") or {})
        #: the environment the snapshot was walked in (`targets.target_snapshot`)
        self.environment: Mapping[str, Any] = dict(data.get("environment") or {})

    def unchecked(self, path: tuple[str, ...]) -> tuple[str, str] | None:
        """(module, why) when `path` lies in a module of the package that the walk
        could not import: the snapshot says nothing of it (unchecked, not accepted in
        silence); None otherwise."""
        parts = [p for p in path if p != CALL] if CALL not in path else list(path[: path.index(CALL)])
        for depth in range(len(parts), 1, -1):
            name = ".".join(parts[:depth])
            reason = self.skipped_modules.get(name)
            if reason is not None:
                return name, reason
        return None

    def members(self, path: tuple[str, ...]) -> Mapping[str, Member] | None:
        path = tuple(path)
        if path and path[-1] == CALL:
            return self.instance_members(self.class_of(path))
        return self._children.get(path)

    def class_of(self, value: tuple[str, ...]) -> str | None:
        """The defining path of the class of `value`, a path ending in ``"()"`` (what a
        call returns), where the snapshot knows it: a class called (by a public or its
        defining path), a function whose return class was recorded, or a method of an
        instance (``("pandas", "DataFrame", "()", "head", "()")``); None otherwise."""
        value = tuple(value)
        if not value or value[-1] != CALL or len(value) < 2:
            return None
        callee = value[:-1]
        if CALL in callee:
            last = len(callee) - 1 - callee[::-1].index(CALL)
            owner = self.class_of(callee[: last + 1])
            if owner is None:
                return None
            return self._returns.get(owner + "()." + ".".join(callee[last + 1 :]))
        name = ".".join(callee)
        if name in self._classes:
            return name
        return self._class_paths.get(name) or self._returns.get(name)

    def instance_members(self, class_path: str | None) -> Mapping[str, Member] | None:
        """Members of an instance of the class defined at `class_path` (None: unknown),
        with a ``"*"`` member of kind "any" or "values" when instances have others."""
        if class_path is None:
            return None
        found = self._instances.get(class_path)
        if found is None:
            entry = self._classes.get(class_path)
            if entry is None:
                return None
            deprecated = entry.get("deprecated") or {}
            found = {
                name: Member(name, kind, kind not in ("function", "keyword"), deprecated.get(name, ""))
                for name, kind in (entry.get("members") or {}).items()
                if isinstance(name, str) and isinstance(kind, str)
            }
            dynamic = entry.get("dynamic")
            if dynamic:
                found[ANY_ATTRIBUTE] = Member(ANY_ATTRIBUTE, str(dynamic), False)
            self._instances[class_path] = found
        return found

    def signature(self, key: tuple[str, ...]) -> Signature | None:
        """The stored signature of call `key` (None: not stored, any keyword allowed);
        a method of an instance is found through the class the snapshot knows for it."""
        key = tuple(key)
        name = dotted(key)
        if name not in self._signature_items and CALL in key[:-1]:
            last = len(key) - 2 - key[-2::-1].index(CALL)
            owner = self.class_of(key[: last + 1])
            if owner is not None:
                name = owner + dotted(key[last:])
        found = self._signatures.get(name)
        if found is None:
            items = self._signature_items.get(name)
            if items is None:
                return None
            try:
                found = self._signatures[name] = Signature.from_list(items)
            except ValueError:
                return None  # a list the notation allows but the rules do not: unknown
        return found

    @property
    def signature_count(self) -> int:
        return len(self._signature_items)

    def packages(self) -> dict[str, str]:
        return {root: self.version for root in self.roots}

    def has_root(self, module: str) -> bool:
        return module in self.roots

    def __len__(self) -> int:
        return len(self.names)


def compat_v1_as_root(data: Mapping[str, Any], compat_prefix: str = "compat.v1") -> dict[str, Any]:
    """The paper's TF v1 setting from a TF 2.x snapshot: ``<root>.compat.v1.X`` -> ``<root>.X``.

    Only the compat.v1 names are kept (in TF 1.x, ``tf.X`` was the v1 API)."""
    validate_snapshot(data)
    root = data["root"]
    prefix = f"{root}.{compat_prefix}."
    names = sorted({root + "." + name[len(prefix) :] for name in data["names"] if name.startswith(prefix)})
    if not names:
        raise SnapshotError(f"snapshot of {data['package']} has no {prefix}* names")
    kinds = {
        root + "." + name[len(prefix) :]: kind
        for name, kind in (data.get("kinds") or {}).items()
        if name.startswith(prefix)
    }
    signatures = {
        root + "." + name[len(prefix) :]: items
        for name, items in (data.get("signatures") or {}).items()
        if name.startswith(prefix)
    }
    deprecated = {
        root + "." + name[len(prefix) :]: message
        for name, message in (data.get("deprecated") or {}).items()
        if name.startswith(prefix)
    }
    return {
        **{k: v for k, v in data.items() if k not in ("names", "kinds", "signatures", "deprecated")},
        "names": names,
        "kinds": kinds,
        "signatures": signatures,
        "deprecated": deprecated,
        "transform": f"{root}.{compat_prefix}.X -> {root}.X",
    }


def tensorflow_v1_setting(path: str | os.PathLike | None = None) -> SnapshotIndex:
    """SnapshotIndex of the TF v1 setting (default: the bundled TF 2.21 snapshot)."""
    from adaptrack_lsp.apis.index import bundled_snapshot

    data = read_snapshot(path if path is not None else bundled_snapshot("tensorflow"))
    return SnapshotIndex(data=compat_v1_as_root(data))


def names_to_snapshot(
    package: str,
    version: str,
    names: Iterable[str],
    kinds: Mapping[str, str] | None = None,
    signatures: Mapping[str, list[str]] | None = None,
    deprecated: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "package": package,
        "version": version,
        "root": package,
        "names": sorted(set(names)),
        "kinds": dict(kinds or {}),
        "signatures": {call: list(items) for call, items in sorted((signatures or {}).items())},
        "deprecated": dict(sorted((deprecated or {}).items())),
    }


def module_snapshot(package: str, submodules: Iterable[str] = ()) -> dict[str, Any]:
    """A shallow snapshot of `package` as importable in *this* process: its public names
    and those of the named `submodules` (e.g. ``("linalg", "random")``), with the
    top-level modules marked as such, the signatures of the callables and the members
    that announce their deprecation (as the introspection worker writes them).  Names
    that raise on access are left out.

    Quick and deterministic (tests, benchmarks); `adaptrack-lsp index` walks a package
    fully, in the environment that is indexed."""
    import importlib
    import types
    import warnings

    from adaptrack_lsp.apis.introspect_worker import deprecation_of, signature_of

    module = importlib.import_module(package)
    names: list[str] = []
    kinds: dict[str, str] = {}
    signatures: dict[str, list[str]] = {}
    deprecated: dict[str, str] = {}
    for prefix, owner in [(package, module), *((f"{package}.{s}", getattr(module, s)) for s in submodules)]:
        for name in dir(owner):
            if name.startswith("_"):
                continue
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                try:
                    value = getattr(owner, name)
                except Exception:
                    continue
            names.append(f"{prefix}.{name}")
            message = deprecation_of(value, name, warned, reader=module_snapshot.__code__.co_filename)
            if message:
                deprecated[f"{prefix}.{name}"] = message
            if owner is module and isinstance(value, types.ModuleType):
                kinds[f"{prefix}.{name}"] = "module"
            items = signature_of(value)
            if items is not None:
                signatures[f"{prefix}.{name}()"] = items
    return names_to_snapshot(package, str(getattr(module, "__version__", "") or "unknown"), names, kinds, signatures, deprecated)


def walk_snapshot(python: str, package: str, max_depth: int = DEFAULT_MAX_DEPTH, timeout_s: float = DEFAULT_WALK_TIMEOUT_S) -> dict:
    """Walk `package` in the environment of `python`; the snapshot dict.

    The walk imports the package, so it runs contained (`interpreter_check.run_contained`):
    its own process group, killed as a whole when the walk ends or times out (a process
    the package starts does not outlive it), from a temporary folder, with a minimal
    environment, writing no bytecode (``-B``).  Raises RuntimeError with the worker's last
    stderr lines when the walk fails."""
    from adaptrack_lsp.apis.interpreter_check import run_contained
    from adaptrack_lsp.apis.introspection import WORKER_SCRIPT

    command = [python, "-I", "-B", str(WORKER_SCRIPT), "--walk", package, "--max-depth", str(max_depth)]
    try:
        returncode, stdout, stderr = run_contained(command, timeout_s, {"TF_CPP_MIN_LOG_LEVEL": "3"})
    except TimeoutError:
        raise RuntimeError(f"walking {package} took longer than {timeout_s:g} s") from None
    except OSError as error:
        raise RuntimeError(f"cannot run {python}: {error}") from None
    if returncode != 0:
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"walking {package} with {python} failed (exit {returncode}):\n{tail}")
    try:
        data = json.loads(stdout)
        validate_snapshot(data, "walk output")
    except ValueError as error:
        raise RuntimeError(f"walking {package} gave unreadable output: {error}") from None
    return data
