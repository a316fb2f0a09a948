"""The Python syntax constraint end to end: a server process (real protocol, service and
decoders) whose exact tabular model prefers ghost text with one closing bracket too many
(`tabular_server.py`).  With `syntaxConstraint` off that text is offered; with it on,
neither ghost text nor the completion list offers it; a syntax error before the cursor
turns the check off for that request and the status says why."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_support import initialize_until_ready, make_client, server_env

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = [sys.executable, str(Path(__file__).resolve().parent / "tabular_server.py")]
SETTINGS = {"model": "tabular", "maxNewTokens": 4, "numSamples": 12, "timeoutMs": 60000}


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=SERVER, server_env=server_env(), client_factory=make_client),
)
async def client(lsp_client: LanguageClient):
    await initialize_until_ready(lsp_client, SETTINGS)
    yield
    await lsp_client.shutdown_session()


def configure(client: LanguageClient, **settings) -> None:
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"adaptrack": {**SETTINGS, **settings}})
    )


def open_document(client: LanguageClient, uri: str, text: str) -> types.Position:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )
    lines = text.split("\n")
    return types.Position(len(lines) - 1, len(lines[-1]))


async def ghost_text(client: LanguageClient, uri: str, position: types.Position) -> list[str]:
    answer = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
            text_document=types.TextDocumentIdentifier(uri),
            position=position,
        )
    )
    return [item.insert_text for item in answer.items]


async def completion_list(client: LanguageClient, uri: str, position: types.Position) -> list[str]:
    answer = await client.text_document_completion_async(
        types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri),
            position=position,
            context=types.CompletionContext(trigger_kind=types.CompletionTriggerKind.Invoked),
        )
    )
    return [item.text_edit.new_text for item in answer.items]


async def test_an_unbalanced_bracket_is_not_offered_with_the_syntax_constraint(client: LanguageClient):
    uri = "file:///workspace/unbalanced.py"
    cursor = open_document(client, uri, "x = foo(a ")
    configure(client, syntaxConstraint=False)
    await asyncio.sleep(0.2)
    assert await ghost_text(client, uri, cursor) == ["))"]  # the model's favourite
    assert "))" in await completion_list(client, uri, cursor)
    configure(client, syntaxConstraint=True)
    await asyncio.sleep(0.2)
    assert await ghost_text(client, uri, cursor) == [")"]
    offered = await completion_list(client, uri, cursor)
    assert offered and all(text.count(")") <= 1 for text in offered), offered


async def test_a_syntax_error_before_the_cursor_turns_the_check_off_and_the_status_says_why(client: LanguageClient):
    uri = "file:///workspace/broken.py"
    cursor = open_document(client, uri, "x = )\ny = foo(a ")
    configure(client, syntaxConstraint=True)
    await asyncio.sleep(0.2)
    assert await ghost_text(client, uri, cursor) == ["))"]  # not checked: the prefix is already broken
    deadline = time.monotonic() + 10
    while not any("syntax check off for this request" in message for _, message in client.statuses):
        assert time.monotonic() < deadline, client.statuses
        await asyncio.sleep(0.05)
    message = next(message for _, message in client.statuses if "syntax check off" in message)
    assert "syntax error before the cursor (line 1): ')' closes no open bracket" in message
