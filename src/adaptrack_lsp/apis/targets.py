"""Declared version targets: an API index valid in every version a project supports.

A *target* is a requirement specifier (``numpy>=1.24,<3``, ``pandas==1.5.3``), from the
setting ``versionTargets``, ``--target`` or a project file (`targets_from_file`:
``[project] dependencies`` of a pyproject.toml, or a requirements.txt).  For each one the
versions checked are the lowest and the highest release that match the specifier *and*
have a wheel for this Python and platform (`concrete_versions`: ``pip index versions
--only-binary=:all:`` through pip's own configuration, the list kept for a day), plus
the installed version, which the live index answers for as before.

Each target version is indexed once into an API snapshot (`target_snapshot`): its own
throwaway environment (`environments.environment_for`, wheels only, never the user's
environment), the introspection worker's walk of every top-level module the
distribution installs, written to ``<cache root>/targets/snapshots/`` (one file per
package, version and Python).  `TargetsIndex` combines the live index with those
snapshots: a member or keyword is valid only where every index that knows the path has
it (an index that does not know a path is unknown there, not a rejection), and
`absence` says which versions lack a name and which have it (``not in numpy 2.4.6
(present in 1.24.0)``).

What cannot be resolved or built (offline, no wheel for this Python, no release
matching) raises `EnvironmentBuildError` naming the package, the version and the fix;
a `TargetsIndex` whose targets failed has that as its `problem` (the server reports
`degraded`, the CLI exits non-zero).  Nothing falls back to the installed version.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptrack_lsp.apis.environments import (
    EnvironmentBuildError,
    environment_for,
    find_environment,
    normalize_name,
    python_identity,
)
from adaptrack_lsp.apis.index import CALL, APIIndex, Member, Signature
from adaptrack_lsp.apis.snapshot import ANY_ATTRIBUTE, DEFAULT_MAX_DEPTH, SnapshotError, SnapshotIndex
from adaptrack_lsp.config import cache_root

log = logging.getLogger(__name__)

Progress = Callable[[str], None]

#: how long a package's list of releases is reused before the index is asked again
VERSIONS_TTL_S = 24 * 3600.0
#: the longest `pip index versions` may take
LIST_TIMEOUT_S = 180.0
#: the longest the walk of one target version may take
TARGET_WALK_TIMEOUT_S = 900.0

_OFFLINE = (
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "ConnectTimeoutError",
    "ProxyError",
    "Connection refused",
    "Max retries exceeded",
)


# --------------------------------------------------------------------------- requirements


def parse_target(text: str):
    """The `packaging` Requirement of one target; ValueError naming what is wrong (not a
    requirement, a URL or path, which has no versions to check)."""
    from packaging.requirements import InvalidRequirement, Requirement

    text = (text or "").strip()
    try:
        requirement = Requirement(text)
    except InvalidRequirement as error:
        raise ValueError(f"version target {text!r} is not a requirement specifier ({error}); write e.g. 'numpy>=1.24,<3'") from None
    if requirement.url:
        raise ValueError(f"version target {text!r} names a URL; a target is a package name and a version range")
    return requirement


def applies(requirement) -> bool:
    """Whether the requirement's environment marker holds for this Python (no marker: yes)."""
    return requirement.marker is None or bool(requirement.marker.evaluate({"extra": ""}))


@dataclass
class DeclaredTargets:
    """Targets read from a project file: the specifiers kept, and what was skipped and why."""

    targets: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    #: the project's ``requires-python`` ("" when it declares none)
    requires_python: str = ""


#: the Python versions `python_note` considers
_PYTHONS = [f"3.{minor}" for minor in range(6, 16)]


def python_note(requires_python: str, version: str) -> str:
    """What to say when a project's ``requires-python`` allows Pythons other than the
    checking interpreter's `version` (``"3.11"``): the standard library is checked for
    that interpreter's version only.  "" when it allows none other (or says nothing)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not requires_python.strip():
        return ""
    try:
        allowed = SpecifierSet(requires_python)
    except InvalidSpecifier:
        return ""
    others = [python for python in _PYTHONS if python != version and allowed.contains(f"{python}.0", prereleases=True)]
    if not others:
        return ""
    shown = others[0] if len(others) == 1 else f"{others[0]} to {others[-1]}" if len(others) == int(others[-1].split(".")[1]) - int(others[0].split(".")[1]) + 1 else ", ".join(others)
    return (f"requires-python {requires_python.strip()} also allows Python {shown}: standard-library names are checked "
            f"for Python {version} only (the checking interpreter's)")


def targets_from_file(path: str | os.PathLike) -> DeclaredTargets:
    """The targets a project declares: ``pyproject.toml`` (``[project] dependencies``;
    ``pyproject.toml[test,docs]`` adds those optional-dependency groups) or a
    requirements file (any other name).  Lines that are not version requirements
    (options, URLs, paths, ``-r`` includes, requirements whose marker does not hold for
    this Python) are skipped and named in `skipped`.  ValueError for a file that
    cannot be read or has no dependencies table."""
    text = str(path)
    groups: list[str] = []
    match = re.fullmatch(r"(.*?)\[([^\]]*)\]", text)
    if match and not Path(text).exists():
        text, groups = match.group(1), [g.strip() for g in match.group(2).split(",") if g.strip()]
    file = Path(text)
    try:
        content = file.read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(f"cannot read {file}: {error.strerror or error}") from None
    if file.name == "pyproject.toml":
        return _pyproject_targets(file, content, groups)
    if groups:
        raise ValueError(f"{file}: [groups] are read from a pyproject.toml only")
    return _requirements_targets(file, content)


def _pyproject_targets(file: Path, content: str, groups: Sequence[str]) -> DeclaredTargets:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise ValueError(f"reading {file} needs Python 3.11 or the tomli package") from None
    try:
        data = tomllib.loads(content)
    except ValueError as error:
        raise ValueError(f"{file} is not valid TOML: {error}") from None
    project = data.get("project")
    if not isinstance(project, dict):
        raise ValueError(f"{file} has no [project] table (other build tools' tables are not read); give the targets with --target")
    if "dependencies" in (project.get("dynamic") or []):
        raise ValueError(f"{file} declares its dependencies as dynamic; give the targets with --target")
    items: list[str] = list(project.get("dependencies") or [])
    optional = project.get("optional-dependencies") or {}
    for group in groups:
        if group not in optional:
            known = ", ".join(sorted(optional)) or "none"
            raise ValueError(f"{file} has no optional-dependencies group {group!r} (groups: {known})")
        items.extend(optional[group])
    declared = DeclaredTargets(requires_python=str(project.get("requires-python") or ""))
    for item in items:
        _keep(declared, str(item), f"{file.name}: {item}")
    return declared


_OPTION = re.compile(r"^-{1,2}[A-Za-z]")
_URL_OR_PATH = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|git\+|hg\+|svn\+|bzr\+|\.{0,2}/|~|[A-Za-z]:\\)")


def _requirements_targets(file: Path, content: str) -> DeclaredTargets:
    declared = DeclaredTargets()
    logical: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(content.splitlines(), 1):
        if not pending:
            start = number
        line = raw
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append((start, pending + line))
        pending = ""
    if pending:
        logical.append((start, pending))
    for number, line in logical:
        text = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not text:
            continue
        where = f"{file.name}:{number}: {text}"
        if _OPTION.match(text):
            declared.skipped.append(f"{where} (an option, not a requirement)")
            continue
        if _URL_OR_PATH.match(text) or text.endswith((".whl", ".tar.gz", ".zip")):
            declared.skipped.append(f"{where} (a URL or path, not a version range)")
            continue
        _keep(declared, text, where)
    return declared


def _keep(declared: DeclaredTargets, text: str, where: str) -> None:
    try:
        requirement = parse_target(text)
    except ValueError as error:
        reason = "a URL, not a version range" if "names a URL" in str(error) else "not a requirement"
        declared.skipped.append(f"{where} ({reason})")
        return
    if not applies(requirement):
        declared.skipped.append(f"{where} (its marker does not hold for this Python)")
        return
    declared.targets.append(re.sub(r"\s+", " ", text).strip())


# --------------------------------------------------------------------------- versions


def exact_pin(requirement) -> str | None:
    """The version of a requirement pinned to one release (``==1.24.4``, ``===1.24.4``),
    else None."""
    specifiers = list(requirement.specifier)
    if len(specifiers) == 1 and specifiers[0].operator in ("==", "===") and "*" not in specifiers[0].version:
        return specifiers[0].version
    return None


def _versions_file(name: str, python: str | None) -> Path:
    return cache_root() / "targets" / "versions" / f"{normalize_name(name)}-{python_identity(python)}.json"


def _listing_error(name: str, reason: str, fix: str, requirement: str = "", log_tail: str = "") -> EnvironmentBuildError:
    """An `EnvironmentBuildError` about finding releases (no environment was tried): its
    text says what could not be listed, why and the fix."""
    error = EnvironmentBuildError([requirement or name], reason, fix, requirement=requirement or name, log_tail=log_tail)
    error.args = (f"{reason} ({fix})",)
    return error


def available_versions(name: str, *, python: str | None = None, refresh: bool = False) -> list[str]:
    """Releases of distribution `name` with a wheel for interpreter `python` (default:
    this one), newest first, pre-releases included: ``pip index versions
    --only-binary=:all:`` with pip's own configuration (its index, extra indexes,
    certificates), kept `VERSIONS_TTL_S` under the cache root.  Raises
    `EnvironmentBuildError` (offline, no such package)."""
    path = _versions_file(name, python)
    if not refresh:
        try:
            cached = json.loads(path.read_text())
            if time.time() - float(cached["time"]) < VERSIONS_TTL_S:
                return [str(v) for v in cached["versions"]]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    base = str(python or sys.executable)
    command = [
        base, "-m", "pip", "index", "versions", name, "--only-binary=:all:", "--pre", "--json",
        "--disable-pip-version-check", "--no-input",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=LIST_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise _listing_error(name, f"the package index did not list the releases of {name} within {LIST_TIMEOUT_S:.0f} s", "try again on a faster connection") from None
    except OSError as error:
        raise _listing_error(name, f"pip could not start to list the releases of {name} ({error})", "install pip for this Python") from None
    output = done.stdout + "\n" + done.stderr
    if done.returncode != 0:
        tail = done.stderr[-2000:]
        if any(marker in output for marker in _OFFLINE):
            raise _listing_error(
                name, f"the package index cannot be reached to list the releases of {name} (offline?)",
                "connect to the network once (the releases and snapshots are cached afterwards), or pin a "
                f"version ({name}==X.Y.Z) whose snapshot is already built", log_tail=tail,
            )
        if "No matching distribution" in output:
            raise _listing_error(
                name, f"no release of {name} has a wheel for Python {sys.version_info[0]}.{sys.version_info[1]} on this platform on the package index",
                "check the name, or run with a Python that the package supports", log_tail=tail,
            )
        last = next((line.strip() for line in reversed(done.stderr.splitlines()) if line.strip()), "pip failed")
        raise _listing_error(name, f"pip index versions {name} failed: {last[:300]}", "see pip's message", log_tail=tail)
    try:
        versions = [str(v) for v in json.loads(done.stdout)["versions"]]
    except (ValueError, KeyError, TypeError):
        raise _listing_error(name, f"pip index versions {name} gave unreadable output", "upgrade pip (21.2 or newer lists versions)") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps({"time": time.time(), "name": name, "versions": versions}))
    os.replace(temporary, path)
    return versions


def concrete_versions(requirement, *, python: str | None = None) -> list[str]:
    """The versions checked for target `requirement`: the lowest and the highest release
    that match its specifier and have a wheel for this Python (one when they are the
    same, or when it pins one version: then the index is not asked)."""
    from packaging.version import InvalidVersion, Version

    pinned = exact_pin(requirement)
    if pinned is not None:
        return [pinned]
    name = normalize_name(requirement.name)
    releases = []
    for text in available_versions(name, python=python):
        try:
            releases.append(Version(text))
        except InvalidVersion:
            continue
    matching = sorted(requirement.specifier.filter(releases))
    if not matching:
        shown = sorted(releases)
        having = f" (releases with wheels: {shown[0]} … {shown[-1]})" if shown else ""
        raise _listing_error(
            name,
            f"no release of {name} matching {requirement.specifier or 'any version'} has a wheel for Python "
            f"{sys.version_info[0]}.{sys.version_info[1]} on this platform{having}",
            "widen the version range, or run with a Python those releases support",
            requirement=str(requirement),
        )
    return [str(v) for v in dict.fromkeys([matching[0], matching[-1]])]


# --------------------------------------------------------------------------- snapshots


def snapshot_path(name: str, version: str, python: str | None = None) -> Path:
    """Where the snapshot of `name` `version` for interpreter `python` is cached."""
    from adaptrack_lsp.apis.introspect_worker import WALK_FORMAT

    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", version)
    return cache_root() / "targets" / "snapshots" / f"{normalize_name(name)}-{safe}-{python_identity(python)}-f{WALK_FORMAT}.json.gz"


_TOP_LEVEL = """
import importlib.metadata as m, json, re, sys
def norm(n): return re.sub(r"[-_.]+", "-", n).lower()
want = norm(sys.argv[1])
mods = sorted(mod for mod, dists in m.packages_distributions().items() if any(norm(d) == want for d in dists))
print(json.dumps(mods))
"""


def top_level_modules(python: str | os.PathLike, name: str) -> list[str]:
    """The public top-level modules distribution `name` installs in the environment of
    `python`, the one named like the distribution first."""
    done = subprocess.run([str(python), "-I", "-c", _TOP_LEVEL, name], capture_output=True, text=True, timeout=120)
    found: list[str] = []
    if done.returncode == 0:
        try:
            found = [m for m in json.loads(done.stdout) if isinstance(m, str) and m.isidentifier() and not m.startswith("_")]
        except ValueError:
            found = []
    guess = normalize_name(name).replace("-", "_")
    if guess in found or not found:
        found = [guess] + [m for m in found if m != guess]
    return found


def walk_environment(python: str | os.PathLike, name: str, version: str, *, progress: Progress | None = None,
                     requirement: str = "", max_depth: int = DEFAULT_MAX_DEPTH, timeout_s: float = TARGET_WALK_TIMEOUT_S) -> dict[str, Any]:
    """One snapshot of distribution `name` as installed for `python`: the walk of each of
    its top-level modules (`snapshot.walk_snapshot`, contained), merged.  A top-level
    module that cannot be walked, or a walk that finds no name, is an error of the
    target (RuntimeError naming the module and the cause): never a partial or empty
    snapshot.  Public submodules that do not import are named in the snapshot
    (``skipped_modules``)."""
    from adaptrack_lsp.apis.snapshot import walk_snapshot

    modules = top_level_modules(python, name)
    merged: dict[str, Any] = {}
    walked: list[str] = []
    for module in modules:
        if progress is not None:
            progress(f"walking {module} ({name} {version})")
        try:
            data = walk_snapshot(str(python), module, max_depth, timeout_s)
        except RuntimeError as error:
            raise RuntimeError(f"{name} {version}: the walk of {module} failed: {_last_line(str(error))}") from None
        walked.append(module)
        if not merged:
            merged = dict(data)
            continue
        merged["names"] = sorted(set(merged["names"]) | set(data["names"]))
        merged["modules"] = sorted(set(merged.get("modules") or ()) | set(data.get("modules") or ()))
        for key in ("kinds", "signatures", "deprecated", "classes", "class_paths", "returns", "skipped_modules"):
            merged[key] = {**(data.get(key) or {}), **(merged.get(key) or {})}
    if not any(not name.rsplit(".", 1)[-1].startswith("_") for name in merged.get("names") or ()):
        raise RuntimeError(f"{name} {version}: the walk of {', '.join(walked) or 'its modules'} found no public name")
    merged.update(package=normalize_name(name), version=version, root=walked[0], roots=walked, requirement=requirement or f"{name}=={version}")
    return merged


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else text.strip()


# --------------------------------------------------------------------------- what works here

_IMPORT_ALL = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
#: the longest importing a release's modules may take
IMPORT_TIMEOUT_S = 300.0


def import_problem(python: str | os.PathLike, name: str) -> str:
    """"" when every top-level module of distribution `name` imports in the environment
    of `python` (contained, as the walk), else the error (its last line)."""
    from adaptrack_lsp.apis.interpreter_check import run_contained

    modules = top_level_modules(python, name)
    try:
        code, _out, err = run_contained([str(python), "-I", "-B", "-c", _IMPORT_ALL, *modules], IMPORT_TIMEOUT_S)
    except TimeoutError:
        return f"importing {', '.join(modules)} took longer than {IMPORT_TIMEOUT_S:g} s"
    except OSError as error:
        return f"cannot run {python}: {error}"
    return "" if code == 0 else _last_line(err) or f"exit status {code}"


@dataclass
class Probe:
    """Whether a release installs (dependencies as of its release) and imports here."""

    works: bool
    reason: str = ""
    environment: Any = None


def _probe_file(name: str, version: str, python: str | None) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", version)
    return cache_root() / "targets" / "probes" / f"{normalize_name(name)}-{safe}-{python_identity(python)}-r{PROBE_RECIPE}.json"


#: bumped when what a probe does changes (verdicts kept on disk are asked again)
PROBE_RECIPE = 1


def target_environment(name: str, version: str, *, python: str | None = None, progress: Progress | None = None):
    """The environment of `name` `version`: its own, with the dependencies of the
    release's time (`dated_resolution`: uploaded before the release plus a few days;
    as of today where the index does not say, noted in the environment)."""
    from adaptrack_lsp.apis.dated_resolution import ReleaseDatesUnavailable, cutoff

    try:
        as_of = cutoff(name, version)
    except ReleaseDatesUnavailable as error:
        if "cannot be reached" in str(error) and find_environment([f"{name}=={version}"], python) is None:
            raise EnvironmentBuildError(
                [f"{name}=={version}"], str(error).replace("cannot be reached", "cannot be reached (offline?)", 1),
                "connect to the network once; the environment is cached afterwards", requirement=f"{name}=={version}",
            ) from None
        if progress is not None:
            progress(f"{name} {version}: dependencies are resolved as of today ({error})")
        as_of = None
    return environment_for([f"{name}=={version}"], python=python, progress=progress, as_of=as_of, exempt=[name])


def probe_release(name: str, version: str, *, python: str | None = None, progress: Progress | None = None) -> Probe:
    """Whether `name` `version` installs and imports on this Python (kept on disk; an
    environment that does not work is removed).  An index out of reach is not a
    verdict: it raises `EnvironmentBuildError`."""
    from adaptrack_lsp.apis.environments import remove_environment

    path = _probe_file(name, version, python)
    try:
        cached = json.loads(path.read_text())
        return Probe(bool(cached["works"]), str(cached.get("reason", "")))
    except (OSError, ValueError, KeyError, TypeError):
        cached = None
    if progress is not None and cached is None:
        progress(f"trying {name} {version} on Python {sys.version_info[0]}.{sys.version_info[1]}")
    try:
        environment = target_environment(name, version, python=python, progress=progress)
    except EnvironmentBuildError as error:
        if "cannot be reached" in error.reason or "did not finish" in error.reason:
            raise
        result = Probe(False, f"does not install: {error.reason}")
    else:
        problem = import_problem(environment.python, name)
        result = Probe(not problem, f"does not import: {problem}" if problem else "", environment)
        if problem:
            remove_environment(environment)
            result.environment = None
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps({"works": result.works, "reason": result.reason}))
    os.replace(temporary, path)
    return result


@dataclass
class Choice:
    """The versions a range target checks, and why they moved from the range's ends."""

    versions: list[str]
    notes: list[str] = field(default_factory=list)


def choose_versions(requirement, *, python: str | None = None, progress: Progress | None = None,
                    releases: Sequence[str] | None = None, probe: Callable[..., Probe] | None = None) -> Choice:
    """The lowest and the highest release matching `requirement` (with a wheel for this
    Python) that install and import here: where an end does not, the nearest release
    that does, found by bisection over the releases between (each verdict kept on
    disk; releases are assumed to work from some version on, and up to some version).
    A pinned target is that release, whatever it does (its failure is the target's).
    Raises `EnvironmentBuildError` when no release works or the index is out of reach.
    `releases` and `probe` stand in for the index's list and `probe_release`."""
    from packaging.version import InvalidVersion, Version

    pinned = exact_pin(requirement)
    if pinned is not None:
        return Choice([pinned])
    name = normalize_name(requirement.name)
    if releases is None:
        listed = concrete_versions(requirement, python=python)  # raises with the reasons
        releases = available_versions(name, python=python)
    else:
        listed = []
    parsed = []
    for text in releases:
        try:
            parsed.append((Version(text), text))
        except InvalidVersion:
            continue
    texts = {version: text for version, text in parsed}
    # pre-releases only where the range asks for one, or no final release matches
    matching = [texts[version] for version in sorted(requirement.specifier.filter(texts))] or listed
    if not matching:
        raise EnvironmentBuildError([str(requirement)], f"no release of {name} matches {requirement.specifier}", "widen the range", requirement=str(requirement))
    here = f"Python {sys.version_info[0]}.{sys.version_info[1]}"
    verdicts: dict[int, Probe] = {}
    probe = probe or probe_release

    def works(position: int) -> bool:
        if position not in verdicts:
            verdicts[position] = probe(name, matching[position], python=python, progress=progress)
        return verdicts[position].works

    notes: list[str] = []
    last = len(matching) - 1
    low = 0 if works(0) else None
    high = last if works(last) else None
    good = low if low is not None else high
    if good is None and last > 1:
        middle = last // 2
        if works(middle):
            good = middle
    if good is None:
        reasons = "; ".join(f"{matching[p]}: {verdicts[p].reason}" for p in sorted(verdicts))
        raise EnvironmentBuildError(
            [str(requirement)], f"no release of {name} matching {requirement.specifier} installs and imports on {here} ({reasons})",
            "narrow the range to releases that support this Python, or run with a Python they support", requirement=str(requirement),
        )
    if low is None:  # the lowest working release lies between 0 (fails) and a good one
        failing = 0
        while good - failing > 1:
            middle = (failing + good) // 2
            if works(middle):
                good = middle
            else:
                failing = middle
        low = good
        span = matching[0] if failing == 0 else f"{matching[0]} to {matching[failing]}"
        notes.append(f"version target {requirement}: {span} {'does' if failing == 0 else 'do'} not install or import on {here} "
                     f"({matching[0]} {verdicts[0].reason}); checking {matching[low]} as the lowest")
    if high is None:  # the highest working release lies between low (works) and last (fails)
        good, failing = low, last
        while failing - good > 1:
            middle = (good + failing) // 2
            if works(middle):
                good = middle
            else:
                failing = middle
        high = good
        span = matching[last] if failing == last else f"{matching[failing]} to {matching[last]}"
        notes.append(f"version target {requirement}: {span} {'does' if failing == last else 'do'} not install or import on {here} "
                     f"({matching[last]} {verdicts[last].reason}); checking {matching[high]} as the highest")
    return Choice(list(dict.fromkeys([matching[low], matching[high]])), notes)


def target_snapshot(name: str, version: str, *, python: str | None = None, progress: Progress | None = None) -> tuple[dict[str, Any], Path, float]:
    """(snapshot, its cache file, seconds spent building it: 0 when it was cached) of
    distribution `name` at `version`: built once in its own environment, with the
    dependencies of the release's time (`target_environment`), which the snapshot
    records (``environment``: the time, what was installed, notes).  Raises
    `EnvironmentBuildError` (cannot install: offline, no wheel) or RuntimeError (it
    does not import, the walk failed)."""
    from adaptrack_lsp.apis.snapshot import read_snapshot, write_snapshot
    from adaptrack_lsp.cache import file_lock

    path = snapshot_path(name, version, python)
    cached = _read_cached(path, lambda file: read_snapshot(file, check_signatures=False))
    if cached is not None:
        return cached, path, 0.0
    with file_lock(path.parent / f".{path.name}.lock"):
        cached = _read_cached(path, lambda file: read_snapshot(file, check_signatures=False))
        if cached is not None:
            return cached, path, 0.0
        started = time.monotonic()
        if progress is not None:
            progress(f"building the API snapshot of {name} {version} (once; kept in {path.parent})")
        requirement = f"{name}=={version}"
        environment = target_environment(name, version, python=python, progress=progress)
        installed = environment.version_of(name)
        if installed is not None and installed != version:
            from packaging.version import Version

            if Version(installed) != Version(version):
                raise EnvironmentBuildError([requirement], f"pip installed {name} {installed}, not {version}", "report this as a bug", requirement=requirement)
        problem = import_problem(environment.python, name)
        if problem:
            raise RuntimeError(f"{name} {version} does not import on Python {sys.version_info[0]}.{sys.version_info[1]}: {problem}")
        data = walk_environment(environment.python, name, version, progress=progress, requirement=requirement)
        seconds = time.monotonic() - started
        data["build_seconds"] = round(seconds, 1)
        data["environment"] = {
            "as_of": environment.as_of,
            "installed": {k: v for k, v in sorted(environment.installed.items()) if k not in ("pip", "setuptools", "wheel")},
            "notes": list(environment.notes),
        }
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp.json.gz")
        write_snapshot(data, temporary)
        os.replace(temporary, path)
        _write_summary(path, data)
    if progress is not None:
        skipped = len(data.get("skipped_modules") or {})
        progress(f"{name} {version}: {len(data['names']):,} names, {len(data.get('classes') or {}):,} classes"
                 f"{f', {skipped} submodules that do not import' if skipped else ''} ({seconds:.1f} s)")
    return data, path, seconds


def _read_cached(path: Path, read) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        return read(path)
    except SnapshotError as error:
        log.warning("cached target snapshot %s is unreadable (%s); building it again", path, error)
        return None


# --------------------------------------------------------------------------- the index


class Target:
    """One indexed target version: the distribution, the version and its snapshot, read
    from disk the first time a check asks about one of its modules (`summary`: what is
    known without reading it: its top-level modules, its environment, the submodules that
    did not import)."""

    def __init__(self, package: str, version: str, index: SnapshotIndex | None = None, specifier: str = "",
                 path: str | os.PathLike | None = None, summary: Mapping[str, Any] | None = None):
        if index is None and path is None:
            raise ValueError("a target needs its snapshot or the file holding it")
        self.package = package
        self.version = version
        #: the specifier it was chosen for
        self.specifier = specifier
        self.path = str(path) if path is not None else getattr(index, "path", None)
        summary = dict(summary or {})
        if index is not None:
            summary = {"roots": list(index.roots), "environment": dict(index.environment),
                       "skipped_modules": dict(index.skipped_modules), **summary}
        self.roots: tuple[str, ...] = tuple(summary.get("roots") or (normalize_name(package).replace("-", "_"),))
        self.environment: Mapping[str, Any] = dict(summary.get("environment") or {})
        self.skipped_modules: Mapping[str, str] = dict(summary.get("skipped_modules") or {})
        self._index = index
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._index is not None

    @property
    def index(self) -> SnapshotIndex:
        """The snapshot (read on first use)."""
        if self._index is None:
            from adaptrack_lsp.apis.snapshot import read_snapshot

            with self._lock:
                if self._index is None:
                    index = SnapshotIndex(data=read_snapshot(self.path, check_signatures=False), validated=True)
                    index.path = self.path
                    self._index = index
        return self._index

    def __repr__(self) -> str:
        return f"Target({self.package!r}, {self.version!r}, loaded={self.loaded})"


def _summary_path(path: Path) -> Path:
    return path.with_name(path.name.removesuffix(".json.gz") + ".summary.json")


def snapshot_summary(data: Mapping[str, Any]) -> dict[str, Any]:
    """What `Target` keeps of a snapshot without reading it whole."""
    return {
        "package": data.get("package"), "version": data.get("version"),
        "roots": list(dict.fromkeys([data.get("root"), *(data.get("roots") or ())])),
        "environment": dict(data.get("environment") or {}),
        "skipped_modules": dict(data.get("skipped_modules") or {}),
        "names": len(data.get("names") or ()),
    }


def _write_summary(path: Path, data: Mapping[str, Any]) -> None:
    summary = _summary_path(path)
    temporary = summary.with_name(f".{summary.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(snapshot_summary(data)))
    os.replace(temporary, summary)


def target_summary(name: str, version: str, *, python: str | None = None, progress: Progress | None = None) -> tuple[dict[str, Any], Path]:
    """(`snapshot_summary`, the snapshot's file) of `name` `version`: from the summary
    kept beside a cached snapshot, else the snapshot is read (or built) once."""
    path = snapshot_path(name, version, python)
    summary = _summary_path(path)
    try:
        if path.is_file() and summary.stat().st_mtime >= path.stat().st_mtime:
            found = json.loads(summary.read_text())
            if isinstance(found, dict) and found.get("roots"):
                return found, path
    except (OSError, ValueError):
        pass
    data, path, _ = target_snapshot(name, version, python=python, progress=progress)
    try:
        _write_summary(path, data)
    except OSError:
        log.debug("cannot write the summary of %s", path, exc_info=True)
    return snapshot_summary(data), path


def intersect_members(answers: Sequence[Mapping[str, Member] | None]) -> Mapping[str, Member] | None:
    """Members valid in every index that knows the path (None answers are unknown there,
    not a rejection): a name is kept where each knowing index lists it or takes any
    attribute (a ``"*"`` member); ``"*"`` is kept only where all have it.  A member
    deprecated in some version is deprecated (with that version's message)."""
    known = [answer for answer in answers if answer is not None]
    if not known:
        return None
    if len(known) == 1:
        return known[0]
    result: dict[str, Member] = {}
    names = set().union(*known) - {ANY_ATTRIBUTE}
    for name in sorted(names):
        if not all(name in answer or ANY_ATTRIBUTE in answer for answer in known):
            continue
        listed = [answer[name] for answer in known if name in answer]
        member = listed[0]
        has = any(m.has_members for m in listed)  # a wrong "no members" would reject valid chains
        deprecated = next((m.deprecated for m in listed if m.deprecated), "")
        same = has == member.has_members and deprecated == member.deprecated
        result[name] = member if same else Member(name, member.kind, has, deprecated)
    if all(ANY_ATTRIBUTE in answer for answer in known):
        kind = "values" if any(answer[ANY_ATTRIBUTE].kind == "values" for answer in known) else "any"
        result[ANY_ATTRIBUTE] = Member(ANY_ATTRIBUTE, kind, False)
    return result


def intersect_signatures(signatures: Sequence[Signature | None]) -> Signature | None:
    """One signature accepting a keyword only where every known signature accepts it
    (None: unknown everywhere).  The parameters are those of the first signature without
    ``**kwargs``; one that some other signature does not take by keyword stays a
    positional slot (positional-only, so positional arguments still count right) or,
    keyword-only, is left out."""
    from adaptrack_lsp.apis.index import KEYWORD_ONLY, POSITIONAL_ONLY

    known = [s for s in signatures if s is not None]
    if not known:
        return None
    strict = [s for s in known if not s.any_keyword]
    if not strict:
        return known[0]
    base = strict[0]
    kept: list[tuple[str, str]] = []
    for name, kind in base.parameters:
        if name in base.keywords and not all(s.keyword_problem(name) is None for s in known):
            if kind == KEYWORD_ONLY:
                continue
            kind = POSITIONAL_ONLY
        kept.append((name, kind))
    return base if tuple(kept) == base.parameters else Signature(tuple(kept))


class TargetsIndex(APIIndex):
    """The live index combined with one snapshot per target version.

    Nothing is built until `start` (or `prefetch`, `wait_ready`), which prepares the
    targets on a background thread, or `prepare`, which does it on the calling thread;
    until they are ready every path is "not ready" (the server answers "indexing").
    `progress(line)` hears each step; `finished(problem)` is called once when the
    targets are ready ("") or failed (the message)."""

    def __init__(self, live: APIIndex, targets: Sequence[str], *, python: str | None = None,
                 progress: Progress | None = None, finished: Callable[[str], None] | None = None, strict: bool = False):
        self.live = live
        #: a target that cannot be built is the index's problem (else its package is
        #: unchecked under that target, and the others are checked)
        self.strict = bool(strict)
        #: the targets that could not be built: "version target X: why (fix)"
        self.failures: list[str] = []
        #: what the versions chosen are and why (a range's end that does not work here)
        self.notes: list[str] = []
        #: module -> why, for modules a target's snapshot does not hold that a check asked about
        self.unchecked_modules: dict[str, str] = {}
        self.specifiers = [str(t).strip() for t in targets if str(t).strip()]
        self.requirements = [parse_target(t) for t in self.specifiers]
        self.base_python = python
        self.progress = progress
        self.finished = finished
        self.targets: list[Target] = []
        self.build_seconds = 0.0
        self._problem = ""
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._started = False
        self.source = f"{getattr(live, 'source', '') or type(live).__name__} + version targets {', '.join(self.specifiers)}"

    # -- preparing the targets --------------------------------------------------------
    @property
    def problem(self) -> str:  # type: ignore[override]
        return getattr(self.live, "problem", "") or self._problem

    @property
    def python(self):
        return getattr(self.live, "python", None)

    def describe(self) -> str:
        live = self.live.describe() if hasattr(self.live, "describe") else (getattr(self.live, "source", "") or "")
        if not self._done.is_set():
            state = "being prepared"
        elif self._problem:
            state = "failed"
        else:
            state = ", ".join(f"{t.package} {t.version}" for t in self.targets) or "none apply"
            if self.failures:
                state += f" ({len(self.failures)} not built: {'; '.join(self.failures)})"
        return f"{live}; version targets {', '.join(self.specifiers)}: {state}"

    def status_note(self) -> str:
        """What a status line says besides "ready": the targets that could not be built
        (their packages are unchecked under them) and the modules found unchecked."""
        parts = list(self.failures)
        if self.unchecked_modules:
            shown = ", ".join(sorted(self.unchecked_modules)[:3]) + (f" and {len(self.unchecked_modules) - 3} more" if len(self.unchecked_modules) > 3 else "")
            parts.append(f"unchecked under a target (not in its snapshot): {shown}")
        return "; ".join(parts)

    def start(self) -> None:
        """Prepare the targets on a background thread (once)."""
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._prepare, name="adaptrack-targets", daemon=True).start()

    def prepare(self) -> str:
        """Prepare the targets on this thread (or wait for the thread preparing them);
        the problem ("" when they are ready)."""
        with self._lock:
            mine = not self._started
            self._started = True
        if mine:
            self._prepare()
        else:
            self._done.wait()
        return self.problem

    def _say(self, line: str) -> None:
        log.info("%s", line)
        if self.progress is not None:
            try:
                self.progress(line)
            except Exception:  # noqa: BLE001 - progress is for the user; it never stops the work
                log.debug("progress callback failed", exc_info=True)

    def _prepare(self) -> None:
        started = time.monotonic()
        targets: list[Target] = []
        for text, requirement in zip(self.specifiers, self.requirements):
            current = text
            try:
                if not applies(requirement):
                    self._say(f"version target {current}: its marker does not hold for this Python; skipped")
                    continue
                name = normalize_name(requirement.name)
                choice = choose_versions(requirement, python=self.base_python, progress=self._say)
                for note in choice.notes:
                    self.notes.append(note)
                    self._say(note)
                self._say(f"version target {current}: checking {name} {', '.join(choice.versions)} and the installed version")
                for version in choice.versions:
                    current = text if exact_pin(requirement) is not None else f"{text} ({name} {version})"
                    summary, path = target_summary(name, version, python=self.base_python, progress=self._say)
                    targets.append(Target(name, version, specifier=text, path=path, summary=summary))
            except Exception as error:  # noqa: BLE001 - one target that cannot be built stops no other
                if not isinstance(error, (EnvironmentBuildError, RuntimeError, ValueError, OSError, SnapshotError)):
                    log.exception("preparing the version target %s failed", current)
                known = isinstance(error, (EnvironmentBuildError, RuntimeError, ValueError, OSError))
                message = f"version target {current}: {error if known else f'{type(error).__name__}: {error}'}"
                self.failures.append(message)
                self._say(f"{message}; {normalize_name(requirement.name)} is unchecked under that target" + ("" if self.strict else " (the other targets are checked)"))
        self.targets = targets
        self.build_seconds = time.monotonic() - started
        if self.failures and self.strict:
            self._problem = "; ".join(self.failures)
        elif targets:
            self._say("version targets ready: " + ", ".join(f"{t.package} {t.version}" for t in targets))
        self._done.set()
        if self._problem:
            log.info("%s", self._problem)
        if self.finished is not None:
            try:
                self.finished(self._problem)
            except Exception:  # noqa: BLE001
                log.debug("finished callback failed", exc_info=True)

    # -- which indexes answer a path ----------------------------------------------------
    def _covering(self, root: str) -> list[Target]:
        return [t for t in self.targets if root in t.roots]

    def _usable(self) -> bool:
        return self._done.is_set() and not self._problem

    # -- APIIndex -----------------------------------------------------------------------
    def members(self, path: tuple[str, ...]) -> Mapping[str, Member] | None:
        path = tuple(path)
        if not self._usable() or not path:
            return None
        live = self.live.members(path)
        covering = self._covering(path[0])
        if not covering:
            return live
        answers = []
        private = {name: member for name, member in (live or {}).items() if name.startswith("_")} if CALL not in path else {}
        for target in covering:
            answer = target.index.members(path)
            if answer is None:
                self._note_unchecked(target, path)
            elif private:
                # a walk lists a module's public names only: its private ones (`__name__`,
                # `_impl`) are unknown there, not absent
                answer = {**private, **answer}
            answers.append(answer)
        return intersect_members([live, *answers])

    def _note_unchecked(self, target: Target, path: tuple[str, ...]) -> None:
        """Remember a module `target`'s snapshot could not import that a check asked
        about (`SnapshotIndex.unchecked`): said in `explain` and the status line."""
        found = target.index.unchecked(path)
        if found is not None and found[0] not in self.unchecked_modules:
            module, reason = found
            self.unchecked_modules[module] = f"{module} is unchecked under {target.package} {target.version}: it does not import there ({reason})"

    def signature(self, key: tuple[str, ...]) -> Signature | None:
        key = tuple(key)
        if not self._usable() or not key:
            return None
        live = self.live.signature(key)
        covering = self._covering(key[0])
        if not covering:
            return live
        return intersect_signatures([live, *(t.index.signature(key) for t in covering)])

    def submodules(self, path: tuple[str, ...]) -> frozenset[str] | None:
        """The live environment's listing (snapshots do not list modules)."""
        return self.live.submodules(tuple(path)) if self._usable() else None

    def check_interpreter(self) -> str:
        check = getattr(self.live, "check_interpreter", None)
        return check() if check is not None else ""

    def absence(self, path: tuple[str, ...], name: str, keyword: bool = False) -> str | None:
        """Which versions lack member `name` of `path` (`keyword`: keyword `name` of the
        call key `path`) while others have it: ``not in numpy 2.4.6 (present in
        1.24.0)``; None when no version has it, or all do, or nothing is known."""
        found = self.lacking(path, name, keyword)
        if found is None:
            return None
        package, lacking, present = found
        return f"not in {package} {', '.join(lacking)} (present in {', '.join(present)})"

    def lacking(self, path: tuple[str, ...], name: str, keyword: bool = False) -> tuple[str, list[str], list[str]] | None:
        path = tuple(path)
        if not self._usable() or not path:
            return None
        covering = self._covering(path[0])
        if not covering:
            return None
        package = covering[0].package
        answers: list[tuple[str, bool | None]] = []
        live_version = self._live_version(path[0])
        for version, index in [(live_version, self.live), *((t.version, t.index) for t in covering)]:
            answers.append((version, _has(index, path, name, keyword)))
        lacking = _versions([v for v, has in answers if has is False])
        present = _versions([v for v, has in answers if has is True])
        if not lacking or not present:
            return None
        return package, lacking, present

    def deprecated_in(self, path: tuple[str, ...], name: str) -> tuple[str, list[str]] | None:
        """(package, the versions in which member `name` of `path` announces its
        deprecation), the installed version included; None when none does or the
        targets do not cover `path`."""
        path = tuple(path)
        if not self._usable() or not path:
            return None
        covering = self._covering(path[0])
        if not covering:
            return None
        versions = []
        for version, index in [(self._live_version(path[0]), self.live), *((t.version, t.index) for t in covering)]:
            try:
                members = index.members(path)
            except Exception:  # noqa: BLE001 - an index failure is "unknown"
                members = None
            member = members.get(name) if members else None
            if member is not None and member.deprecated:
                versions.append(version)
        return (covering[0].package, _versions(versions)) if versions else None

    def _live_version(self, root: str) -> str:
        try:
            version = self.live.packages().get(root, "")
        except Exception:  # noqa: BLE001 - the version only decorates messages
            version = ""
        return version if version and version != "unknown" else "installed"

    def packages(self) -> dict[str, str]:
        try:
            found = dict(self.live.packages())
        except Exception:  # noqa: BLE001
            found = {}
        if not self._usable():
            return found
        roots = {root for t in self.targets for root in t.roots}
        for root in roots:
            versions = [t.version for t in self._covering(root)]
            installed = found.get(root)
            if installed and installed != "unknown":
                versions.append(installed)
            found[root] = ", ".join(_versions(versions))
        return found

    def has_root(self, module: str) -> bool:
        if self._usable() and self._covering(module):
            return True
        return self.live.has_root(module)

    def ready(self, path: tuple[str, ...]) -> bool:
        if not self._done.is_set():
            return False
        return self._problem != "" or self.live.ready(path)

    def prefetch(self, path: tuple[str, ...]) -> None:
        self.start()
        self.live.prefetch(path)

    def wait_ready(self, paths, timeout_s: float) -> bool:
        self.start()
        deadline = time.monotonic() + timeout_s
        if not self._done.wait(timeout_s):
            return False
        if self._problem:
            return True
        return self.live.wait_ready(paths, max(0.0, deadline - time.monotonic()))

    def work_seconds(self) -> float:
        return self.live.work_seconds()

    def close(self) -> None:
        self.live.close()


def _has(index: APIIndex, path: tuple[str, ...], name: str, keyword: bool) -> bool | None:
    """Whether `index` has member `name` of `path` (`keyword`: keyword `name` of the
    call key `path`); None when it does not know."""
    try:
        if keyword:
            signature = index.signature(path)
            if signature is None:
                return None
            return signature.keyword_problem(name) is None
        members = index.members(path)
    except Exception:  # noqa: BLE001 - an index failure is "unknown"
        return None
    if members is None:
        return None
    return name in members or ANY_ATTRIBUTE in members


def _versions(versions: Iterable[str]) -> list[str]:
    """Distinct versions, oldest first ("installed" where the live version is unknown, last)."""
    from packaging.version import InvalidVersion, Version

    def key(text: str):
        try:
            return (0, Version(text), text)
        except InvalidVersion:
            return (1, Version("0"), text)

    return sorted(dict.fromkeys(versions), key=key)


def describe_targets(index: TargetsIndex) -> str:
    """One line for people: the versions each target checks."""
    if not index.targets:
        return "no target applies"
    return ", ".join(f"{t.package} {t.version}" for t in index.targets)


__all__ = [
    "DeclaredTargets",
    "Target",
    "TargetsIndex",
    "available_versions",
    "concrete_versions",
    "intersect_members",
    "intersect_signatures",
    "parse_target",
    "python_note",
    "choose_versions",
    "probe_release",
    "snapshot_path",
    "snapshot_summary",
    "target_snapshot",
    "target_summary",
    "targets_from_file",
    "walk_environment",
]
