"""Attribute names that the files a document leans on assign on objects.

A test file's objects are often set up elsewhere: a helper module beside it makes a
client and sets ``client.statuses = []``, a pytest ``conftest.py`` fixture sets
``lsp_client.init_result``.  Those names are never rejected on a typed receiver, as
names the document assigns itself are not (`receivers.assigned_attribute_names`).

`assigned_beside(file, analysis)` reads, as text and never by running them:

- the modules the document imports from its own folder (``import helper``, ``from
  helper import make``, ``from . import helper``, ``from .helper import make``), one
  level deep (what those modules import is not followed);
- the ``conftest.py`` files of its folder and of the folders above it, up to the first
  one that holds a project marker (``pyproject.toml``, ``setup.py``, ``setup.cfg``,
  ``tox.ini``, ``pytest.ini``, ``.git``), at most `MAX_LEVELS` folders.

Files larger than `MAX_FILE_BYTES` are skipped.  Which files a document leans on is
looked up again after `timed_cache.STATUS_SECONDS` (typing asks on every keystroke with the same
imports); what a file assigns is kept per modification time (an edited file is read
again).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from adaptrack_lsp.apis.document import DocumentAnalysis
from adaptrack_lsp.timed_cache import TimedCache

log = logging.getLogger(__name__)

#: folders looked at for conftest.py files (the document's and those above it)
MAX_LEVELS = 6
#: files larger than this are not read
MAX_FILE_BYTES = 1_000_000
#: files read per document at most
MAX_FILES = 32
_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "tox.ini", "pytest.ini", ".git")
_CACHE_SIZE = 256
#: (path, modification time, size) -> names the file assigns
_FILE_NAMES: dict[tuple[str, int, int], frozenset[str]] = {}
#: (document file, its imports) -> the files
_FILES: TimedCache[list[Path]] = TimedCache(_CACHE_SIZE)


def assigned_beside(file: str | os.PathLike | None, analysis: DocumentAnalysis) -> frozenset[str]:
    """The attribute names assigned by the modules the document at `file` imports from
    its folder and by the conftest.py files above it (see the module docstring); empty
    without a file."""
    if not file:
        return frozenset()
    current = Path(os.path.abspath(file))
    found = _FILES.get((current, analysis.imports), lambda: _files_read(current, current.parent, analysis)[:MAX_FILES])
    names: set[str] = set()
    for path in found:
        names |= _names_of(path)
    return frozenset(names)


def _files_read(current: Path, folder: Path, analysis: DocumentAnalysis) -> list[Path]:
    found: list[Path] = []

    def add(candidate: Path) -> None:
        if candidate != current and candidate not in found and candidate.is_file():
            found.append(candidate)

    for ref in analysis.imports:
        if ref.level:
            base = folder
            for _ in range(ref.level - 1):
                base = base.parent
        elif ref.module and _module_file(folder, ref.module[:1]) is not None:
            base = folder  # a module of the document's folder (what a script imports)
        else:
            continue
        module_file = _module_file(base, ref.module)
        if module_file is not None:
            add(module_file)
        if ref.is_from:  # from pkg import mod: a submodule file
            package = base.joinpath(*ref.module)
            for name in ref.names:
                if name != "*":
                    submodule = _module_file(package, (name,))
                    if submodule is not None:
                        add(submodule)
    here = folder
    for _ in range(MAX_LEVELS):
        add(here / "conftest.py")
        if any((here / marker).exists() for marker in _PROJECT_MARKERS) or here.parent == here:
            break
        here = here.parent
    return found


def _module_file(base: Path, module: tuple[str, ...]) -> Path | None:
    if not module:
        candidate = base / "__init__.py"
        return candidate if candidate.is_file() else None
    target = base.joinpath(*module)
    for candidate in (target.with_suffix(".py"), target / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _names_of(path: Path) -> frozenset[str]:
    from adaptrack_lsp.apis.receivers import attribute_names

    try:
        status = path.stat()
    except OSError:
        return frozenset()
    key = (str(path), status.st_mtime_ns, status.st_size)
    cached = _FILE_NAMES.get(key)
    if cached is not None:
        return cached
    names: frozenset[str] = frozenset()
    if status.st_size <= MAX_FILE_BYTES:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
            names = attribute_names(DocumentAnalysis.parse(text).tree)
        except (OSError, ValueError):
            log.debug("could not read %s", path, exc_info=True)
    if len(_FILE_NAMES) >= _CACHE_SIZE:
        _FILE_NAMES.pop(next(iter(_FILE_NAMES)))
    _FILE_NAMES[key] = names
    return names
