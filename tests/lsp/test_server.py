"""The language server over stdio with the built-in tiny model (pytest-lsp).

One server process serves the whole module (loading the model takes seconds).  Validity
comes from a snapshot of the *installed* numpy (`apiSnapshot`), which is fast and
deterministic; the live jedi environment path is covered by the slow test at the end.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_support import SERVER_COMMAND, initialize_with_numpy_snapshot, make_client, numpy_public_names, server_env

pytestmark = pytest.mark.asyncio(loop_scope="module")

URI = "file:///workspace/example.py"
NUMPY_DOC = "import numpy as np\nx = np."
BASE_SETTINGS = {"model": "tiny", "maxNewTokens": 6, "numSamples": 4, "timeoutMs": 120000}


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=SERVER_COMMAND, server_env=server_env(), client_factory=make_client),
)
async def client(lsp_client: LanguageClient, tmp_path_factory):
    lsp_client.init_result = await initialize_with_numpy_snapshot(lsp_client, tmp_path_factory, BASE_SETTINGS)
    yield
    await lsp_client.shutdown_session()


async def wait_ready(client: LanguageClient, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [state for state, _ in client.statuses]
        if "ready" in states:
            return
        if "error" in states:
            raise AssertionError(f"model failed to load: {client.statuses}")
        await asyncio.sleep(0.1)
    raise AssertionError(f"model not ready after {timeout} s: {client.statuses}")


def configure(client: LanguageClient, **settings) -> None:
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"adaptrack": settings}))


def open_document(client: LanguageClient, uri: str, text: str) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )


async def inline(client: LanguageClient, uri: str, line: int, character: int):
    return await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
            text_document=types.TextDocumentIdentifier(uri),
            position=types.Position(line, character),
        )
    )


async def completion(client: LanguageClient, uri: str, line: int, character: int):
    return await client.text_document_completion_async(
        types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri),
            position=types.Position(line, character),
            context=types.CompletionContext(trigger_kind=types.CompletionTriggerKind.TriggerCharacter, trigger_character="."),
        )
    )


def leading_name(text: str) -> str:
    return re.match(r"\w*", text).group(0)


async def test_advertised_capabilities(client: LanguageClient):
    capabilities = client.init_result.capabilities
    assert capabilities.inline_completion_provider is True
    assert capabilities.completion_provider is not None
    assert list(capabilities.completion_provider.trigger_characters) == [".", "(", ","]
    assert client.init_result.server_info.name == "adaptrack-lsp"


async def test_model_load_reports_progress_and_status(client: LanguageClient):
    await wait_ready(client)
    states = [state for state, _ in client.statuses]
    assert states[0] == "loading" and states[-1] == "ready"
    assert len(client.progress_reports) == 1
    (reports,) = client.progress_reports.values()
    assert isinstance(reports[0], types.WorkDoneProgressBegin)
    assert reports[0].title == "adaptrack: loading model"
    assert any(isinstance(r, types.WorkDoneProgressReport) for r in reports)
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)


async def test_inline_completion_names_only_installed_numpy_members(client: LanguageClient):
    await wait_ready(client)
    open_document(client, URI, NUMPY_DOC)
    result = await inline(client, URI, 1, len("x = np."))
    assert result.items, "the tiny model gives at least one completion"
    valid = numpy_public_names()
    for item in result.items:
        assert item.range.start == types.Position(1, 7) == item.range.end
        assert leading_name(item.insert_text) in valid, item.insert_text


async def test_without_the_constraint_the_tiny_model_names_no_numpy_member(client: LanguageClient):
    """The check above can fail: the same model, unconstrained, writes no valid member."""
    await wait_ready(client)
    configure(client, decoder="unconstrained")
    try:
        open_document(client, URI + ".unconstrained.py", NUMPY_DOC)
        result = await inline(client, URI + ".unconstrained.py", 1, len("x = np."))
        names = [leading_name(item.insert_text) for item in result.items]
        assert names and not any(name in numpy_public_names() for name in names), names
    finally:
        configure(client, decoder="adaptrack")


async def test_completion_list_is_distinct_ranked_and_names_the_source(client: LanguageClient):
    import numpy

    await wait_ready(client)
    open_document(client, URI, NUMPY_DOC)
    result = await completion(client, URI, 1, len("x = np."))
    assert isinstance(result, types.CompletionList) and not result.is_incomplete
    assert result.items
    labels = [item.label for item in result.items]
    assert len(labels) == len(set(labels))
    logprobs = [item.data["logprob"] for item in result.items]
    assert logprobs == sorted(logprobs, reverse=True)
    assert [item.sort_text for item in result.items] == sorted(item.sort_text for item in result.items)
    for item in result.items:
        assert leading_name(item.label) in numpy_public_names()
        assert item.detail == f"numpy {numpy.__version__}"
        assert item.data["counters"]["lm_calls"] >= 1
        assert item.data["constraint"]["packages"] == {"numpy": numpy.__version__}
        assert item.text_edit.range.start == types.Position(1, 7)


async def test_token_healing_inside_a_partial_name(client: LanguageClient):
    await wait_ready(client)
    uri = URI + ".healing.py"
    open_document(client, uri, "import numpy as np\nx = np.lin")
    result = await inline(client, uri, 1, len("x = np.lin"))
    assert result.items
    members = {name for name in numpy_public_names() if name.startswith("lin")}
    for item in result.items:
        # the healed "lin" is not repeated in the answer; together they name a member
        assert leading_name("lin" + item.insert_text) in members, item.insert_text
    listed = await completion(client, uri, 1, len("x = np.lin"))
    for item in listed.items:
        assert item.text_edit.range.start == types.Position(1, len("x = np."))
        assert leading_name(item.text_edit.new_text) in members


async def test_an_edit_during_decoding_does_not_move_the_answer(client: LanguageClient):
    """The request is built once from the document as it was asked about: an edit that
    arrives while the list is decoded (three lines inserted above the cursor) leaves the
    edit range where the user typed (re-reading the document after decoding put it on
    another line, at another column)."""
    await wait_ready(client)
    uri = URI + ".moving.py"
    open_document(client, uri, "import numpy as np\nx = np.lin")
    asked = asyncio.wrap_future(  # sent now (the clients' async helpers send when awaited)
        client.protocol.send_request(
            types.TEXT_DOCUMENT_COMPLETION,
            types.CompletionParams(text_document=types.TextDocumentIdentifier(uri), position=types.Position(1, len("x = np.lin"))),
        )
    )
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=types.Position(0, 0), end=types.Position(0, 0)), text="\n\n\n"
                )
            ],
        )
    )
    listed = await asyncio.wait_for(asked, 120)
    assert listed.items
    for item in listed.items:
        assert item.text_edit.range == types.Range(start=types.Position(1, len("x = np.")), end=types.Position(1, len("x = np.lin")))
        assert item.text_edit.new_text.startswith("lin")


async def test_cancel_request_stops_a_slow_decode_and_the_next_request_is_served(client: LanguageClient):
    await wait_ready(client)
    uri = URI + ".slow.py"
    open_document(client, uri, "import numpy as np\nx = np.")
    configure(client, maxNewTokens=400, numSamples=64)
    try:
        slow = asyncio.ensure_future(
            client.protocol.send_request_async(
                types.TEXT_DOCUMENT_COMPLETION,
                types.CompletionParams(text_document=types.TextDocumentIdentifier(uri), position=types.Position(1, 7)),
                msg_id="slow-decode",
            )
        )
        await asyncio.sleep(1.0)
        assert not slow.done(), "the decode should still be running"
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="slow-decode"))
        with pytest.raises(JsonRpcRequestCancelled):
            await asyncio.wait_for(slow, timeout=30)
    finally:
        configure(client, **{k: v for k, v in BASE_SETTINGS.items() if k != "model"})
    started = time.monotonic()
    result = await inline(client, uri, 1, 7)
    assert result.items
    assert time.monotonic() - started < 30


async def test_newer_request_supersedes_an_older_one(client: LanguageClient):
    await wait_ready(client)
    uri = URI + ".supersede.py"
    open_document(client, uri, "import numpy as np\nx = np.")
    configure(client, maxNewTokens=200, numSamples=16)
    try:
        first = asyncio.ensure_future(completion(client, uri, 1, 7))
        await asyncio.sleep(0.5)
        configure(client, maxNewTokens=4, numSamples=2)
        second = asyncio.ensure_future(completion(client, uri, 1, 7))
        first_result, second_result = await asyncio.wait_for(asyncio.gather(first, second), timeout=120)
    finally:
        configure(client, **{k: v for k, v in BASE_SETTINGS.items() if k != "model"})
    assert first_result.is_incomplete and not first_result.items
    assert second_result.items


@pytest.mark.slow
async def test_live_environment_index_reports_installed_numpy(client: LanguageClient):
    """Validity from the live environment (jedi + runtime introspection), no snapshot."""
    import numpy

    await wait_ready(client)
    configure(client, apiSnapshot=None, pythonPath=sys.executable)
    try:
        uri = URI + ".jedi.py"
        open_document(client, uri, NUMPY_DOC)
        deadline = time.monotonic() + 400
        while True:  # while numpy's members are computed the answer is empty and incomplete
            result = await asyncio.wait_for(completion(client, uri, 1, 7), timeout=400)
            if result.items or time.monotonic() > deadline:
                break
            assert result.is_incomplete
            await asyncio.sleep(0.5)
        assert result.items
        for item in result.items:
            assert leading_name(item.label) in numpy_public_names()
            assert item.detail == f"numpy {numpy.__version__}"
            assert item.data["constraint"]["source"] == "jedi"
    finally:
        configure(client, apiSnapshot=client.snapshot, pythonPath=None)
