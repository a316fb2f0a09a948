"""Open documents split lines at LSP line breaks only (\\n, \\r\\n, \\r)."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.workspace import TextDocument, Workspace

from adaptrack_lsp.lsp_server.documents import LspTextDocument, LspWorkspace, lsp_lines

ODD = ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]


@pytest.mark.parametrize("separator", ODD)
def test_only_lsp_line_breaks_end_lines(separator):
    text = f"a = '{separator}'\r\nb\rc\nlast"
    assert lsp_lines(text) == [f"a = '{separator}'\r\n", "b\r", "c\n", "last"]
    assert lsp_lines("") == [] and lsp_lines("x\n") == ["x\n"]


@pytest.mark.parametrize("separator", ODD)
def test_positions_and_incremental_edits_after_odd_separators(separator):
    source = f"s = '{separator}'\nimport os\nx = os.pat\n"
    document = LspTextDocument("file:///a.py", source)
    assert len(document.lines) == 3
    position = types.Position(line=2, character=7)
    assert source[document.offset_at_position(position):].startswith("pat")
    assert document.client_position_at_offset(source.index("pat")) == position
    document.apply_change(
        types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=2, character=0), end=types.Position(line=2, character=1)), text="y"
        )
    )
    assert document.source == f"s = '{separator}'\nimport os\ny = os.pat\n"
    # pygls' own document splits at the separator: the same edit lands elsewhere
    plain = TextDocument("file:///a.py", source)
    plain.apply_change(
        types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=2, character=0), end=types.Position(line=2, character=1)), text="y"
        )
    )
    assert plain.source != document.source


def test_adopted_workspace_creates_lsp_documents():
    workspace = LspWorkspace.adopt(Workspace(None))
    workspace.put_text_document(types.TextDocumentItem(uri="file:///b.py", language_id="python", version=1, text="a\u2028b\nc"))
    document = workspace.get_text_document("file:///b.py")
    assert isinstance(document, LspTextDocument) and document.lines == ("a\u2028b\n", "c")
