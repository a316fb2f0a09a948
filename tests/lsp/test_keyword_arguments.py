"""Keyword names over LSP (tiny model, a snapshot of the installed numpy with its
signatures): completion lists after "(" and ", " offer the call's keyword names, kind
Variable, never a removed one; the typed word filters them; `keywordArguments: false`
turns them off; the server advertises "(" and "," as trigger characters."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from test_server import configure, open_document, wait_ready

from lsp_support import SERVER_COMMAND, initialize_with_numpy_snapshot, make_client, server_env

pytestmark = pytest.mark.asyncio(loop_scope="module")

SETTINGS = {"model": "tiny", "maxNewTokens": 6, "numSamples": 4, "timeoutMs": 120000}
DOCUMENT = "import numpy as np\ncounts, edges = np.histogram(values, "


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=SERVER_COMMAND, server_env=server_env(), client_factory=make_client),
)
async def client(lsp_client: LanguageClient, tmp_path_factory):
    lsp_client.init_result = await initialize_with_numpy_snapshot(lsp_client, tmp_path_factory, SETTINGS)
    yield
    await lsp_client.shutdown_session()


async def listed(client: LanguageClient, uri: str, text: str, trigger: str | None = "("):
    open_document(client, uri, text)
    lines = text.split("\n")
    context = (
        types.CompletionContext(trigger_kind=types.CompletionTriggerKind.TriggerCharacter, trigger_character=trigger)
        if trigger
        else types.CompletionContext(trigger_kind=types.CompletionTriggerKind.Invoked)
    )
    return await client.text_document_completion_async(
        types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri),
            position=types.Position(len(lines) - 1, len(lines[-1])),
            context=context,
        )
    )


def keyword_items(result) -> list[types.CompletionItem]:
    return [item for item in result.items if item.kind == types.CompletionItemKind.Variable]


async def test_trigger_characters(client: LanguageClient):
    assert list(client.init_result.capabilities.completion_provider.trigger_characters) == [".", "(", ","]


async def test_the_list_offers_the_installed_keyword_names(client: LanguageClient):
    await wait_ready(client)
    result = await listed(client, "file:///workspace/kw1.py", DOCUMENT, trigger=None)
    names = [item.label for item in keyword_items(result)]
    # numpy.histogram(a, bins, range, density, weights): `a` is given by position
    assert sorted(names) == ["bins=", "density=", "range=", "weights="]
    assert all("numpy" in item.detail and item.text_edit.new_text == item.label for item in keyword_items(result))
    assert not any("normed=" in item.label for item in result.items)
    ranked = [item.data["logprob"] for item in keyword_items(result) if item.data["logprob"] is not None]
    assert ranked and ranked == sorted(ranked, reverse=True)


async def test_the_typed_word_filters_and_given_keywords_leave(client: LanguageClient):
    await wait_ready(client)
    typed = await listed(client, "file:///workspace/kw2.py", DOCUMENT + "dens", trigger=None)
    assert [item.label for item in keyword_items(typed)] == ["density="]
    assert keyword_items(typed)[0].text_edit.range.start.character == len("counts, edges = np.histogram(values, ")
    given = await listed(client, "file:///workspace/kw3.py", DOCUMENT + "density=True,", trigger=",")
    assert sorted(item.label for item in keyword_items(given)) == [" bins=", " range=", " weights="]
    removed = await listed(client, "file:///workspace/kw4.py", DOCUMENT + "norm", trigger=None)
    assert not keyword_items(removed)  # normed= is gone: nothing starting with "norm" is a keyword


async def test_the_setting_turns_keyword_names_off(client: LanguageClient):
    await wait_ready(client)
    configure(client, **SETTINGS, keywordArguments=False)
    try:
        result = await listed(client, "file:///workspace/kw5.py", DOCUMENT, trigger="(")
        assert not keyword_items(result)
    finally:
        configure(client, **SETTINGS, keywordArguments=True)
