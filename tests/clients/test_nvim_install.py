"""Installing the Neovim plugin as the docs say: the lazy.nvim spec of docs/editors.md
loaded as written, `:checkhealth adaptrack` on a healthy and a broken setup, and
`:AdaptrackInstall` (the server's private environment) with its faults.

lazy.nvim is not fetched here; `LAZY` below does what lazy.nvim does with a `dir` spec
that has `ft`, `opts` and `config`: on the first FileType event of that type, add `dir`
(expanded) to 'runtimepath', call `config(plugin, opts)`, and fire FileType again for
the buffer.  The spec's `dir` is `~/src/adaptrack-lsp/nvim-client`: HOME is a temporary
folder whose `src/adaptrack-lsp` links to this repository.  The server is found as
the docs say, here as `adaptrack-lsp` on PATH (a script like the one pipx writes).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_nvim import MATRIX, REPO, VERSIONS, pynvim, quit_nvim, wait_until  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
DOCS = REPO / "docs" / "editors.md"
MARKER = "<!-- the lazy.nvim spec: tests/clients/test_nvim_install.py loads it as written -->"

LAZY = r"""
local spec = dofile(SPEC_FILE)
local plugin = vim.tbl_extend('force', spec, { dir = vim.fn.fnamemodify(vim.fn.expand(spec.dir), ':p'):gsub('/$', ''), name = 'nvim-client' })
vim.api.nvim_create_autocmd('FileType', {
  pattern = spec.ft,
  once = true,
  callback = function(event)
    vim.opt.runtimepath:append(plugin.dir)
    plugin.config(plugin, spec.opts or {})
    vim.schedule(function()
      vim.api.nvim_exec_autocmds('FileType', { buffer = event.buf, modeline = false })
    end)
  end,
})
"""


def documented_spec() -> str:
    text = DOCS.read_text(encoding="utf-8")
    assert MARKER in text, "docs/editors.md lost its lazy.nvim spec marker"
    block = re.search(r"```lua\n(.*?)```", text[text.index(MARKER):], re.S)
    return block.group(1)


def shim(folder: Path) -> Path:
    """`adaptrack-lsp` on PATH, as pipx writes it (an entry point of another interpreter)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "adaptrack-lsp"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom adaptrack_lsp.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return folder


def system_path() -> str:
    """PATH without virtual environments (their python3 has adaptrack-lsp)."""
    return os.pathsep.join(part for part in os.environ.get("PATH", "").split(os.pathsep) if part and not (Path(part).parent / "pyvenv.cfg").exists())


def editor_env(tmp_path: Path, path: str) -> dict[str, str]:
    home = tmp_path / "home"
    (home / "src").mkdir(parents=True, exist_ok=True)
    link = home / "src" / "adaptrack-lsp"
    if not link.exists():
        link.symlink_to(REPO, target_is_directory=True)
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    env.update({
        "HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_STATE_HOME": str(tmp_path / "state"), "PATH": path,
        "ADAPTRACK_CACHE": os.environ.get("ADAPTRACK_CACHE") or str(Path.home() / ".cache" / "adaptrack-lsp"),
        "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
    })  # fmt: skip
    return env


def start(nvim_path: str, tmp_path: Path, init_lua: str, env: dict[str, str]):
    init = tmp_path / "init.lua"
    init.write_text(init_lua)
    # pynvim starts the child with this process's environment: `env` sets the editor's
    unset = [part for name in os.environ if name not in env for part in ("-u", name)]
    assignments = [f"{name}={value}" for name, value in env.items()]
    return pynvim.attach("child", argv=["env", *unset, *assignments, nvim_path, "--embed", "--headless", "-n", "-i", "NONE", "-u", str(init)])


def checkhealth(nvim) -> str:
    nvim.command("checkhealth adaptrack")
    return "\n".join(nvim.current.buffer[:])


@pytest.mark.parametrize("editor", VERSIONS)
def test_the_documented_lazy_spec_loads_and_gives_ghost_text(tmp_path, editor, builtin_model):
    nvim_path = editor[0]
    spec = tmp_path / "spec.lua"
    spec.write_text("return " + documented_spec())
    env = editor_env(tmp_path, os.pathsep.join([str(shim(tmp_path / "bin")), system_path()]))
    nvim = start(nvim_path, tmp_path, f"vim.opt.swapfile = false\nlocal SPEC_FILE = {json.dumps(str(spec))}\n" + LAZY, env)
    try:
        source = tmp_path / "example.py"
        source.write_text("import numpy as np\n\nvalues = np\n")
        assert nvim.exec_lua("return package.loaded['adaptrack'] == nil"), "loaded before its ft event"
        nvim.command(f"edit {source}")
        state = wait_until(
            lambda: nvim.exec_lua("local ok, a = pcall(require, 'adaptrack'); if not ok then return nil end; local s = a.status(); return s ~= 'starting' and s ~= 'loading' and s ~= 'stopped' and s"),
            300, "the server from the documented spec", interval=0.5,
        )  # fmt: skip
        assert state == "ready", nvim.exec_lua("return select(2, require('adaptrack').status())")
        nvim.input("GA.")
        shown = wait_until(lambda: nvim.exec_lua("return require('adaptrack').ghost_text()"), 300, "ghost text", interval=0.2)
        assert shown.strip()
        # ghost text comes before the index of numpy is complete (cold cache): health is
        # read once the server is ready again
        wait_until(lambda: nvim.exec_lua("return require('adaptrack').status() == 'ready'"), 300, "the index of numpy", interval=0.5)
        report = checkhealth(nvim)
        print(report)
        assert "adaptrack-lsp serve (from the adaptrack-lsp command on PATH)" in report
        assert re.search(r"(OK|✅).*model: builtin", report) and re.search(r"(OK|✅).*ready", report), report
        assert not re.search(r"ERROR|❌", report), report
    finally:
        quit_nvim(nvim)


@pytest.mark.parametrize("editor", VERSIONS)
def test_checkhealth_on_a_broken_setup_names_the_fixes(tmp_path, editor):
    """No server anywhere (python3 without adaptrack-lsp), then a server whose settings
    name a missing project interpreter and a model whose extra is absent."""
    nvim_path = editor[0]
    env = editor_env(tmp_path, system_path())
    env.pop("PYTHONPATH", None)
    init = f"vim.opt.runtimepath:prepend({json.dumps(str(REPO / 'nvim-client'))})\nrequire('adaptrack').setup({{}})\n"
    nvim = start(nvim_path, tmp_path, init, env)
    try:
        report = checkhealth(nvim)
        print(report)
        assert "does not run the server (from python3" in report and ":AdaptrackInstall" in report and "pipx install adaptrack-lsp" in report, report
    finally:
        quit_nvim(nvim)
    env = editor_env(tmp_path, os.pathsep.join([str(shim(tmp_path / "bin")), system_path()]))
    env.update({"ADAPTRACK_TEST_WATCH": "torch,transformers", "ADAPTRACK_TEST_ABSENT": "1"})
    guard = REPO / "tests" / "lsp" / "import_guard.py"
    init = (
        f"vim.opt.runtimepath:prepend({json.dumps(str(REPO / 'nvim-client'))})\n"
        f"require('adaptrack').setup({{ cmd = {{ {json.dumps(sys.executable)}, {json.dumps(str(guard))}, 'serve' }},"
        " settings = { model = 'Qwen/Qwen2.5-Coder-0.5B', pythonPath = '/nonexistent/bin/python' } })\n"
    )
    nvim = start(nvim_path, tmp_path, init, env)
    try:
        report = checkhealth(nvim)
        print(report)
        assert re.search(r"(ERROR|❌).*model: model 'Qwen/Qwen2.5-Coder-0.5B' needs the transformers extra", report), report
        assert "-m pip install 'adaptrack-lsp[transformers]'" in report
        assert re.search(r"(ERROR|❌).*project python: python interpreter not found: /nonexistent/bin/python", report), report
    finally:
        quit_nvim(nvim)


INSTALL_INIT = """
vim.opt.swapfile = false
vim.opt.runtimepath:prepend({client})
require('adaptrack').setup({{ install_source = {source} }})
_G.install_result = nil
require('adaptrack').install(function(ok, message) _G.install_result = {{ ok = ok, message = message }} end)
"""


def run_install(nvim_path: str, tmp_path: Path, env: dict[str, str], source: str, timeout: float) -> tuple[dict, object]:
    init = INSTALL_INIT.format(client=json.dumps(str(REPO / "nvim-client")), source=json.dumps(source))
    nvim = start(nvim_path, tmp_path, init, env)
    result = wait_until(lambda: nvim.exec_lua("return _G.install_result"), timeout, ":AdaptrackInstall to finish", interval=0.5)
    return result, nvim


@pytest.mark.parametrize("editor", VERSIONS)
def test_adaptrack_install_faults_give_one_message_and_no_retry(tmp_path, editor):
    nvim_path = editor[0]
    old = tmp_path / "old-python"
    old.mkdir()
    for name in ("python3", "python3.13", "python3.12", "python3.11", "python3.10", "python"):
        (old / name).write_text('#!/bin/sh\necho "3 9"\n')
        (old / name).chmod(0o755)
    result, nvim = run_install(nvim_path, tmp_path, editor_env(tmp_path, os.pathsep.join([str(old), "/nonexistent-bin"])), "adaptrack-lsp", 60)
    try:
        assert result["ok"] is False and "needs Python 3.10 or newer (only python3 (Python 3.9)" in result["message"], result
        assert ":AdaptrackInstall" in result["message"]
        time.sleep(2)
        assert nvim.exec_lua("return require('adaptrack').status()") == "error"
        assert not Path(nvim.exec_lua("return require('adaptrack.install').env_dir()")).exists()
    finally:
        quit_nvim(nvim)

    blocked = tmp_path / "a-file"
    blocked.write_text("")
    env = editor_env(tmp_path, system_path())
    env["XDG_DATA_HOME"] = str(blocked)  # below a file: the data folder cannot be made
    result, nvim = run_install(nvim_path, tmp_path, env, "adaptrack-lsp", 60)
    try:
        assert result["ok"] is False and result["message"].startswith(f"cannot write {blocked}/nvim/adaptrack"), result
        assert "pipx install adaptrack-lsp" in result["message"]
    finally:
        quit_nvim(nvim)


def test_adaptrack_install_sets_up_the_server_and_checkhealth_finds_it(tmp_path, builtin_model):
    """A real venv and a real pip install of the server's wheel (dependencies from the
    package index), on Neovim 0.12; then a Python buffer gets ghost text from it."""
    editors = [param.values[0][0] for param in VERSIONS if param.values[0][0] and "plugin" == param.values[0][1]]
    newest = [path for path in editors if path.startswith(str(Path(sys.executable).parent))] or editors
    if not newest:
        pytest.skip("no Neovim")
    tree, out = tmp_path / "tree", tmp_path / "wheel"
    for name in ("pyproject.toml", "README.md"):
        tree.mkdir(exist_ok=True)
        (tree / name).write_bytes((REPO / name).read_bytes())
    subprocess.run(["cp", "-r", str(REPO / "src"), str(tree / "src")], check=True)
    subprocess.run(["find", str(tree / "src"), "-name", "__pycache__", "-prune", "-exec", "rm", "-rf", "{}", "+"], check=True)
    clean = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(tree)], check=True, env=clean, timeout=300)
    wheel = next(out.glob("adaptrack_lsp-*.whl"))
    env = editor_env(tmp_path, system_path())
    env.pop("PYTHONPATH", None)
    started = time.monotonic()
    result, nvim = run_install(newest[0], tmp_path, env, str(wheel), 900)
    try:
        assert result["ok"] is True, result
        print(f":AdaptrackInstall took {time.monotonic() - started:.0f} s: {result['message']}")
        env_python = nvim.exec_lua("return require('adaptrack.install').env_python()")
        assert nvim.exec_lua("return require('adaptrack.install').installed()")
        source = tmp_path / "example.py"
        source.write_text("import numpy as np\n\nvalues = np\n")
        nvim.command(f"edit {source}")
        state = wait_until(
            lambda: nvim.exec_lua("local s = require('adaptrack').status(); return s ~= 'starting' and s ~= 'loading' and s ~= 'stopped' and s"),
            300, "the server from the private environment", interval=0.5,
        )  # fmt: skip
        assert state == "ready", nvim.exec_lua("return select(2, require('adaptrack').status())")
        nvim.input("GA.")
        assert wait_until(lambda: nvim.exec_lua("return require('adaptrack').ghost_text()"), 300, "ghost text", interval=0.2).strip()
        report = checkhealth(nvim)
        print(report)
        assert f"{env_python} -m adaptrack_lsp serve (from the environment :AdaptrackInstall made)" in report
        assert f"on {env_python}" in report and "extra transformers: not installed" in report
        assert not re.search(r"ERROR|❌", report), report
    finally:
        quit_nvim(nvim)
    log = Path(env["XDG_CACHE_HOME"]) / "nvim" / "adaptrack-install.log"
    assert "Successfully installed" in log.read_text(), textwrap.shorten(log.read_text(), 2000)
