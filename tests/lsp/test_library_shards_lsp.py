"""Library shards over stdio, as a user gets them: a document imports a library of the
project's environment (`pythonPath`: a real virtual environment holding a fake library
of a few files), the built-in model learns it in the background with the status line
saying so, and then writes the library's own idiom after its alias; in a trusted
workspace, the methods of a project class after a receiver typed with it (``def
refill(stock: Stock): stock.``).

The server's cache root is fresh (the built-in model linked in), so the shard is built
by this test and never found from an earlier run."""

from __future__ import annotations

import asyncio
import atexit
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from test_server import inline, leading_name, open_document, wait_ready

from lsp_support import SERVER_COMMAND, make_client, server_env

sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))
from api_index_support import make_fixture_venv, site_packages  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")

CACHE_ROOT = Path(tempfile.mkdtemp(prefix="adaptrack-cache-"))
atexit.register(shutil.rmtree, CACHE_ROOT, True)
#: the library: many public names, one of which its own code and docstrings use all the time
LIBRARY = {
    "__init__.py": '''"""Frames of zorbs.

>>> import zorblib as zl
>>> frame = zl.quantize_zorbs(data)
>>> zl.quantize_zorbs(frame, levels=4)
"""
from zorblib.core import *
''',
    "core.py": "import zorblib as zl\n\n\n"
    + "".join(f"def {name}_zorbs(frame):\n    return frame\n\n\n" for name in ("aardvark", "bistro", "cobalt", "dervish", "quantize"))
    + "def helper(frame):\n    return zl.quantize_zorbs(zl.quantize_zorbs(frame, levels=2))\n\n\n"
    + "def other(frame):\n    value = zl.quantize_zorbs(frame)\n    return zl.quantize_zorbs(value, levels=4)\n",
    "tests/test_core.py": "import zorblib as zl\n\n\ndef test_cobalt():\n    assert zl.cobalt_zorbs(1) == 1\n",
}
INVENTORY = '''"""The shop's stock."""


class Stock:
    """Items on the shelves."""

    def __init__(self, items):
        self.items = items

    def add_items(self, count):
        self.items += count

    def remove_items(self, count):
        self.items -= count
'''
MAIN = "import zorblib as zl\nfrom inventory import Stock\n\nframe = zl.\n\n\ndef refill(stock: Stock):\n    stock.\n"
SETTINGS = {"model": "builtin", "maxNewTokens": 16, "numSamples": 2, "timeoutMs": 120000, "trustedWorkspace": True}


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(
        server_command=SERVER_COMMAND, server_env={**server_env(), "ADAPTRACK_CACHE": str(CACHE_ROOT)}, client_factory=make_client
    ),
)
async def client(lsp_client: LanguageClient, builtin_model, tmp_path_factory):
    from adaptrack_lsp.completion.lm.builtin import builtin_model_path

    model = builtin_model_path()
    (CACHE_ROOT / model.name).symlink_to(model, target_is_directory=True)
    python = make_fixture_venv(tmp_path_factory.mktemp("project-env") / "env")
    site = site_packages(python)
    for name, text in LIBRARY.items():
        (site / "zorblib" / name).parent.mkdir(parents=True, exist_ok=True)
        (site / "zorblib" / name).write_text(text)
    (site / "zorblib-1.0.dist-info").mkdir()
    (site / "zorblib-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: zorblib\nVersion: 1.0\n")
    workspace = tmp_path_factory.mktemp("shop")
    (workspace / "inventory.py").write_text(INVENTORY)
    (workspace / "main.py").write_text(MAIN)
    lsp_client.workspace = workspace
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=workspace.as_uri(),
            initialization_options={**SETTINGS, "pythonPath": python},
        )
    )
    yield
    await lsp_client.shutdown_session()


async def test_a_library_is_learned_in_the_background_and_then_written(client: LanguageClient):
    await wait_ready(client)
    uri = (client.workspace / "main.py").as_uri()
    open_document(client, uri, MAIN)
    deadline = time.monotonic() + 120
    while not any(message.startswith("learning zorblib 1.0") for _, message in client.statuses):
        assert time.monotonic() < deadline, client.statuses
        await asyncio.sleep(0.1)
    learning = next(i for i, (_, message) in enumerate(client.statuses) if message.startswith("learning zorblib 1.0"))
    assert client.statuses[learning][0] == "indexing"
    while not any(state == "ready" for state, _ in client.statuses[learning:]):  # learned: ready again
        assert time.monotonic() < deadline, client.statuses
        await asyncio.sleep(0.1)
    assert (CACHE_ROOT / "builtin-shards").is_dir()
    result = await ghost_text(client, uri, 3, len("frame = zl."))
    assert leading_name(result) == "quantize_zorbs", result


async def ghost_text(client: LanguageClient, uri: str, line: int, character: int) -> str:
    """The ghost text at a cursor, asked again while the API index is computing the
    members the cursor needs (an empty "indexing" answer)."""
    deadline = time.monotonic() + 120
    while True:
        result = await inline(client, uri, line, character)
        if result.items:
            return result.items[0].insert_text
        assert time.monotonic() < deadline, client.statuses
        await asyncio.sleep(0.5)


async def test_the_methods_of_a_project_class_follow_a_receiver_typed_with_it(client: LanguageClient):
    await wait_ready(client)
    uri = (client.workspace / "main.py").as_uri()
    open_document(client, uri, MAIN)
    result = await ghost_text(client, uri, 7, len("    stock."))
    assert leading_name(result) in {"add_items", "remove_items", "items"}, result
