"""Import learning: which names a document binds to which modules.

`learn_roots(document)` reads the document's import statements with tree-sitter-python
(syntax errors tolerated, relative and wildcard imports ignored) and returns
alias -> module path (`import numpy as np` -> {"np": ("numpy",)}); `imported_modules`
gives every dotted module path the statements name (``import sympy.physics.quantum`` ->
``("sympy", "physics", "quantum")``: after it, ``sympy.physics`` exists at run time even
where ``sympy/__init__`` never imports it).  The answers come from the document's
`DocumentAnalysis` (`apis.document`): a caller may pass one, a caller with only the
text gets the one kept for that text (reached from the last text by an incremental
parse, so typing costs little).
"""

from __future__ import annotations

import logging

from adaptrack_lsp.apis.document import PARSE_LOCK, DocumentAnalysis, analysis_of
from adaptrack_lsp.apis.document import parser as _parser

__all__ = ["PARSE_LOCK", "_parser", "ambiguous_roots", "document_roots", "imported_modules", "learn_roots"]


def _analysis(document: str | DocumentAnalysis) -> DocumentAnalysis | None:
    if isinstance(document, DocumentAnalysis):
        return document
    return analysis_of(document) if document else None


def learn_roots(document: str | DocumentAnalysis) -> dict[str, tuple[str, ...]]:
    """Alias -> module path bound by the document's imports.

    ``import a.b as c`` binds c -> (a, b); ``import a.b`` binds a -> (a,); ``from a
    import b [as c]`` binds b (or c) -> (a, b).  Relative and wildcard imports are
    ignored; syntax errors are tolerated (tree-sitter recovers).  Later imports win.
    """
    analysis = _analysis(document)
    return analysis.roots if analysis is not None else {}


def ambiguous_roots(document: str | DocumentAnalysis) -> frozenset[str]:
    """The names the document's imports bind to more than one module path
    (``try: from lxml import etree`` / ``except ImportError: import
    xml.etree.ElementTree as etree``): which one a use means depends on what is
    installed, so checks of existing code leave them alone."""
    analysis = _analysis(document)
    return analysis.ambiguous if analysis is not None else frozenset()


def imported_modules(document: str | DocumentAnalysis) -> frozenset[tuple[str, ...]]:
    """The dotted module paths the document's import statements name: ``import a.b.c``
    and ``import a.b.c as d`` -> (a, b, c); ``from a.b import c`` -> (a, b)."""
    analysis = _analysis(document)
    return analysis.modules if analysis is not None else frozenset()


def document_roots(text: str | DocumentAnalysis) -> dict[str, tuple[str, ...]]:
    """`learn_roots` that never raises (a document whose imports cannot be read binds none)."""
    try:
        return learn_roots(text)
    except Exception:
        logging.getLogger(__name__).debug("could not read the document's imports", exc_info=True)
        return {}
