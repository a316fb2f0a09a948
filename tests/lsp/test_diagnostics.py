"""Version diagnostics in the editor (docs/check.md, "Diagnostics in the editor"): the
real server over stdio (pytest-lsp), one process per delivery mode.

- a pull client (declares `textDocument.diagnostic`, LSP 3.17) asks with
  `textDocument/diagnostic` and is told to ask again (`workspace/diagnostic/refresh`)
  when results change without an edit;
- a push client (no such capability) gets `textDocument/publishDiagnostics`.

Validity comes from the live environment (numpy 2.4.6 in the test venv): what is
missing is found out here by running numpy (`hasattr`, `inspect.signature`), not by
the checker under test.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
import time

import numpy
import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from adaptrack_lsp.checking.checker import CheckCancelled, Checker, Finding
from adaptrack_lsp.lsp_server.diagnostics import (
    DEBOUNCE_S,
    MAX_PAUSE_S,
    CheckGate,
    CheckRun,
    TextPositions,
    diagnostic,
)

from lsp_support import SERVER_COMMAND, server_env, write_numpy_snapshot

on_the_servers_loop = pytest.mark.asyncio(loop_scope="module")

SETTINGS = {"model": "tiny", "maxNewTokens": 4, "numSamples": 1, "timeoutMs": 120000}
DOC = """import numpy as np

x = np.float_(3)
a = np.zeros(3)
r = a.ptp()
h = np.histogram([1, 2], normed=True)
"""
#: (name, the flagged text, its line, rule id, index path, missing member) of each finding in DOC
EXPECTED = [
    ("np.float_", "float_", 2, "missing-attribute", ["numpy"], "float_"),
    ("a.ptp", "ptp", 4, "missing-member", ["numpy", "zeros", "()"], "ptp"),
    ("np.histogram(normed=)", "normed", 5, "unknown-keyword", ["numpy", "histogram", "()"], "normed"),
]
UNGUARDED = "from numpy import float_\n"
GUARDED = "try:\n    from numpy import float_\nexcept ImportError:\n    float_ = float\n"


def test_the_reference_numpy_lacks_what_the_document_uses():
    """The findings expected here are real: numpy 2 raises on each of these uses."""
    assert numpy.__version__.startswith("2.")
    assert not hasattr(numpy, "float_")
    assert not hasattr(numpy.zeros(3), "ptp")
    assert "normed" not in inspect.signature(numpy.histogram).parameters
    with pytest.raises(ImportError):
        exec(UNGUARDED, {})
    exec(GUARDED, {})  # the guard catches it


# -- the conversion of a finding ---------------------------------------------------------------
def _finding(text: str, flagged: str, **fields) -> Finding:
    start = text.index(flagged)
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    defaults = dict(kind="attribute", name="np.float_", message="np.float_ does not exist in numpy 2.4.6",
                    start=start, end=start + len(flagged), line=line, column=column, end_line=line,
                    end_column=column + len(flagged), targets=("numpy 2.4.6",), path=("numpy",), member="float_")  # fmt: skip
    return Finding(**{**defaults, **fields})


@pytest.mark.parametrize(
    ("setting", "severity"),
    [("hint", types.DiagnosticSeverity.Hint), ("warning", types.DiagnosticSeverity.Warning), ("error", types.DiagnosticSeverity.Error)],
)
def test_a_finding_becomes_a_diagnostic_of_the_set_severity(setting, severity):
    text = "import numpy as np\nx = np.float_(1)\n"
    item = diagnostic(_finding(text, "float_"), setting, 7, text=text)
    assert item.severity == severity and not item.tags
    assert item.range == types.Range(types.Position(1, 7), types.Position(1, 13))
    assert (item.source, item.code, item.message) == ("adaptrack", "missing-attribute", "np.float_ does not exist in numpy 2.4.6")
    start = text.index("float_")
    assert item.data == {"kind": "attribute", "name": "np.float_", "path": ["numpy"], "member": "float_",
                         "start": start, "end": start + 6, "version": 7}  # fmt: skip


@pytest.mark.parametrize("setting", ["hint", "warning", "error"])
def test_a_deprecation_is_always_a_hint_tagged_deprecated(setting):
    text = "import numpy as np\nnp.in1d([1], [1])\n"
    finding = _finding(text, "in1d", kind="deprecated", name="np.in1d", message="np.in1d is deprecated", member="in1d", deprecated=True)
    item = diagnostic(finding, setting, 3, text=text)
    assert item.severity == types.DiagnosticSeverity.Hint
    assert item.tags == [types.DiagnosticTag.Deprecated]
    assert item.code == "deprecated" and item.data["kind"] == "deprecated"


def test_ranges_count_utf16_code_units():
    """LSP columns are UTF-16 code units: a character outside the BMP counts two."""
    text = "s = '\U0001f600'; import numpy as np; x = np.float_\n"
    item = diagnostic(_finding(text, "float_"), "warning", 1, positions=TextPositions(text))
    column = len(text[: text.index("float_")].encode("utf-16-le")) // 2
    assert column == text.index("float_") + 1
    assert item.range.start == types.Position(0, column) and item.range.end == types.Position(0, column + 6)


# -- the check's thread: paused for completions, stopped when stale -----------------------------
@pytest.fixture(scope="module")
def numpy_checker(tmp_path_factory):
    """A checker on a snapshot of the installed numpy, and how long a 3,000-line check takes."""
    from adaptrack_lsp.apis.index import SnapshotIndex

    snapshot = write_numpy_snapshot(tmp_path_factory.mktemp("snapshot") / "numpy.json")
    checker = Checker(SnapshotIndex(str(snapshot)))
    started = time.perf_counter()
    assert [f.name for f in checker.check(long_document(3000)).findings] == ["np.float_"]
    return checker, time.perf_counter() - started


def _check_in_thread(checker, gate: CheckGate, text: str, run: CheckRun | None = None) -> tuple[threading.Thread, dict]:
    outcome = {}

    def check():
        try:
            outcome["findings"] = checker.check(text, pause=gate.pause, cancelled=run.is_set if run else None).findings
        except CheckCancelled:
            outcome["stopped"] = True

    thread = threading.Thread(target=check)
    thread.start()
    return thread, outcome


def test_a_check_pauses_while_a_completion_is_computed(numpy_checker):
    checker, whole = numpy_checker
    gate, completion = CheckGate(), concurrent.futures.Future()
    gate.hold_while(completion)
    thread, outcome = _check_in_thread(checker, gate, long_document(3000) + "\n")
    thread.join(min(2 * whole, MAX_PAUSE_S - 0.2))
    assert thread.is_alive() and not outcome, "the check ran on while a completion was computed"
    completion.set_result(None)
    thread.join(60)
    assert [f.name for f in outcome["findings"]] == ["np.float_"]


def test_a_cancelled_check_stops_at_its_next_checkpoint(numpy_checker):
    checker, whole = numpy_checker
    gate, run = CheckGate(), CheckRun()
    thread, outcome = _check_in_thread(checker, gate, long_document(3000) + "\n\n", run)
    time.sleep(whole / 4)
    run.set()
    thread.join(60)
    assert outcome == {"stopped": True}


# -- the servers -------------------------------------------------------------------------------
def recording_client() -> LanguageClient:
    """A pytest-lsp client that keeps every publishDiagnostics (with its arrival time)."""
    from pygls.protocol import default_converter
    from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

    client = LanguageClient(converter_factory=default_converter)
    client.published = []
    client.statuses = []

    def publish(ls, params: types.PublishDiagnosticsParams):
        ls.diagnostics[params.uri] = params.diagnostics
        ls.published.append((time.monotonic(), params))

    def status(ls, params):
        ls.statuses.append((params.state, params.message))

    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish, "adaptrack/status": status})
    return client


CONFIG = ClientServerConfig(server_command=SERVER_COMMAND, server_env=server_env(), client_factory=recording_client)


async def _start(lsp_client: LanguageClient, folder, capabilities: types.ClientCapabilities) -> None:
    lsp_client.folder = folder
    lsp_client.init_result = await lsp_client.initialize_session(
        types.InitializeParams(capabilities=capabilities, root_uri=folder.as_uri(), initialization_options=SETTINGS)
    )


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def pull_client(lsp_client: LanguageClient, tmp_path_factory):
    capabilities = types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(diagnostic=types.DiagnosticClientCapabilities(related_document_support=False)),
        workspace=types.WorkspaceClientCapabilities(diagnostics=types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)),
    )
    await _start(lsp_client, tmp_path_factory.mktemp("pull"), capabilities)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def push_client(lsp_client: LanguageClient, tmp_path_factory):
    capabilities = types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            publish_diagnostics=types.PublishDiagnosticsClientCapabilities(version_support=True, data_support=True)
        ),
        window=types.WindowClientCapabilities(work_done_progress=True),
    )
    await _start(lsp_client, tmp_path_factory.mktemp("push"), capabilities)
    yield
    await lsp_client.shutdown_session()


# -- helpers -----------------------------------------------------------------------------------
def uri_of(client: LanguageClient, name: str) -> str:
    return (client.folder / name).as_uri()


def open_document(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))


def change(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def long_document(lines: int) -> str:
    """`lines` lines of numpy calls that exist, and one that does not at the end; each
    line is padded by a comment to over 220 characters, so that 5,000 lines are more
    than an open document completions read as project context (1 MiB)."""
    body = ["import numpy as np"] + [f"v{i} = np.asarray([{i}]).sum()  # {'.' * 196}" for i in range(lines)]
    return "\n".join(body) + "\nw = np.float_(1)\n"


def close(client: LanguageClient, uri: str) -> None:
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))


def configure(client: LanguageClient, **settings) -> None:
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"adaptrack": {**SETTINGS, **settings}}))


async def pull(client: LanguageClient, uri: str, previous: str | None = None, timeout: float = 120.0):
    return await asyncio.wait_for(
        client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri), previous_result_id=previous)
        ),
        timeout,
    )


async def published(client: LanguageClient, uri: str, version: int | None, after: int = 0, timeout: float = 120.0):
    """The first publishDiagnostics for `uri` and `version` among those from index `after` on."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for _, params in client.published[after:]:
            if params.uri == uri and params.version == version:
                return params
        await asyncio.sleep(0.05)
    raise AssertionError(f"no publishDiagnostics for {uri} version {version}: {[(p.uri, p.version) for _, p in client.published]}")


def assert_expected(items, text: str, version: int, severity=types.DiagnosticSeverity.Warning) -> None:
    """`items` are the findings of DOC (EXPECTED), computed from `text` independently."""
    assert [item.data["name"] for item in items] == [name for name, *_ in EXPECTED], [item.message for item in items]
    lines = text.splitlines()
    for item, (name, flagged, line, rule, path, member) in zip(items, EXPECTED, strict=True):
        column = lines[line].index(flagged)
        start = sum(len(previous) + 1 for previous in lines[:line]) + column
        assert item.range == types.Range(types.Position(line, column), types.Position(line, column + len(flagged))), name
        assert text[item.data["start"] : item.data["end"]] == flagged
        assert item.data == {"kind": item.data["kind"], "name": name, "path": path, "member": member,
                             "start": start, "end": start + len(flagged), "version": version}  # fmt: skip
        assert item.source == "adaptrack" and item.code == rule and item.severity == severity
        assert f"numpy {numpy.__version__}" in item.message and name.split("(")[0] in item.message
        assert not item.tags


# -- pull --------------------------------------------------------------------------------------
@on_the_servers_loop
async def test_the_server_advertises_pull_diagnostics(pull_client: LanguageClient):
    provider = pull_client.init_result.capabilities.diagnostic_provider
    assert provider is not None and provider.identifier == "adaptrack"
    assert provider.inter_file_dependencies is False and provider.workspace_diagnostics is False


@on_the_servers_loop
async def test_pull_reports_the_findings_of_the_current_version(pull_client: LanguageClient):
    uri = uri_of(pull_client, "pulled.py")
    open_document(pull_client, uri, DOC)
    report = await pull(pull_client, uri)
    assert report.kind == "full" and report.result_id.startswith("1:")
    assert_expected(report.items, DOC, 1)
    again = await pull(pull_client, uri, previous=report.result_id)
    assert again.kind == "unchanged" and again.result_id == report.result_id
    assert pull_client.published == [], "a pull client gets no pushed diagnostics"


@on_the_servers_loop
async def test_a_pull_answers_for_the_version_after_an_edit_sent_meanwhile(pull_client: LanguageClient):
    """Asked after an edit (version 2) and answered after the next (version 3, sent
    right after the request): the answer is the check of version 3, the document as it
    is when the debounced check runs."""
    uri = uri_of(pull_client, "edited.py")
    open_document(pull_client, uri, DOC)
    assert (await pull(pull_client, uri)).result_id.startswith("1:")
    edited = "# a comment line first\n" + DOC
    change(pull_client, uri, DOC + "\n", 2)
    asked = asyncio.ensure_future(pull(pull_client, uri))
    await asyncio.sleep(0.05)
    change(pull_client, uri, edited, 3)
    report = await asked
    assert report.result_id.startswith("3:"), report.result_id
    assert [item.range.start.line for item in report.items] == [3, 5, 6]
    assert all(item.data["version"] == 3 for item in report.items)
    assert [edited[item.data["start"] : item.data["end"]] for item in report.items] == ["float_", "ptp", "normed"]
    close(pull_client, uri)


@on_the_servers_loop
async def test_pull_severity_follows_the_setting_and_off_clears(pull_client: LanguageClient):
    uri = uri_of(pull_client, "severity.py")
    open_document(pull_client, uri, DOC)
    assert {item.severity for item in (await pull(pull_client, uri)).items} == {types.DiagnosticSeverity.Warning}
    for setting, severity in (("error", types.DiagnosticSeverity.Error), ("hint", types.DiagnosticSeverity.Hint)):
        refreshes = pull_client.diagnostic_refresh_count
        configure(pull_client, diagnostics=setting)
        await _until(lambda refreshes=refreshes: pull_client.diagnostic_refresh_count > refreshes, "workspace/diagnostic/refresh")
        report = await pull(pull_client, uri)
        assert_expected(report.items, DOC, 1, severity)
    configure(pull_client, diagnostics="off")
    report = await pull(pull_client, uri)
    assert report.kind == "full" and list(report.items) == []
    configure(pull_client, diagnostics="warning")
    assert_expected((await pull(pull_client, uri)).items, DOC, 1)
    close(pull_client, uri)


@on_the_servers_loop
async def test_pull_gives_nothing_for_a_guarded_use(pull_client: LanguageClient):
    uri = uri_of(pull_client, "guarded.py")
    open_document(pull_client, uri, UNGUARDED)
    (item,) = (await pull(pull_client, uri)).items
    assert item.code == "missing-module" and item.data["member"] == "float_"
    change(pull_client, uri, GUARDED, 2)
    report = await pull(pull_client, uri)
    assert list(report.items) == [] and report.result_id.startswith("2:")
    close(pull_client, uri)


# -- push --------------------------------------------------------------------------------------
@on_the_servers_loop
async def test_push_publishes_the_findings_with_the_document_version(push_client: LanguageClient):
    assert push_client.init_result.capabilities.diagnostic_provider is not None  # advertised, and still pushed
    uri = uri_of(push_client, "pushed.py")
    open_document(push_client, uri, DOC)
    params = await published(push_client, uri, 1)
    assert_expected(params.diagnostics, DOC, 1)


@on_the_servers_loop
async def test_push_severity_follows_the_setting_and_off_clears(push_client: LanguageClient):
    uri = uri_of(push_client, "severity.py")
    open_document(push_client, uri, DOC)
    await published(push_client, uri, 1)
    for setting, severity in (("error", types.DiagnosticSeverity.Error), ("hint", types.DiagnosticSeverity.Hint)):
        seen = len(push_client.published)
        configure(push_client, diagnostics=setting)
        await _until(lambda seen=seen: any(p.uri == uri and p.diagnostics for _, p in push_client.published[seen:]), f"diagnostics at {setting}")
        params = next(p for _, p in push_client.published[seen:] if p.uri == uri)
        assert_expected(params.diagnostics, DOC, 1, severity)
    seen = len(push_client.published)
    configure(push_client, diagnostics="off")
    await _until(lambda: any(p.uri == uri for _, p in push_client.published[seen:]), "the cleared diagnostics")
    assert [list(p.diagnostics) for _, p in push_client.published[seen:] if p.uri == uri] == [[]]
    # off stops: an edit publishes nothing
    change(push_client, uri, DOC + "\n", 2)
    await asyncio.sleep(DEBOUNCE_S + 1.0)
    assert [p for _, p in push_client.published[seen:] if p.uri == uri and p.diagnostics] == []
    configure(push_client, diagnostics="warning")
    assert_expected((await published(push_client, uri, 2, after=seen)).diagnostics, DOC + "\n", 2)


@on_the_servers_loop
async def test_a_later_edit_replaces_stale_results(push_client: LanguageClient):
    uri = uri_of(push_client, "stale.py")
    open_document(push_client, uri, DOC)
    await published(push_client, uri, 1)
    seen = len(push_client.published)
    # version 2 is checked after the debounce; version 3 comes while it runs or right after
    change(push_client, uri, DOC + "z = np.float_\n", 2)
    await asyncio.sleep(DEBOUNCE_S + 0.02)
    third = "\n\n" + DOC
    change(push_client, uri, third, 3)
    params = await published(push_client, uri, 3, after=seen)
    assert [item.range.start.line for item in params.diagnostics] == [4, 6, 7]
    assert [third[item.data["start"] : item.data["end"]] for item in params.diagnostics] == ["float_", "ptp", "normed"]
    await asyncio.sleep(DEBOUNCE_S + 0.5)
    later = [p for _, p in push_client.published[seen:] if p.uri == uri]
    assert later[-1].version == 3, "nothing older is published after version 3"
    for p in later:
        assert all(item.data["version"] == p.version for item in p.diagnostics)


@on_the_servers_loop
async def test_a_guarded_use_is_not_published(push_client: LanguageClient):
    uri = uri_of(push_client, "guarded.py")
    open_document(push_client, uri, UNGUARDED)
    assert [item.code for item in (await published(push_client, uri, 1)).diagnostics] == ["missing-module"]
    change(push_client, uri, GUARDED, 2)
    assert list((await published(push_client, uri, 2)).diagnostics) == []


@on_the_servers_loop
async def test_closing_a_document_clears_its_diagnostics(push_client: LanguageClient):
    uri = uri_of(push_client, "closed.py")
    open_document(push_client, uri, DOC)
    assert (await published(push_client, uri, 1)).diagnostics
    seen = len(push_client.published)
    close(push_client, uri)
    params = await published(push_client, uri, None, after=seen, timeout=10)
    assert list(params.diagnostics) == []


@on_the_servers_loop
async def test_ghost_text_answers_while_a_check_runs(push_client: LanguageClient):
    """Completions never wait for diagnostics: with a long check under way (a document
    of 5,000 lines of numpy calls), ghost text on another document is answered before
    that check's diagnostics come."""
    await _until(lambda: any(state == "ready" for state, _ in push_client.statuses), "the model", 240)
    small = uri_of(push_client, "small.py")
    open_document(push_client, small, "import numpy as np\nx = np.")
    deadline = time.monotonic() + 120
    while True:  # warm: the model and numpy's members ready (the first answers are empty while they are computed)
        started = time.monotonic()
        warm = await _inline(push_client, small)
        alone = time.monotonic() - started
        if warm.items or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.3)
    big = uri_of(push_client, "big.py")
    seen = len(push_client.published)
    text = long_document(5000)
    assert len(text) > 1024 * 1024
    open_document(push_client, big, text)
    started = time.monotonic()
    result = await _inline(push_client, small)
    answered = time.monotonic()
    params = await published(push_client, big, 1, after=seen, timeout=300)
    arrived = next(t for t, p in push_client.published[seen:] if p is params)
    assert [item.data["name"] for item in params.diagnostics] == ["np.float_"]
    print(f"ghost text answered in {answered - started:.2f} s ({alone:.2f} s with no check under way); "
          f"the check's diagnostics came after {arrived - started:.2f} s")
    assert result is not None and result.items, result
    assert answered < arrived, "ghost text waited for the check"
    close(push_client, big)


async def _inline(client: LanguageClient, uri: str):
    return await asyncio.wait_for(
        client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
                text_document=types.TextDocumentIdentifier(uri),
                position=types.Position(1, len("x = np.")),
            )
        ),
        120,
    )


async def _until(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
