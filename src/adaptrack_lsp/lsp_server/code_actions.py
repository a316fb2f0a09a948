"""`textDocument/codeAction`: "Rewrite with a version-correct API" quick fixes for the
checker's diagnostics (docs/check.md, "Quick fixes").

For each diagnostic of source ``adaptrack`` in the request's context whose ``data`` names
the finding (``kind``, ``name``, ``path``, ``member``, ``start`` and ``end`` as character
offsets, ``version``: the document version it was computed on), the replacements come
from `checking.fixes.Suggester` with the server's loaded model (setting ``model``), the
``adaptrack`` decoder and the index completions use: decoding runs on the service's
model thread, the check of each candidate on a worker thread, never on the event loop.
A cancelled request stops decoding between LM calls.  Each replacement is one action
(kind ``quickfix``, the first preferred) whose edit replaces the offending expression.
Answers are kept per document version and finding, so a client asking again (as editors
do when the cursor moves) gets them at once.  A diagnostic computed on another version
of the document, or whose offsets no longer hold its name, gets none.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from typing import Any

from lsprotocol import types

logger = logging.getLogger(__name__)

__all__ = ["ACTION_TITLE", "register_code_actions"]

ACTION_TITLE = "Rewrite with a version-correct API"
#: the diagnostics' source this module fixes
DIAGNOSTIC_SOURCE = "adaptrack"
#: finding kinds a rewrite is decoded for
FIXABLE_KINDS = frozenset({"import", "attribute", "receiver", "keyword", "deprecated"})
#: answers kept (document version and finding -> replacements), least recently used out
CACHE_SIZE = 128
#: longest wait on the model thread for API members a decode meets (each round), in seconds
INDEX_WAIT_S = 10.0


def finding_from_data(text: str, data: Any):
    """The `checker.Finding` a diagnostic's ``data`` names in `text`, or None when the
    data is not a finding's or its range does not hold the member it names."""
    from adaptrack_lsp.checking.checker import Finding
    from adaptrack_lsp.checking.fixes import position

    if not isinstance(data, dict) or data.get("kind") not in FIXABLE_KINDS:
        return None
    start, end = data.get("start"), data.get("end")
    if not isinstance(start, int) or not isinstance(end, int) or isinstance(start, bool) or isinstance(end, bool):
        return None
    if not 0 <= start < end <= len(text):
        return None
    member = data.get("member") or ""
    if member and data["kind"] != "import" and text[start:end] != member:
        return None  # the document moved under the diagnostic
    first, last = position(text, start), position(text, end)
    path = data.get("path") or ()
    return Finding(
        kind=data["kind"],
        name=str(data.get("name") or text[start:end]),
        message="",
        start=start,
        end=end,
        line=first["line"],
        column=first["column"],
        end_line=last["line"],
        end_column=last["column"],
        path=tuple(str(part) for part in path) if isinstance(path, (list, tuple)) else (),
        member=str(member),
        deprecated=data["kind"] == "deprecated",
    )


def _wants_quick_fixes(params: types.CodeActionParams) -> bool:
    only = params.context.only
    return not only or any(kind == types.CodeActionKind.QuickFix or str(kind).startswith("quickfix") for kind in only)


def _document_changes(server) -> bool:
    try:
        return bool(server.client_capabilities.workspace.workspace_edit.document_changes)
    except AttributeError:
        return False


class QuickFixes:
    """Computes and keeps the quick fixes of one server."""

    def __init__(self, server):
        self.server = server
        self._answers: collections.OrderedDict[tuple, list[tuple[int, int, str]]] = collections.OrderedDict()

    async def actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        from urllib.parse import unquote

        server = self.server
        service = server.service
        if not _wants_quick_fixes(params) or service is None or not service.ready:
            return []
        uri = params.text_document.uri
        document = server.workspace.text_documents.get(unquote(uri))
        if document is None:
            return []
        text = document.source
        actions: list[types.CodeAction] = []
        for diagnostic in params.context.diagnostics:
            if diagnostic.source != DIAGNOSTIC_SOURCE:
                continue
            data = diagnostic.data
            version = data.get("version") if isinstance(data, dict) else None
            if version is not None and document.version is not None and version != document.version:
                continue
            finding = finding_from_data(text, data)
            if finding is None:
                continue
            key = (unquote(uri), document.version, text if document.version is None else None, finding.kind, finding.name, finding.start, finding.end)
            edits = self._answers.get(key)
            if edits is None:
                edits = await self.compute(text, finding, unquote(uri))
                self._answers[key] = edits
                while len(self._answers) > CACHE_SIZE:
                    self._answers.popitem(last=False)
            else:
                self._answers.move_to_end(key)
            for rank, (start, end, replacement) in enumerate(edits):
                edit_range = types.Range(
                    start=document.client_position_at_offset(start), end=document.client_position_at_offset(end)
                )
                text_edit = types.TextEdit(range=edit_range, new_text=replacement)
                if _document_changes(server):
                    identifier = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=document.version)
                    edit = types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=identifier, edits=[text_edit])])
                else:
                    edit = types.WorkspaceEdit(changes={uri: [text_edit]})
                actions.append(
                    types.CodeAction(
                        title=f"{ACTION_TITLE}: {replacement}",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        is_preferred=rank == 0,
                        edit=edit,
                    )
                )
        return actions

    async def compute(self, text: str, finding, uri: str) -> list[tuple[int, int, str]]:
        """(start, end, replacement) of each quick fix for `finding`: decoded on the model
        thread, checked on a worker thread.  Cancellation stops both."""
        from adaptrack_lsp.checking.fixes import Suggester, fix_target
        from adaptrack_lsp.completion.request import modules_beside

        server = self.server
        service = server.service
        target = await asyncio.to_thread(fix_target, text, finding)
        if target is None:
            return []
        suggester = Suggester(server.settings, service.constraints, host=service.host, index_wait_s=INDEX_WAIT_S)
        cancel = threading.Event()
        try:
            proposals = await asyncio.wrap_future(
                service.host.submit(lambda: suggester.decode(text, target, uri, cancelled=cancel.is_set))
            )
            if not proposals:
                return []
            accepted = await asyncio.to_thread(
                suggester.accept, text, target, proposals, local_modules=modules_beside(uri), cancelled=cancel.is_set
            )
        except asyncio.CancelledError:
            cancel.set()
            raise
        return [(target.start, target.end, replacement) for replacement in accepted]


def register_code_actions(server) -> None:
    """Register the ``textDocument/codeAction`` handler (quick fixes) on `server`."""
    fixes = QuickFixes(server)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
    )
    async def code_action(ls, params: types.CodeActionParams):
        try:
            return await fixes.actions(params)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("code actions failed")
            return []
