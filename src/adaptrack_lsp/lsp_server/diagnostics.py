"""Version diagnostics on open documents: what `adaptrack-lsp check` reports, in the editor.

Owns everything diagnostics in the server:

- when a document is checked: at didOpen and didSave, and `DEBOUNCE_S` after the last
  didChange (a pull waits for that check; it starts one only where none is due);
- where: one background thread of its own (`checking.checker.Checker` blocks while the
  API index computes answers), never the event loop or the model thread, so completions
  never wait for a check; and while a completion is computed the check pauses
  (`CheckGate`): the walk is pure Python, and sharing the interpreter lock with it
  would make ghost text several times slower;
- staleness: results are keyed by document version (and by a generation that changes
  with the settings a check depends on); an edit cancels the run in flight (`cancelled=`
  of `Checker.check`: the check stops at its next checkpoint) and a result for an older
  version or generation is dropped;
- delivery: pull (`textDocument/diagnostic`, LSP 3.17) for clients that declare
  `textDocument.diagnostic`: the answer waits for the check of the document's current
  version; `workspace/diagnostic/refresh` (where the client supports it) when results
  change without an edit (settings, save, version targets ready).  Other clients get
  `textDocument/publishDiagnostics`;
- the conversion of a `Finding` to an LSP `Diagnostic` (`diagnostic`): severity from the
  setting `diagnostics` (``off`` clears and stops), deprecations a Hint tagged
  Deprecated, source ``adaptrack``, code the finding kind's rule id, and ``data`` (the
  quick-fix contract): kind, name, path, member, start/end character offsets and the
  document version.

The index is the one completions are constrained by (`ConstraintEnvironment.api_index`
with the server's settings, so an untrusted workspace gets what its trust level allows);
the project's own modules (never checked as imports) are the names beside the document
and those of the workspace root (`checking.files.ProjectModules`).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import hashlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from lsprotocol import types

logger = logging.getLogger(__name__)

__all__ = ["DEBOUNCE_S", "DIAGNOSTIC_OPTIONS", "SOURCE", "CheckGate", "CheckRun", "DocumentDiagnostics", "TextPositions", "diagnostic"]

SOURCE = "adaptrack"
#: a check starts this long after the last edit
DEBOUNCE_S = 0.4
#: setting `diagnostics` -> the severity of a finding that is not a deprecation
SEVERITIES = {
    "hint": types.DiagnosticSeverity.Hint,
    "warning": types.DiagnosticSeverity.Warning,
    "error": types.DiagnosticSeverity.Error,
}
#: advertised as `diagnosticProvider` (pull clients ask; push clients ignore it)
DIAGNOSTIC_OPTIONS = types.DiagnosticOptions(identifier=SOURCE, inter_file_dependencies=False, workspace_diagnostics=False)
#: a check paused for completions runs again after this long (then for `RESUME_S`), so
#: that a stream of completions without a pause cannot hold it back for good
MAX_PAUSE_S = 2.0
RESUME_S = 0.05


# -- the conversion ----------------------------------------------------------------------------
class TextPositions:
    """Character offsets of one text -> LSP positions in the client's units."""

    def __init__(self, text: str, codec=None):
        from adaptrack_lsp.lsp_server.documents import lsp_lines

        self.lines = lsp_lines(text)
        self.starts = []
        total = 0
        for line in self.lines:
            self.starts.append(total)
            total += len(line)
        self.length = total
        self.codec = codec

    def position(self, offset: int) -> types.Position:
        offset = max(0, min(offset, self.length))
        if not self.lines:
            return types.Position(line=0, character=0)
        line = max(0, bisect.bisect_right(self.starts, offset) - 1)
        content = self.lines[line]
        character = min(offset - self.starts[line], len(content.rstrip("\r\n")))
        if line == len(self.lines) - 1 and offset == self.length and content.endswith(("\n", "\r")):
            return types.Position(line=line + 1, character=0)
        if self.codec is None:  # UTF-16, the LSP default
            units = len(content[:character].encode("utf-16-le", "surrogatepass")) // 2
            return types.Position(line=line, character=units)
        return types.Position(line=line, character=self.codec.client_num_units(content[:character]))


def diagnostic(finding, severity: str, version: int | None, positions: TextPositions | None = None, text: str = "") -> types.Diagnostic:
    """The LSP diagnostic of a checker `Finding` in a document of `version` (`positions`
    of the checked text, else built from `text`); `severity`: the setting `diagnostics`."""
    from adaptrack_lsp.checking.formats import RULES

    if positions is None:
        positions = TextPositions(text)
    if finding.deprecated:
        level, tags = types.DiagnosticSeverity.Hint, [types.DiagnosticTag.Deprecated]
    else:
        level, tags = SEVERITIES.get(severity, types.DiagnosticSeverity.Warning), None
    return types.Diagnostic(
        range=types.Range(start=positions.position(finding.start), end=positions.position(finding.end)),
        message=finding.message,
        severity=level,
        code=RULES.get(finding.kind, (finding.kind,))[0],
        source=SOURCE,
        tags=tags,
        data={
            "kind": finding.kind,
            "name": finding.name,
            "path": list(finding.path),
            "member": finding.member,
            "start": finding.start,
            "end": finding.end,
            "version": version,
        },
    )


def _result_id(version: int | None, diagnostics: Sequence[types.Diagnostic]) -> str:
    digest = hashlib.blake2b(digest_size=8)
    for item in diagnostics:
        r = item.range
        digest.update(repr((r.start.line, r.start.character, r.end.line, r.end.character, item.message, int(item.severity or 0),
                            item.code, tuple(item.tags or ()))).encode("utf-8", "surrogatepass"))
    return f"{version}:{digest.hexdigest()}"


# -- completions first, stale checks stopped -------------------------------------------------
class CheckRun:
    """The cancel flag of one check (`Checker.check` polls it at its checkpoints)."""

    __slots__ = ("cancelled",)

    def __init__(self):
        self.cancelled = False

    def set(self) -> None:
        self.cancelled = True

    def is_set(self) -> bool:
        return self.cancelled


class CheckGate:
    """Completions in flight, and the checks held back meanwhile.

    While a completion is computed or built (`hold_while`, `holding`), a check waits at
    its next checkpoint (`pause`, called by `Checker.check` every few dozen nodes and
    between its walks).  A pause longer than `MAX_PAUSE_S` lets the check run on for
    `RESUME_S`, so that a stream of completions cannot hold it back for good.
    """

    def __init__(self):
        self.busy = 0
        self._idle = threading.Event()
        self._idle.set()
        self._lock = threading.Lock()
        self._resume_until = 0.0

    def hold_while(self, future) -> None:
        """Checks pause until `future` (a completion on the model thread) is done."""
        self._hold()
        future.add_done_callback(self._release)

    @contextlib.contextmanager
    def holding(self):
        """Checks pause while the block runs (a completion request being built)."""
        self._hold()
        try:
            yield
        finally:
            self._release()

    def _hold(self) -> None:
        with self._lock:
            self.busy += 1
            self._idle.clear()

    def _release(self, _future=None) -> None:
        with self._lock:
            self.busy = max(0, self.busy - 1)
            if self.busy == 0:
                self._idle.set()

    def pause(self) -> None:
        """A check's checkpoint: wait while a completion is computed (see the class)."""
        if not self.busy or time.monotonic() < self._resume_until:
            return
        if not self._idle.wait(MAX_PAUSE_S):
            self._resume_until = time.monotonic() + RESUME_S


# -- per-document state ---------------------------------------------------------------------
@dataclass
class _Result:
    version: int | None
    generation: int
    items: list[types.Diagnostic]
    result_id: str


@dataclass
class _Document:
    #: the URI as the client wrote it (diagnostics are published under it)
    client_uri: str
    timer: asyncio.TimerHandle | None = None
    #: (version, generation) of the run queued or in flight, and its cancel flag
    running: tuple[int | None, int] | None = None
    cancel: CheckRun | None = None
    result: _Result | None = None
    #: result id last published (push) or answered (pull), and the version it was for
    delivered: tuple[int | None, str] | None = None
    waiters: list[asyncio.Future] = field(default_factory=list)


class DocumentDiagnostics:
    """The diagnostics of one server's open Python documents (see the module docstring).
    Every method but `_check` runs on the event loop."""

    def __init__(self, server):
        self.server = server
        self.documents: dict[str, _Document] = {}
        #: changes with the settings a check depends on: older results are stale
        self.generation = 0
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._checker = None
        self._refresh_queued = False
        self._closed = False
        self.gate = CheckGate()

    # -- what the client supports --------------------------------------------------------
    @property
    def client_pulls(self) -> bool:
        """The client asks for diagnostics (`textDocument.diagnostic` capability)."""
        try:
            text_document = self.server.client_capabilities.text_document
            return bool(text_document is not None and text_document.diagnostic is not None)
        except Exception:
            return False

    @property
    def refresh_support(self) -> bool:
        try:
            workspace = self.server.client_capabilities.workspace
            return bool(workspace and workspace.diagnostics and workspace.diagnostics.refresh_support)
        except Exception:
            return False

    @property
    def enabled(self) -> bool:
        return self.server.settings.diagnostics != "off" and self.server.service is not None

    # -- document events -----------------------------------------------------------------
    def opened(self, uri: str) -> None:
        key = _unquote(uri)
        if not self._is_python(key):
            return
        state = self.documents.get(key)
        if state is None:
            state = self.documents[key] = _Document(client_uri=uri)
        self._schedule(key, state, 0.0)

    def changed(self, uri: str) -> None:
        key = _unquote(uri)
        state = self.documents.get(key)
        if state is None:
            return
        if state.cancel is not None:
            state.cancel.set()  # the text it checks is gone
        self._schedule(key, state, DEBOUNCE_S)

    def saved(self, uri: str) -> None:
        key = _unquote(uri)
        state = self.documents.get(key)
        if state is not None:
            self._schedule(key, state, 0.0, again=True)

    def closed(self, uri: str) -> None:
        key = _unquote(uri)
        state = self.documents.pop(key, None)
        if state is None:
            return
        self._stop(state)
        self._wake(state)
        if not self.client_pulls and state.delivered is not None:
            self._publish(state.client_uri, None, [])

    def settings_changed(self, previous) -> None:
        """After `workspace/didChangeConfiguration`: a new severity or index makes every
        result stale; ``off`` clears them and stops."""
        settings = self.server.settings
        service = self.server.service
        index_changed = service is not None and service.constraints.key(previous) != service.constraints.key(settings)
        if previous.diagnostics == settings.diagnostics and not index_changed:
            return
        self.recheck_all()

    def index_changed(self) -> None:
        """The index answers differently now (version targets ready): check again."""
        if self.documents:
            self.recheck_all()

    def recheck_all(self) -> None:
        self.generation += 1
        self._checker = None
        for key, state in self.documents.items():
            self._stop(state)
            state.result = None
            if not self.enabled:
                if not self.client_pulls and state.delivered is not None:
                    self._publish(state.client_uri, None, [])
                    state.delivered = None
                self._wake(state)
                continue
            self._schedule(key, state, 0.0)
        if self.client_pulls:
            self._refresh()

    def close(self) -> None:
        self._closed = True
        for state in self.documents.values():
            self._stop(state)
        self._jobs.put(None)

    def yield_to(self, completion) -> None:
        """A completion was submitted (`completion`: its future): checks pause until it is done."""
        self.gate.hold_while(completion)

    def completing(self):
        """A context in which checks pause (a completion request is built from the document)."""
        return self.gate.holding()

    # -- the pull request ----------------------------------------------------------------
    async def pull(self, params: types.DocumentDiagnosticParams) -> types.DocumentDiagnosticReport:
        """The report of the document's current version (waits for its check)."""
        key = _unquote(params.text_document.uri)
        while True:
            state = self.documents.get(key)
            document = self.server.workspace.text_documents.get(key)
            if state is None or document is None or not self.enabled:
                return types.RelatedFullDocumentDiagnosticReport(items=[])
            result = state.result
            if result is not None and result.version == document.version and result.generation == self.generation:
                break
            if state.running != (document.version, self.generation) and state.timer is None:
                self._schedule(key, state, 0.0)  # nothing under way for this version (else: the debounce's run)
            waiter = asyncio.get_running_loop().create_future()
            state.waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in state.waiters:
                    state.waiters.remove(waiter)
        state.delivered = (result.version, result.result_id)
        if params.previous_result_id == result.result_id:
            return types.RelatedUnchangedDocumentDiagnosticReport(result_id=result.result_id)
        return types.RelatedFullDocumentDiagnosticReport(items=list(result.items), result_id=result.result_id)

    # -- scheduling ----------------------------------------------------------------------
    def _schedule(self, key: str, state: _Document, delay: float, again: bool = False) -> None:
        if state.timer is not None:
            state.timer.cancel()
            state.timer = None
        if not self.enabled or self._closed:
            return
        loop = asyncio.get_running_loop()
        if delay <= 0:
            self._start(key, state, again)
        else:
            state.timer = loop.call_later(delay, self._start, key, state, again)

    def _start(self, key: str, state: _Document, again: bool = False) -> None:
        state.timer = None
        if self.documents.get(key) is not state or not self.enabled:
            return
        document = self.server.workspace.text_documents.get(key)
        if document is None:
            return
        version, generation = document.version, self.generation
        result = state.result
        if not again and result is not None and (result.version, result.generation) == (version, generation):
            return  # checked already
        if state.cancel is not None:
            if state.running == (version, generation) and not again:
                return  # in flight
            state.cancel.set()
        cancel = CheckRun()
        state.cancel, state.running = cancel, (version, generation)
        text = document.source
        codec = document.position_codec
        settings = self.server.settings
        service = self.server.service

        def job() -> None:
            from adaptrack_lsp.checking.checker import CheckCancelled

            if cancel.is_set():
                items = None
            else:
                try:
                    items = self._check(service, settings, key, text, version, codec, cancel)
                except CheckCancelled:
                    items = None
                except Exception:
                    logger.exception("checking %s failed", key)
                    items = []
            self.server.call_soon(self._finished, key, state, version, generation, cancel, items)

        self._ensure_thread()
        self._jobs.put(job)

    def _finished(self, key, state, version, generation, cancel, items) -> None:
        if state.cancel is cancel:
            state.cancel, state.running = None, None
        try:
            document = self.server.workspace.text_documents.get(key)
            current = (
                items is not None
                and not cancel.is_set()
                and self.documents.get(key) is state
                and generation == self.generation
                and document is not None
                and document.version == version
                and self.enabled
            )
            if not current:
                return
            result = state.result = _Result(version, generation, items, _result_id(version, items))
            if self.client_pulls:
                if state.delivered is not None and state.delivered[0] == version and state.delivered[1] != result.result_id:
                    self._refresh()  # answered for this version, and the answer changed (a save)
            elif state.delivered != (version, result.result_id):
                self._publish(state.client_uri, version, items)
                state.delivered = (version, result.result_id)
        finally:
            self._wake(state)

    # -- the check (diagnostics thread) ----------------------------------------------------
    def _check(self, service, settings, key: str, text: str, version, codec, run: CheckRun) -> list[types.Diagnostic] | None:
        from adaptrack_lsp.checking.checker import Checker
        from adaptrack_lsp.completion.project_context import document_path

        index, _info = service.constraints.api_index(settings)
        if index is None:
            return []
        checker = self._checker
        if checker is None or checker.index is not index:
            checker = self._checker = Checker(index)
        local_modules = self._local_modules(key)
        result = checker.check(
            text, local_modules=local_modules, path=document_path(key), cancelled=run.is_set, pause=self.gate.pause
        )
        if run.cancelled:
            return None
        positions = TextPositions(text, codec)
        return [diagnostic(finding, settings.diagnostics, version, positions) for finding in result.findings]

    def _local_modules(self, key: str) -> frozenset[str]:
        from pygls.uris import to_fs_path

        from adaptrack_lsp.checking.files import ProjectModules
        from adaptrack_lsp.completion.request import modules_beside

        root = getattr(self.server.service.constraints, "workspace_root", None) if self.server.service else None
        project = ProjectModules([root] if root else [])
        path = to_fs_path(key) if key.startswith("file:") else None
        if path is None and root:  # a document without a file (untitled:) counts as one in the root folder
            path = os.path.join(root, "untitled.py")
        return (project.for_file(path) if path else frozenset()) | modules_beside(key)

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            # a daemon: a check waiting for the index never holds up the process's exit
            self._thread = threading.Thread(target=self._run_jobs, name="adaptrack-diagnostics", daemon=True)
            self._thread.start()

    def _run_jobs(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:
                logger.exception("a diagnostics job failed")

    # -- to the client -------------------------------------------------------------------
    def _publish(self, uri: str, version: int | None, items: list[types.Diagnostic]) -> None:
        try:
            self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=items))
        except Exception:
            logger.exception("publishing diagnostics failed")

    def _refresh(self) -> None:
        """Ask a pull client to pull again (once per turn of the event loop)."""
        if not self.refresh_support or self._refresh_queued:
            return
        self._refresh_queued = True

        def send() -> None:
            self._refresh_queued = False
            try:
                self.server.workspace_diagnostic_refresh(None)
            except Exception:
                logger.exception("asking for a diagnostic refresh failed")

        asyncio.get_running_loop().call_soon(send)

    @staticmethod
    def _stop(state: _Document) -> None:
        if state.timer is not None:
            state.timer.cancel()
            state.timer = None
        if state.cancel is not None:
            state.cancel.set()
        state.cancel, state.running = None, None

    @staticmethod
    def _wake(state: _Document) -> None:
        for waiter in state.waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _is_python(self, key: str) -> bool:
        document = self.server.workspace.text_documents.get(key)
        if document is None:
            return False
        return document.language_id == "python" or key.endswith((".py", ".pyi"))


def _unquote(uri: str) -> str:
    from urllib.parse import unquote

    return unquote(uri)
