"""Import learning: which names a document binds to which modules.

`learn_roots(document)` reads the document's import statements with tree-sitter-python
(syntax errors tolerated, relative and wildcard imports ignored) and returns
alias -> module path (`import numpy as np` -> {"np": ("numpy",)}); `imported_modules`
gives every dotted module path the statements name (``import sympy.physics.quantum`` ->
``("sympy", "physics", "quantum")``: after it, ``sympy.physics`` exists at run time even
where ``sympy/__init__`` never imports it).  Results are cached by the document's import
lines, so typing elsewhere costs nothing.
"""

from __future__ import annotations

import logging
import re
import threading

_PARSER = None
_IMPORT_QUERY = None
#: one parse at a time through the shared parser (the completion path and the
#: diagnostics thread both parse documents)
PARSE_LOCK = threading.RLock()
#: the lines that can belong to an import statement (its continuation lines included)
_IMPORT_LINE = re.compile(r"^[ \t]*(?:import|from)\b[^\n(\\]*(?:\([^)]*\)|\\\n[^\n]*)*[^\n]*", re.MULTILINE)
_ROOTS_CACHE: dict[tuple, tuple[dict[str, tuple[str, ...]], frozenset[tuple[str, ...]], frozenset[str]]] = {}
_ROOTS_CACHE_SIZE = 16


def _parser():
    global _PARSER, _IMPORT_QUERY
    if _PARSER is None:
        import tree_sitter_python
        from tree_sitter import Language, Parser, Query

        language = Language(tree_sitter_python.language())
        _IMPORT_QUERY = Query(language, "[(import_statement) (import_from_statement)] @import")
        _PARSER = Parser(language)
    return _PARSER


def _import_statements(tree) -> list:
    """Every import statement of a parse tree (any depth), in source order."""
    from tree_sitter import QueryCursor

    captures = QueryCursor(_IMPORT_QUERY).captures(tree.root_node)
    return sorted(captures.get("import", []), key=lambda node: node.start_byte)


def _dotted(node) -> tuple[str, ...]:
    return tuple(
        child.text.decode("utf-8", "replace")
        for child in node.children
        if child.type == "identifier"
    )


def learn_roots(document: str) -> dict[str, tuple[str, ...]]:
    """Alias -> module path bound by the document's imports.

    ``import a.b as c`` binds c -> (a, b); ``import a.b`` binds a -> (a,); ``from a
    import b [as c]`` binds b (or c) -> (a, b).  Relative and wildcard imports are
    ignored; syntax errors are tolerated (tree-sitter recovers).  Later imports win.
    """
    return dict(_read(document)[0])


def ambiguous_roots(document: str) -> frozenset[str]:
    """The names the document's imports bind to more than one module path
    (``try: from lxml import etree`` / ``except ImportError: import
    xml.etree.ElementTree as etree``): which one a use means depends on what is
    installed, so checks of existing code leave them alone."""
    return _read(document)[2]


def imported_modules(document: str) -> frozenset[tuple[str, ...]]:
    """The dotted module paths the document's import statements name: ``import a.b.c``
    and ``import a.b.c as d`` -> (a, b, c); ``from a.b import c`` -> (a, b)."""
    return _read(document)[1]


def _read(document: str) -> tuple[dict[str, tuple[str, ...]], frozenset[tuple[str, ...]], frozenset[str]]:
    if not document:
        return {}, frozenset(), frozenset()
    # Typing rarely touches the imports: the parse is redone only when the lines that
    # can hold an import (or the string delimiters that decide what is code) change.
    key = (
        tuple(match.group(0) for match in _IMPORT_LINE.finditer(document)),
        document.count('"""'),
        document.count("'''"),
    )
    cached = _ROOTS_CACHE.get(key)
    if cached is None:
        cached = _learn_roots_uncached(document)
        if len(_ROOTS_CACHE) >= _ROOTS_CACHE_SIZE:
            _ROOTS_CACHE.pop(next(iter(_ROOTS_CACHE)))
        _ROOTS_CACHE[key] = cached
    return cached


class _Bindings(dict):
    """alias -> path, remembering every path each alias was bound to."""

    def __init__(self):
        super().__init__()
        self.paths: dict[str, set[tuple[str, ...]]] = {}

    def __setitem__(self, alias, path):
        self.paths.setdefault(alias, set()).add(tuple(path))
        super().__setitem__(alias, path)


def _learn_roots_uncached(document: str) -> tuple[dict[str, tuple[str, ...]], frozenset[tuple[str, ...]], frozenset[str]]:
    roots: dict[str, tuple[str, ...]] = _Bindings()
    modules: set[tuple[str, ...]] = set()
    with PARSE_LOCK:
        tree = _parser().parse(document.encode("utf-8", "surrogatepass"))
    for node in _import_statements(tree):
        if node.type == "import_statement":
            for child in node.children_by_field_name("name"):
                if child.type == "aliased_import":
                    name, alias = (
                        child.child_by_field_name("name"),
                        child.child_by_field_name("alias"),
                    )
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
        if node.type == "import_from_statement":
            module = node.child_by_field_name("module_name")
            if module is None or module.type != "dotted_name":
                continue  # relative import (or broken statement)
            base = _dotted(module)
            if not base:
                continue
            modules.add(base)
            for child in node.children_by_field_name("name"):
                if child.type == "aliased_import":
                    name, alias = (
                        child.child_by_field_name("name"),
                        child.child_by_field_name("alias"),
                    )
                    if name is not None and alias is not None and _dotted(name):
                        roots[alias.text.decode("utf-8", "replace")] = base + _dotted(
                            name
                        )
                elif child.type == "dotted_name":
                    parts = _dotted(child)
                    if len(parts) == 1:
                        roots[parts[0]] = base + parts
    # statements come in source order, so later imports overwrite earlier ones
    ambiguous = frozenset(alias for alias, paths in roots.paths.items() if len(paths) > 1)
    return {alias: path for alias, path in roots.items() if alias.isidentifier()}, frozenset(modules), ambiguous


def document_roots(text: str) -> dict[str, tuple[str, ...]]:
    """`learn_roots` that never raises (a document whose imports cannot be read binds none)."""
    try:
        return learn_roots(text)
    except Exception:
        logging.getLogger(__name__).debug("could not read the document's imports", exc_info=True)
        return {}
