"""Open documents with LSP line breaks.

The LSP specification counts lines at ``\\n``, ``\\r\\n`` and ``\\r`` only.  pygls'
`TextDocument` splits with `str.splitlines`, which also breaks at U+2028, U+2029, U+0085,
``\\x0b``, ``\\x0c`` and ``\\x1c``-``\\x1e``: a document holding one of them in an earlier
line has every later position off by a line, and incremental edits land on the wrong
line.  `LspTextDocument` splits the LSP way; everything of pygls' that maps positions
(offsets, incremental changes, UTF-16 conversion) goes through `lines`, so overriding it
is enough.  `LspWorkspace.adopt` makes a pygls workspace create such documents.

`DocumentAnalyses` keeps the syntax analysis of each open document
(`apis.document.DocumentAnalysis`), edited incrementally with its changes.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence

from pygls.workspace import TextDocument, Workspace

from adaptrack_lsp.apis.document import DocumentAnalysis, remember

_LSP_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def lsp_lines(text: str) -> list[str]:
    """`text` split after each LSP line break, the breaks kept (like ``splitlines(True)``)."""
    return _LSP_LINE.findall(text)


class LspTextDocument(TextDocument):
    """A pygls text document whose lines end at LSP line breaks only (split once per
    text: a request maps positions several times)."""

    _split: tuple[str, tuple[str, ...]] | None = None

    @property
    def lines(self) -> Sequence[str]:
        source = self.source
        split = self._split
        if split is None or split[0] is not source:
            split = self._split = (source, tuple(lsp_lines(source)))
        return split[1]


class LspWorkspace(Workspace):
    """A pygls workspace whose text documents are `LspTextDocument`s."""

    def _create_text_document(self, doc_uri, source=None, version=None, language_id=None) -> TextDocument:
        return LspTextDocument(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self._position_codec,
        )

    @classmethod
    def adopt(cls, workspace: Workspace) -> Workspace:
        """Make `workspace` (created by pygls at `initialize`, before any document is
        open) an `LspWorkspace`; its state is untouched."""
        if not isinstance(workspace, cls) and type(workspace) is Workspace:
            workspace.__class__ = cls
        return workspace


class DocumentAnalyses:
    """One `DocumentAnalysis` per open document, edited with the document's changes.

    `opened` parses, `changed` applies the notification's content changes to the tree
    (incremental parse), `closed` drops it.  `analysis(uri, text)` never answers for
    another text: when the kept analysis is not of `text` (a change it missed, a race)
    it is brought to `text` by one edit.  Each analysis is also kept by text
    (`apis.document.remember`), so readers that have only the document's text (the
    import learning of the warm-up and of requests) find it instead of parsing again.
    """

    def __init__(self):
        self._by_uri: dict[str, DocumentAnalysis] = {}
        self._lock = threading.Lock()

    def opened(self, uri: str, text: str) -> DocumentAnalysis:
        return self._keep(uri, DocumentAnalysis.parse(text))

    def changed(self, uri: str, changes: Sequence, text: str, encoding: str = "utf-16") -> DocumentAnalysis:
        """Apply `changes` (the didChange content changes, in order) to the analysis of
        `uri`; `text` is the document's text after them (the workspace's), which the
        result is checked against."""
        with self._lock:
            previous = self._by_uri.get(uri)
        if previous is None:
            return self._keep(uri, DocumentAnalysis.parse(text))
        analysis = previous.edited(changes, encoding)
        if analysis.text != text:  # positions read differently (out of range, split characters)
            analysis = previous.with_text(text)
        return self._keep(uri, analysis)

    def closed(self, uri: str) -> None:
        with self._lock:
            self._by_uri.pop(uri, None)

    def analysis(self, uri: str, text: str) -> DocumentAnalysis:
        """The analysis of the open document `uri` as its text is `text`."""
        with self._lock:
            kept = self._by_uri.get(uri)
        if kept is not None and kept.text == text:
            return kept
        analysis = kept.with_text(text) if kept is not None else DocumentAnalysis.parse(text)
        remember(analysis)  # the document's own entry follows its notifications only
        return analysis

    def _keep(self, uri: str, analysis: DocumentAnalysis) -> DocumentAnalysis:
        with self._lock:
            self._by_uri[uri] = analysis
        remember(analysis)
        return analysis
