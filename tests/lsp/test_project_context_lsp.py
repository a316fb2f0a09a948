"""Project context over stdio: a name defined in an open ``utils.py`` is proposed by the
built-in model in ``main.py`` (its document model reads the snippets the prompt carries);
without the context (``contextTokens: 0``, or ``utils.py`` closed in an untrusted
workspace, where nothing is read from disk) it is not.  Validity comes from a numpy
snapshot, which knows nothing of ``utils``: the chain after ``utils.`` is not constrained."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from test_server import completion, configure, inline, leading_name, open_document, wait_ready

from lsp_support import SERVER_COMMAND, make_client, server_env, write_numpy_snapshot

pytestmark = pytest.mark.asyncio(loop_scope="module")

UTILS = '''"""Helpers of the project."""
import json


def load_settings(path):
    """Read the settings file."""
    with open(path) as handle:
        return json.load(handle)


def save_report(report, path):
    with open(path, "w") as handle:
        json.dump(report, handle)
'''
MAIN = "import utils\n\nsettings = utils."
NAMES = {"load_settings", "save_report"}
SETTINGS = {"model": "builtin", "maxNewTokens": 16, "numSamples": 4, "timeoutMs": 120000}


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=SERVER_COMMAND, server_env=server_env(), client_factory=make_client),
)
async def client(lsp_client: LanguageClient, tmp_path_factory, builtin_model):
    workspace = tmp_path_factory.mktemp("project")
    (workspace / "utils.py").write_text(UTILS)
    (workspace / "main.py").write_text(MAIN)
    snapshot = write_numpy_snapshot(tmp_path_factory.mktemp("snapshot") / "numpy.json")
    lsp_client.workspace = workspace
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=workspace.as_uri(),
            initialization_options={**SETTINGS, "apiSnapshot": str(snapshot)},
        )
    )
    yield
    await lsp_client.shutdown_session()


async def ghost_text(client: LanguageClient) -> str:
    result = await inline(client, (client.workspace / "main.py").as_uri(), 2, len("settings = utils."))
    assert result.items, "no ghost text"
    return result.items[0].insert_text


async def test_a_name_from_an_open_utils_module_is_proposed_in_main(client: LanguageClient):
    await wait_ready(client)
    utils_uri = (client.workspace / "utils.py").as_uri()
    open_document(client, utils_uri, UTILS)
    open_document(client, (client.workspace / "main.py").as_uri(), MAIN)
    assert leading_name(await ghost_text(client)) in NAMES
    listed = await completion(client, (client.workspace / "main.py").as_uri(), 2, len("settings = utils."))
    assert {leading_name(item.label) for item in listed.items} & NAMES

    # the check can fail: with no context the model never writes these names
    configure(client, contextTokens=0)
    assert leading_name(await ghost_text(client)) not in NAMES
    configure(client, contextTokens=1024)
    assert leading_name(await ghost_text(client)) in NAMES

    # closed, in an untrusted workspace: utils.py is not read from disk
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(utils_uri)))
    assert leading_name(await ghost_text(client)) not in NAMES
    # trusted: the imported module is read from disk under the workspace root
    configure(client, trustedWorkspace=True)
    assert leading_name(await ghost_text(client)) in NAMES
