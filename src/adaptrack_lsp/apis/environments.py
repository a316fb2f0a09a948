"""Throwaway Python environments under the cache root: one per set of pinned requirements.

`environment_for(["numpy==1.24.4"])` returns a `BuiltEnvironment` (its interpreter and the
versions installed), building it on first use in ``<cache root>/envs/<key>/``: a fresh
``venv`` into which pip installs **wheels only** (``--only-binary=:all:``; nothing is
compiled, no package's build code runs), with a time limit and a file lock so concurrent
first uses build once.  A finished environment carries a ``.complete`` marker holding what
was installed; a half-built one is removed and built again.  The user's own environment is
never touched.

What cannot be built raises `EnvironmentBuildError` naming the requirement, the reason in
words (no wheel for this Python and platform, no such version, the package index out of
reach, a time-out) and the fix; there is never a silent fallback to another version.

Used by version targets (an API snapshot per target version) and by the GitChameleon
evaluation (one environment per pinned library version).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from adaptrack_lsp.cache import file_lock
from adaptrack_lsp.config import cache_root

log = logging.getLogger(__name__)

#: bumped when the layout or the way environments are built changes (new folders)
ENVIRONMENT_RECIPE = 1
#: default time limit for building one environment (venv + pip), seconds
BUILD_TIMEOUT_S = 1200.0
_MARKER = ".complete"
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


class EnvironmentBuildError(RuntimeError):
    """An environment that could not be built: what, why (in words) and how to fix it."""

    def __init__(self, requirements: Sequence[str], reason: str, fix: str, requirement: str = "", log_tail: str = ""):
        self.requirements = tuple(requirements)
        self.requirement = requirement
        self.reason = reason
        self.fix = fix
        self.log_tail = log_tail
        what = requirement or " ".join(self.requirements)
        super().__init__(f"cannot build an environment with {what}: {reason} ({fix})")


@dataclass(frozen=True)
class BuiltEnvironment:
    """A finished environment: its folder, its interpreter and what pip installed."""

    folder: Path
    python: Path
    requirements: tuple[str, ...]
    #: normalized distribution name -> version, for every distribution installed
    installed: dict[str, str] = field(default_factory=dict, compare=False)
    #: seconds the build took (0.0 when it was found in the cache)
    build_seconds: float = field(default=0.0, compare=False)
    #: the time dependencies were resolved as of (ISO, UTC); "" = as of today
    as_of: str = field(default="", compare=False)
    #: what to know about the resolution (a dependency without a wheel for this Python
    #: at the time, a dated resolution that could not be made and why)
    notes: tuple[str, ...] = field(default=(), compare=False)

    def version_of(self, distribution: str) -> str | None:
        return self.installed.get(normalize_name(distribution))


def normalize_name(name: str) -> str:
    """PEP 503 normalized distribution name (``Scikit_Learn`` -> ``scikit-learn``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The distribution a requirement names (``numpy>=1.24,<3`` -> ``numpy``); ValueError
    for text that is not a requirement."""
    match = _REQUIREMENT.match(requirement or "")
    if not match or not match.group(1):
        raise ValueError(f"not a requirement: {requirement!r} (write e.g. 'numpy==1.24.4')")
    return normalize_name(match.group(1))


def environments_root() -> Path:
    return cache_root() / "envs"


def environment_key(requirements: Sequence[str], python: str | os.PathLike, as_of: dt.datetime | None = None) -> str:
    """Folder name of the environment for `requirements` on interpreter `python` (its
    version and platform, not its path, decide what installs), resolved as of `as_of`."""
    identity = {
        "recipe": ENVIRONMENT_RECIPE,
        "requirements": sorted(r.strip() for r in requirements),
        "python": _python_identity(str(python)),
    }
    if as_of is not None:
        identity["as_of"] = as_of.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M")
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    names = "-".join(requirement_name(r) for r in sorted(requirements))[:40]
    return f"{names}-{digest}"


_IDENTITY_CACHE: dict[str, str] = {}


def python_identity(python: str | os.PathLike | None = None) -> str:
    """What decides which wheels install for interpreter `python` (default: this one):
    ``cpython-3.11-linux-x86_64``."""
    return _python_identity(str(python or sys.executable))


def _python_identity(python: str) -> str:
    if python == sys.executable:
        return f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}-{sys.platform}-{os.uname().machine if hasattr(os, 'uname') else ''}"
    cached = _IDENTITY_CACHE.get(python)
    if cached is None:
        done = subprocess.run(
            [python, "-I", "-c", "import os, sys; print(f'{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}-{sys.platform}-{os.uname().machine}')"],
            capture_output=True, text=True, timeout=30,
        )
        if done.returncode != 0:
            raise EnvironmentBuildError((), f"the interpreter {python} does not run ({done.stderr.strip()[-200:]})", "name a working Python 3 interpreter")
        cached = _IDENTITY_CACHE[python] = done.stdout.strip()
    return cached


def find_environment(requirements: Sequence[str], python: str | os.PathLike | None = None, as_of: dt.datetime | None = None) -> BuiltEnvironment | None:
    """The finished environment for `requirements` if it is in the cache, else None
    (never builds)."""
    base = str(python or sys.executable)
    folder = environments_root() / environment_key(requirements, base, as_of)
    return _finished(folder, requirements)


def remove_environment(environment: BuiltEnvironment) -> None:
    """Delete a built environment (one that turned out not to work here)."""
    shutil.rmtree(environment.folder, ignore_errors=True)


def environment_for(
    requirements: Sequence[str],
    *,
    python: str | os.PathLike | None = None,
    progress: Callable[[str], None] | None = None,
    timeout_s: float = BUILD_TIMEOUT_S,
    as_of: dt.datetime | None = None,
    exempt: Sequence[str] = (),
) -> BuiltEnvironment:
    """The environment with exactly `requirements` installed (built on first use).

    `python`: the base interpreter (default: this one).  `progress` gets one line per
    step ("creating …", "installing …", pip's own lines while it works).  `as_of`:
    dependencies no newer than that time (`dated_resolution`; the distributions in
    `exempt`, a pinned target, are not bounded); where the index cannot say when
    releases came out, or no dated set installs, they are resolved as of today and
    `notes` says so.  Raises `EnvironmentBuildError` (see the module docstring) and
    ValueError for a requirement that cannot be read.
    """
    requirements = tuple(r.strip() for r in requirements if r and r.strip())
    if not requirements:
        raise ValueError("no requirements given")
    for requirement in requirements:
        requirement_name(requirement)
    base = str(python or sys.executable)
    root = environments_root()
    folder = root / environment_key(requirements, base, as_of)
    found = _finished(folder, requirements)
    if found is not None:
        return found
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / f".{folder.name}.lock"):
        found = _finished(folder, requirements)
        if found is not None:
            return found
        if folder.exists():
            shutil.rmtree(folder)
        started = time.monotonic()
        try:
            installed, dated, notes = _build(folder, requirements, base, progress, timeout_s, as_of, exempt)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        seconds = time.monotonic() - started
        (folder / _MARKER).write_text(json.dumps({
            "requirements": list(requirements), "installed": installed, "seconds": round(seconds, 1),
            "as_of": dated, "notes": list(notes),
        }))
    return BuiltEnvironment(folder, _interpreter(folder), requirements, installed, seconds, dated, tuple(notes))


def _interpreter(folder: Path) -> Path:
    for candidate in (folder / "bin" / "python", folder / "Scripts" / "python.exe"):
        if candidate.exists():
            return candidate
    return folder / "bin" / "python"


def _finished(folder: Path, requirements: Sequence[str]) -> BuiltEnvironment | None:
    marker = folder / _MARKER
    if not marker.is_file():
        return None
    try:
        data = json.loads(marker.read_text())
        installed = {str(k): str(v) for k, v in data.get("installed", {}).items()}
        as_of = str(data.get("as_of") or "")
        notes = tuple(str(n) for n in data.get("notes") or ())
    except (OSError, ValueError, AttributeError):
        return None
    python = _interpreter(folder)
    if not python.exists():  # a broken environment (deleted files): built again
        return None
    return BuiltEnvironment(folder, python, tuple(requirements), installed, 0.0, as_of, notes)


def _say(progress: Callable[[str], None] | None, line: str) -> None:
    log.info("%s", line)
    if progress is not None:
        progress(line)


def _build(folder: Path, requirements: Sequence[str], base: str, progress, timeout_s: float,
           as_of: dt.datetime | None = None, exempt: Sequence[str] = ()) -> tuple[dict[str, str], str, list[str]]:
    """(what was installed, the time dependencies were resolved as of ("" today), notes)."""
    deadline = time.monotonic() + timeout_s
    _say(progress, f"creating an environment for {' '.join(requirements)} in {folder}")
    done = subprocess.run([base, "-m", "venv", str(folder)], capture_output=True, text=True, timeout=max(1.0, deadline - time.monotonic()))
    if done.returncode != 0:
        raise EnvironmentBuildError(requirements, f"python -m venv failed: {done.stderr.strip()[-300:]}", "check that the venv module works for this Python")
    python = _interpreter(folder)
    notes: list[str] = []
    dated = ""
    constraints: list[str] = []
    if as_of is not None:
        from adaptrack_lsp.apis.dated_resolution import ReleaseDatesUnavailable, dated_bounds

        _say(progress, f"resolving the dependencies of {' '.join(requirements)} as of {as_of:%Y-%m-%d}")
        try:
            bounds = dated_bounds(requirements, as_of, lambda reqs, lines: _dry_run(python, folder, reqs, lines, deadline), exempt)
            constraints = bounds.constraint_lines()
            notes.extend(bounds.notes)
            dated = as_of.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
        except ReleaseDatesUnavailable as error:
            notes.append(f"dependencies resolved as of today: {error}")
    try:
        installed = _install(folder, python, requirements, constraints, progress, deadline, timeout_s)
    except EnvironmentBuildError as error:
        if not constraints or "conflicting requirements" not in error.reason:
            raise
        notes.append(f"dependencies resolved as of today: no set of releases as of {as_of:%Y-%m-%d} installs ({error.reason[:200]})")
        dated = ""
        installed = _install(folder, python, requirements, [], progress, deadline, timeout_s)
    return installed, dated, notes


def _dry_run(python: Path, folder: Path, requirements: Sequence[str], constraints: Sequence[str], deadline: float) -> dict[str, str]:
    """What pip would install for `requirements` under `constraints` (name -> version)."""
    report = folder / ".resolution.json"
    constraint_file = folder / ".dated-constraints.txt"
    constraint_file.write_text("".join(f"{line}\n" for line in constraints))
    command = [
        str(python), "-m", "pip", "install", "--dry-run", "--ignore-installed", "--only-binary=:all:", "--no-input",
        "--disable-pip-version-check", "--quiet", "--report", str(report), "-c", str(constraint_file), *requirements,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired as error:
        raise EnvironmentBuildError(requirements, "pip did not finish resolving in time", "try again on a faster connection") from error
    if done.returncode != 0:
        raise _pip_error(requirements, (done.stdout + "\n" + done.stderr).splitlines(), python)
    try:
        data = json.loads(report.read_text())
        return {normalize_name(item["metadata"]["name"]): str(item["metadata"]["version"]) for item in data.get("install", [])}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _install(folder: Path, python: Path, requirements: Sequence[str], constraints: Sequence[str], progress,
             deadline: float, timeout_s: float) -> dict[str, str]:
    extra: list[str] = []
    if constraints:
        constraint_file = folder / ".dated-constraints.txt"
        constraint_file.write_text("".join(f"{line}\n" for line in constraints))
        extra = ["-c", str(constraint_file)]
    _say(progress, f"installing {' '.join(requirements)} (wheels only{', dependencies as of the release' if constraints else ''})")
    command = [
        str(python), "-m", "pip", "install", "--only-binary=:all:", "--no-input",
        "--disable-pip-version-check", "--progress-bar", "off", *extra, *requirements,
    ]
    lines: list[str] = []
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    except OSError as error:
        raise EnvironmentBuildError(requirements, f"pip could not start: {error}", "check the new environment's interpreter") from error
    try:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip()
            lines.append(line)
            if line.startswith(("Collecting", "Downloading", "Installing", "Successfully")):
                _say(progress, "  " + line.strip())
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(command, timeout_s)
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired as error:
        _kill(process)
        raise EnvironmentBuildError(requirements, f"pip did not finish within {timeout_s:.0f} s", "try again on a faster connection, or raise the time limit", log_tail="\n".join(lines[-20:])) from error
    finally:
        if process.poll() is None:
            _kill(process)
    if code != 0:
        raise _pip_error(requirements, lines, python)
    installed = _installed(python)
    _say(progress, "installed " + ", ".join(f"{name} {version}" for name, version in sorted(installed.items()) if name in {requirement_name(r) for r in requirements}))
    return installed


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, 9)
    except (OSError, AttributeError):
        process.kill()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


_NO_MATCH = re.compile(r"No matching distribution found for (\S+)")
_NO_VERSION = re.compile(r"Could not find a version that satisfies the requirement (\S+)(?: \(from versions: ([^)]*)\))?")
_OFFLINE = ("Failed to establish a new connection", "Temporary failure in name resolution", "Network is unreachable", "ConnectTimeoutError", "ProxyError")


def _pip_error(requirements: Sequence[str], lines: list[str], python: Path | None = None) -> EnvironmentBuildError:
    text = "\n".join(lines)
    tail = "\n".join(lines[-20:])
    if any(marker in text for marker in _OFFLINE):
        return EnvironmentBuildError(
            requirements, "the package index cannot be reached (offline?)",
            "connect to the network once; the environment is cached afterwards", log_tail=tail,
        )
    if "ResolutionImpossible" in text:
        return _resolution_error(requirements, lines, python)
    missing = _NO_VERSION.search(text)
    if missing:
        requirement, versions = missing.group(1), (missing.group(2) or "").strip()
        if versions and versions != "none":
            shown = versions.split(", ")
            listed = (", ".join(shown[:3]) + ", …, " + ", ".join(shown[-3:])) if len(shown) > 6 else ", ".join(shown)
            reason = f"no wheel of {requirement} for Python {sys.version_info[0]}.{sys.version_info[1]} on this platform (wheels exist for: {listed})"
        else:
            reason = f"no release of {requirement} with a wheel for Python {sys.version_info[0]}.{sys.version_info[1]} on this platform was found on the package index"
        return EnvironmentBuildError(
            requirements, reason,
            "choose a version with a wheel for this Python, or run with a Python that version supports",
            requirement=requirement, log_tail=tail,
        )
    match = _NO_MATCH.search(text)
    if match:
        return EnvironmentBuildError(requirements, f"no matching distribution for {match.group(1)}", "check the name and version", requirement=match.group(1), log_tail=tail)
    last = next((line.strip() for line in reversed(lines) if line.strip().startswith("ERROR")), lines[-1].strip() if lines else "pip failed")
    return EnvironmentBuildError(requirements, last[:300], "see pip's output above", log_tail=tail)


_CONFLICT_START = "The conflict is caused by:"
_USER_PIN = re.compile(r"The user requested ([A-Za-z0-9][A-Za-z0-9._-]*==[^\s,;]+)$")


def _resolution_error(requirements: Sequence[str], lines: list[str], python: Path | None) -> EnvironmentBuildError:
    """pip found no set of versions: a pinned version without a wheel for this Python
    (pip words that as a conflict when a pip constraint file names the package: each pin
    pip lists is asked about alone, constraints off), or pins that contradict each other
    (named as pip lists them)."""
    tail = "\n".join(lines[-20:])
    stripped = [line.strip() for line in lines]
    cause: list[str] = []
    if _CONFLICT_START in stripped:
        for line in stripped[stripped.index(_CONFLICT_START) + 1 :]:
            if not line:
                break
            cause.append(line)
    for line in cause:
        pin = _USER_PIN.match(line)
        if pin and python is not None:
            alone = _pin_alone(python, pin.group(1))
            if alone is not None and _NO_VERSION.search("\n".join(alone)):
                return _pip_error(requirements, alone)
    said = "; ".join(cause) if cause else "pip found no versions that satisfy every requirement"
    return EnvironmentBuildError(requirements, f"conflicting requirements: {said}"[:400], "change the pins so that they agree", log_tail=tail)


def _pin_alone(python: Path, requirement: str) -> list[str] | None:
    """pip's answer for one pinned requirement, without dependencies and without the
    constraint files of pip's configuration (the rest of the configuration, e.g. the
    package index, stays): its output lines, None when pip could not be asked."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="adaptrack-pip-") as folder:
        config = Path(folder) / "pip.conf"
        config.write_text("[global]\nconstraint =\n")
        env = {k: v for k, v in os.environ.items() if k != "PIP_CONSTRAINT"}
        env["PIP_CONFIG_FILE"] = str(config)  # loaded last: overrides the constraint setting only
        try:
            done = subprocess.run(
                [str(python), "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed", "--only-binary=:all:",
                 "--no-input", "--disable-pip-version-check", requirement],
                capture_output=True, text=True, timeout=300, env=env,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
    return (done.stdout + "\n" + done.stderr).splitlines()


def _installed(python: Path) -> dict[str, str]:
    done = subprocess.run(
        [str(python), "-I", "-c", "import json, importlib.metadata as m; print(json.dumps({d.metadata['Name']: d.version for d in m.distributions() if d.metadata['Name']}))"],
        capture_output=True, text=True, timeout=60,
    )
    if done.returncode != 0:
        return {}
    try:
        return {normalize_name(k): v for k, v in json.loads(done.stdout).items()}
    except ValueError:
        return {}
