"""Quick fixes over the protocol: ``textDocument/codeAction`` for a version diagnostic,
against a server process whose model is the exact tabular model of the quick-fix tests
and whose API index is their ``mylib`` snapshot (`fix_server.py`,
`tests/unit/fix_support.py`), so the edit is known exactly."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_support import initialize_until_ready, make_client, server_env

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from fix_support import MEMBERS, NAMES, TOKENS, distribution  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = [sys.executable, str(Path(__file__).resolve().parent / "fix_server.py")]
SETTINGS = {"model": "tabular", "timeoutMs": 60000}
DOCUMENT = "import mylib as ml\nv = 2\nx = ml.product(v) * 2\n"
URI = "file:///tmp/adaptrack-fixes/old.py"


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=SERVER, server_env=server_env(), client_factory=make_client),
)
async def client(lsp_client: LanguageClient):
    await initialize_until_ready(lsp_client, SETTINGS)
    lsp_client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=URI, language_id="python", version=3, text=DOCUMENT))
    )
    yield
    await lsp_client.shutdown_session()


def diagnostic(version: int = 3, source: str = "adaptrack") -> types.Diagnostic:
    """The diagnostic of ``ml.product`` as the server's diagnostics describe it."""
    start = DOCUMENT.index("product")
    line = DOCUMENT.split("\n")[2]
    column = line.index("product")
    return types.Diagnostic(
        range=types.Range(types.Position(2, column), types.Position(2, column + len("product"))),
        message="ml.product does not exist in mylib 2.0",
        source=source,
        data={
            "kind": "attribute",
            "name": "ml.product",
            "path": ["mylib"],
            "member": "product",
            "start": start,
            "end": start + len("product"),
            "version": version,
        },
    )


async def code_actions(client: LanguageClient, diagnostics: list[types.Diagnostic], only=None):
    line = DOCUMENT.split("\n")[2]
    return await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(URI),
            range=types.Range(types.Position(2, line.index("product")), types.Position(2, line.index("product"))),
            context=types.CodeActionContext(diagnostics=diagnostics, only=only),
        )
    )


def expected_first() -> str:
    """The server's fix: the model mixed with the copy of ``ml.product`` (weight 0.5;
    after ``ml.`` the copy proposes prod and product, 16 : 49), best valid member first."""
    probs = distribution(MEMBERS)
    members = {name.split(".", 1)[1] for name in NAMES}
    copy = {"prod": 16 / 65, "product": 49 / 65}
    mixed = {token: 0.5 * float(probs[i]) + 0.5 * copy.get(token, 0.0) for i, token in enumerate(TOKENS) if token in members}
    return f"ml.{max(mixed, key=mixed.get)}(v)"


async def test_a_version_diagnostic_gets_a_rewrite_whose_edit_replaces_the_call(client: LanguageClient):
    actions = await code_actions(client, [diagnostic()], only=[types.CodeActionKind.QuickFix])
    assert actions, "no quick fix"
    first = actions[0]
    assert first.kind == types.CodeActionKind.QuickFix and first.is_preferred
    assert first.title == f"Rewrite with a version-correct API: {expected_first()}"
    assert first.diagnostics and first.diagnostics[0].data["name"] == "ml.product"
    line = DOCUMENT.split("\n")[2]
    column = line.index("ml.product(v)")
    (edit,) = first.edit.changes[URI]
    assert edit.new_text == expected_first() == "ml.prod(v)"
    assert edit.range == types.Range(types.Position(2, column), types.Position(2, column + len("ml.product(v)")))
    assert len(actions) <= 3 and not any(action.is_preferred for action in actions[1:])
    assert all(action.edit.changes[URI][0].range == edit.range for action in actions)
    # asked again (as an editor does when the cursor moves), the same answer
    again = await code_actions(client, [diagnostic()])
    assert [a.title for a in again] == [a.title for a in actions]


async def test_no_rewrite_for_another_source_a_stale_version_or_another_kind_asked(client: LanguageClient):
    assert not await code_actions(client, [diagnostic(source="pyright")])
    assert not await code_actions(client, [diagnostic(version=2)])  # computed on an older document
    assert not await code_actions(client, [diagnostic()], only=[types.CodeActionKind.Refactor])
    moved = diagnostic()
    moved.data = {**moved.data, "start": moved.data["start"] - 3, "end": moved.data["end"] - 3}
    assert not await code_actions(client, [moved])  # the offsets no longer hold "product"
    assert await code_actions(client, [diagnostic()])  # the same diagnostic as it is gets its rewrite
