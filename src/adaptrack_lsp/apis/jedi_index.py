"""`JediIndex`: the members of dotted paths in the user's own Python environment.

Where the answer comes from, per path (``("numpy", "linalg")``):

1. jedi completes ``import numpy.linalg\\nnumpy.linalg.`` in the user's environment.
   Kept: public names (no leading ``_``), minus what jedi lists but the module does
   not export: stub-only aliases (``import ctypes as ct`` in a ``.pyi``), and package
   sub-directories that the package's ``__init__`` never imports (``numpy.tests``).
   Functions whose body only raises (removed-API placeholders such as
   ``torch.matrix_rank``) are dropped, found from the source jedi points to.
2. Runtime introspection (`RuntimeIntrospector`, a subprocess with the user's python)
   then checks the answer for every path jedi infers to be a module, and answers alone
   where jedi finds no public member (Keras-3 lazy loaders such as
   ``tf.keras.layers``): the worker imports the module and keeps the names of
   ``dir()`` plus jedi's names that pass ``getattr``.  This adds what jedi cannot see
   statically (module ``__getattr__``/``setattr`` tricks: ``tf.keras``, ``tf.losses``,
   ``numpy.testing.SkipTest``) and drops what jedi lists but the runtime refuses
   (stub-only names, names bound in branches not taken, lazily loaded members that
   raise on access such as ``tf.compat.v1.layers`` with Keras 3).  With
   ``runtime_introspection=False``, or when the module cannot be imported, the jedi
   answer stands.

Signatures of calls (call keys, ``("numpy", "histogram", "()")``, see `api_index`):

1. With runtime introspection, the worker answers a module's members together with
   the signatures of its callable members (``inspect.signature``), so a module
   function's signature is known as soon as its module's members are; a callee it did
   not cover (a method, a class path) is asked on its own.
2. Otherwise, or where the runtime finds nothing to resolve, jedi's
   ``Script.get_signatures`` on ``import m\nm.f(`` (overloads merged: a name any of
   them takes is allowed).  A method of what a call returns (``pandas.read_csv().to_csv``)
   is written as that call: jedi infers the result's type; the runtime is asked about
   the type jedi names (a class's instances need no inference).
Nothing is found: None (any keyword allowed), as definitive as a found signature.

Every lookup runs on one background thread; a caller waits at most ``timeout_s`` and
gets ``None`` (unknown = unconstrained) when the answer is not ready, while the lookup
finishes in the background and fills the cache (`ready` and `prefetch` let a caller
never wait).  Answers are cached in memory and on disk (`index_cache`: per interpreter
path + Python version, package name + version, and the module files' size and mtime),
so a new process answers from disk without starting jedi.  The parse trees jedi read
are released once no look-up came for `IDLE_RELEASE_S`.  The interpreter is asked
for its version and ``sys.path`` once, with a time limit; one that does not answer
makes the index unconstrained with a `problem` saying why.
"""

from __future__ import annotations

import ast
import concurrent.futures
import hashlib
import logging
import os
import queue
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from adaptrack_lsp.apis.index import (
    CALL,
    APIIndex,
    Member,
    Signature,
    describe_key,
    dotted,
    key_kind,
    key_path,
    members_key,
    modules_key,
)
from adaptrack_lsp.apis.index_cache import (
    PROBE_TIMEOUT_S,
    EnvironmentFacts,
    EnvironmentProbeError,
    IndexCache,
    distribution_version,
    module_location,
    module_stamps,
    probe_environment,
    stamps_match,
)
from adaptrack_lsp.apis.introspect_worker import function_node_only_raises
from adaptrack_lsp.apis.parso_disk_cache import make_crash_safe
from adaptrack_lsp.config import cache_root as default_cache_dir

log = logging.getLogger(__name__)

#: one look-up at a time in this process: each index has its own thread, but jedi keeps
#: its parsed modules and inference caches per process, and they are not thread-safe
#: (two environments looked up at once raised KeyError inside jedi)
_JEDI_LOCK = threading.Lock()

#: modules parso may keep between look-ups (its own collection, mid-inference, is off)
PARSO_CACHE_LIMIT = 3000


def _between_lookups() -> None:
    """Keep parso's module cache bounded at a point where no inference runs (see
    `JediIndex._answer_key`)."""
    try:
        import parso.cache as parso_cache
    except ImportError:  # pragma: no cover - jedi depends on parso
        return
    make_crash_safe()  # a cache file a killed process left half written is a miss, not an error
    parso_cache._CACHED_SIZE_TRIGGER = 10**9  # no collection in the middle of an inference
    _release_parsed_modules(above=PARSO_CACHE_LIMIT)


#: seconds without a look-up after which parso's module cache is emptied
#: (`_release_parsed_modules`)
IDLE_RELEASE_S = 30.0


def _release_parsed_modules(above: int = 0) -> int:
    """Empty parso's module cache (the parse trees jedi read) when it holds more than
    `above` modules; returns how many it held.  The index keeps its answers itself, in
    memory and on disk, so the trees serve only the next look-ups of a burst; left in
    memory they hold 100 MB or more (numpy's stubs and sources), and a look-up after the
    release reads them again from parso's disk cache.  Called with `_JEDI_LOCK` held (or
    on the look-up thread between look-ups): no inference is running."""
    try:
        import parso.cache as parso_cache
    except ImportError:  # pragma: no cover - jedi depends on parso
        return 0
    held = sum(len(modules) for modules in parso_cache.parser_cache.values())
    if held > above:
        parso_cache.parser_cache.clear()  # jedi holds this very dict: emptied, not replaced
    return held


#: seconds before a path whose lookup failed (timeout, crash) is tried again
RETRY_FAILED_AFTER_S = 30.0

DEFAULT_CACHE = object()


def _venv_python(venv: Path) -> Path | None:
    for candidate in (venv / "bin" / "python", venv / "Scripts" / "python.exe"):
        if candidate.is_file():
            return candidate
    return None


FOUND_BY_SETTING = "setting"


def workspace_environment(workspace: str | os.PathLike | None) -> tuple[str, str] | None:
    """(folder name, interpreter) of the workspace's ``.venv`` or ``venv``, if any."""
    if workspace:
        for name in (".venv", "venv"):
            found = _venv_python(Path(workspace) / name)
            if found is not None:
                return name, str(found)
    return None


def find_python(
    python: str | os.PathLike | None = None,
    workspace: str | os.PathLike | None = None,
    trusted_workspace: bool = False,
) -> tuple[str | None, str, str]:
    """(interpreter, how it was found, problem) for the environment to index.

    Order: the explicit `python` (an interpreter or a virtualenv directory), the
    workspace's ``.venv`` or ``venv`` *only when the workspace is trusted* (an opened
    folder must not choose the interpreter that the server runs), ``$VIRTUAL_ENV``, the
    server's own interpreter.  An explicit path that does not exist is a problem, not a
    silent fallback.
    """
    if python:
        path = Path(python).expanduser()
        if not path.is_absolute():
            # a relative path names a file under the workspace (an editor's setting) or,
            # without one, under the current directory (the command line); a bare name
            # such as ``python3`` is looked up on PATH
            if len(path.parts) == 1 and shutil.which(str(path)) and not (Path(workspace or ".") / path).exists():
                path = Path(shutil.which(str(path)))
            else:
                path = (Path(workspace) if workspace else Path.cwd()) / path
        if path.is_dir():
            found = _venv_python(path)
            if found is None:
                return None, FOUND_BY_SETTING, f"no python interpreter in environment directory {path}"
            return str(found), FOUND_BY_SETTING, ""
        if not path.is_file():
            return None, FOUND_BY_SETTING, f"python interpreter not found: {path}"
        return str(path), FOUND_BY_SETTING, ""
    if trusted_workspace:
        found_in_workspace = workspace_environment(workspace)
        if found_in_workspace is not None:
            return found_in_workspace[1], f"workspace {found_in_workspace[0]} (trusted workspace)", ""
    virtual_env = os.environ.get("VIRTUAL_ENV")
    if virtual_env:
        found = _venv_python(Path(virtual_env))
        if found is not None:
            return str(found), "VIRTUAL_ENV", ""
    return sys.executable, "server interpreter", ""


#: folders never searched for a workspace's own modules
_NOT_SOURCES = frozenset({"node_modules", "__pycache__", "site-packages", "build", "dist"})


def workspace_module_names(workspace: str | os.PathLike, max_depth: int = 4, max_entries: int = 20000) -> frozenset[str]:
    """Names of the modules and packages anywhere in the workspace (``.py`` files and
    folders, to `max_depth`, skipping hidden folders, virtual environments and build
    output): a test run or a script can put any of its folders on ``sys.path``, so an
    import of one of these names is the workspace's business, never rejected.  Only
    names are read, no file's contents."""
    found: set[str] = set()
    seen = 0
    stack = [(Path(workspace), 0)]
    while stack and seen < max_entries:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            name = entry.name
            if name.endswith(".py") and name[:-3].isidentifier():
                found.add(name[:-3])
            elif name.isidentifier() and not name.startswith(".") and name not in _NOT_SOURCES:
                try:
                    is_folder = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_folder = False
                if is_folder and not (Path(entry.path) / "pyvenv.cfg").exists():
                    found.add(name)
                    if depth + 1 < max_depth:
                        stack.append((Path(entry.path), depth + 1))
    return frozenset(found)


# ------------------------------------------------------------------------ module sources


class ModuleFacts:
    """What a module's source says statically: bound names, imported submodules, __all__."""

    def __init__(self, bound: set[str], submodules: set[str], exported: set[str] | None):
        self.bound = bound
        self.submodules = submodules
        self.exported = exported  # __all__ when it is a literal list/tuple


def _module_level_statements(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """Statements executed at module level (descending into if/try/with/for blocks)."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for child in inner:
                    if isinstance(child, ast.ExceptHandler):
                        yield from _module_level_statements(child.body)
                    elif isinstance(child, ast.stmt):
                        yield from _module_level_statements([child])


def module_facts(source: str, module_name: str, is_package: bool) -> ModuleFacts:
    tree = ast.parse(source)
    bound: set[str] = set()
    submodules: set[str] = set()
    exported: set[str] | None = None
    package = module_name if is_package else module_name.rpartition(".")[0]
    seen: set[int] = set()
    for node in _module_level_statements(tree.body):
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound.add(alias.asname or alias.name.split(".")[0])
                if alias.name.startswith(module_name + "."):
                    submodules.add(alias.name[len(module_name) + 1 :].split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                if node.level > 1:
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                if alias.name != "*":
                    bound.add(alias.asname or alias.name)
                if base == module_name and alias.name != "*":
                    submodules.add(alias.name)
            if base.startswith(module_name + "."):
                submodules.add(base[len(module_name) + 1 :].split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        bound.add(sub.id)
                if isinstance(target, ast.Name) and target.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                    exported = {elt.value for elt in node.value.elts if isinstance(elt, ast.Constant) and isinstance(elt.value, str)}
    return ModuleFacts(bound, submodules, exported)


class _SourceCache:
    """Parsed facts per file, and function-def nodes per (file, line)."""

    def __init__(self):
        self._facts: dict[tuple[str, str], ModuleFacts | None] = {}
        self._functions: dict[str, dict[int, ast.AST]] = {}

    def facts(self, path: Path, module_name: str) -> ModuleFacts | None:
        key = (str(path), module_name)
        if key not in self._facts:
            try:
                source = path.read_text(encoding="utf-8", errors="replace")
                self._facts[key] = module_facts(source, module_name, path.stem == "__init__")
            except (OSError, SyntaxError, ValueError):
                self._facts[key] = None
        return self._facts[key]

    def function_at(self, path: Path, line: int):
        key = str(path)
        if key not in self._functions:
            table: dict[int, ast.AST] = {}
            try:
                tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        table[node.lineno] = node
            except (OSError, SyntaxError, ValueError):
                pass
            self._functions[key] = table
        return self._functions[key].get(line)


def _source_files(module_path: Path) -> list[Path]:
    """The .py and .pyi files of one module (either may be missing)."""
    stem = module_path.with_suffix("")
    return [p for p in (stem.with_suffix(".py"), stem.with_suffix(".pyi")) if p.is_file()]


# ------------------------------------------------------------------------ the index


class JediIndex(APIIndex):
    """API index of a live Python environment (jedi first, runtime introspection second)."""

    def __init__(
        self,
        python: str | os.PathLike | None = None,
        workspace: str | os.PathLike | None = None,
        timeout_s: float = 2.0,
        runtime_introspection: bool = True,
        cache_dir: Any = DEFAULT_CACHE,
        runtime_timeout_s: float = 60.0,
        trusted_workspace: bool = False,
    ):
        """`timeout_s`: how long `members` waits for an answer that is not cached yet.
        `trusted_workspace`: whether the user trusts the workspace (its ``.venv`` is
        used, and modules may be imported by runtime introspection); runtime
        introspection runs only in a trusted workspace or an explicitly configured
        environment (`runtime_introspection_allowed`).
        `runtime_timeout_s`: hard limit of one introspection request (the worker is
        killed past it).  `cache_dir`: directory of the on-disk cache; the default is
        the user cache dir, None disables the on-disk cache."""
        self.timeout_s = float(timeout_s)
        self.runtime_timeout_s = float(runtime_timeout_s)
        self.workspace = str(workspace) if workspace else None
        self.trusted_workspace = bool(trusted_workspace)
        self.python, self.found_by, self.problem = find_python(python, workspace, self.trusted_workspace)
        self.note = ""
        passed_over = None if (python or self.trusted_workspace) else workspace_environment(workspace)
        if passed_over is not None:
            self.note = (
                f"the workspace's {passed_over[0]} is not used because the workspace is not trusted "
                "(trust the workspace, or set pythonPath)"
            )
        self.configured = self.found_by == FOUND_BY_SETTING
        #: imports in the analysed environment: only where the user trusts it — an
        #: interpreter the user named, a trusted workspace's, or the server's own (its
        #: packages are the ones the server itself runs beside; the worker is sandboxed
        #: and isolated from the workspace either way)
        self.runtime_introspection_allowed = self.configured or self.trusted_workspace or self.found_by == "server interpreter"
        self.runtime_introspection = bool(runtime_introspection) and self.runtime_introspection_allowed
        if self.problem:
            log.warning("API index: %s; completions are not API-constrained", self.problem)
        else:
            log.info("API index: %s", self.describe())
        if cache_dir is DEFAULT_CACHE:
            cache_dir = default_cache_dir() / "api-index"
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None

        self._environment = None
        self._project = None
        self._environment_key: str | None = None
        self._python_version: str | None = None
        self._sys_path: list[str] = []
        self._versions: dict[str, str] | None = None
        self._sources = _SourceCache()
        self._introspector = None

        self._lock = threading.Lock()
        self._facts_lock = threading.Lock()
        self._memory: dict[tuple[str, ...], dict[str, Member] | None] = {}
        #: call key -> signature (None: none found) for answered calls
        self._signatures: dict[tuple[str, ...], Signature | None] = {}
        #: modules_key -> importable module names (None: not known)
        self._modules: dict[tuple[str, ...], frozenset[str] | None] = {}
        self._pending: dict[tuple[str, ...], concurrent.futures.Future] = {}
        self._failed_at: dict[tuple[str, ...], float] = {}
        #: top-level package -> [answered, asked] look-ups since it last had none waiting
        self._progress: dict[str, list[int]] = {}
        self._root_versions: dict[str, str] = {}
        self._disk: dict[str, dict] = {}  # root -> {"file": Path|None, "paths": {...}, "signatures": {...}}
        self._jobs: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self.probe_timeout_s = PROBE_TIMEOUT_S
        #: seconds the background thread spent on lookups (probe, disk, jedi, runtime)
        self.busy_seconds = 0.0
        self._facts: EnvironmentFacts | None = None
        self._project_reader = None
        #: members key -> (file, mtime) of answers read from the project's source
        self._project_stamps: dict[tuple[str, ...], tuple | None] = {}
        self._disk_cache = IndexCache(self.cache_dir) if self.cache_dir is not None else None

    # ------------------------------------------------------------------ public API

    @property
    def source(self) -> str:  # type: ignore[override]
        if self.problem:
            return f"unconstrained ({self.problem})"
        versions = self.packages()
        if versions:
            return ", ".join(f"{name} {version}" for name, version in sorted(versions.items()))
        return f"python environment {self.python}"

    def describe(self) -> str:
        """Which environment validates completions, and why (for the status and log)."""
        if self.problem:
            return f"no environment ({self.problem}); completions are not API-constrained"
        text = f"environment {self.python} ({self.found_by})"
        if self.runtime_introspection:
            text += "; runtime introspection on (sandboxed)"
        elif not self.runtime_introspection_allowed:
            text += "; runtime introspection off (workspace not trusted)"
        else:
            text += "; runtime introspection off"
        if self.note:
            text += f"; {self.note}"
        return text

    def packages(self) -> dict[str, str]:
        with self._lock:
            return dict(self._root_versions)

    def members(self, path: tuple[str, ...]) -> Mapping[str, Member] | None:
        """Members of `path` (waits at most `timeout_s`; None when unknown).  A path
        ending in `CALL` asks what an instance has (``("numpy", "ndarray", "()")``, or
        what ``numpy.zeros()`` returns)."""
        return self._answer(members_key(tuple(path)))

    def signature(self, key: tuple[str, ...]) -> Signature | None:
        """The signature of call `key` (waits at most `timeout_s`; None when unknown)."""
        return self._answer(tuple(key))

    def submodules(self, path: tuple[str, ...]) -> frozenset[str] | None:
        """Modules importable under `path` (runtime introspection only; waits at most
        `timeout_s`; None when unknown)."""
        return self._answer(modules_key(tuple(path)))

    def _store(self, key: tuple[str, ...]) -> dict:
        kind = key_kind(key)
        return self._signatures if kind == "signature" else self._modules if kind == "modules" else self._memory

    def _valid_key(self, key: tuple[str, ...]) -> bool:
        kind = key_kind(key)
        if kind == "signature":
            return _valid_call_key(key)
        path = key_path(key)
        if kind == "modules":
            return all(isinstance(p, str) and p.isidentifier() for p in path)
        return _valid_member_path(path)

    def _answer(self, key: tuple[str, ...]):
        if self.problem or not self._valid_key(key):
            return None
        store = self._store(key)
        with self._lock:
            if key in store and not self._stale_locked(key):
                return store[key]
            future = self._submit_locked(key)
            if future is None:
                return None
        try:
            future.result(timeout=self.timeout_s)
        except concurrent.futures.TimeoutError:
            log.debug("API index: %s not answered within %.3g s (unknown for now)", describe_key(key), self.timeout_s)
            return None
        except Exception as error:  # a bug in a lookup must not reach the caller
            log.warning("API index: lookup of %s failed: %s", describe_key(key), error)
            return None
        with self._lock:
            return store.get(key)

    def prefetch(self, path: tuple[str, ...]) -> None:
        """Start looking a key up in the background (a member path, a call key, a
        `modules_key` or `members_key`; e.g. for the document's imports)."""
        key = tuple(path)
        if self.problem or not key or not self._valid_key(key):
            return
        with self._lock:
            if key not in self._store(key):
                self._submit_locked(key)

    def ready(self, path: tuple[str, ...]) -> bool:
        """Whether the answer for a key (see `prefetch`) is there now, without waiting
        for a lookup."""
        key = tuple(path)
        if self.problem or not key or not self._valid_key(key):
            return True
        kind = key_kind(key)
        with self._lock:
            if key in self._store(key) and not self._stale_locked(key):
                return True
            failed_at = self._failed_at.get(key)
            if key not in self._pending and failed_at is not None and time.monotonic() - failed_at < RETRY_FAILED_AFTER_S:
                return True
        if kind == "modules":
            return False
        return self._signature_from_disk(key) if kind == "signature" else self._answer_from_disk(key)

    def _signature_from_disk(self, key: tuple[str, ...]) -> bool:
        entry = self._disk.get(key[0])
        cached = entry["signatures"].get(dotted(key)) if entry is not None else None
        if cached is None or not stamps_match(cached.get("files")):
            return False
        signature = _signature_or_none(cached.get("signature"))
        with self._lock:
            self._signatures.setdefault(key, signature)
        return True

    def _answer_from_disk(self, path: tuple[str, ...]) -> bool:
        """Move `path`'s answer from the loaded disk cache of its package into memory
        (a few file stats, no lookup); False when the disk cache has no valid answer."""
        key, path = path, key_path(path)
        entry = self._disk.get(path[0])
        cached = entry["paths"].get(".".join(path)) if entry is not None else None
        if cached is None or not stamps_match(cached.get("files")):
            return False
        raw = cached.get("members")
        members = {n: Member.from_list(n, items) for n, items in raw.items()} if raw is not None else None
        with self._lock:
            self._memory.setdefault(key, members)
        return True

    def work_seconds(self) -> float:
        return self.busy_seconds

    def progress(self, root: str) -> tuple[int, int] | None:
        with self._lock:
            counts = self._progress.get(root)
            return (counts[0], counts[1]) if counts is not None else None

    def wait_ready(self, paths: Iterable[tuple[str, ...]], timeout_s: float) -> bool:
        """Look `paths` up (in the background) and wait until all are answered or
        `timeout_s` passed; True when all are."""
        deadline = time.monotonic() + timeout_s
        for path in paths:
            path = tuple(path)
            self.prefetch(path)
            with self._lock:
                future = self._pending.get(path)
            if future is not None:
                try:
                    future.result(timeout=max(0.0, deadline - time.monotonic()))
                except concurrent.futures.TimeoutError:
                    return False
        return all(self.ready(tuple(path)) for path in paths)

    def close(self) -> None:
        """Stop the background thread and the introspection worker."""
        self._jobs.put(None)
        if self._introspector is not None:
            self._introspector.close()

    # ------------------------------------------------------------------ scheduling

    def _submit_locked(self, path: tuple[str, ...]) -> concurrent.futures.Future | None:
        future = self._pending.get(path)
        if future is not None:
            return future
        failed_at = self._failed_at.get(path)
        if failed_at is not None and time.monotonic() - failed_at < RETRY_FAILED_AFTER_S:
            return None
        future = concurrent.futures.Future()
        self._pending[path] = future
        root = key_path(path)[0] if key_path(path) else ""
        counts = self._progress.setdefault(root, [0, 0])
        if counts[0] >= counts[1]:  # a new wave of look-ups under this package
            counts[0] = counts[1] = 0
        counts[1] += 1
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run_jobs, name="api-index", daemon=True)
            self._thread.start()
        self._jobs.put((path, future))
        return future

    def _answer_key(self, key: tuple[str, ...], kind: str):
        """(answer, definitive) for `key`.  parso collects its module cache *during* an
        inference once it holds 600 modules, dropping those it thinks unused for ten
        minutes; a module loaded from parso's disk cache keeps the time it was first
        parsed, so it can be dropped right after jedi loaded it, and jedi then raises
        KeyError(path) (long processes, many environments).  Here parso never collects
        mid-inference; its cache is emptied between look-ups once it is large
        (`_between_lookups`), and a KeyError still gets one more try."""
        _between_lookups()
        for attempt in (1, 2):
            try:
                if kind == "signature":
                    return self._lookup_signature(key)
                if kind == "modules":
                    return self._lookup_modules(key_path(key))
                return self._lookup(key_path(key))
            except KeyError as error:
                if attempt == 2 or not isinstance(error.args[0] if error.args else None, os.PathLike):
                    raise
                log.debug("API index: jedi lost %s while looking up %s; asking again", error, describe_key(key))
        raise AssertionError("unreachable")

    def _run_jobs(self) -> None:
        idle = False  # the parsed modules were released since the last look-up
        while True:
            try:
                job = self._jobs.get(timeout=None if idle else IDLE_RELEASE_S)
            except queue.Empty:
                with _JEDI_LOCK:
                    released = _release_parsed_modules()
                log.debug("API index: idle for %.0f s; released %d parsed modules", IDLE_RELEASE_S, released)
                idle = True
                continue
            idle = False
            if job is None:
                return
            key, future = job
            started = time.perf_counter()
            kind = key_kind(key)
            try:
                with _JEDI_LOCK:  # jedi's caches are process-wide and not thread-safe
                    answer, definitive = self._answer_key(key, kind)
            except Exception as error:  # jedi raising on odd code is "unknown"
                # (a signature that fails to load only leaves a call's keywords open)
                (log.debug if kind == "signature" else log.warning)("API index: %s: %s: %s", describe_key(key), type(error).__name__, error)
                answer, definitive = None, False
            with self._lock:
                self.busy_seconds += time.perf_counter() - started
                self._pending.pop(key, None)
                if definitive:
                    self._store(key)[key] = answer
                    self._failed_at.pop(key, None)
                else:
                    self._failed_at[key] = time.monotonic()
                counts = self._progress.get(key_path(key)[0] if key_path(key) else "")
                if counts is not None:
                    counts[0] += 1
            future.set_result(answer)

    # ------------------------------------------------------------------ environment

    def _ensure_environment(self) -> None:
        if self._environment is not None:
            return
        import jedi

        from adaptrack_lsp.apis.interpreter_check import ENVIRONMENT_TIMEOUT_S, call_with_time_limit

        try:
            environment = call_with_time_limit(
                lambda: jedi.create_environment(self.python, safe=self._needs_safety_check()),
                ENVIRONMENT_TIMEOUT_S,
                f"starting {self.python}",
            )
        except jedi.InvalidPythonEnvironment as error:
            self.problem = (
                f"the interpreter {self.python} ({self.found_by}) is not used: {error} "
                "(set pythonPath to name it explicitly)"
            )
            log.warning("API index: %s; completions are not API-constrained", self.problem)
            raise
        except Exception as error:  # the service drops the constraint and says why
            self.problem = f"jedi cannot use the python interpreter {self.python}: {error}"
            log.warning("API index: %s; completions are not API-constrained", self.problem)
            raise
        self._python_version = ".".join(str(v) for v in environment.version_info[:3])
        self._sys_path = [p for p in environment.get_sys_path() if p]
        real = os.path.realpath(environment.executable)
        self._environment_key = hashlib.sha256(f"{real}\0{self._python_version}".encode()).hexdigest()[:16]
        if self.workspace:
            self._project = jedi.Project(self.workspace, environment_path=self.python)
        self._environment = environment

    def _introspection(self):
        if self._introspector is None:
            from adaptrack_lsp.apis.introspection import RuntimeIntrospector

            self._introspector = RuntimeIntrospector(self.python, timeout_s=self.runtime_timeout_s)
        return self._introspector

    def _distribution_versions(self) -> dict[str, str]:
        """top-level module name -> version of the distribution that provides it."""
        if self._versions is None:
            from importlib import metadata

            versions: dict[str, str] = {}
            without_top_level = []
            for dist in metadata.distributions(path=self._sys_path):
                name = dist.metadata["Name"] or ""
                version = dist.version or ""
                versions.setdefault(re.sub(r"[-_.]+", "_", name).lower(), version)
                text = dist.read_text("top_level.txt")
                if text:
                    for line in text.split():
                        versions.setdefault(line.strip(), version)
                else:
                    without_top_level.append((dist, version))
            for dist, version in without_top_level:
                for file in dist.files or ():
                    first = file.parts[0] if file.parts else ""
                    if first and not first.endswith((".dist-info", ".data")) and first != "..":
                        versions.setdefault(first.removesuffix(".py"), version)
            self._versions = versions
        return self._versions

    def _root_version(self, root: str, root_file: str | None) -> str | None:
        """Version of the distribution providing `root`; the Python version for the
        standard library; None for anything else (not cached on disk)."""
        if self._facts is not None and root in self._facts.builtin_modules:
            return f"{self._python_version} (stdlib)"
        version = distribution_version(root, root_file)
        if version:
            return version
        if root_file and ("site-packages" in root_file or "dist-packages" in root_file):
            version = self._distribution_versions().get(root)  # other layouts (egg-info, ...)
            if version:
                return version
        if root_file and "site-packages" not in root_file and "dist-packages" not in root_file:
            if any(root_file.startswith(p) for p in self._sys_path) or root_file.endswith(".pyi"):
                return f"{self._python_version} (stdlib)"
        return None

    # ------------------------------------------------------------------ disk cache

    def _needs_safety_check(self) -> bool:
        """An interpreter the user did not name must pass jedi's safety check (owned by
        root, or a known system interpreter) before it is run at all, as in jedi,
        jedi-language-server and pylsp; the server's own interpreter is already running."""
        return not self.configured and self.found_by != "server interpreter"

    def _refuse_unsafe(self) -> bool:
        """True (and `problem` set) when the interpreter fails jedi's safety check."""
        if not self._needs_safety_check():
            return False
        from jedi.api.environment import InvalidPythonEnvironment, _assert_safe

        try:
            _assert_safe(self.python, True)
        except (InvalidPythonEnvironment, OSError) as error:
            self.problem = (
                f"the interpreter {self.python} ({self.found_by}) is not used: {error} "
                "(set pythonPath to name it explicitly)"
            )
            log.warning("API index: %s; completions are not API-constrained", self.problem)
            return True
        return False

    def check_interpreter(self) -> str:
        """Run the interpreter's first, time-limited check now (it otherwise runs with the
        first look-up, in the background): "" when it answers, else the problem (also in
        `problem`).  A command that must not answer "accepted" for everything asks this
        before it checks anything."""
        self._ensure_facts()
        return self.problem

    def _ensure_facts(self) -> bool:
        """Ask the interpreter for its version and sys.path (once, time-limited); False
        (and `problem` set) when it does not answer or is refused by the safety check."""
        with self._facts_lock:
            return self._ensure_facts_locked()

    def _ensure_facts_locked(self) -> bool:
        if self._facts is None and not self.problem:
            if self._refuse_unsafe():
                return False
            try:
                facts = probe_environment(self.python, self.probe_timeout_s)
            except EnvironmentProbeError as error:
                self.problem = str(error)
                log.warning("API index: %s; completions are not API-constrained", self.problem)
                return False
            self._python_version = facts.version
            self._sys_path = list(facts.sys_path)
            self._facts = facts
        return self._facts is not None

    def _disk_entry(self, root: str, root_file: str | None) -> dict:
        entry = self._disk.get(root)
        if entry is not None:
            return entry
        version = self._root_version(root, root_file)
        file = None
        paths: dict = {}
        signatures: dict = {}
        if version is not None and self._disk_cache is not None and self._facts is not None:
            mode = "runtime" if self.runtime_introspection else "static"
            file = self._disk_cache.file(self._facts, root, version, mode)
            paths, signatures = self._disk_cache.load_all(file, root, version)
        entry = {"file": file, "paths": paths, "signatures": signatures, "version": version}
        self._disk[root] = entry
        with self._lock:
            self._root_versions[root] = version or "unknown"
        return entry

    def _save(self, root: str, entry: dict, key: str | None, signature_keys=()) -> None:
        file = entry["file"]
        if file is None or self._disk_cache is None:
            return
        extra = {"python": self.python, "python_version": self._python_version}
        paths = {key: entry["paths"][key]} if key is not None else {}
        signatures = {name: entry["signatures"][name] for name in signature_keys}
        self._disk_cache.store(file, root, entry["version"], paths, extra, signatures)

    # ------------------------------------------------------------------ lookups

    def _entry_for(self, path: tuple[str, ...]) -> dict:
        """The loaded disk cache of `path`'s package (see `_disk_entry`)."""
        root_file = None
        if path[0] not in self._disk:
            root_file = next(iter(module_location(path[:1], self._sys_path)), None)
        return self._disk_entry(path[0], root_file)

    @staticmethod
    def _cached_members(entry: dict, key: str) -> tuple[bool, dict[str, Member] | None]:
        """(found, members) for a cached answer whose module files did not change."""
        cached = entry["paths"].get(key)
        if cached is None or not stamps_match(cached.get("files")):
            return False, None
        raw = cached.get("members")
        return True, ({n: Member.from_list(n, items) for n, items in raw.items()} if raw is not None else None)

    def _remember(self, path, entry, key, members, via, stamps, signatures: dict[str, Signature | None]) -> None:
        """Keep an answer (and the signatures of the path's callable members) in memory
        and on disk."""
        entry["paths"][key] = {
            "via": via,
            "members": {n: m.to_list() for n, m in members.items()} if members is not None else None,
            "files": stamps,
        }
        signature_keys = []
        for name, signature in signatures.items():
            call = (*path, name, CALL)
            entry["signatures"][dotted(call)] = {
                "via": "runtime",
                "signature": signature.to_list() if signature is not None else None,
                "files": stamps,
            }
            signature_keys.append(dotted(call))
            with self._lock:
                self._signatures.setdefault(call, signature)
        self._save(path[0], entry, key, signature_keys)

    def _lookup_modules(self, path: tuple[str, ...]) -> tuple[frozenset[str] | None, bool]:
        """(importable module names under `path`, definitive); runs on the background
        thread.  Only the runtime can say what imports (module ``__getattr__`` loaders,
        modules registered in ``sys.modules``, namespace packages, import hooks): without
        runtime introspection the answer is unknown."""
        if not self._ensure_facts() or not self.runtime_introspection:
            return None, True
        answer, failure = self._introspection().request({"op": "modules", "path": list(path)}, self.runtime_timeout_s)
        if failure is not None:
            return None, not failure.transient
        names = answer.get("modules")
        if not isinstance(names, list):
            log.debug("API index: the modules under %s are not known: %s", dotted(path) or "the top level", answer.get("error"))
            return None, True
        found = {str(name) for name in names}
        if not path and self.workspace:
            found |= workspace_module_names(self.workspace)
        return frozenset(found), True

    def _project_classes(self):
        """The reader of the project's own classes (a trusted workspace only)."""
        if self._project_reader is None:
            from adaptrack_lsp.apis.project_classes import ProjectClasses

            self._project_reader = ProjectClasses(self.workspace, lambda path: self._lookup_instance(path)[0])
        return self._project_reader

    def _stale_locked(self, key: tuple[str, ...]) -> bool:
        """Whether the kept answer for `key`, read from a project file, is older than
        the file (it is dropped then)."""
        stamp = self._project_stamps.get(key)
        if stamp is None or self._project_reader is None:
            return False
        if self._project_reader.stamp(key_path(key)) == stamp:
            return False
        self._project_stamps.pop(key, None)
        self._memory.pop(key, None)
        return True

    def _lookup_instance(self, path: tuple[str, ...]) -> tuple[dict[str, Member] | None, bool]:
        """(what an instance of the type `path[:-1]` names, or of what calling it
        returns, has; definitive): in a trusted workspace, a class of the project read
        from its source (`project_classes`); else runtime introspection of the class
        (its instance members, `introspect_worker.instance_members`), the result's
        class from jedi where the runtime cannot tell (a C function such as
        ``numpy.zeros``).  Without runtime introspection: unknown."""
        if self.trusted_workspace and self.workspace and CALL not in path[:-1]:
            project = self._project_classes()
            if project.locate(path) is not None:
                members = project.members(path)
                with self._lock:
                    self._project_stamps[members_key(path)] = project.stamp(path)
                return members, True
        if not self._ensure_facts() or not self.runtime_introspection:
            return None, True
        callee = path[:-1]
        entry, key = self._entry_for(path), ".".join(path)
        found, members = self._cached_members(entry, key)
        if found:
            return members, True
        stamps = module_stamps(callee, self._sys_path)
        introspector = self._introspection()
        answer = introspector.members(path, timeout_s=self.runtime_timeout_s, signatures=True)
        if answer.members is None and not answer.transient and "not known" in (answer.error or ""):
            self._ensure_environment()
            result = self._result_type(callee)
            if result is not None and result != callee:
                # the runtime decides with jedi's type as a hint (a stub's `-> Self` on a
                # base class is the receiver's own class)
                hints = {dotted(callee): ".".join(result)}
                answer = introspector.members(path, timeout_s=self.runtime_timeout_s, signatures=True, types=hints)
        if answer.transient:
            return None, False
        members = dict(answer.members) if answer.members is not None else None
        signatures = {name: _signature_or_none(items) for name, items in (answer.signatures or {}).items()}
        self._remember(path, entry, key, members, "runtime", stamps, signatures)
        return members, True

    def _lookup(self, path: tuple[str, ...]) -> tuple[dict[str, Member] | None, bool]:
        """(members, definitive) for `path`; runs on the background thread."""
        if path and path[-1] == CALL:
            return self._lookup_instance(path)
        if not self._ensure_facts():
            return None, True  # the interpreter does not answer: unconstrained, `problem` says why
        entry, key = self._entry_for(path), ".".join(path)
        found, members = self._cached_members(entry, key)
        if found:
            return members, True

        stamps = module_stamps(path, self._sys_path)  # before computing: a later edit is seen next time
        self._ensure_environment()
        members, is_module = self._jedi_members(path)
        via = "jedi"
        found_signatures: dict[str, Signature | None] = {}
        if self.runtime_introspection and members and not is_module:
            # a class or an object: jedi reads declarations; the runtime also lists what a
            # class's metaclass offers (``collections.abc.Sequence.register``) and the
            # private names a C object has (``numpy.negative._get_strided_loop``)
            answer = self._introspection().members(path, extra=[], timeout_s=self.runtime_timeout_s, private=True)
            if answer.transient:
                return None, False
            for name, member in (answer.members or {}).items():
                members.setdefault(name, member)
        if self.runtime_introspection and (not members or is_module):
            answer = self._introspection().members(
                path, extra=sorted(members), timeout_s=self.runtime_timeout_s, signatures=True, private=True
            )
            if answer.members is not None:
                members, via = dict(answer.members), "runtime"
                for name, member in members.items():
                    if member.kind != "module":
                        found_signatures[name] = _signature_or_none((answer.signatures or {}).get(name))
            elif answer.transient:
                return None, False
            elif not members:
                members, via = None, "runtime"  # the path does not resolve at runtime
            # else: the import fails at runtime but jedi saw members: jedi's answer stands
        elif not members:
            # jedi sees nothing (a C function, a builtin instance) and there is no runtime
            # check: unknown, as definitive as an answer (kept on disk: a new process does
            # not ask jedi again)
            members = None
        self._remember(path, entry, key, members, via, stamps, found_signatures)
        return members, True

    def _lookup_signature(self, key: tuple[str, ...]) -> tuple[Signature | None, bool]:
        """(signature, definitive) for call `key`; runs on the background thread."""
        if not self._ensure_facts():
            return None, True
        callee = key[:-1]
        root_file = None
        if key[0] not in self._disk:
            root_file = next(iter(module_location(key[:1], self._sys_path)), None)
        entry = self._disk_entry(key[0], root_file)
        name = dotted(key)
        cached = entry["signatures"].get(name)
        if cached is not None and stamps_match(cached.get("files")):
            return _signature_or_none(cached.get("signature")), True
        plain = callee[: callee.index(CALL)] if CALL in callee else callee
        stamps = module_stamps(plain, self._sys_path)
        if self.runtime_introspection and CALL not in callee and len(callee) > 1:
            # the parent's members come with the signatures of its callables
            parent = callee[:-1]
            with self._lock:
                known = parent in self._memory
            if not known:
                members, definitive = self._lookup(parent)
                if definitive:
                    with self._lock:
                        self._memory[parent] = members
            with self._lock:
                if key in self._signatures:
                    return self._signatures[key], True
        self._ensure_environment()
        signature, via, definitive = self._compute_signature(callee)
        if not definitive:
            return None, False
        entry["signatures"][name] = {"via": via, "signature": signature.to_list() if signature is not None else None, "files": stamps}
        self._save(key[0], entry, None, [name])
        return signature, True

    def _compute_signature(self, callee: tuple[str, ...]) -> tuple[Signature | None, str, bool]:
        """(signature, where it came from, definitive) of calling `callee`."""
        target = callee
        if self.runtime_introspection:
            answer = self._introspection().signature(target, timeout_s=self.runtime_timeout_s)
            if CALL in callee and answer.items is None and not answer.transient and "not known" in (answer.error or ""):
                last = len(callee) - 1 - callee[::-1].index(CALL)
                result_type = self._result_type(callee[:last])
                if result_type is not None:
                    hints = {dotted(callee[:last]): ".".join(result_type)}
                    answer = self._introspection().signature(target, timeout_s=self.runtime_timeout_s, types=hints)
            if answer.transient:
                return None, "runtime", False
            if answer.items is not None:
                return _signature_or_none(answer.items), "runtime", True
            if answer.error == "no signature":
                return None, "runtime", True  # found, but inspect sees no signature: any keyword
            log.debug("runtime signature of %s: %s; asking jedi", dotted(target), answer.error)
        return self._jedi_signature(callee), "jedi", True

    def _jedi_signature(self, callee: tuple[str, ...]) -> Signature | None:
        import jedi

        module = callee[: callee.index(CALL)] if CALL in callee else callee
        module = module[:-1] if len(module) > 1 else module
        expression = dotted(callee)
        script = jedi.Script(f"import {'.'.join(module)}\n{expression}(", environment=self._environment, project=self._project)
        try:
            found = script.get_signatures(2, len(expression) + 1)
        except Exception as error:
            log.debug("jedi signature of %s failed: %s: %s", expression, type(error).__name__, error)
            return None
        signature = Signature.merge(Signature.from_parameters(item.params) for item in found)
        if signature is None:
            log.debug("jedi finds no signature for %s()", expression)
        return signature

    def _result_type(self, callee: tuple[str, ...]) -> tuple[str, ...] | None:
        """The class path of what calling `callee` returns: the class itself for a
        class, else the one type jedi infers (None when it infers none or several)."""
        parent = callee[:-1]
        with self._lock:
            members = self._memory.get(parent) if parent else None
        member = members.get(callee[-1]) if members else None
        if member is not None and member.kind == "class":
            return callee
        import jedi

        plain = callee[: callee.index(CALL)] if CALL in callee else callee
        module = plain[:-1] if len(plain) > 1 else plain
        expression = dotted(callee)
        script = jedi.Script(
            f"import {'.'.join(module)}\n_result = {expression}()\n_result\n{expression}(", environment=self._environment, project=self._project
        )
        try:
            names = script.infer(3, 1)
            signatures = script.get_signatures(4, len(expression) + 1)
        except Exception as error:
            log.debug("jedi cannot infer the result of %s(): %s", expression, error)
            return None
        if len({_returned(signature) for signature in signatures}) > 1:
            # overloads that return different types (``randn() -> float``, ``randn(*args)
            # -> NDArray``): a call without arguments picks one, the document's call may not
            log.debug("the overloads of %s() return different types", expression)
            return None
        if any(name.type != "instance" for name in names):
            # a class, a function or a module among what it returns (``binary_dilation``:
            # the class bool or a dtype): several kinds of value
            log.debug("the result of %s() is not only instances", expression)
            return None
        types_found = {tuple(name.full_name.split(".")) for name in names if name.full_name}
        types_found.discard(("builtins", "object"))  # "an object" says nothing
        if len(types_found) != 1:
            log.debug("the result of %s() has %d inferred types", expression, len(types_found))
            return None
        annotated = any(_returned(signature) for signature in signatures)  # a stub's or the source's
        if not annotated and not _every_return_inferred(script, 4, len(expression)):
            log.debug("a return statement of %s() has no inferred type", expression)
            return None
        return next(iter(types_found))

    def _jedi_members(self, path: tuple[str, ...]) -> tuple[dict[str, Member], bool]:
        """Public members of `path` according to jedi, and whether `path` is a module."""
        import jedi

        dotted = ".".join(path)
        script = jedi.Script(f"import {dotted}\n{dotted}.", environment=self._environment, project=self._project)
        completions = script.complete(2, len(dotted) + 1)
        facts: list[ModuleFacts] = []
        is_module = False
        for name in script.infer(2, len(dotted)):
            if name.type in ("module", "namespace"):
                is_module = True
                for file in _source_files(Path(name.module_path)) if name.module_path else ():
                    found = self._sources.facts(file, dotted)
                    if found is not None:
                        facts.append(found)
                break
        exported = set().union(*(f.exported for f in facts if f.exported)) if facts else set()
        reachable = set().union(*(f.bound | f.submodules for f in facts)) if facts else set()
        # A module is checked by the runtime worker (jedi's names are candidates there,
        # kinds come from the runtime): following each import would be wasted work.
        follow_definitions = not (is_module and self.runtime_introspection)
        members: dict[str, Member] = {}
        for completion in completions:
            name = completion.name
            if not name.isidentifier() or name in members:
                continue
            if not is_module and name[:2] == "__" and name[-2:] == "__":
                continue  # the object protocol of a function or an instance says nothing of the API
            internal = getattr(completion, "_name", None)
            # `completion.type` also computes docstrings and signatures (seconds for a
            # big module); the name's own api_type is what it returns in the end.
            try:
                kind = internal.api_type
            except Exception:
                kind = completion.type
            internal_type = type(internal).__name__
            if internal_type == "SubModuleName" and facts and name not in reachable and name not in exported:
                continue  # a package sub-directory the package never imports
            if internal_type == "StubName" and name not in exported and _is_stub_alias(internal):
                continue  # `import x as y` in a stub is not a re-export
            if follow_definitions and (kind == "function" or (kind == "module" and internal_type != "SubModuleName")):
                # jedi calls every imported name a "module";
                # follow the import to the definition: its kind, and whether it is a
                # removed-API placeholder (a function whose body only raises)
                kind, placeholder = self._definition_kind(completion, kind)
                if placeholder:
                    continue
            if kind == "namespace":
                kind = "module"
            members[name] = Member(name, kind, kind not in ("function", "keyword"))
        return members, is_module

    def _definition_kind(self, completion, kind: str) -> tuple[str, bool]:
        """(kind of the definition `completion` leads to, is it a placeholder)."""
        try:
            definitions = completion.goto(follow_imports=True)
        except Exception:
            return kind, False
        for definition in definitions:
            try:
                kind = definition._name.api_type
            except Exception:
                kind = definition.type
            module_path = definition.module_path
            if kind == "function" and module_path and str(module_path).endswith(".py") and definition.line:
                node = self._sources.function_at(Path(module_path), definition.line)
                if node is not None and function_node_only_raises(node):
                    return kind, True
            return kind, False
        return kind, False


def _every_return_inferred(script, line: int, column: int) -> bool:
    """Whether every ``return`` of the function named at (`line`, `column`), read from
    its source, has a type jedi infers: jedi's result of a call is the union of what it
    infers for each, and a return it can infer nothing for (``return in1 * in2`` on
    arguments of unknown type, scipy's ``fftconvolve``) is an unknown member of that
    union, so the one type inferred is not the type of every result.  Generators and
    classes are not read (True); the caller skips functions whose stub or source
    annotates the return."""
    try:
        for name in script.infer(line, column):
            for value in name._name.infer():  # noqa: SLF001 - jedi's values: the function's source
                node = getattr(value, "tree_node", None)
                if node is None or node.type not in ("funcdef", "lambdef") or getattr(value, "is_stub", lambda: False)():
                    continue
                if node.type == "funcdef" and (getattr(node, "annotation", None) is not None or node.is_generator()):
                    continue
                context = value.as_context()
                for statement in node.iter_return_stmts():
                    if len(statement.children) < 2 or not context.infer_node(statement.children[1]):
                        return False
    except Exception:  # noqa: BLE001 - jedi's internals changed or failed: keep what it inferred
        log.debug("could not read the return statements at %d:%d", line, column, exc_info=True)
    return True


def _returned(signature) -> str:
    """The return annotation a jedi signature writes (after ``->``), "" when none."""
    try:
        text = signature.to_string()
    except Exception:
        return ""
    return text.rsplit(") -> ", 1)[1].strip() if ") -> " in text else ""


def _valid_member_path(path: tuple[str, ...]) -> bool:
    """Identifiers and `CALL`s (what the call before returns), never first nor two in a
    row; a path with a `CALL` ends in one (an instance's members)."""
    if not path or not isinstance(path[0], str) or not path[0].isidentifier():
        return False
    for previous, part in zip(path, path[1:]):
        if not isinstance(part, str) or not (part.isidentifier() or (part == CALL and previous != CALL)):
            return False
    return CALL not in path or path[-1] == CALL


def _valid_call_key(key: tuple[str, ...]) -> bool:
    return (
        len(key) >= 2
        and key[-1] == CALL
        and key[0] != CALL
        and all(isinstance(p, str) and (p == CALL or p.isidentifier()) for p in key)
    )


def _signature_or_none(items) -> Signature | None:
    if items is None:
        return None
    try:
        return Signature.from_list(items)
    except ValueError as error:
        log.debug("unreadable signature %r: %s", items, error)
        return None


def _is_stub_alias(internal_name) -> bool:
    """Whether a jedi stub name is bound by ``import a as b`` / ``from m import a as b``
    with b != a (not a re-export in a stub, PEP 484)."""
    try:
        tree_name = internal_name.tree_name
        parent = tree_name.parent
        if parent.type in ("import_as_name", "dotted_as_name") and parent.children[-1] is tree_name:
            original = parent.children[0]
            original_name = original.get_code(include_prefix=False).split(".")[-1]
            return original_name != tree_name.value
    except AttributeError:
        return False
    return False

