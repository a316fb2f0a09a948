"""The files `adaptrack-lsp check` reads: which ones a path names, how each is read, and
which module names the project itself offers to each.

- `python_files(paths)` yields the ``.py``/``.pyi`` files under each path (a file
  given by name is checked whatever its suffix), in a stable order, skipping hidden
  folders, virtual environments (a folder with ``pyvenv.cfg``), ``site-packages``,
  ``__pycache__`` and ``node_modules``; it walks lazily, so a tree of any size costs
  memory for one folder at a time.
- `read_source(path)` gives the text, or why the file is skipped (not UTF-8, binary,
  unreadable); nothing is ever written.
- `ProjectModules` answers the top-level module names an import may find in the
  project rather than in the environment: the file's own folder, the folder above its
  outermost package (a folder with ``__init__.py``), the paths checked, the working
  directory and their ``src/`` folders.  Only names are read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

#: folder names never walked into
SKIPPED_FOLDERS = frozenset({"site-packages", "dist-packages", "__pycache__", "node_modules", "venv", ".venv"})
#: the largest file read (bigger ones are skipped and named)
MAX_FILE_BYTES = 8 * 1024 * 1024
_SUFFIXES = (".py", ".pyi")


def _is_environment(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "pyvenv.cfg"))


def python_files(paths: Iterable[str]) -> Iterator[str]:
    """The Python files the paths name, each once, in a stable order (see the module
    docstring); a path that does not exist raises FileNotFoundError naming it before
    any file is yielded."""
    paths = list(paths)
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(path)
    seen: set[str] = set()
    for path in paths:
        if os.path.isfile(path):
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                yield path
            continue
        for folder, folders, files in os.walk(path):
            folders[:] = sorted(
                name for name in folders
                if not name.startswith(".") and name not in SKIPPED_FOLDERS and not _is_environment(os.path.join(folder, name))
            )
            for name in sorted(files):
                if name.endswith(_SUFFIXES) and not name.startswith("."):
                    file = os.path.join(folder, name)
                    real = os.path.realpath(file)
                    if real not in seen:
                        seen.add(real)
                        yield file


def read_source(path: str) -> tuple[str | None, str]:
    """(text, "") for a readable UTF-8 Python file; (None, why it is skipped) otherwise."""
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            return None, f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB"
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        return None, f"cannot be read ({error.strerror or error})"
    if b"\0" in data:
        return None, "binary (holds NUL bytes)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, f"not UTF-8 (byte {error.start}: {data[error.start:error.start + 1]!r})"
    return text.removeprefix("\ufeff"), ""


def _module_names(folder: str) -> frozenset[str]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return frozenset()
    names = set()
    for entry in entries[:20000]:
        name = entry.name
        if name.endswith(_SUFFIXES):
            stem = name.rsplit(".", 1)[0]
            if stem.isidentifier():
                names.add(stem)
        elif name.isidentifier():
            try:
                if entry.is_dir():
                    names.add(name)
            except OSError:
                continue
    return frozenset(names)


class ProjectModules:
    """Top-level module names the project offers, per file (folder listings cached)."""

    def __init__(self, roots: Iterable[str] = ()):
        self._listings: dict[str, frozenset[str]] = {}
        folders = []
        for root in [*roots, os.getcwd()]:
            folder = root if os.path.isdir(root) else os.path.dirname(root) or "."
            folders += [folder, os.path.join(folder, "src")]
        self._common = frozenset().union(*(self.listing(folder) for folder in folders))

    def listing(self, folder: str) -> frozenset[str]:
        folder = os.path.abspath(folder)
        found = self._listings.get(folder)
        if found is None:
            found = self._listings[folder] = _module_names(folder) if os.path.isdir(folder) else frozenset()
        return found

    def for_file(self, path: str) -> frozenset[str]:
        """The module names an import in file `path` may find in the project."""
        folder = os.path.dirname(os.path.abspath(path))
        names = set(self.listing(folder))
        top = Path(folder)
        while (top / "__init__.py").exists() and top.parent != top:
            top = top.parent
        names |= self.listing(str(top))
        return self._common | names
