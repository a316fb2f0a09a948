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

import hashlib
import logging
import os
import stat as stat_module
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

logger = logging.getLogger(__name__)

#: files larger than this are not read (and whole open documents larger than it not used)
MAX_FILE_BYTES = 256 * 1024
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
#: one-line assignments longer than this many characters are left out of outlines
ASSIGNMENT_CHARS = 160
#: parsed modules kept (by text)
_CACHE_SIZE = 128

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


def workspace_file(path: Path, root: Path) -> tuple[Path, os.stat_result] | None:
    """(real path, status) of `path` when it is a regular file of at most
    `MAX_FILE_BYTES` whose real path (symlinks resolved) lies under the real `root`."""
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
_PARSER = None


def _parser():
    global _PARSER
    if _PARSER is None:
        import tree_sitter_python
        from tree_sitter import Language, Parser

        _PARSER = Parser(Language(tree_sitter_python.language()))
    return _PARSER


@dataclass(frozen=True)
class ImportRef:
    """One import: ``level`` dots (0: absolute), the module path, and the names a
    ``from`` import takes (empty for ``import a.b``; ``("*",)`` for a wildcard)."""

    level: int
    module: tuple[str, ...]
    names: tuple[str, ...] = ()
    is_from: bool = False


def _dotted(node) -> tuple[str, ...]:
    return tuple(child.text.decode("utf-8", "replace") for child in node.children if child.type == "identifier")


_IMPORTS_CACHE: dict[str, tuple[ImportRef, ...]] = {}


def document_imports(text: str) -> tuple[ImportRef, ...]:
    """The import statements of `text` in source order (any depth; syntax errors tolerated)."""
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    cached = _IMPORTS_CACHE.get(key)
    if cached is not None:
        return cached
    found: list[ImportRef] = []
    tree = _parser().parse(text.encode("utf-8", "surrogatepass"))
    stack = [tree.root_node]
    nodes = []
    while stack:
        node = stack.pop()
        if node.type in ("import_statement", "import_from_statement"):
            nodes.append(node)
            continue
        if node.type in ("string", "comment"):
            continue
        stack.extend(node.children)
    for node in sorted(nodes, key=lambda n: n.start_byte):
        if node.type == "import_statement":
            for child in node.children_by_field_name("name"):
                name = child.child_by_field_name("name") if child.type == "aliased_import" else child
                if name is not None and name.type == "dotted_name" and _dotted(name):
                    found.append(ImportRef(0, _dotted(name)))
            continue
        module = node.child_by_field_name("module_name")
        if module is None:
            continue
        if module.type == "relative_import":
            level = sum(len(c.text) for c in module.children if c.type == "import_prefix")
            path = next((_dotted(c) for c in module.children if c.type == "dotted_name"), ())
        elif module.type == "dotted_name":
            level, path = 0, _dotted(module)
        else:
            continue
        names: list[str] = []
        if any(child.type == "wildcard_import" for child in node.children):
            names.append("*")
        for child in node.children_by_field_name("name"):
            name = child.child_by_field_name("name") if child.type == "aliased_import" else child
            parts = _dotted(name) if name is not None else ()
            if len(parts) == 1:
                names.append(parts[0])
        if level or path:
            found.append(ImportRef(level, path, tuple(names), True))
    result = tuple(found)
    if len(_IMPORTS_CACHE) >= _CACHE_SIZE:
        _IMPORTS_CACHE.pop(next(iter(_IMPORTS_CACHE)))
    _IMPORTS_CACHE[key] = result
    return result


@dataclass(frozen=True)
class ModuleOutline:
    """A module's pieces: its outline and its top-level definitions by name."""

    outline: str
    definitions: dict[str, str]


_OUTLINE_CACHE: dict[str, ModuleOutline] = {}


def module_outline(text: str) -> ModuleOutline:
    """The outline of a module's text and its top-level definitions (cached by text)."""
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    cached = _OUTLINE_CACHE.get(key)
    if cached is not None:
        return cached
    data = text.encode("utf-8", "surrogatepass")
    tree = _parser().parse(data)
    outline: list[str] = []
    definitions: dict[str, str] = {}
    for node in tree.root_node.children:
        definition = node.child_by_field_name("definition") if node.type == "decorated_definition" else node
        if definition is None:
            continue
        if definition.type == "function_definition":
            name = _name(definition)
            signature = _signature(data, node, definition)
            outline.append(signature)
            whole = _source(data, node)
            definitions[name] = whole if whole.count("\n") < NAMED_FUNCTION_LINES else signature
        elif definition.type == "class_definition":
            name = _name(definition)
            body = _class_outline(data, node, definition, keep_init=True)
            outline.append(_class_outline(data, node, definition, keep_init=False))
            definitions[name] = body
        elif node.type == "expression_statement" and node.children and node.children[0].type == "assignment":
            statement = _source(data, node)
            targets = _assigned_names(node.children[0])
            if "\n" not in statement and len(statement) <= ASSIGNMENT_CHARS:
                outline.append(statement)
            for target in targets:
                definitions.setdefault(target, statement if statement.count("\n") < NAMED_FUNCTION_LINES else "")
    result = ModuleOutline("\n".join(outline), {k: v for k, v in definitions.items() if v})
    if len(_OUTLINE_CACHE) >= _CACHE_SIZE:
        _OUTLINE_CACHE.pop(next(iter(_OUTLINE_CACHE)))
    _OUTLINE_CACHE[key] = result
    return result


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


def _signature(data: bytes, outer, definition) -> str:
    """``def name(...) -> T:`` (with decorators), its short docstring and ``...``."""
    body = definition.child_by_field_name("body")
    end = body.start_byte if body is not None else definition.end_byte
    head = (_indent(outer) + data[outer.start_byte : end].decode("utf-8", "replace")).rstrip()
    inner = " " * (definition.start_point[1] + 4)
    if body is not None and body.start_point[0] > definition.start_point[0]:
        inner = _indent(body)
    docstring = _docstring(data, body)
    return head + "\n" + (docstring + "\n" if docstring else "") + inner + "..."


def _class_outline(data: bytes, outer, definition, keep_init: bool) -> str:
    """A class with its short docstring, class-level assignments and method signatures
    (``__init__`` whole when `keep_init` and short)."""
    body = definition.child_by_field_name("body")
    end = body.start_byte if body is not None else definition.end_byte
    lines = [(_indent(outer) + data[outer.start_byte : end].decode("utf-8", "replace")).rstrip()]
    inner = " " * (definition.start_point[1] + 4)
    members = 0
    for index, statement in enumerate(body.children if body is not None else ()):
        member = statement.child_by_field_name("definition") if statement.type == "decorated_definition" else statement
        if member is None:
            continue
        if member.type == "function_definition":
            whole = _source(data, statement)
            if keep_init and _name(member) in ("__init__", "__post_init__") and whole.count("\n") < INIT_LINES:
                lines.append(whole)
            else:
                lines.append(_signature(data, statement, member))
            members += 1
        elif member.type == "class_definition":
            lines.append(_class_outline(data, statement, member, keep_init=False))
            members += 1
        elif statement.type == "expression_statement" and statement.children:
            kind = statement.children[0].type
            text = _source(data, statement)
            if kind == "string" and index == 0 and text.count("\n") < DOCSTRING_LINES:
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
    module itself)."""

    files: dict[Path, list[str]] = field(default_factory=dict)

    def add(self, path: Path, name: str) -> None:
        names = self.files.setdefault(path, [])
        if name not in names:
            names.append(name)


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
            for name in ref.names:
                if name == "*":
                    continue
                sub = _module_file(base, (*ref.module, name), reader)
                if sub is not None:
                    submodules.append(sub)
                elif module is not None:
                    resolved.add(module, name)
            for sub in submodules:
                resolved.add(sub, "")
            if module is not None and (not ref.is_from or "*" in ref.names or not ref.names):
                resolved.add(module, "")
            if module is not None or submodules:
                break
    resolved.files.pop(current, None)
    return resolved


# -- gathering -----------------------------------------------------------------------------
def label(path: Path, root: Path | None) -> str:
    """A file's label in prompts: relative to the root ("/"-separated), else its name."""
    if root is not None and _under(path, root):
        return PurePosixPath(*Path(os.path.relpath(path, root)).parts).as_posix()
    return path.name


def gather_context(
    document: str, text: str, sources: ContextSources | None, max_chars: int | None = None
) -> ProjectContext | None:
    """The project context of a document (its key or path and its text), or None when
    there is no source.  Pieces longer than `max_chars` are cut at a line end (names and
    outlines) or left out (whole files)."""
    if sources is None:
        return None
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
    names: list[Snippet] = []
    outlines: list[Snippet] = []
    files: list[Snippet] = []
    seen_outline: set[str] = set()
    if current is not None:
        try:
            resolved = resolve_imports(current, document_imports(text), root, reader)
        except Exception:  # a document or module the parser cannot read contributes nothing
            logger.debug("context: could not resolve the imports of %s", document, exc_info=True)
            resolved = _Resolved()
        for module_path, taken in resolved.files.items():
            module_text = reader.text(module_path)
            if module_text is None:
                continue
            name = label(module_path, root)
            outline = module_outline(module_text)
            for taken_name in taken:
                piece = outline.outline if taken_name == "" else outline.definitions.get(taken_name, "")
                if piece.strip():
                    names.append(Snippet(name, piece, "names", name))
            if "" not in taken and outline.outline.strip():
                outlines.append(Snippet(name, outline.outline, "outline", name))
            seen_outline.add(name)
            files.append(Snippet(name, module_text, "file", name))
    open_files: list[Snippet] = []
    for key in reversed(order[-MAX_OPEN_DOCUMENTS - 1 :]):  # the last opened first
        if current is not None and key == str(current):
            continue
        open_text = open_texts[key]
        name = label(Path(key), root)
        if name in seen_outline or len(open_text) > MAX_FILE_BYTES:
            continue
        outline = module_outline(open_text).outline
        if outline.strip():
            outlines.append(Snippet(name, outline, "outline", name))
        open_files.append(Snippet(name, open_text, "file", name))
    snippets = [s for s in names + outlines + files + open_files if s.text.strip()]
    if max_chars is not None:
        snippets = [_cut(s, max_chars) for s in snippets if s.kind != "file" or len(s.text) <= max_chars]
    snippets = [s for s in snippets if s is not None and s.text.strip()]
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
