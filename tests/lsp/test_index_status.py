"""The server while a document's API members are computed: index work starts at
didOpen/didChange, a request meanwhile answers at once with an empty, incomplete list
and an "indexing" status, and the next request after the index is ready completes."""

from __future__ import annotations

import asyncio
import atexit
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_support import SERVER_COMMAND, make_client, server_env

sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))
from api_index_support import install_fake_package, make_fixture_venv  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: the server's cache root: empty API index, the tiny model linked in (no rebuild)
CACHE_ROOT = Path(tempfile.mkdtemp(prefix="adaptrack-cache-"))
atexit.register(shutil.rmtree, CACHE_ROOT, True)
#: importing the fake package takes this long (the runtime check imports it)
SLOW_IMPORT = "import time\ntime.sleep(4)\n\n\ndef slow_api():\n    pass\n\n\ndef other_api():\n    pass\n"
URI = "file:///workspace/slow.py"
DOCUMENT = "import slowpkg as sp\nx = sp."


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(
        server_command=SERVER_COMMAND, server_env={**server_env(), "ADAPTRACK_CACHE": str(CACHE_ROOT)}, client_factory=make_client
    ),
)
async def client(lsp_client: LanguageClient):
    from adaptrack_lsp.completion.lm.tiny import tiny_model_path

    tiny = tiny_model_path()
    (CACHE_ROOT / tiny.name).symlink_to(tiny, target_is_directory=True)
    python = make_fixture_venv(CACHE_ROOT.parent / (CACHE_ROOT.name + "-venv"))
    atexit.register(shutil.rmtree, Path(python).parents[1], True)
    install_fake_package(python, "slowpkg", "1.0.0", SLOW_IMPORT)
    install_fake_package(python, "laterpkg", "1.0.0", SLOW_IMPORT)
    settings = {"model": "tiny", "maxNewTokens": 4, "numSamples": 2, "timeoutMs": 60000, "pythonPath": python}
    await lsp_client.initialize_session(types.InitializeParams(capabilities=types.ClientCapabilities(), initialization_options=settings))
    deadline = time.monotonic() + 240
    while "ready" not in [state for state, _ in lsp_client.statuses]:
        assert time.monotonic() < deadline and "error" not in [s for s, _ in lsp_client.statuses], lsp_client.statuses
        await asyncio.sleep(0.1)
    yield
    await lsp_client.shutdown_session()


async def completion(client: LanguageClient, uri: str, line: int, character: int):
    return await client.text_document_completion_async(
        types.CompletionParams(text_document=types.TextDocumentIdentifier(uri), position=types.Position(line, character))
    )


async def test_request_during_indexing_answers_at_once_then_completes(client: LanguageClient):
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=URI, language_id="python", version=1, text=DOCUMENT))
    )
    started = time.monotonic()
    first = await completion(client, URI, 1, 7)
    assert time.monotonic() - started < 3.0  # not the 4 s import, not the 60 s budget
    assert first.is_incomplete and not first.items
    assert any(state == "indexing" and "slowpkg" in message for state, message in client.statuses)
    # without being asked again, the server says when the members are computed (clients
    # ask again then); the status says "ready", never "error"
    indexing_at = max(i for i, (state, _) in enumerate(client.statuses) if state == "indexing")
    deadline = time.monotonic() + 120
    while not any(state == "ready" for state, _ in client.statuses[indexing_at:]):
        assert time.monotonic() < deadline, client.statuses
        await asyncio.sleep(0.2)
    assert "error" not in [state for state, _ in client.statuses]
    while True:  # a decode may need deeper members (an answer's chain): asked again after each
        result = await completion(client, URI, 1, 7)
        if result.items:
            break
        assert time.monotonic() < deadline, client.statuses
        await asyncio.sleep(0.5)
    for item in result.items:
        assert re.match(r"\w*", item.label).group(0) in {"slow_api", "other_api", "time"}  # `import time` binds sp.time
        assert item.data["constraint"]["source"] == "jedi"
    assert client.statuses[-1][0] == "ready"


async def test_index_work_starts_when_a_change_adds_an_import(client: LanguageClient):
    uri = URI + ".changed.py"
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text="x = 1\n"))
    )
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text="import laterpkg\nx = laterpkg.")],
        )
    )
    # no completion is asked for: the change alone computes and stores laterpkg's members
    deadline = time.monotonic() + 120
    while not list(CACHE_ROOT.glob("api-index/*/laterpkg-1.0.0.*.json")):
        assert time.monotonic() < deadline, "laterpkg was not indexed after the change"
        await asyncio.sleep(0.5)
    result = await completion(client, uri, 1, 10)
    assert not result.is_incomplete and result.items
