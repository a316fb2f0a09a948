"""One document's syntax: parsed once per text, edited incrementally, asked many times.

`DocumentAnalysis` holds one tree-sitter-python tree of a document's text and answers
what the readers of a request ask of it, each answer computed on first use and kept on
the analysis:

- the imports and the names they bind (`roots`, `modules`, `ambiguous`: what
  `apis.imports.learn_roots` / `imported_modules` / `ambiguous_roots` return);
- the import statements as the project context reads them (`imports`: `ImportRef`s);
- `region(offset)`: whether a character is code, inside a string literal (f-string
  text included, its ``{...}`` expressions not) or inside a comment;
- `open_call(offset)`: the innermost call whose argument list is open at an offset
  (`OpenCall`: the callee's dotted name and the keywords already written).

`edited(changes)` applies LSP content changes (ranges in UTF-16 code units, or whole
texts) to a copy of the tree (`Tree.edit`) and parses again with it, so tree-sitter
reuses what the edit left alone; `with_text(text)` does the same for a new text by the
span between its first and last differing characters.  Either gives the answers a fresh
`DocumentAnalysis.parse` of the new text gives; import answers already read are carried
over when no import statement touches the edit or a range whose syntax it changed.
`analysis_of(text)` keeps the last analyses by text, for callers that have only a text
(a new text is reached by `with_text` from the last one).  One module-level parser
serves every thread, one parse at a time (`PARSE_LOCK`).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

_PARSER = None
_LANGUAGE = None
_IMPORT_QUERY = None
#: one parse at a time through the shared parser (the completion path and the
#: diagnostics thread both parse documents)
PARSE_LOCK = threading.RLock()
#: LSP line breaks (positions count lines at these only)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_CLASS_HEADER = re.compile(r"class\s+[A-Za-z_]\w*\s*[(:]")
#: tokens that begin a statement and never stand inside brackets
_STATEMENT_KEYWORDS = frozenset(
    "def class import return pass break continue raise global nonlocal del assert while try except finally with".split()
)
#: answers of `region` and `open_call` kept per analysis (by offset)
_OFFSET_ANSWERS = 256
#: analyses kept by text (`analysis_of`)
_BY_TEXT_SIZE = 16

Region = str  # "code" | "string" | "comment"


def parser():
    """The module-level tree-sitter-python parser (use it under `PARSE_LOCK`)."""
    global _PARSER, _LANGUAGE, _IMPORT_QUERY
    if _PARSER is None:
        with PARSE_LOCK:
            if _PARSER is None:
                import tree_sitter_python
                from tree_sitter import Language, Parser, Query

                _LANGUAGE = Language(tree_sitter_python.language())
                _IMPORT_QUERY = Query(_LANGUAGE, "[(import_statement) (import_from_statement)] @import")
                _PARSER = Parser(_LANGUAGE)
    return _PARSER


def parse_tree(data: bytes, old_tree=None):
    """A tree-sitter tree of UTF-8 `data` (with `old_tree`, edited to match, reused)."""
    parse = parser()
    with PARSE_LOCK:
        return parse.parse(data, old_tree) if old_tree is not None else parse.parse(data)


def encode(text: str) -> bytes:
    """`text` as the bytes the trees are built from (lone surrogates kept)."""
    return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class ImportRef:
    """One import: ``level`` dots (0: absolute), the module path, the names a ``from``
    import takes (empty for ``import a.b``; ``"*"`` for a wildcard), and the names they
    are bound to where ``as`` renames them (`aliases`, one per name; `alias` for
    ``import a.b as c``)."""

    level: int
    module: tuple[str, ...]
    names: tuple[str, ...] = ()
    is_from: bool = False
    aliases: tuple[str | None, ...] = ()
    alias: str | None = None

    def alias_of(self, index: int) -> str | None:
        return self.aliases[index] if index < len(self.aliases) else None


@dataclass(frozen=True)
class OpenCall:
    """The innermost call whose argument list is open at an offset."""

    #: the callee's dotted name as written (``np.zeros``, ``a.mean``); None where the
    #: callee is no dotted name (``f()(``, ``x[0](``)
    callee: str | None
    #: the keyword names already written in the argument list (all of them when the
    #: list is closed, those before the offset when it is not), in order
    keywords: tuple[str, ...]
    #: the character offset of the call's ``(``
    start: int
    #: the offset lies inside another bracket within the argument list (``f([1, |``)
    nested: bool = False


@dataclass(frozen=True)
class ImportBindings:
    """What a document's import statements bind (see `apis.imports`)."""

    roots: dict[str, tuple[str, ...]]
    modules: frozenset[tuple[str, ...]]
    ambiguous: frozenset[str]


def _dotted(node) -> tuple[str, ...]:
    return tuple(child.text.decode("utf-8", "replace") for child in node.children if child.type == "identifier")


def _alias(child) -> str | None:
    alias = child.child_by_field_name("alias") if child.type == "aliased_import" else None
    return alias.text.decode("utf-8", "replace") if alias is not None else None


class _Bindings(dict):
    """alias -> path, remembering every path each alias was bound to."""

    def __init__(self):
        super().__init__()
        self.paths: dict[str, set[tuple[str, ...]]] = {}

    def __setitem__(self, alias, path):
        self.paths.setdefault(alias, set()).add(tuple(path))
        super().__setitem__(alias, path)


class DocumentAnalysis:
    """One tree-sitter tree of one document text and the answers read from it.

    Immutable: `edited` and `with_text` return a new analysis (the tree is copied
    before it is edited), so an analysis handed to another thread never changes."""

    def __init__(self, text: str, data: bytes, tree):
        self.text = text
        self.data = data
        self.tree = tree
        self._regions: dict[int, Region] = {}
        self._calls: dict[int, OpenCall | None] = {}

    @classmethod
    def parse(cls, text: str) -> DocumentAnalysis:
        """A fresh parse of `text`."""
        data = encode(text)
        return cls(text, data, parse_tree(data))

    # -- edits ------------------------------------------------------------------------------
    def edited(self, changes: Iterable[Any], encoding: str = "utf-16") -> DocumentAnalysis:
        """The analysis of the text after LSP content `changes` (each applied to the text
        the previous ones left; a change with a ``range`` replaces it by its ``text``, one
        without replaces the whole text).  Positions count lines at LSP line breaks and
        characters in `encoding` units ("utf-16", the LSP default; "utf-8", "utf-32"); a
        line past the end means the end, a character past a line's end its end."""
        text, data = self.text, self.data
        tree = self.tree.copy()
        head, tail = len(data), len(data)  # bytes no change touched, at the start and at the end
        for change in changes:
            change_range = getattr(change, "range", None)
            if change_range is None:
                start, end = _differing_span(text, change.text)
                fragment = change.text[start : len(change.text) - (len(text) - end)]
            else:
                start_line = change_range.start.line
                line_start = _line_start(text, start_line)  # counted once: the end is on it or after it
                known = (start_line, line_start) if line_start is not None else None
                start = _offset(text, start_line, change_range.start.character, encoding, known)
                end = _offset(text, change_range.end.line, change_range.end.character, encoding, known)
                start, end = min(start, end), max(start, end)
                fragment = change.text
            text, data, start_byte, new_end_byte = _edit(tree, text, data, start, end, fragment)
            head, tail = min(head, start_byte), min(tail, len(data) - new_end_byte)
        if text == self.text:
            return self
        return self._successor(text, data, tree, head, tail)

    def with_text(self, text: str) -> DocumentAnalysis:
        """The analysis of `text`, reached by one edit from this one (the span between the
        first and the last character where the texts differ)."""
        if text == self.text:
            return self
        start, end = _differing_span(self.text, text)
        tree = self.tree.copy()
        fragment = text[start : len(text) - (len(self.text) - end)]
        new_text, data, start_byte, new_end_byte = _edit(tree, self.text, self.data, start, end, fragment)
        return self._successor(new_text, data, tree, start_byte, len(data) - new_end_byte)

    def _successor(self, text: str, data: bytes, edited_tree, head: int, tail: int) -> DocumentAnalysis:
        """The analysis of `text` parsed with this analysis's tree, edited to match
        (`edited_tree`; the edits left the first `head` and the last `tail` bytes alone);
        the import answers already computed here are carried over when the edits
        provably left every import statement alone (`_carry_imports`)."""
        successor = DocumentAnalysis(text, data, parse_tree(data, edited_tree))
        if "import_spans" in self.__dict__:
            successor._carry_imports(self, edited_tree, head, tail)
        return successor

    def _carry_imports(self, previous: DocumentAnalysis, edited_tree, head: int, tail: int) -> None:
        """Take `previous`'s import answers when no import statement of either text
        touches the edited span (between the untouched `head` and `tail` bytes) or a
        range whose syntax changed (then the statements are the same, in the same
        order, only moved)."""
        start_byte = head
        old_end_byte = len(previous.data) - tail
        new_end_byte = len(self.data) - tail
        shift = new_end_byte - old_end_byte
        spans = []
        for span_start, span_end in previous.import_spans:
            if span_end < start_byte:
                spans.append((span_start, span_end))
            elif span_start > old_end_byte:
                spans.append((span_start + shift, span_end + shift))
            else:
                return  # the edit touches an import statement
        ranges = [(start_byte, new_end_byte)]
        ranges.extend((r.start_byte, r.end_byte) for r in edited_tree.changed_ranges(self.tree))
        if sum(end - begin for begin, end in ranges) > len(self.data) // 4:
            return  # as costly as reading them again
        from tree_sitter import QueryCursor

        for begin, end in ranges:
            begin, end = max(begin - 1, 0), end + 1  # touching counts
            if any(span_start < end and span_end > begin for span_start, span_end in spans):
                return
            cursor = QueryCursor(_IMPORT_QUERY)
            cursor.set_byte_range(begin, end)
            if cursor.captures(self.tree.root_node):
                return
        self.__dict__["import_spans"] = tuple(spans)
        for name in ("bindings", "imports"):
            if name in previous.__dict__:
                self.__dict__[name] = previous.__dict__[name]

    # -- offsets ----------------------------------------------------------------------------
    def byte_offset(self, offset: int) -> int:
        """The byte offset (in `data`) of character `offset`."""
        if self.text.isascii():
            return offset
        return len(encode(self.text[:offset]))

    def char_offset(self, byte: int) -> int:
        """The character offset of byte offset `byte` (a character boundary)."""
        if self.text.isascii():
            return byte
        return len(self.data[:byte].decode("utf-8", "surrogatepass"))

    # -- imports ----------------------------------------------------------------------------
    @cached_property
    def import_nodes(self) -> tuple:
        """Every import statement of the tree (any depth), in source order."""
        from tree_sitter import QueryCursor

        parser()
        captures = QueryCursor(_IMPORT_QUERY).captures(self.tree.root_node)
        return tuple(sorted(captures.get("import", []), key=lambda node: node.start_byte))

    @cached_property
    def import_spans(self) -> tuple[tuple[int, int], ...]:
        """(start byte, end byte) of every import statement, in source order."""
        return tuple((node.start_byte, node.end_byte) for node in self.import_nodes)

    @cached_property
    def bindings(self) -> ImportBindings:
        """alias -> module path, the module paths named, the names bound more than once
        (the semantics of `apis.imports`)."""
        roots: dict[str, tuple[str, ...]] = _Bindings()
        modules: set[tuple[str, ...]] = set()
        self.import_spans  # noqa: B018 (kept with the answers: a successor may carry them)
        for node in self.import_nodes:
            if node.type == "import_statement":
                for child in node.children_by_field_name("name"):
                    if child.type == "aliased_import":
                        name, alias = child.child_by_field_name("name"), child.child_by_field_name("alias")
                        if name is not None and alias is not None:
                            path = _dotted(name)
                            if path:
                                roots[alias.text.decode("utf-8", "replace")] = path
                                modules.add(path)
                    elif child.type == "dotted_name":
                        path = _dotted(child)
                        if path:
                            roots[path[0]] = path[:1]
                            modules.add(path)
                continue
            module = node.child_by_field_name("module_name")
            if module is None or module.type != "dotted_name":
                continue  # relative import (or broken statement)
            base = _dotted(module)
            if not base:
                continue
            modules.add(base)
            for child in node.children_by_field_name("name"):
                if child.type == "aliased_import":
                    name, alias = child.child_by_field_name("name"), child.child_by_field_name("alias")
                    if name is not None and alias is not None and _dotted(name):
                        roots[alias.text.decode("utf-8", "replace")] = base + _dotted(name)
                elif child.type == "dotted_name":
                    parts = _dotted(child)
                    if len(parts) == 1:
                        roots[parts[0]] = base + parts
        # statements come in source order, so later imports overwrite earlier ones
        ambiguous = frozenset(alias for alias, paths in roots.paths.items() if len(paths) > 1)
        return ImportBindings(
            {alias: path for alias, path in roots.items() if alias.isidentifier()}, frozenset(modules), ambiguous
        )

    @property
    def roots(self) -> dict[str, tuple[str, ...]]:
        """alias -> module path bound by the imports (a new dict each time)."""
        return dict(self.bindings.roots)

    @property
    def modules(self) -> frozenset[tuple[str, ...]]:
        return self.bindings.modules

    @property
    def ambiguous(self) -> frozenset[str]:
        return self.bindings.ambiguous

    @cached_property
    def imports(self) -> tuple[ImportRef, ...]:
        """The import statements outside strings and comments, in source order, as the
        project context reads them (relative and wildcard imports included)."""
        found: list[ImportRef] = []
        self.import_spans  # noqa: B018 (kept with the answers: a successor may carry them)
        for node in self.import_nodes:
            if _inside(node, ("string", "comment")):
                continue
            if node.type == "import_statement":
                for child in node.children_by_field_name("name"):
                    name = child.child_by_field_name("name") if child.type == "aliased_import" else child
                    if name is not None and name.type == "dotted_name" and _dotted(name):
                        found.append(ImportRef(0, _dotted(name), alias=_alias(child)))
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
            aliases: list[str | None] = []
            if any(child.type == "wildcard_import" for child in node.children):
                names.append("*")
                aliases.append(None)
            for child in node.children_by_field_name("name"):
                name = child.child_by_field_name("name") if child.type == "aliased_import" else child
                parts = _dotted(name) if name is not None else ()
                if len(parts) == 1:
                    names.append(parts[0])
                    aliases.append(_alias(child))
            if level or path:
                found.append(ImportRef(level, path, tuple(names), True, tuple(aliases)))
        return tuple(found)

    # -- regions ----------------------------------------------------------------------------
    def region(self, offset: int) -> Region:
        """"code", "string" or "comment": where the character at `offset` stands.  A
        string literal is its quotes, prefix and text (an f-string's format spec
        included); an f-string's ``{...}`` (braces, expression, ``!r``, the ``:`` of a
        spec) is code.  Offsets outside the text are code."""
        answer = self._regions.get(offset)
        if answer is None:
            answer = self._region(offset)
            _remember(self._regions, offset, answer)
        return answer

    def _region(self, offset: int) -> Region:
        if not 0 <= offset < len(self.text):
            return "code"
        start = self.byte_offset(offset)
        end = start + len(encode(self.text[offset]))
        node = self.tree.root_node.descendant_for_byte_range(start, end)
        if node is not None and node.type == ":" and node.parent is not None and node.parent.type == "format_specifier":
            return "code"
        while node is not None:
            kind = node.type
            if kind == "comment":
                return "comment"
            if kind in ("interpolation", "format_expression"):
                return "code"
            if kind in ("string", "string_start", "string_content", "string_end", "format_specifier"):
                return "string"
            node = node.parent
        return "code"

    # -- classes --------------------------------------------------------------------------
    def class_runs_to_end(self, offset: int) -> bool:
        """Whether the innermost class whose body holds character `offset` has no line
        after it at its own indentation or less: its body runs to the end of the document,
        so more of it (methods the code before calls) may still be written.  Read from the
        indentation of the lines (the text at a cursor seldom parses); False outside a
        class."""
        lines = _LINE_BREAK.split(self.text[:offset])
        before, current = lines[:-1], lines[-1]
        depth = _indentation(current) if current.strip() else None
        class_indent = None
        for line in reversed(before):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            indent = _indentation(line)
            if depth is not None and indent >= depth:
                continue
            depth = indent
            if _CLASS_HEADER.match(stripped):
                class_indent = indent
                break
            if indent == 0:
                return False
        if class_indent is None:
            return False
        rest = self.text[offset:]
        newline = _LINE_BREAK.search(rest)
        for line in _LINE_BREAK.split(rest[newline.end():]) if newline else ():
            stripped = line.strip()
            if stripped and not stripped.startswith("#") and _indentation(line) <= class_indent:
                return False
        return True

    # -- calls ------------------------------------------------------------------------------
    def open_call(self, offset: int) -> OpenCall | None:
        """The innermost call whose argument list is open at character `offset` (its
        ``(`` before the offset, its ``)`` missing or at or after it), or None.  An
        unclosed call in broken code counts; a ``def``/``class`` header does not."""
        if offset in self._calls:
            return self._calls[offset]
        answer = self._open_call(offset)
        _remember(self._calls, offset, answer)
        return answer

    def _open_call(self, offset: int) -> OpenCall | None:
        if not 0 < offset <= len(self.text):
            return None
        limit = self.byte_offset(offset)
        units = _Units(self.tree.root_node, limit)
        passed: list = []  # the units between the offset and the open bracket, nearest first
        depth = 0
        nested = False
        for unit in units:  # outwards from the offset
            kind = unit.type
            if unit.child_count == 0 and kind in _STATEMENT_KEYWORDS:
                return None
            if unit.child_count and _is_statement(kind):
                return None
            if unit.child_count == 0 and kind in (")", "]", "}"):
                depth += 1
            elif unit.child_count == 0 and kind in ("(", "[", "{"):
                if depth:
                    depth -= 1
                elif kind == "(" and (callee := _callee(units)) is not None:
                    if callee is _DEFINITION:
                        return None
                    keywords = _keywords(unit, passed, limit)
                    name = callee if isinstance(callee, str) else None
                    return OpenCall(name, keywords, self.char_offset(unit.start_byte), nested)
                else:
                    nested = True  # a bracket inside the argument list of a call further out
            passed.append(unit)
        return None

    def __repr__(self) -> str:
        return f"DocumentAnalysis({len(self.text)} characters)"


# -- helpers ------------------------------------------------------------------------------------
def _remember(answers: dict, key, value) -> None:
    if len(answers) >= _OFFSET_ANSWERS:
        answers.clear()  # (one step: another thread may be reading them)
    answers[key] = value


def _inside(node, kinds: tuple[str, ...]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in kinds:
            return True
        parent = parent.parent
    return False


def _is_statement(kind: str) -> bool:
    return kind.endswith(("_statement", "_definition")) or kind == "block"


class _Units:
    """The syntax units before a byte offset, nearest first: tokens, and whole nodes
    that end before it and hold no error (balanced brackets), strings and comments
    whole (comments skipped).  Missing tokens (inserted by error recovery) are skipped."""

    def __init__(self, root, limit: int):
        self._iterator = self._walk(root, limit)
        self._buffer: list = []

    def _walk(self, node, limit: int) -> Iterator:
        for child in reversed(node.children):
            if child.start_byte >= limit or child.is_missing:
                continue
            if child.type == "comment":
                continue
            if (
                child.child_count == 0
                or child.type in ("string", "concatenated_string")
                or (child.end_byte <= limit and not child.has_error)
            ):
                yield child
            else:
                yield from self._walk(child, limit)

    def __iter__(self):
        return self

    def __next__(self):
        if self._buffer:
            return self._buffer.pop()
        return next(self._iterator)

    def peek(self):
        if not self._buffer:
            try:
                self._buffer.append(next(self._iterator))
            except StopIteration:
                return None
        return self._buffer[-1]

    def take(self):
        return self.__next__()


_DEFINITION = object()
_NOT_DOTTED = object()


def _dotted_unit(unit) -> list[str] | None:
    """The names of an identifier or of an attribute chain of identifiers."""
    if unit.type == "identifier" or (unit.child_count == 0 and unit.type in ("print", "exec")):
        return [unit.text.decode("utf-8", "replace")]
    if unit.type == "attribute":
        obj, attribute = unit.child_by_field_name("object"), unit.child_by_field_name("attribute")
        if obj is None or attribute is None or attribute.type != "identifier":
            return None
        head = _dotted_unit(obj)
        return None if head is None else [*head, attribute.text.decode("utf-8", "replace")]
    return None


def _callee(units: _Units):
    """What stands before a ``(`` (the next units): its dotted name, `_NOT_DOTTED` for
    another callable expression, `_DEFINITION` for a ``def``/``class`` header, None
    for a bracket that is no call."""
    unit = units.peek()
    if unit is None:
        return None
    parts = _dotted_unit(unit)
    if parts is None:
        if unit.type in (")", "]", "string", "concatenated_string", "call", "subscript", "parenthesized_expression", "attribute"):
            return _NOT_DOTTED
        return None
    units.take()
    while (dot := units.peek()) is not None and dot.type == ".":
        units.take()
        before = units.peek()
        head = _dotted_unit(before) if before is not None else None
        if head is None:
            return _NOT_DOTTED
        units.take()
        parts = [*head, *parts]
    before = units.peek()
    if before is not None and before.type in ("def", "class"):
        return _DEFINITION
    return ".".join(parts)


def _keywords(paren, passed: list, limit: int) -> tuple[str, ...]:
    """The keyword names of the argument list that `paren` opens: from the tree when
    the list is closed, else from the units between it and the offset (`passed`,
    nearest first)."""
    arguments = paren.parent
    if arguments is not None and arguments.type == "argument_list" and arguments.children:
        close = arguments.children[-1]
        if close.type == ")" and not close.is_missing and close.start_byte >= limit:
            found = []
            for child in arguments.children:
                if child.type == "keyword_argument":
                    name = child.child_by_field_name("name")
                    if name is not None:
                        found.append(name.text.decode("utf-8", "replace"))
            return tuple(found)
    return _keywords_in(passed[::-1])


def _keywords_in(units: list) -> tuple[str, ...]:
    """``name=`` at the top level of an argument list's units (in order; lambdas'
    parameters are not keywords of the call)."""
    found: list[str] = []
    depth = 0
    in_lambda = False
    previous = None
    for index, unit in enumerate(units):
        kind = unit.type
        leaf = unit.child_count == 0
        if leaf and kind in ("(", "[", "{"):
            depth += 1
        elif leaf and kind in (")", "]", "}"):
            depth -= 1
        elif depth == 0:
            if leaf and kind == "lambda":
                in_lambda = True
            elif in_lambda and leaf and kind == ":":
                in_lambda = False
            elif not in_lambda and kind == "keyword_argument":
                name = unit.child_by_field_name("name")
                if name is not None:
                    found.append(name.text.decode("utf-8", "replace"))
            elif (
                not in_lambda
                and kind == "identifier"
                and (previous is None or previous.type == ",")
                and index + 1 < len(units)
                and units[index + 1].type == "="
            ):
                found.append(unit.text.decode("utf-8", "replace"))
        previous = unit
    return tuple(found)


def _line_start(text: str, line: int, start: int = 0) -> int | None:
    """The character offset where `line` lines after the line starting at `start`
    begins (lines at LSP breaks), or None past the last line.  A text with no ``\r``
    breaks only at ``\n``, found by `str.find` (a keystroke deep in a long file is
    thousands of lines from the start)."""
    if "\r" not in text:
        for _ in range(max(line, 0)):
            found = text.find("\n", start)
            if found < 0:
                return None
            start = found + 1
        return start
    for _ in range(max(line, 0)):
        found = _LINE_BREAK.search(text, start)
        if found is None:
            return None
        start = found.end()
    return start


def _offset(text: str, line: int, character: int, encoding: str, known: tuple[int, int] | None = None) -> int:
    """The character offset of an LSP position (lines at LSP breaks, `character` in
    `encoding` units), clamped to the line and the text.  `known`: (line, its start) of
    an earlier line, where counting may begin."""
    if known is not None and 0 <= known[0] <= line:
        start = _line_start(text, line - known[0], known[1])
    else:
        start = _line_start(text, line)
    if start is None:
        return len(text)
    found = _LINE_BREAK.search(text, start)
    content = text[start : found.start() if found else len(text)]
    if encoding == "utf-32":
        return start + min(max(character, 0), len(content))
    units = 0
    for index, char in enumerate(content):
        if units >= character:
            return start + index
        code = ord(char)
        if encoding == "utf-8":
            units += 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4
        else:
            units += 2 if code > 0xFFFF else 1
    return start + len(content)


def _differing_span(old: str, new: str) -> tuple[int, int]:
    """(start, end) in `old` of the span that `new` replaces: after their common prefix,
    before their common suffix (which does not overlap the prefix)."""
    limit = min(len(old), len(new))
    start = common_prefix_length(old, new, limit)
    end = _common_suffix(old, new, limit - start)
    return start, len(old) - end


def common_prefix_length(a: str | bytes, b: str | bytes, limit: int | None = None) -> int:
    """How many characters (bytes) `a` and `b` share from their start, at most `limit`."""
    low, high = 0, min(len(a), len(b)) if limit is None else limit  # binary search on slice equality (each compare runs in C)
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: str, b: str, limit: int) -> int:
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle : len(a) - low] == b[len(b) - middle : len(b) - low]:
            low = middle
        else:
            high = middle - 1
    return low


def _point(data: bytes, byte: int) -> tuple[int, int]:
    """tree-sitter's (row, column) of a byte offset: rows at ``\\n``, columns in bytes."""
    return data.count(b"\n", 0, byte), byte - (data.rfind(b"\n", 0, byte) + 1)


def _edit(tree, text: str, data: bytes, start: int, end: int, fragment: str) -> tuple[str, bytes, int, int]:
    """Replace characters [start, end) of `text` by `fragment`, telling `tree`; the
    new text, its bytes, and the start and new end of the edit in them."""
    start_byte = len(encode(text[:start]))
    old_end_byte = start_byte + len(encode(text[start:end]))
    inserted = encode(fragment)
    new_data = data[:start_byte] + inserted + data[old_end_byte:]
    new_end_byte = start_byte + len(inserted)
    tree.edit(
        start_byte=start_byte,
        old_end_byte=old_end_byte,
        new_end_byte=new_end_byte,
        start_point=_point(data, start_byte),
        old_end_point=_point(data, old_end_byte),
        new_end_point=_point(new_data, new_end_byte),
    )
    return text[:start] + fragment + text[end:], new_data, start_byte, new_end_byte


# -- analyses by text -------------------------------------------------------------------------
_BY_TEXT: OrderedDict[str, DocumentAnalysis] = OrderedDict()
_BY_TEXT_LOCK = threading.Lock()


def analysis_of(text: str, given: DocumentAnalysis | None = None) -> DocumentAnalysis:
    """The analysis of `text`: `given` when it is of `text` (a caller's, carried), else
    one kept by text, else reached from the last one kept by one edit (`with_text`;
    typing in one document costs an incremental parse)."""
    if given is not None and given.text == text:
        return given
    with _BY_TEXT_LOCK:
        found = _BY_TEXT.get(text)
        if found is not None:
            _BY_TEXT.move_to_end(text)
            return found
        last = next(reversed(_BY_TEXT.values()), None)
    analysis = last.with_text(text) if last is not None else DocumentAnalysis.parse(text)
    remember(analysis)
    return analysis


def remember(analysis: DocumentAnalysis) -> None:
    """Keep `analysis` for `analysis_of` its text (the server's open documents give it
    theirs, so a reader that has only the text finds it)."""
    with _BY_TEXT_LOCK:
        _BY_TEXT[analysis.text] = analysis
        _BY_TEXT.move_to_end(analysis.text)
        while len(_BY_TEXT) > _BY_TEXT_SIZE:
            _BY_TEXT.popitem(last=False)


def _indentation(line: str) -> int:
    """The width of a line's leading blanks (a tab counts as one: Python rejects a mix
    that would make the two counts disagree)."""
    return len(line) - len(line.lstrip(" \t"))
