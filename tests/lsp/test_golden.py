"""Golden protocol tests: request -> expected response files under tests/data/lsp/<case>/.

The cases run on the built-in model (`--model builtin`, what users get offline), except
`fim`, which needs a model with fill-in-the-middle tokens (the random `tiny` one; its
text is noise, the prompt layout is what it checks).  Ghost text is deterministic at
temperature 0 and completion lists are seeded from the text and the cursor, so each
case's response is fixed for a given build of the model: the built-in model is counted
from the standard library and numpy installed, so another Python or numpy release may
change a response (rewrite and review, below).  A case
folder holds `document.py` (opened as `file:///workspace/<case>.py`), `request.json`
(`{"method": ..., "line": ..., "character": ..., "settings": {...}}`; `settings.model`
picks the model, builtin by default; `textDocument/diagnostic` takes no position) and
`response.json` (the response with what varies between runs removed: timings and
counters, a diagnostic report's `resultId`, and the installed numpy version written as
`<numpy>`).

After a deliberate change of behaviour, rewrite the expected files with
`ADAPTRACK_UPDATE_GOLDEN=1 pytest tests/lsp/test_golden.py` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from test_server import completion, inline, open_document, wait_ready

from lsp_support import SERVER_COMMAND, initialize_with_numpy_snapshot, make_client, server_env

pytestmark = pytest.mark.asyncio(loop_scope="module")

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "lsp"
CASES = sorted(path.name for path in GOLDEN.iterdir() if (path / "request.json").exists())
UPDATE = os.environ.get("ADAPTRACK_UPDATE_GOLDEN") == "1"
BASE_SETTINGS = {"model": "builtin", "maxNewTokens": 16, "numSamples": 4, "timeoutMs": 120000}


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=SERVER_COMMAND, server_env=server_env(), client_factory=make_client),
)
async def client(lsp_client: LanguageClient, tmp_path_factory, builtin_model):
    await initialize_with_numpy_snapshot(lsp_client, tmp_path_factory, BASE_SETTINGS)
    yield
    await lsp_client.shutdown_session()


def normalise(value, numpy_version: str):
    """Drop what varies between runs; round log-probabilities."""
    if isinstance(value, dict):
        return {
            key: normalise(item, numpy_version)
            for key, item in value.items()
            if key not in ("counters", "environment", "resultId") and item is not None
        }
    if isinstance(value, list):
        return [normalise(item, numpy_version) for item in value]
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, str):
        return value.replace(numpy_version, "<numpy>")
    return value


@pytest.mark.parametrize("case", CASES)
async def test_golden_response(client: LanguageClient, case: str):
    import numpy

    await wait_ready(client)
    folder = GOLDEN / case
    request = json.loads((folder / "request.json").read_text(encoding="utf-8"))
    text = (folder / "document.py").read_text(encoding="utf-8")
    uri = f"file:///workspace/{case}.py"
    settings = {**BASE_SETTINGS, **request.get("settings", {})}
    model_changes = settings["model"] != getattr(client, "golden_model", BASE_SETTINGS["model"])
    if model_changes:
        client.statuses.clear()
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"adaptrack": settings}))
    if model_changes:
        client.golden_model = settings["model"]
        await wait_ready(client)
    open_document(client, uri, text)
    try:
        if request["method"] == types.TEXT_DOCUMENT_INLINE_COMPLETION:
            result = await inline(client, uri, request["line"], request["character"])
        elif request["method"] == types.TEXT_DOCUMENT_DIAGNOSTIC:
            params = types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri))
            result = await client.text_document_diagnostic_async(params)
        else:
            result = await completion(client, uri, request["line"], request["character"])
    finally:  # one document open at a time: the other cases are no project context of this one
        client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    actual = normalise(client.protocol._converter.unstructure(result), numpy.__version__)
    expected_path = folder / "response.json"
    if UPDATE:
        expected_path.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    expected = json.loads(expected_path.read_text(encoding="utf-8"))
    assert actual == expected, f"{case}: response differs from {expected_path} (ADAPTRACK_UPDATE_GOLDEN=1 rewrites it)"
