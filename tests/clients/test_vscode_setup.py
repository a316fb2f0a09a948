"""The VS Code extension sets up its own server: a fresh code-server profile with only the
`.vsix` installed (it carries the server's wheel, as `make dist` packs it), no settings
written, no interpreter with adaptrack-lsp on PATH.  Opening a Python file brings one
offer; one click on "Set Up" creates the private environment in the extension's global
storage and pip-installs the wheel (its dependencies from the package index, as a user's
pip would); then ghost text appears after ``np.``.

The time from opening the file to the ghost text is printed, and the screenshot saved to
$ADAPTRACK_TEST_ARTIFACTS (default test-artifacts/) as vscode-setup-ghost-text.png.
Tools as for test_vscode_web.py (code-server, chromium, playwright).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_vscode_web import (
    ARTIFACTS,
    CHROMIUM,
    CLIENT,
    EDITOR,
    REPO,
    _code_server,
    _editor_line,
    _node_dir,
    free_port,
    missing_tools,
    run,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
SCREENSHOT = ARTIFACTS / "vscode-setup-ghost-text.png"
LINE = 3
TYPED = "values = np."
#: the setup (venv + pip from the index) and the first start (the built-in model, the API index)
GHOST_TIMEOUT_S = 900.0


def build_vsix(out: Path) -> Path:
    """The extension with the server's wheel inside, as `make dist` makes it."""
    from adaptrack_lsp import __version__

    tree = out / "tree"
    for name in ("pyproject.toml", "README.md"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tree / name)
    shutil.copytree(REPO / "src" / "adaptrack_lsp", tree / "src" / "adaptrack_lsp", ignore=shutil.ignore_patterns("__pycache__"))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(tree)], 300, env=env)
    wheel = out / f"adaptrack_lsp-{__version__}-py3-none-any.whl"
    npm = shutil.which("npm")
    marker = REPO / "node_modules" / ".package-lock.json"
    if not marker.exists() or marker.stat().st_mtime < (REPO / "package-lock.json").stat().st_mtime:
        run([npm, "ci", "--no-audit", "--no-fund"], 900, cwd=REPO)
    run([npm, "run", "build", "--workspace", "vscode-client"], 600, cwd=REPO)
    server = CLIENT / "server"
    shutil.rmtree(server, ignore_errors=True)
    server.mkdir()
    shutil.copy(wheel, server / wheel.name)
    vsix = out / "adaptrack.vsix"
    try:
        run([str(REPO / "node_modules" / ".bin" / "vsce"), "package", "--no-dependencies", "--allow-missing-repository", "--out", str(vsix)], 300, cwd=CLIENT)
    finally:
        shutil.rmtree(server, ignore_errors=True)
    listing = run(["unzip", "-l", str(vsix)], 60) if shutil.which("unzip") else ""
    assert not listing or f"extension/server/{wheel.name}" in listing, listing
    return vsix


def clean_path() -> str:
    """PATH without virtual environments: python3 there has no adaptrack-lsp."""
    parts = [part for part in os.environ.get("PATH", "").split(os.pathsep) if part and not (Path(part).parent / "pyvenv.cfg").exists()]
    return os.pathsep.join([str(_node_dir() / "bin"), *parts])


def test_a_fresh_profile_sets_up_the_server_and_shows_ghost_text(tmp_path):
    reason = missing_tools()
    if reason:
        pytest.skip(reason)
    vsix = build_vsix(tmp_path / "build")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = clean_path()
    probe = subprocess.run(["python3", "-c", "import adaptrack_lsp"], env=env, capture_output=True, text=True, timeout=60)
    assert probe.returncode != 0, "python3 on the cleaned PATH has adaptrack-lsp: the setup would not be offered"
    user_data, extensions = tmp_path / "user-data", tmp_path / "extensions"
    folder = tmp_path / "workspace"
    folder.mkdir()
    shutil.copy(CLIENT / "test-fixtures" / "example.py", folder / "example.py")
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(f"bind-addr: 127.0.0.1:{port}\nauth: none\ncert: false\n")
    base = [str(_code_server()), "--config", str(config), "--user-data-dir", str(user_data), "--extensions-dir", str(extensions)]
    run([*base, "--install-extension", str(vsix)], 300, env=env)
    installed = sorted(path.name for path in extensions.iterdir() if path.is_dir())
    assert len(installed) == 1 and installed[0].startswith("adaptrack.adaptrack-"), installed
    log = tmp_path / "code-server.log"
    with open(log, "w") as log_file:
        process = subprocess.Popen(
            [*base, "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", "--disable-getting-started-override", str(folder)],
            stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
            time.sleep(0.2)
        drive_the_editor(f"http://127.0.0.1:{port}/?folder={folder}", folder, user_data)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
    assert not (user_data / "User" / "settings.json").exists() or "adaptrack" not in (user_data / "User" / "settings.json").read_text()


def drive_the_editor(url: str, folder: Path, user_data: Path) -> None:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url)
            page.wait_for_selector(".monaco-workbench", timeout=120000)
            # a fresh profile: the welcome page, and the chat view has the focus; open the
            # file from the explorer, as a person would
            page.locator(".explorer-folders-view .monaco-list-row", has_text="example.py").dblclick(timeout=120000)
            opened = time.monotonic()
            try:
                page.wait_for_selector(f"{EDITOR} .view-lines", timeout=60000)
            except Exception:
                page.screenshot(path=str(ARTIFACTS / "vscode-setup-failed.png"))
                raise
            offer = page.locator(".notification-toast", has_text="set up its language server")
            offer.wait_for(timeout=120000)
            page.screenshot(path=str(ARTIFACTS / "vscode-setup-offer.png"))
            offer.get_by_role("button", name="Set Up").click()
            print(f"setup offered {time.monotonic() - opened:.1f} s after opening the file; clicked Set Up")
            page.click(f"{EDITOR} .view-lines")
            page.keyboard.press("Control+Home")
            for _ in range(LINE):
                page.keyboard.press("ArrowDown")
            page.keyboard.press("End")
            assert _editor_line(page, LINE) == TYPED
            deadline = time.monotonic() + GHOST_TIMEOUT_S
            ghost = None
            while time.monotonic() < deadline and not ghost:
                page.keyboard.press("Backspace")
                page.keyboard.type(".")
                time.sleep(0.3)
                page.keyboard.press("Escape")  # the completion list (the server's, on "."), if any
                page.keyboard.press("Alt+Backslash")  # Trigger Inline Suggestion
                with contextlib.suppress(Exception):
                    page.wait_for_selector(f"{EDITOR} .ghost-text-decoration", timeout=15000)
                    ghost = "".join(page.eval_on_selector_all(f"{EDITOR} .ghost-text-decoration", "es => es.map(e => e.textContent)"))
            elapsed = time.monotonic() - opened
            page.screenshot(path=str(SCREENSHOT))
            ghost = (ghost or "").replace("\u00a0", " ")
            storage = list((user_data / "User" / "globalStorage").glob("adaptrack.adaptrack/server-env/adaptrack-wheel.txt"))
            assert ghost, f"no ghost text {elapsed:.0f} s after opening the file (private environment stamp: {storage})"
            print(f"ghost text {ghost!r} {elapsed:.1f} s after opening the file (setup included)")
            assert storage, "the server did not run from the private environment"
            assert _editor_line(page, LINE) == TYPED + ghost
        finally:
            browser.close()
