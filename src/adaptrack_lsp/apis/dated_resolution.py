"""Dependencies as of a release: upper bounds that keep an environment to what existed
when a target version came out.

A target version's environment (`apis.environments.environment_for` with ``as_of``)
must get the dependencies of its time: ``pandas==1.5.1`` was built against a NumPy 1,
and today's NumPy 2 cannot import it.  `release_time` reads when a release was uploaded
from the package index's JSON listing (PEP 691 / PEP 700 ``upload-time``; pip's own
index URL, ``https://pypi.org/simple`` by default); the cut-off is that time plus
`GRACE_DAYS`.  `dated_bounds` then finds, for every distribution pip resolves,
the newest release with a wheel for this Python uploaded before the cut-off
(``numpy<=1.23.4``); a distribution that had no such wheel yet gets its first release
that has one, and is named in the notes.  The bounds are a pip constraints file, so
they hold whatever index or local folder serves the files (an index that does not say
when files were uploaded would otherwise let today's releases in).

The listing of a distribution is kept a day under ``<cache root>/targets/releases/``.
What cannot be read (an index without the JSON listing, offline) raises
`ReleaseDatesUnavailable`; the caller then resolves as of today and says so.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from adaptrack_lsp.config import cache_root

#: days after a release's upload whose dependencies still count as "of its time"
GRACE_DAYS = 3
#: how long a distribution's listing is reused
LISTING_TTL_S = 24 * 3600.0
#: the longest one listing may take to download
LISTING_TIMEOUT_S = 60.0
#: rounds of "resolve, bound what appeared" before the bounds are taken as they are
MAX_ROUNDS = 5
_JSON = "application/vnd.pypi.simple.v1+json"


class ReleaseDatesUnavailable(RuntimeError):
    """The package index did not say when releases were uploaded (why, in words)."""


@dataclass
class DatedBounds:
    """The constraints of an environment as of `as_of`: ``name<=version`` per
    distribution, and notes on distributions that had no wheel for this Python yet."""

    as_of: dt.datetime
    bounds: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def constraint_lines(self) -> list[str]:
        return [f"{name}<={version}" for name, version in sorted(self.bounds.items())]


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def index_url() -> str:
    """The package index pip uses (``PIP_INDEX_URL``, pip's configuration, else PyPI)."""
    found = os.environ.get("PIP_INDEX_URL", "").strip()
    if found:
        return found.split()[0]
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        done = None
    if done is not None and done.returncode == 0:
        for line in done.stdout.splitlines():
            key, _, value = line.partition("=")
            if key.strip().endswith(".index-url"):
                return value.strip().strip("'\"").split()[0]
    return "https://pypi.org/simple"


def _listing_file(name: str) -> Path:
    return cache_root() / "targets" / "releases" / f"{normalize(name)}.json"


def _version_of(filename: str, name: str) -> str | None:
    from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename

    try:
        if filename.endswith(".whl"):
            return str(parse_wheel_filename(filename)[1])
        return str(parse_sdist_filename(filename)[1])
    except (InvalidWheelFilename, InvalidSdistFilename, ValueError):
        return None


def listing(name: str) -> dict[str, dict]:
    """version -> ``{"uploaded": ISO time of its first file, "wheel": ISO time of its
    first wheel for this Python (absent: none), "yanked": bool}`` for distribution
    `name`, from the index's JSON listing (kept a day).  Raises
    `ReleaseDatesUnavailable`."""
    path = _listing_file(name)
    identity = f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}-{sys.platform}"
    try:
        cached = json.loads(path.read_text())
        if time.time() - float(cached["time"]) < LISTING_TTL_S and cached.get("python") == identity:
            return dict(cached["versions"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    base = index_url().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise ReleaseDatesUnavailable(f"the package index {base} is not served over HTTP")
    request = urllib.request.Request(f"{base}/{normalize(name)}/", headers={"Accept": _JSON})
    try:
        with urllib.request.urlopen(request, timeout=LISTING_TIMEOUT_S) as response:  # noqa: S310 - pip's own index
            kind = response.headers.get("Content-Type", "")
            body = response.read()
    except urllib.error.HTTPError as error:
        raise ReleaseDatesUnavailable(f"the package index answered {error.code} for {name}") from None
    except (urllib.error.URLError, OSError, TimeoutError) as error:
        raise ReleaseDatesUnavailable(f"the package index cannot be reached ({getattr(error, 'reason', error)})") from None
    if _JSON not in kind:
        raise ReleaseDatesUnavailable(f"the package index {base} has no JSON listing (PEP 691) with upload times")
    try:
        files = json.loads(body)["files"]
    except (ValueError, KeyError, TypeError):
        raise ReleaseDatesUnavailable(f"the package index's listing of {name} cannot be read") from None
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.tags import sys_tags
    from packaging.utils import parse_wheel_filename

    tags = set(sys_tags())
    here = f"{sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}"
    versions: dict[str, dict] = {}
    for item in files:
        filename, uploaded = item.get("filename", ""), item.get("upload-time")
        version = _version_of(filename, name)
        if version is None or not isinstance(uploaded, str):
            continue
        entry = versions.setdefault(version, {"uploaded": uploaded, "yanked": True})
        entry["uploaded"] = min(entry["uploaded"], uploaded)
        entry["yanked"] = entry["yanked"] and bool(item.get("yanked"))
        if not filename.endswith(".whl") or item.get("yanked"):
            continue
        try:
            fits = bool(tags & set(parse_wheel_filename(filename)[3]))
            needed = item.get("requires-python")
            if fits and needed:
                fits = here in SpecifierSet(needed)
        except (ValueError, InvalidSpecifier):
            fits = False
        if fits:
            entry["wheel"] = min(entry.get("wheel", uploaded), uploaded)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps({"time": time.time(), "python": identity, "name": name, "versions": versions}))
    os.replace(temporary, path)
    return versions


def _parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def release_time(name: str, version: str) -> dt.datetime:
    """When `version` of `name` was first uploaded.  Raises `ReleaseDatesUnavailable`."""
    from packaging.version import InvalidVersion, Version

    found = listing(name)
    entry = found.get(version)
    if entry is None:
        try:
            wanted = Version(version)
            entry = next((e for v, e in found.items() if _same(v, wanted)), None)
        except InvalidVersion:
            entry = None
    if entry is None:
        raise ReleaseDatesUnavailable(f"the package index lists no release {version} of {name}")
    return _parse_time(entry["uploaded"])


def _same(text: str, wanted) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text) == wanted
    except InvalidVersion:
        return False


def cutoff(name: str, version: str) -> dt.datetime:
    """The time dependencies must be older than: the release's upload plus `GRACE_DAYS`."""
    return release_time(name, version) + dt.timedelta(days=GRACE_DAYS)


def bound_for(name: str, as_of: dt.datetime) -> tuple[str | None, str]:
    """(the newest release of `name` with a wheel for this Python uploaded before
    `as_of`, or the first one after it when there was none yet; "" or a note)."""
    from packaging.version import InvalidVersion, Version

    dated = []
    for text, entry in listing(name).items():
        if "wheel" not in entry:
            continue
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if version.is_prerelease or version.is_devrelease:
            continue
        dated.append((version, _parse_time(entry["wheel"]), text))
    if not dated:
        return None, ""
    before = [item for item in dated if item[1] <= as_of]
    if before:
        return max(before)[2], ""
    first = min(dated, key=lambda item: item[1])
    return first[2], f"{name}: no wheel for this Python before {as_of:%Y-%m-%d}; {first[2]} ({first[1]:%Y-%m-%d}) is the first"


def dated_bounds(
    requirements: Sequence[str],
    as_of: dt.datetime,
    resolve: Callable[[Sequence[str], Sequence[str]], dict[str, str]],
    exempt: Sequence[str] = (),
) -> DatedBounds:
    """The bounds that keep `requirements` to what existed at `as_of`: `resolve(requirements,
    constraint lines)` answers what pip would install (name -> version); each
    distribution that appears (except `exempt`, the pinned target itself) gets
    `bound_for`, until a round adds none.  Raises `ReleaseDatesUnavailable`."""
    found = DatedBounds(as_of)
    exempt_names = {normalize(name) for name in exempt}
    unknown: set[str] = set()
    for _ in range(MAX_ROUNDS):
        resolved = resolve(requirements, found.constraint_lines())
        new = [n for n in (normalize(name) for name in resolved) if n not in found.bounds and n not in exempt_names and n not in unknown]
        if not new:
            break
        for name in new:
            try:
                bound, note = bound_for(name, as_of)
            except ReleaseDatesUnavailable:
                bound, note = None, ""
            if bound is None:
                unknown.add(name)  # a distribution the index does not list (a local one): not bounded
                continue
            found.bounds[name] = bound
            if note:
                found.notes.append(note)
    return found


__all__ = ["DatedBounds", "GRACE_DAYS", "ReleaseDatesUnavailable", "bound_for", "cutoff", "dated_bounds", "listing", "release_time"]
