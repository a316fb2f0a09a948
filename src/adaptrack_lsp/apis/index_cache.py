"""The on-disk API index cache, and the facts it is keyed by.

One JSON file per (environment, top-level package, package version, mode) under
``<cache root>/api-index/<environment key>/``: the members of dotted paths
(``"paths"``) and the signatures of calls (``"signatures"``, keyed by the dotted call
``numpy.histogram()``; a file without them is still read).  The environment key hashes the
interpreter's real path and Python version; the file name carries the package name and
version.  Each cached path also records the size and modification time of the module
files it was computed from (`module_stamps`); an entry whose files changed is
recomputed.  So an upgraded package (another version) or an edited module (same
version, other files) is never answered from stale entries.

Reading never trusts the file: anything that is not the expected structure (a partial
write, a corrupt or foreign file) is ignored, entry by entry, and rebuilt.  Writing goes
to a temporary file in the same folder and is renamed over the target (atomic on POSIX
and Windows), after merging the entries another process may have written meanwhile.  A
cache folder that cannot be written turns the disk cache off for this process, with
one log line.

`probe_environment` asks the interpreter for its version and ``sys.path`` once, with a
time limit: an interpreter that hangs is reported, never waited on.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: bump when the stored structure or the member rules change, so old files are not reused
#: (4: a deprecated member's message as a third item; 5: a class's or an object's
#: members add the runtime's to jedi's, and a call's result type drops overloads)
CACHE_FORMAT = 5
#: seconds the interpreter may take to say its version and sys.path
PROBE_TIMEOUT_S = 20.0

_PROBE_SCRIPT = (
    "import json, os, sys; "
    "print(json.dumps({'executable': os.path.realpath(sys.executable), "
    "'version': '.'.join(map(str, sys.version_info[:3])), 'sys_path': [p for p in sys.path if p], "
    "'builtin_modules': sorted(sys.builtin_module_names)}))"
)


class EnvironmentProbeError(RuntimeError):
    """The interpreter could not say what it is (it hangs, crashes or prints garbage)."""


@dataclass(frozen=True)
class EnvironmentFacts:
    executable: str
    version: str
    sys_path: tuple[str, ...]
    #: modules compiled into the interpreter (no file: ``sys``, ``time``, ``itertools``)
    builtin_modules: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        """The cache folder name of this environment (interpreter real path + version)."""
        return hashlib.sha256(f"{self.executable}\0{self.version}".encode()).hexdigest()[:16]


def probe_environment(python: str, timeout_s: float = PROBE_TIMEOUT_S) -> EnvironmentFacts:
    """Version and sys.path of `python`, asked once with a time limit."""
    from adaptrack_lsp.apis.interpreter_check import run_contained

    try:  # own process group, temporary folder, minimal environment (killed as a whole)
        returncode, stdout, stderr = run_contained([python, "-I", "-c", _PROBE_SCRIPT], timeout_s)
    except TimeoutError:
        raise EnvironmentProbeError(f"python interpreter {python} did not say its version within {timeout_s:g} s") from None
    except OSError as error:
        raise EnvironmentProbeError(f"cannot run python interpreter {python}: {error}") from None
    try:
        data = json.loads(stdout.strip().splitlines()[-1])
        return EnvironmentFacts(
            str(data["executable"]),
            str(data["version"]),
            tuple(str(p) for p in data["sys_path"]),
            frozenset(str(name) for name in data.get("builtin_modules", ())),
        )
    except (ValueError, KeyError, IndexError, TypeError):
        tail = (stderr or stdout).strip().splitlines()[-1:] or ["no output"]
        raise EnvironmentProbeError(
            f"python interpreter {python} did not say its version (exit code {returncode}: {tail[0][:200]})"
        ) from None


# ------------------------------------------------------------------------ module files


def module_location(path: Sequence[str], sys_path: Iterable[str]) -> tuple[str, ...]:
    """The source files (.py, .pyi) of the longest module prefix of `path` that exists
    on `sys_path` as a plain file or package folder, found without importing anything
    (an extension module: its compiled file)."""
    for entry in sys_path:
        base = Path(entry)
        if not (base / path[0]).is_dir() and not any((base / f"{path[0]}{suffix}").is_file() for suffix in (".py", ".pyi")):
            compiled = sorted(str(p) for p in base.glob(f"{path[0]}.*") if p.suffix in (".so", ".pyd") and p.is_file())
            if compiled:
                return (compiled[0],)
            continue
        files: tuple[str, ...] = ()
        folder = base
        for part in path:
            package = folder / part
            found = [str(package / name) for name in ("__init__.py", "__init__.pyi") if (package / name).is_file()]
            if not found:
                found = [str(folder / f"{part}{suffix}") for suffix in (".py", ".pyi") if (folder / f"{part}{suffix}").is_file()]
                if found:
                    files = tuple(found)
                break
            files = tuple(found)
            folder = package
        return files
    return ()


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def distribution_version(root: str, root_file: str | None) -> str | None:
    """Version of the installed distribution providing top-level module `root`, read
    from the ``NAME-VERSION.dist-info`` folders next to it (file names, ``top_level.txt``,
    then ``RECORD``); None when none is found.  Reads no METADATA (parsing every
    distribution's METADATA takes seconds in a big environment)."""
    if not root_file:
        return None
    location = Path(root_file).parent
    if location.name == root:  # a package: root/__init__.py
        location = location.parent
    try:
        folders = sorted(entry for entry in location.iterdir() if entry.name.endswith(".dist-info") and "-" in entry.name)
    except OSError:
        return None
    versioned = [(folder, *folder.name[: -len(".dist-info")].split("-", 1)) for folder in folders]
    for _folder, name, version in versioned:
        if _normalized(name) == _normalized(root):
            return version
    for reader, matches in (
        ("top_level.txt", lambda text: root in text.split()),
        ("RECORD", lambda text: any(line.startswith((f"{root}/", f"{root}.py,", f"{root}.pyi,")) for line in text.splitlines())),
    ):
        for folder, _name, version in versioned:
            try:
                text = (folder / reader).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if matches(text):
                return version
    return None


def file_stamp(file: str) -> list[int] | None:
    """[size, mtime in ns] of `file`, None when it cannot be read."""
    try:
        status = os.stat(file)
    except OSError:
        return None
    return [status.st_size, status.st_mtime_ns]


def module_stamps(path: Sequence[str], sys_path: Iterable[str]) -> dict[str, list[int]]:
    """file -> [size, mtime_ns] for the module files an answer about `path` depends on."""
    stamps = {}
    for file in module_location(tuple(path), sys_path):
        stamp = file_stamp(file)
        if stamp is not None:
            stamps[file] = stamp
    return stamps


def stamps_match(stamps: object) -> bool:
    """Whether every recorded file still has the recorded size and mtime."""
    if not isinstance(stamps, dict):
        return False
    return all(isinstance(file, str) and file_stamp(file) == stamp for file, stamp in stamps.items())


# ------------------------------------------------------------------------ the cache files


def _valid_entry(entry: object) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("files"), dict):
        return False
    members = entry.get("members")
    if members is None:
        return True
    if not isinstance(members, dict):
        return False
    for name, value in members.items():
        if not (isinstance(name, str) and isinstance(value, list) and len(value) in (2, 3)):
            return False
        if not (isinstance(value[0], str) and isinstance(value[1], bool) and all(isinstance(v, str) for v in value[2:])):
            return False
    return True


def _valid_signature_entry(entry: object) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("files"), dict):
        return False
    items = entry.get("signature")
    return items is None or (isinstance(items, list) and all(isinstance(item, str) for item in items))


_UNWRITABLE: set[str] = set()
_UNWRITABLE_LOCK = threading.Lock()


_WORKER_DIGEST: list[str] = []


def worker_digest() -> str:
    """A short hash of the sources that compute cached answers, the introspection worker
    and the jedi index: what they answer (which names count, how types are found, what
    a call returns) is part of every cached answer, so a changed one never reads
    answers an older one wrote."""
    if not _WORKER_DIGEST:
        import hashlib

        folder = Path(__file__).parent
        source = b"\0".join((folder / name).read_bytes() for name in ("introspect_worker.py", "jedi_index.py"))
        _WORKER_DIGEST.append(hashlib.sha256(source).hexdigest()[:10])
    return _WORKER_DIGEST[0]


class IndexCache:
    """The files of one cache folder (``<cache root>/api-index``)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.writable = True
        self._lock = threading.Lock()

    def file(self, environment: EnvironmentFacts, package: str, version: str, mode: str) -> Path:
        safe_version = re.sub(r"[^A-Za-z0-9.+-]", "_", version)
        return self.folder / environment.key / f"{package}-{safe_version}.{mode}.v{CACHE_FORMAT}-{worker_digest()}.json"

    def _read(self, file: Path, package: str, version: str) -> dict | None:
        """The cache file's data when it is a cache of this package version, else None."""
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, UnicodeDecodeError) as error:
            log.info("API index cache %s is unreadable (%s); rebuilding it", file, error)
            return None
        if not (
            isinstance(data, dict)
            and data.get("format") == CACHE_FORMAT
            and data.get("package") == package
            and data.get("version") == version
            and isinstance(data.get("paths"), dict)
        ):
            log.info("API index cache %s is not a cache of %s %s; rebuilding it", file, package, version)
            return None
        return data

    def load(self, file: Path, package: str, version: str) -> dict[str, dict]:
        """dotted path -> entry, for the well-formed entries of `file` ({} when absent,
        unreadable or not a cache file of this package version)."""
        return self.load_all(file, package, version)[0]

    def load_all(self, file: Path, package: str, version: str) -> tuple[dict[str, dict], dict[str, dict]]:
        """(dotted path -> members entry, dotted call -> signature entry) of `file`, the
        well-formed entries only."""
        data = self._read(file, package, version)
        if data is None:
            return {}, {}
        paths = {key: entry for key, entry in data["paths"].items() if isinstance(key, str) and _valid_entry(entry)}
        raw = data.get("signatures")
        signatures = (
            {key: entry for key, entry in raw.items() if isinstance(key, str) and _valid_signature_entry(entry)}
            if isinstance(raw, dict)
            else {}
        )
        return paths, signatures

    def store(
        self,
        file: Path,
        package: str,
        version: str,
        paths: dict[str, dict],
        extra: dict | None = None,
        signatures: dict[str, dict] | None = None,
    ) -> None:
        """Write `paths` and `signatures` (merged with what is on disk now) atomically;
        never raises."""
        if not self.writable:
            return
        with self._lock:
            old_paths, old_signatures = self.load_all(file, package, version)
            merged = {**old_paths, **paths}
            data = {
                "format": CACHE_FORMAT,
                "package": package,
                "version": version,
                **(extra or {}),
                "paths": merged,
                "signatures": {**old_signatures, **(signatures or {})},
            }
            temporary = None
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
                handle, temporary = tempfile.mkstemp(prefix=file.name + ".", suffix=".tmp", dir=file.parent)
                with os.fdopen(handle, "w", encoding="utf-8") as stream:
                    json.dump(data, stream, separators=(",", ":"))
                os.replace(temporary, file)
            except OSError as error:
                self.writable = False
                with _UNWRITABLE_LOCK:
                    first = str(self.folder) not in _UNWRITABLE
                    _UNWRITABLE.add(str(self.folder))
                if first:  # once per folder and process
                    log.warning("API index cache folder %s is not writable (%s); working without the disk cache", self.folder, error)
                if temporary is not None:
                    try:
                        os.unlink(temporary)
                    except OSError:
                        pass
