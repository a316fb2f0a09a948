"""Open documents with LSP line breaks.

The LSP specification counts lines at ``\\n``, ``\\r\\n`` and ``\\r`` only.  pygls'
`TextDocument` splits with `str.splitlines`, which also breaks at U+2028, U+2029, U+0085,
``\\x0b``, ``\\x0c`` and ``\\x1c``-``\\x1e``: a document holding one of them in an earlier
line has every later position off by a line, and incremental edits land on the wrong
line.  `LspTextDocument` splits the LSP way; everything of pygls' that maps positions
(offsets, incremental changes, UTF-16 conversion) goes through `lines`, so overriding it
is enough.  `LspWorkspace.adopt` makes a pygls workspace create such documents.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pygls.workspace import TextDocument, Workspace

_LSP_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def lsp_lines(text: str) -> list[str]:
    """`text` split after each LSP line break, the breaks kept (like ``splitlines(True)``)."""
    return _LSP_LINE.findall(text)


class LspTextDocument(TextDocument):
    """A pygls text document whose lines end at LSP line breaks only."""

    @property
    def lines(self) -> Sequence[str]:
        return tuple(lsp_lines(self.source))


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
