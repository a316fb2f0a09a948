"""Context from the project: which text of other files a completion's prompt carries.

Owns the choice of sources and the pieces cut from them, in order of importance; the
prompt builder (`context.PromptBuilder`) fits them to the token budget and lays them out
in the model family's format.

Sources, for the document being edited:

- the workspace modules it imports: relative imports (``from .utils import load``,
  ``from . import config``) and absolute ones that resolve to a file under the workspace
  root (``import mypkg.config``; searched in the document's folder, its top package's
  parent folder, the root and ``root/src``);
- the other Python documents open in the editor (the text the editor sent).

An imported module that is open in the editor is taken from the editor.  Files are read
from disk only when the workspace is trusted (`trustedWorkspace`), only regular files
whose real path (symlinks resolved) lies under the workspace root, at most
`MAX_FILE_BYTES` each and `MAX_IMPORTED_FILES` per document; an untrusted workspace
contributes only what the editor already sent (nothing is opened or listed on disk).

Pieces, most important first (`Snippet.kind`):

1. ``names``: the definitions an import names (``from .utils import load, Config``:
   ``load``'s signature, or its whole body when short; ``Config``'s body with method
   bodies elided), and the outline of a module imported as a module;
2. ``outline``: the top-level signatures, classes (method bodies elided) and one-line
   assignments of the imported modules, then of the other open documents;
3. ``file``: whole files, imported modules first.

Everything here is a pure function of the sources' texts, so the pieces (and the prompt
block built from them) change only when a source changes; parses are cached by text.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import re
import stat as stat_module
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from adaptrack_lsp.apis.document import DocumentAnalysis, ImportRef, encode, parse_tree
from adaptrack_lsp.timed_cache import TimedCache

logger = logging.getLogger(__name__)

#: files larger than this are not read (and whole open documents larger than it not used)
MAX_FILE_BYTES = 1024 * 1024
#: at most this many workspace files are read for one document's imports
MAX_IMPORTED_FILES = 24
#: at most this many other open documents are used
MAX_OPEN_DOCUMENTS = 16
#: a named function longer than this many lines is given by its signature
NAMED_FUNCTION_LINES = 24
#: an ``__init__`` longer than this many lines is elided in a class body too
INIT_LINES = 32
#: docstrings longer than this many lines are left out of signatures
DOCSTRING_LINES = 4
#: parameters an outline names per function (the rest is ``...``)
OUTLINE_PARAMETERS = 4
#: one-line assignments longer than this many characters are left out of outlines
ASSIGNMENT_CHARS = 160
#: files, parses and outlines kept (by path or text)
_CACHE_SIZE = 512

KINDS = ("names", "outline", "file")


@dataclass(frozen=True)
class Snippet:
    """One piece of another file's text for the prompt."""

    #: the file's label in the prompt: its path relative to the workspace root ("/"
    #: separated), or its file name when it lies outside the root
    path: str
    text: str
    #: "names", "outline" or "file" (see the module docstring)
    kind: str
    #: the label of the file it is cut from (pieces of one file share it)
    source: str
    #: (name, alias) where the document binds the module (its name: `module_name`) or a
    #: definition of it under another name (``import pkg.config as cfg``)
    aliases: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ProjectContext:
    """What a request carries about the project: the current document's label, the
    workspace's name and the snippets, most important first."""

    path: str
    repo: str
    snippets: tuple[Snippet, ...] = ()


@dataclass(frozen=True)
class ContextSources:
    """Where context may come from, as the server holds it when a request arrives."""

    #: the workspace root folder (None: no workspace, nothing is read from disk)
    root: str | None = None
    #: the user trusts the workspace: imported modules may be read from disk under `root`
    trusted: bool = False
    #: (file path, text) of the documents open in the editor
    open_documents: tuple[tuple[str, str], ...] = ()


# -- reading files ----------------------------------------------------------------------
def document_path(document: str) -> str | None:
    """A file-system path for a document key (a ``file:`` URI or a path); None for other
    URIs (``untitled:``)."""
    if not document:
        return None
    if document.startswith("file:"):
        from pygls.uris import to_fs_path

        return to_fs_path(document)
    if ":" in document.split("/", 1)[0] and not os.path.splitdrive(document)[0]:
        return None  # another scheme
    return document


@dataclass
class _Reader:
    """Reads module files for one request: open documents first, then (trusted only)
    regular files under the root, each at most once."""

    root: Path | None
    trusted: bool
    open_texts: dict[str, str]
    read: int = 0
    texts: dict[str, str | None] = field(default_factory=dict)

    def exists(self, path: Path) -> bool:
        """Whether `path` is an open document or (trusted) a readable workspace file;
        a file on disk is looked at (its status), not read."""
        key = os.path.normpath(str(path))
        if key in self.open_texts or self.texts.get(key) is not None:
            return True
        if not self.trusted or self.root is None:
            return False
        return workspace_file(Path(key), self.root) is not None

    def text(self, path: Path) -> str | None:
        key = os.path.normpath(str(path))
        if key in self.texts:
            return self.texts[key]
        text = self.open_texts.get(key)
        if text is None and self.trusted and self.root is not None and self.read < MAX_IMPORTED_FILES:
            text = read_workspace_file(Path(key), self.root)
            if text is not None:
                self.read += 1
        self.texts[key] = text
        return text


_FILE_CACHE: dict[str, tuple[int, int, str]] = {}


_STATUS_CACHE: TimedCache[tuple[Path, os.stat_result] | None] = TimedCache(4 * _CACHE_SIZE)


def workspace_file(path: Path, root: Path) -> tuple[Path, os.stat_result] | None:
    """(real path, status) of `path` when it is a regular file of at most
    `MAX_FILE_BYTES` whose real path (symlinks resolved) lies under the real `root`
    (looked at again after `timed_cache.STATUS_SECONDS`)."""
    return _STATUS_CACHE.get((str(path), str(root)), lambda: _workspace_file(path, root))


def _workspace_file(path: Path, root: Path) -> tuple[Path, os.stat_result] | None:
    if not os.path.isfile(path):  # most candidate paths of an import do not exist: one stat
        return None
    try:
        real_root = root.resolve(strict=True)
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):  # missing, a symlink loop
        return None
    if not real.is_relative_to(real_root):
        logger.debug("context: %s resolves outside the workspace (%s); not read", path, real)
        return None
    try:
        status = real.stat()
    except OSError:
        return None
    if not stat_module.S_ISREG(status.st_mode) or status.st_size > MAX_FILE_BYTES:
        return None
    return real, status


def read_workspace_file(path: Path, root: Path) -> str | None:
    """The text of `path` when it is a `workspace_file`; None otherwise (and for
    undecodable files).  Cached by real path, modification time and size."""
    found = workspace_file(path, root)
    if found is None:
        return None
    real, status = found
    key = str(real)
    cached = _FILE_CACHE.get(key)
    if cached is not None and cached[:2] == (status.st_mtime_ns, status.st_size):
        return cached[2]
    try:
        with open(real, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if len(data) > MAX_FILE_BYTES:
        return None
    if len(_FILE_CACHE) >= _CACHE_SIZE:
        _FILE_CACHE.pop(next(iter(_FILE_CACHE)))
    _FILE_CACHE[key] = (status.st_mtime_ns, status.st_size, text)
    return text


# -- parsing ------------------------------------------------------------------------------
_IMPORTS_CACHE: dict[str, tuple[ImportRef, ...]] = {}


#: id(text) -> (text, key): a module's text comes back as the same object from the file
#: cache on every keystroke, so its key is not hashed again (the texts are kept with
#: their keys: at most `_KEYS_KEPT`, the modules of a few requests)
_KEYS_BY_ID: dict[int, tuple[str, str]] = {}
_KEYS_KEPT = 64


def _text_key(text: str) -> str:
    known = _KEYS_BY_ID.get(id(text))
    if known is not None and known[0] is text:
        return known[1]
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    if len(_KEYS_BY_ID) >= _KEYS_KEPT:
        _KEYS_BY_ID.clear()
    _KEYS_BY_ID[id(text)] = (text, key)
    return key


def document_imports(text: str) -> tuple[ImportRef, ...]:
    """The import statements of another module's text in source order (any depth,
    outside strings and comments; syntax errors tolerated): `DocumentAnalysis.imports`
    of a parse kept by text.  (The requested document's imports are its analysis's.)"""
    key = _text_key(text)
    cached = _IMPORTS_CACHE.get(key)
    if cached is not None:
        return cached
    result = DocumentAnalysis.parse(text).imports
    if len(_IMPORTS_CACHE) >= _CACHE_SIZE:
        _IMPORTS_CACHE.pop(next(iter(_IMPORTS_CACHE)))
    _IMPORTS_CACHE[key] = result
    return result


@dataclass(frozen=True)
class ModuleOutline:
    """A module's pieces: its outline (one line per top-level function, assignment and
    relative re-export; classes with one line per method) and its top-level definitions
    by name (a short function whole, else its signature and short docstring; a class
    with its docstring, class attributes, short ``__init__`` and method signatures)."""

    outline: str
    definitions: dict[str, str]


_OUTLINE_CACHE: dict[str, ModuleOutline] = {}


def module_outline(text: str) -> ModuleOutline:
    """The outline of a module's text and its top-level definitions (cached by text)."""
    key = _text_key(text)
    cached = _OUTLINE_CACHE.get(key)
    if cached is not None:
        return cached
    data = encode(text)
    tree = parse_tree(data)
    outline: list[str] = []
    definitions: dict[str, str] = {}
    for node in tree.root_node.children:
        definition = node.child_by_field_name("definition") if node.type == "decorated_definition" else node
        if definition is None:
            continue
        if definition.type == "function_definition":
            name = _name(definition)
            outline.append(_signature_line(data, definition))
            whole = _source(data, node)
            definitions[name] = whole if whole.count("\n") < NAMED_FUNCTION_LINES else _signature(data, node, definition)
        elif definition.type == "class_definition":
            name = _name(definition)
            outline.append(_class_outline(data, node, definition, compact=True))
            definitions[name] = _class_outline(data, node, definition, compact=False)
        elif node.type == "expression_statement" and node.children and node.children[0].type == "assignment":
            statement = _source(data, node)
            targets = _assigned_names(node.children[0])
            if "\n" not in statement and len(statement) <= ASSIGNMENT_CHARS:
                outline.append(statement)
            for target in targets:
                definitions.setdefault(target, statement if statement.count("\n") < NAMED_FUNCTION_LINES else "")
        elif node.type == "import_from_statement":
            module = node.child_by_field_name("module_name")
            if module is not None and module.type == "relative_import":  # a re-export: its names are members
                outline.append(_one_line(data[node.start_byte : node.end_byte].decode("utf-8", "replace")))
    result = ModuleOutline("\n".join(outline), {k: v for k, v in definitions.items() if v})
    if len(_OUTLINE_CACHE) >= _CACHE_SIZE:
        _OUTLINE_CACHE.pop(next(iter(_OUTLINE_CACHE)))
    _OUTLINE_CACHE[key] = result
    return result


def _one_line(text: str) -> str:
    """`text` with its end-of-line comments dropped and its line breaks (and the
    indentation after them) folded into spaces, brackets kept tight:
    ``def f(\n    a,  # the input\n)`` -> ``def f(a)``."""
    text = re.sub(r"[ \t]*#[^'\"\n]*$", "", text, flags=re.M)
    text = re.sub(r"\s*\\?\n\s*", " ", text).strip()
    text = re.sub(r"([(\[{]) ", r"\1", text)
    text = re.sub(r",? ([)\]}])", r"\1", text)
    return text


def _name(definition) -> str:
    name = definition.child_by_field_name("name")
    return name.text.decode("utf-8", "replace") if name is not None else ""


def _assigned_names(assignment) -> list[str]:
    left = assignment.child_by_field_name("left")
    if left is None:
        return []
    if left.type == "identifier":
        return [left.text.decode("utf-8", "replace")]
    return [c.text.decode("utf-8", "replace") for c in left.children if c.type == "identifier"]


def _indent(node) -> str:
    return " " * node.start_point[1]


def _source(data: bytes, node) -> str:
    """A node's text with its first line's indentation."""
    return _indent(node) + data[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _docstring(data: bytes, body) -> str:
    """The body's docstring statement (with indentation) when it has at most
    `DOCSTRING_LINES` lines, else ""."""
    first = body.children[0] if body is not None and body.children else None
    if first is None or first.type != "expression_statement" or not first.children or first.children[0].type != "string":
        return ""
    text = _source(data, first)
    return text if text.count("\n") < DOCSTRING_LINES else ""


def _head(data: bytes, outer, definition) -> str:
    body = definition.child_by_field_name("body")
    end = body.start_byte if body is not None else definition.end_byte
    return (_indent(outer) + data[outer.start_byte : end].decode("utf-8", "replace")).rstrip()


def _signature_line(data: bytes, definition) -> str:
    """``def name(a, b, c, d, ...): ...`` on one line: the parameters' names (at most
    `OUTLINE_PARAMETERS`), without annotations, defaults, decorators or docstring, so
    that an outline holds many names in few tokens."""
    parameters = definition.child_by_field_name("parameters")
    names: list[str] = []
    for child in parameters.named_children if parameters is not None else ():
        if child.type == "identifier":
            names.append(child.text.decode("utf-8", "replace"))
        elif child.type in ("typed_parameter", "default_parameter", "typed_default_parameter"):
            name = child.child_by_field_name("name") or (child.named_children[0] if child.named_children else None)
            if name is not None:
                names.append(_one_line(name.text.decode("utf-8", "replace")))
        elif child.type in ("list_splat_pattern", "dictionary_splat_pattern", "keyword_separator", "positional_separator"):
            names.append(child.text.decode("utf-8", "replace"))
    if len(names) > OUTLINE_PARAMETERS:
        names = [*names[:OUTLINE_PARAMETERS], "..."]
    prefix = "async def" if definition.children and definition.children[0].type == "async" else "def"
    return f"{_indent(definition)}{prefix} {_name(definition)}({', '.join(names)}): ..."


def _signature(data: bytes, outer, definition) -> str:
    """``def name(...) -> T:`` (with decorators), its short docstring and ``...``."""
    body = definition.child_by_field_name("body")
    inner = " " * (definition.start_point[1] + 4)
    if body is not None and body.start_point[0] > definition.start_point[0]:
        inner = _indent(body)
    docstring = _docstring(data, body)
    return _head(data, outer, definition) + "\n" + (docstring + "\n" if docstring else "") + inner + "..."


def _class_outline(data: bytes, outer, definition, compact: bool) -> str:
    """A class with its class-level assignments and method signatures; `compact`: one
    line per member and no decorators or docstrings, else its short docstring, its
    methods' decorators and docstrings and a short ``__init__`` whole."""
    body = definition.child_by_field_name("body")
    head = definition if compact else outer
    lines = [_one_line(_head(data, head, definition)) if compact else _head(data, head, definition)]
    if compact:
        lines[0] = _indent(definition) + lines[0].lstrip()
    inner = " " * (definition.start_point[1] + 4)
    members = 0
    for index, statement in enumerate(body.children if body is not None else ()):
        member = statement.child_by_field_name("definition") if statement.type == "decorated_definition" else statement
        if member is None:
            continue
        if member.type == "function_definition":
            whole = _source(data, statement)
            if compact:
                lines.append(_signature_line(data, member))
            elif _name(member) in ("__init__", "__post_init__") and whole.count("\n") < INIT_LINES:
                lines.append(whole)
            else:
                lines.append(_signature(data, statement, member))
            members += 1
        elif member.type == "class_definition":
            lines.append(_class_outline(data, statement, member, compact=True))
            members += 1
        elif statement.type == "expression_statement" and statement.children:
            kind = statement.children[0].type
            text = _source(data, statement)
            if kind == "string" and index == 0 and not compact and text.count("\n") < DOCSTRING_LINES:
                lines.append(text)
            elif kind == "assignment" and "\n" not in text and len(text) <= ASSIGNMENT_CHARS:
                lines.append(text)
                members += 1
    if not members:
        lines.append(inner + "...")
    return "\n".join(lines)


# -- resolving imports ---------------------------------------------------------------------
def _module_file(base: Path, parts: Sequence[str], reader: _Reader) -> Path | None:
    """``base/a/b.py`` or ``base/a/b/__init__.py`` for parts (a, b), when it can be read."""
    if not parts:
        candidate = base / "__init__.py"
        return candidate if reader.exists(candidate) else None
    folder = base.joinpath(*parts[:-1])
    for candidate in (folder / f"{parts[-1]}.py", folder / parts[-1] / "__init__.py"):
        if reader.exists(candidate):
            return candidate
    return None


def _search_folders(current: Path, root: Path | None, reader: _Reader) -> list[Path]:
    """Folders absolute imports are looked for in: the document's folder, its top
    package's parent, the root and root/src (those under the root; the document's own
    folder and package when there is no root)."""
    folder = current.parent
    top = folder
    while reader.exists(top / "__init__.py") and top.parent != top:
        top = top.parent
    found = [folder, top]
    if root is not None:
        found += [root, root / "src"]
    unique: list[Path] = []
    for candidate in found:
        if root is not None and not _under(candidate, root):
            continue
        if candidate not in unique:
            unique.append(candidate)
    return unique


def _under(path: Path, root: Path) -> bool:
    try:
        return Path(os.path.normpath(path)).is_relative_to(Path(os.path.normpath(root)))
    except ValueError:
        return False


@dataclass
class _Resolved:
    """Imported workspace files in import order: file -> names taken from it ("" for the
    module itself), and the names the document binds them to where they differ."""

    files: dict[Path, list[str]] = field(default_factory=dict)
    aliases: dict[Path, list[tuple[str, str]]] = field(default_factory=dict)
    #: file -> the names the document uses it by (for ranking)
    bound: dict[Path, list[str]] = field(default_factory=dict)

    def add(self, path: Path, name: str, alias: str | None = None, bound: str = "") -> None:
        names = self.files.setdefault(path, [])
        if name not in names:
            names.append(name)
        if alias:
            owner = name or module_name(path)
            pairs = self.aliases.setdefault(path, [])
            if (owner, alias) not in pairs and alias != owner:
                pairs.append((owner, alias))
        if bound or alias:
            self.bound.setdefault(path, []).append(alias or bound)


def module_name(path: Path) -> str:
    """The name a module file is imported by: its stem, or its folder's for ``__init__.py``."""
    return path.parent.name if path.name == "__init__.py" else path.stem


#: (document, imports, root, trusted, open documents) -> (when, resolution): what the
#: imports lead to depends on the files' status, itself trusted for `timed_cache.STATUS_SECONDS`
_RESOLVED_CACHE: TimedCache[_Resolved] = TimedCache(_CACHE_SIZE)


def resolved_imports(current: Path, imports: tuple[ImportRef, ...], root: Path | None, reader: _Reader) -> _Resolved:
    """`resolve_imports`, kept for `timed_cache.STATUS_SECONDS` (the next keystrokes find the same
    files; an edited import or a new file is seen then)."""
    key = (current, imports, root, reader.trusted, frozenset(reader.open_texts))
    return _RESOLVED_CACHE.get(key, lambda: resolve_imports(current, imports, root, reader))


def resolve_imports(current: Path, imports: Iterable[ImportRef], root: Path | None, reader: _Reader) -> _Resolved:
    """The workspace files `imports` of the document at `current` refer to."""
    resolved = _Resolved()
    folders: list[Path] | None = None
    for ref in imports:
        if ref.level:
            base = current.parent
            for _ in range(ref.level - 1):
                base = base.parent
            if root is not None and not _under(base, root):
                continue
            bases = [base]
        else:
            if folders is None:
                folders = _search_folders(current, root, reader)
            bases = folders
        for base in bases:
            module = _module_file(base, ref.module, reader)
            submodules = []
            for index, name in enumerate(ref.names):
                if name == "*":
                    continue
                sub = _module_file(base, (*ref.module, name), reader)
                if sub is not None:
                    submodules.append((sub, ref.alias_of(index), name))
                elif module is not None:
                    resolved.add(module, name, ref.alias_of(index), name)
            for sub, alias, name in submodules:
                resolved.add(sub, "", alias, name)
            if module is not None and (not ref.is_from or "*" in ref.names or not ref.names):
                resolved.add(module, "", ref.alias, ref.module[-1] if ref.module else "")
            if module is not None or submodules:
                break
    resolved.files.pop(current, None)
    return resolved


# -- gathering -----------------------------------------------------------------------------
@functools.lru_cache(maxsize=_CACHE_SIZE)
def label(path: Path, root: Path | None) -> str:
    """A file's label in prompts: relative to the root ("/"-separated), else its name."""
    if root is not None and _under(path, root):
        return PurePosixPath(*Path(os.path.relpath(path, root)).parts).as_posix()
    return path.name


def _uses(text: str, bound: dict[Path, list[str]]) -> dict[Path, int]:
    """How much the document uses each module: log2(1 + occurrences) of the names it
    binds it to, bucketed so that typing rarely changes it (the block stays put)."""
    names = {name for found in bound.values() for name in found if name}
    if not names:
        return {}
    pattern = re.compile(r"(?<![\w.])(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")\b")
    counts: dict[str, int] = {}
    for match in pattern.finditer(text):
        counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    return {path: int(math.log2(1 + sum(counts.get(n, 0) for n in set(found)))) for path, found in bound.items()}


def _with_reexports(module_path: Path, text: str, outline: str, reader: _Reader) -> str:
    """A module's outline followed by the outlines of the modules it star-imports
    relatively (``from ._basic import *``: their names are the module's too), one level."""
    parts = [outline]
    for ref in document_imports(text):
        if not ref.level or "*" not in ref.names:
            continue
        base = module_path.parent
        for _ in range(ref.level - 1):
            base = base.parent
        target = _module_file(base, ref.module, reader)
        target_text = reader.text(target) if target is not None and target != module_path else None
        if target_text is not None:
            parts.append(module_outline(target_text).outline)
    return "\n".join(part for part in parts if part.strip())


def gather_context(
    document: str,
    analysis: DocumentAnalysis,
    sources: ContextSources | None,
    max_chars: int | None = None,
    offset: int | None = None,
) -> ProjectContext | None:
    """The project context of a document (its key or path and its `analysis`, the one
    the request carries: its imports are read there, not again), or None when there is
    no source.  Imported modules come in import order, those the document uses most (by
    name, bucketed: `_uses`; the cursor's line, at `offset`, is not counted, so typing
    it never reorders them) first.  Pieces longer than `max_chars` are cut at a line end
    (names and outlines) or left out (whole files)."""
    if sources is None:
        return None
    text = analysis.text
    path = document_path(document)
    root = Path(os.path.abspath(sources.root)) if sources.root else None
    open_texts: dict[str, str] = {}
    order: list[str] = []
    for open_path, open_text in sources.open_documents:
        key = os.path.normpath(os.path.abspath(open_path))
        if key not in open_texts and key.endswith((".py", ".pyi")):
            order.append(key)
        open_texts[key] = open_text
    current = Path(os.path.normpath(os.path.abspath(path))) if path else None
    reader = _Reader(root, sources.trusted, open_texts)
    names: list[tuple[int, Snippet]] = []
    outlines: list[tuple[int, Snippet]] = []
    files: list[tuple[int, Snippet]] = []
    seen: set[str] = set()
    if current is not None:
        try:
            resolved = resolved_imports(current, analysis.imports, root, reader)
        except Exception:  # a document or module the parser cannot read contributes nothing
            logger.debug("context: could not resolve the imports of %s", document, exc_info=True)
            resolved = _Resolved()
        if offset is not None:  # the line being typed is left out of the counts
            start, end = text.rfind("\n", 0, offset) + 1, text.find("\n", offset)
            counted = text[:start] + (text[end:] if end >= 0 else "")
        else:
            counted = text
        uses = _uses(counted, resolved.bound)
        for module_path, taken in resolved.files.items():
            module_text = reader.text(module_path)
            if module_text is None:
                continue
            name = label(module_path, root)
            aliases = tuple(resolved.aliases.get(module_path, ()))
            rank = -uses.get(module_path, 0)
            outline = module_outline(module_text)
            for taken_name in taken:
                if taken_name == "":
                    piece = _with_reexports(module_path, module_text, outline.outline, reader)
                else:
                    piece = outline.definitions.get(taken_name, "")
                if piece.strip():
                    names.append((rank, Snippet(name, piece, "names", name, aliases)))
            if "" not in taken and outline.outline.strip():
                outlines.append((rank, Snippet(name, outline.outline, "outline", name, aliases)))
            seen.add(name)
            files.append((rank, Snippet(name, module_text, "file", name, aliases)))
    open_files: list[tuple[int, Snippet]] = []
    for key in reversed(order[-MAX_OPEN_DOCUMENTS - 1 :]):  # the last opened first
        if current is not None and key == str(current):
            continue
        open_text = open_texts[key]
        name = label(Path(key), root)
        if name in seen or len(open_text) > MAX_FILE_BYTES:
            continue
        outline = module_outline(open_text).outline
        if outline.strip():
            outlines.append((1, Snippet(name, outline, "outline", name)))
        open_files.append((1, Snippet(name, open_text, "file", name)))
    snippets = []
    for tier in (names, outlines, files, open_files):
        snippets.extend(snippet for _, snippet in sorted(tier, key=lambda item: item[0]))  # stable: import order
    if max_chars is not None:
        snippets = [_cut(s, max_chars) for s in snippets if s.kind != "file" or len(s.text) <= max_chars]
    snippets = [s for s in snippets if s.text.strip()]
    if not snippets:
        return None
    current_label = label(current, root) if current is not None else ""
    return ProjectContext(current_label, root.name if root is not None else "", tuple(snippets))


def _cut(snippet: Snippet, max_chars: int) -> Snippet:
    if len(snippet.text) <= max_chars:
        return snippet
    cut = snippet.text.rfind("\n", 0, max_chars)
    from dataclasses import replace

    return replace(snippet, text=snippet.text[: max(cut, 0)])
