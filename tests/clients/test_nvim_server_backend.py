"""Neovim end to end on the `server` backend: the Lua client starts `adaptrack_lsp serve`
with `backend = "server"` pointing at a real llama-server (the tiny model as GGUF); the
ghost text Neovim shows equals what the language server answers a direct LSP client with
the same settings (greedy, so deterministic), and accepting it inserts exactly that.
Every Neovim of the matrix (`test_nvim.MATRIX`)."""

from __future__ import annotations

import asyncio
import sys

import pytest
from llama_server_support import llama_server  # noqa: F401

pytest.importorskip("pynvim", reason="pynvim is needed to drive Neovim")

import test_nvim  # noqa: E402
from test_nvim import MATRIX, READY_TIMEOUT_S, ghost, quit_nvim, rendered_ghost, start_nvim, wait_until  # noqa: E402


def server_settings(endpoint: str) -> dict:
    return {**test_nvim.REAL_SETTINGS, "model": "tiny", "backend": "server", "endpoint": endpoint, "serverTimeoutMs": 60000}


@pytest.fixture(scope="module")
def server_answer(tmp_path_factory, llama_server):  # noqa: F811
    """The language server's greedy answer after `np.` on the server backend, asked once
    by a direct LSP client."""
    workspace = tmp_path_factory.mktemp("direct-server")
    source = workspace / "example.py"
    source.write_text("import numpy as np\n\nvalues = np\n")
    typed = "import numpy as np\n\nvalues = np.\n"
    answer = asyncio.run(
        test_nvim._server_answer(workspace, source, typed, 2, len("values = np."), server_settings(llama_server.url))
    )
    assert answer.strip(), f"empty answer {answer!r}"
    return answer


@pytest.mark.slow
@pytest.mark.parametrize("editor", MATRIX)
def test_ghost_text_from_an_inference_server_equals_the_servers_answer(tmp_path, editor, server_answer, llama_server):  # noqa: F811
    nvim_path, ghost_path = editor
    source = tmp_path / "example.py"
    source.write_text("import numpy as np\n\nvalues = np\n")
    nvim = start_nvim(
        tmp_path,
        {"python": sys.executable, "settings": server_settings(llama_server.url), "ghost_text": {"debounce_ms": 50}},
        nvim_path,
        ghost_path,
    )
    try:
        nvim.command(f"edit {source}")
        state = wait_until(
            lambda: nvim.exec_lua(
                "local s = require('adaptrack').status(); return s ~= 'starting' and s ~= 'loading' and s ~= 'stopped' and s"
            ),
            READY_TIMEOUT_S,
            "the server to connect to llama-server",
            interval=0.5,
        )
        assert state == "ready", nvim.exec_lua("return select(2, require('adaptrack').status())")
        nvim.input("GA.")
        shown = wait_until(lambda: ghost(nvim), 120, "ghost text from the inference server", interval=0.2)
        assert shown == server_answer
        assert rendered_ghost(nvim) == server_answer
        nvim.input("<Tab>")
        wait_until(lambda: nvim.current.line != "values = np.", 10, "the accepted text")
        assert "\n".join(nvim.current.buffer[:]) == "import numpy as np\n\nvalues = np." + server_answer
    finally:
        quit_nvim(nvim)
