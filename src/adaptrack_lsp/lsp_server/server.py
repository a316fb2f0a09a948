"""The pygls language server: thin LSP handlers over `CompletionService`.

Handlers only convert between LSP types and the service; every handler is guarded so
that a failure answers with an empty result (or a JSON-RPC error) and the server keeps
running.  What this module owns besides the conversions:

- settings from `initializationOptions` and `workspace/didChangeConfiguration`
  (`window/showMessage` for invalid values, defaults used for them);
- the background model load after `initialized`, reported with a server-created
  `$/progress` ("adaptrack: loading model") and `adaptrack/status` notifications; one
  load per settings change (a configuration that keeps the model fields starts none);
- API index work for a document's imports, started at didOpen/didChange on the index
  thread; while members a request needs are computed it gets an empty result at once
  (`isIncomplete: true`) and an `adaptrack/status` "indexing" notification, and
  "ready" follows when they are computed (the clients ask again then);
- one `CompletionRequest` per completion, built at the handler from the document as
  it is then (`cursor_request`), with the range its answers replace; the response is
  built from them, never from the document re-read after decoding;
- request plumbing: model work on the service's worker thread, `$/cancelRequest`
  (the asyncio task is cancelled, decoding stops between LM calls, the client gets
  RequestCancelled) and supersession (a newer request of the same kind for the same
  document makes the older one return an empty result);
- robustness against malformed JSON-RPC (`GuardedProtocol`, and `framing.FramedReader`
  for stdio: message size cap, resynchronisation after bad frames);
- the LSP lifecycle: one `initialize`, `InvalidRequest` after `shutdown`, exit code 1
  for `exit` without `shutdown`;
- telling the user when completions fail or lose their constraint (`health.py`).

Version diagnostics of the open documents (`diagnostics.py`) are started from the
document notifications and `didChangeConfiguration`, and answer `textDocument/diagnostic`.

Completion lists sample `numSamples` times at max(temperature, 1.0) with `listDecoder`
(default `exact`: exact samples of the constrained distribution), de-duplicate and rank
by model probability; at the start of an argument of a call whose signature is known
they add the call's keyword names (``name=``, kind Variable, the model's most probable
first); ghost text uses `decoder`, greedy at temperature 0 (the default).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import math
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcParseError
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from adaptrack_lsp import __version__
from adaptrack_lsp.apis.document import DocumentAnalysis
from adaptrack_lsp.completion.lm.base import EngineUnavailable
from adaptrack_lsp.completion.pipeline import INDEXING, CompletionCancelled, CompletionResult
from adaptrack_lsp.completion.request import CompletionRequest
from adaptrack_lsp.completion.service import CompletionService, ServiceNotReady
from adaptrack_lsp.config import Settings, parse_settings
from adaptrack_lsp.lsp_server.code_actions import register_code_actions
from adaptrack_lsp.lsp_server.diagnostics import DIAGNOSTIC_OPTIONS, DocumentDiagnostics
from adaptrack_lsp.lsp_server.documents import DocumentAnalyses, LspWorkspace
from adaptrack_lsp.lsp_server.framing import DEFAULT_MAX_MESSAGE_BYTES
from adaptrack_lsp.lsp_server.health import CompletionHealth

logger = logging.getLogger(__name__)

STATUS_NOTIFICATION = "adaptrack/status"
#: completion requests -> the mode they ask for
COMPLETION_METHODS = {types.TEXT_DOCUMENT_INLINE_COMPLETION: "inline", types.TEXT_DOCUMENT_COMPLETION: "list"}
#: requests built on arrival and not yet taken by their handler, at most
MAX_ARRIVED_REQUESTS = 64
PROGRESS_TITLE = "adaptrack: loading model"
#: completion lists open after "." (members) and after "(" and "," (keyword names of the call)
TRIGGER_CHARACTERS = [".", "(", ","]


class GuardedProtocol(LanguageServerProtocol):
    """pygls' protocol, hardened against malformed messages and lifecycle misuse.

    A request whose params cannot be structured gets a JSON-RPC error response naming
    the offending field (pygls alone would drop it without an answer); messages that
    are not JSON-RPC objects are logged and ignored.  A second `initialize` and any
    request after `shutdown` get `InvalidRequest` (pygls would replace the session, or
    drop the request without an answer).
    """

    _initialize_seen = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        #: ids of notification futures that finished, removed at the next notification
        self._finished_notifications: set[str] = set()

    def structure_message(self, data):
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            message_id = data.get("id") if isinstance(data, dict) else None
            if isinstance(data, dict) and "method" in data and _valid_id(message_id):
                response = error.to_response_error()
                if isinstance(error, JsonRpcInvalidParams):
                    response.message = f"invalid params for {data.get('method')}: {_describe_structure_error(error)}"
                self._send_response(message_id, error=response)
            logger.warning("dropping malformed message: %s", error)
            return _Ignored()

    def handle_message(self, message):
        if isinstance(message, _Ignored):
            return
        if not hasattr(message, "jsonrpc"):
            logger.warning("ignoring a message that is not a JSON-RPC object: %.200r", message)
            return
        method = getattr(message, "method", None)
        message_id = getattr(message, "id", None)
        is_request = method is not None and _valid_id(message_id)
        if is_request and self._shutdown and method != types.EXIT:
            self._send_response(message_id, error=JsonRpcInvalidRequest(f"{method}: the server is shutting down").to_response_error())
            return
        if is_request and method in COMPLETION_METHODS:
            # pygls starts an async handler on a later turn of the event loop, after
            # notifications read meanwhile (an edit) have changed the document: the
            # request is built now, from the document the client asked about
            self._server.request_arrived(method, getattr(message, "params", None))
        if is_request and method == types.INITIALIZE:
            if self._initialize_seen:
                error = JsonRpcInvalidRequest("initialize: the server is already initialized")
                self._send_response(message_id, error=error.to_response_error())
                return
            self._initialize_seen = True
        try:
            super().handle_message(message)
        except Exception:
            logger.exception("failed to handle a message")

    def _handle_notification(self, method_name, params):
        # pygls files the future of every coroutine or generator notification handler
        # (didOpen, didChange, ...) under a fresh id and never removes it: one entry per
        # notification for the life of the server.  Drop them once they are done.
        # (Removal is deferred for futures still running: pygls cancels them while it
        # iterates over the table at `shutdown`.)
        futures = self._request_futures
        finished = self._finished_notifications
        for key in list(finished):
            finished.discard(key)
            futures.pop(key, None)
        before = set(futures)
        super()._handle_notification(method_name, params)
        for key in set(futures) - before:
            future = futures[key]
            if future.done():
                futures.pop(key, None)
            else:
                future.add_done_callback(lambda _, key=key: finished.add(key))

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        result = yield from super().lsp_initialize(params)
        # positions and incremental edits use LSP line breaks only (see documents.py)
        LspWorkspace.adopt(self.workspace)
        return result


def _describe_structure_error(error: Exception) -> str:
    """The fields that failed to structure, e.g. "expected int @ $.params.position.line"."""
    import cattrs

    cause = error.__cause__
    if isinstance(cause, cattrs.BaseValidationError):
        try:
            return "; ".join(cattrs.transform_error(cause, path="$"))
        except Exception:
            pass
    return str(cause or error)


class _Ignored:
    """Stands in for a message that was already answered or must be dropped."""


def _valid_id(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


class AdaptrackServer(LanguageServer):
    """Language server state: settings, the completion service, model-load progress."""

    def __init__(self, service_factory: Callable[..., CompletionService] = CompletionService, **kwargs):
        super().__init__("adaptrack-lsp", __version__, protocol_cls=GuardedProtocol, **kwargs)
        self.settings = Settings()
        self.service_factory = service_factory
        self.service: CompletionService | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pending_problems: list[str] = []
        #: run at `exit`, which ends the process without unwinding (no finally, no atexit)
        self.exit_cleanups: list[Callable[[], None]] = []
        self._progress_ids = itertools.count(1)
        self._load_lock = threading.Lock()
        self._status: tuple[str, str] | None = None
        self._not_ready_logged = False
        #: a `shutdown` request came before `exit` (the exit code is 0 only then)
        self.shutdown_requested = False
        self.max_message_bytes = DEFAULT_MAX_MESSAGE_BYTES
        self.exit_code = 0
        self.health = CompletionHealth(self.send_status, self.show_message, self._ready_message, self.log_message)
        #: version diagnostics of the open documents (`diagnostics.py`)
        self.diagnostics = DocumentDiagnostics(self)
        #: the syntax analysis of each open document, edited with its changes (`documents.py`)
        self.analyses = DocumentAnalyses()
        #: id(params) -> (request, edit range) built when the request was read
        self._tasks: set[asyncio.Future] = set()
        self._arrived: collections.OrderedDict[int, tuple[CompletionRequest, types.Range] | None] = collections.OrderedDict()

    def _ready_message(self) -> str:
        service = self.service
        return service.message if service is not None and service.message else "ready"

    # -- stdio with a hardened reader -------------------------------------------------------
    def start_io(self, stdin=None, stdout=None) -> None:
        """Serve on stdio like pygls, reading frames with `framing.FramedReader`; the exit
        code asked for by `exit` (0 after `shutdown`, else 1) is kept in `exit_code`."""
        import sys

        from pygls.io_ import StdoutWriter, run_async

        from adaptrack_lsp.lsp_server.framing import FramedReader, StdinChunks

        self._stop_event = threading.Event()
        reader = FramedReader(StdinChunks(stdin or sys.stdin.buffer), self.max_message_bytes, self.framing_error)
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        try:
            asyncio.run(
                run_async(
                    stop_event=self._stop_event,
                    reader=reader,
                    protocol=self.protocol,
                    logger=logger,
                    error_handler=self.report_server_error,
                )
            )
        except BrokenPipeError:
            logger.error("the connection to the client is lost; shutting down")
        except KeyboardInterrupt:
            pass
        except SystemExit as request:
            self.exit_code = request.code if isinstance(request.code, int) else 1
        finally:
            self.shutdown()

    def framing_error(self, message: str, answer: bool) -> None:
        """A frame the reader rejected (answered, id null) or bytes it skipped (logged)."""
        logger.warning("%s", message)
        if answer:
            self.protocol._send_response(None, error=JsonRpcInvalidRequest(message).to_response_error())

    # -- errors never take the server down ------------------------------------------------
    def report_server_error(self, error: Exception, source) -> None:
        logger.error("server error (%s): %s", getattr(source, "__name__", source), error)
        if source is JsonRpcException and isinstance(error, ValueError):
            # pygls' reader could not parse a frame's body: JSON-RPC says Parse error, id null
            try:
                self.protocol._send_response(None, error=JsonRpcParseError(f"unparsable message: {error}").to_response_error())
            except Exception:
                logger.debug("could not answer an unparsable message", exc_info=True)

    # -- notifications (safe from any thread) ---------------------------------------------
    def call_soon(self, function: Callable, *args) -> None:
        """Run `function(*args)` on the event loop (from the loop or a worker thread)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            _guarded(function, *args)
        else:
            loop.call_soon_threadsafe(_guarded, function, *args)

    def background(self, coroutine) -> None:
        """Run `coroutine` on the event loop as a task, its failure logged."""
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)

        def finished(done: asyncio.Future) -> None:
            self._tasks.discard(done)
            if not done.cancelled() and done.exception() is not None:
                logger.error("background task failed: %s", done.exception())

        task.add_done_callback(finished)

    def send_status(self, state: str, message: str) -> None:
        if self._status == (state, message):
            return
        self._status = (state, message)
        self.call_soon(self.protocol.notify, STATUS_NOTIFICATION, {"state": state, "message": message})

    def show_message(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        self.call_soon(self.window_show_message, types.ShowMessageParams(type=kind, message=message))

    def log_message(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.call_soon(self.window_log_message, types.LogMessageParams(type=kind, message=message))

    def report_environment(self) -> None:
        """Log which environment validates completions, and why (workspace trust)."""
        try:
            if self.service is not None:
                self.log_message(f"adaptrack: API constraint from {self.service.describe_constraint()}")
        except Exception:
            logger.exception("describing the API environment failed")

    def report_problems(self, problems: list[str]) -> None:
        for problem in problems:
            self.show_message(f"adaptrack: {problem}", types.MessageType.Warning)

    # -- model loading ------------------------------------------------------------------------
    async def start_model_load(self, ticket: int) -> None:
        """Load the model in the background with `$/progress` and `adaptrack/status`;
        `ticket`: from `service.begin_load()`, which the caller runs before scheduling
        this (a configuration read meanwhile then sees the load)."""
        service = self.service
        if service is None:
            return
        # before any await too: a request answered while the client creates the progress
        # token is not a silent empty answer
        self.send_status("loading", f"loading {self.settings.model}")
        token = None
        if _client_supports_progress(self):
            token = f"adaptrack-load-{next(self._progress_ids)}"
            try:
                await asyncio.wait_for(self.work_done_progress.create_async(token), timeout=10)
            except Exception:
                logger.info("client did not accept a progress token; loading without progress")
                token = None
        if token is not None:
            self.work_done_progress.begin(
                token,
                types.WorkDoneProgressBegin(
                    title=PROGRESS_TITLE, message=self.settings.model, percentage=0, cancellable=False
                ),
            )
        self._not_ready_logged = False

        def progress(message: str, percentage: int | None = None) -> None:
            if token is not None:
                value = types.WorkDoneProgressReport(message=message, percentage=percentage)
                self.call_soon(self.work_done_progress.report, token, value)

        def done(state: str, message: str) -> None:
            if token is not None:
                end = types.WorkDoneProgressEnd(message=message)
                self.call_soon(self.work_done_progress.end, token, end)
            if state == "superseded":
                return  # the newer load reports
            problem = service.engine_problem() if state == "ready" else ""
            if problem:  # loaded, but its inference server cannot be used yet
                self.health.engine_unavailable(problem)
                return
            self.send_status("ready" if state == "ready" else "error", message)
            if state != "ready":
                self.show_message(f"adaptrack: {message}", types.MessageType.Error)

        service.load_in_background(progress=progress, done=done, ticket=ticket)

    # -- documents --------------------------------------------------------------------------
    def document_offset(self, document, position: types.Position) -> int | None:
        """The character offset of a client `position` in `document`, or None when the
        position is outside it (a column past the line's end is clamped to it)."""
        text = document.source
        lines = document.lines
        if position.line < 0 or position.character < 0:
            return None
        if position.line >= len(lines):
            if position.line == len(lines) and (not lines or lines[-1].endswith(("\n", "\r"))):
                return len(text)
            return None
        content = lines[position.line].rstrip("\r\n")
        server_position = document.position_codec.position_from_client_units(lines, position)
        column = min(server_position.character, len(content))
        return sum(len(text_line) for text_line in lines[: position.line]) + column

    def document_analysis(self, uri: str) -> DocumentAnalysis | None:
        """The syntax analysis of the open document `uri` as its text is now (None for a
        document that is not open)."""
        document = self.workspace.text_documents.get(_unquote(uri))
        if document is None:
            return None
        return self.analyses.analysis(_unquote(uri), document.source)

    def cursor_request(self, uri: str, position: types.Position, mode: str) -> tuple[CompletionRequest, types.Range] | None:
        """The request for a cursor, built once from the document as it is now, and the
        range its answers replace (the typed word up to the cursor); None for an unknown
        document or a position outside it."""
        document = self.workspace.text_documents.get(_unquote(uri))
        if document is None or self.service is None:
            return None
        offset = self.document_offset(document, position)
        if offset is None:
            return None
        request = self.service.request(
            document.source,
            offset,
            mode=mode,
            document=_unquote(uri),
            version=document.version,
            open_documents=self.open_documents(),
            analysis=self.analyses.analysis(_unquote(uri), document.source),
        )
        word = request.typed_word
        start = document.client_position_at_offset(offset - len(word)) if word else position
        return request, types.Range(start=start, end=position)

    def attach(self, service: CompletionService) -> CompletionService:
        """Hear the service's version targets being prepared (status and log)."""
        constraints = getattr(service, "constraints", None)
        if constraints is not None:
            constraints.target_progress = self.target_progress
            constraints.target_finished = self.targets_finished
        if getattr(service, "host", None) is not None:  # the built-in model learning a library: the same status line
            service.host.library_progress = lambda message: self.target_progress(message) if message else self.index_ready(True)
        return service

    def target_progress(self, message: str) -> None:
        """A step of preparing the version targets: logged; the status says it while
        completions wait for it (status "indexing"), not over a model still loading."""
        self.log_message(f"adaptrack: {message}")
        if self._status is None or self._status[0] in ("ready", "indexing"):
            self.send_status("indexing", message)

    def targets_finished(self, problem: str) -> None:
        """The version targets are ready ("") or failed: status "ready" again, or
        "degraded" naming the problem (never a silent fallback to the installed version)."""
        if problem:
            self.health.constraint_unavailable(problem)
        else:
            self.index_ready(True)
        self.call_soon(self.diagnostics.index_changed)

    def open_documents(self) -> tuple[tuple[str, str], ...]:
        """(file path, text) of the Python documents open in the editor, in the order they
        were opened (the project context of a request; `completion/project_context.py`)."""
        from pygls.uris import to_fs_path

        from adaptrack_lsp.completion.request import sanitize_text

        found = []
        for uri, document in list(self.workspace.text_documents.items()):
            if not uri.startswith("file:"):
                continue
            path = to_fs_path(uri)
            if path and (document.language_id == "python" or path.endswith((".py", ".pyi"))):
                found.append((path, sanitize_text(document.source)))  # lone surrogates: as the request's own text
        return tuple(found)

    def index_ready(self, answered: bool) -> None:
        """The API members an "indexing" answer waited for are computed: status "ready"
        again, so that clients ask again (their next request decodes)."""
        if answered and self._status is not None and self._status[0] == "indexing" and self.health.state == "ready":
            service = self.service
            self.send_status("ready", service.message if service is not None else "ready")

    def request_arrived(self, method: str, params) -> None:
        """Build the request of a completion message as it is read (see `GuardedProtocol`)."""
        if params is None:
            return
        if self.service is None or not self.service.ready:
            self._arrived.pop(id(params), None)  # no stale entry under a reused id
            return  # the handler answers "not ready" (or builds the request itself)
        try:
            with self.diagnostics.completing():  # a check under way pauses meanwhile
                located = self.cursor_request(params.text_document.uri, params.position, COMPLETION_METHODS[method])
        except Exception:
            logger.exception("building the completion request failed")
            located = None
        self._arrived[id(params)] = located
        while len(self._arrived) > MAX_ARRIVED_REQUESTS:  # requests cancelled before their handler ran
            self._arrived.popitem(last=False)

    async def run_completion(
        self, params, mode: str
    ) -> tuple[CompletionResult, types.Range] | None:
        """The service's result for a completion request and the range it replaces; None
        when there is nothing to answer (not ready, unknown document, superseded).  The
        request is the one built when the message was read (built now when it was not).
        Cancellation propagates."""
        service = self.service
        if service is None or not service.ready:
            if not self._not_ready_logged:
                self._not_ready_logged = True
                state = service.message if service is not None else "not initialized"
                self.log_message(f"adaptrack: no completions yet ({state})")
            return None
        arrived = self._arrived.pop(id(params), _NOT_BUILT)
        located = self.cursor_request(params.text_document.uri, params.position, mode) if arrived is _NOT_BUILT else arrived
        if located is None:
            return None
        request, edit_range = located
        cancel = threading.Event()
        try:
            future = service.submit(request, cancelled=cancel.is_set)
        except ServiceNotReady:
            return None
        self.diagnostics.yield_to(future)
        try:
            result = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            cancel.set()
            raise
        except CompletionCancelled as cancelled:
            logger.debug("completion %s", cancelled.reason)
            return None
        except ServiceNotReady:
            return None
        except EngineUnavailable as error:  # the server backend's engine: degraded, retried next time
            self.health.engine_unavailable(str(error))
            return None
        except Exception as error:
            self.health.request_failed(f"{type(error).__name__}: {error}")
            raise
        if result.status == INDEXING or (result.pending and result.status != "failed"):
            # an empty answer while members are computed, or ghost text answered without
            # them: either way the status says what is being indexed, until it is done
            message = result.message if result.status == INDEXING else f"{result.indexing}; meanwhile completions leave out members not computed yet"
            self.send_status("indexing", message)
            service.when_indexed(result, lambda answered: self.call_soon(self.index_ready, answered))
            return result, edit_range
        if self._status is not None and self._status[0] == "indexing" and not result.constraint.problem and self.health.state == "ready":
            self.send_status("ready", service.message)
        syntax = result.constraint.syntax
        note = f"syntax check off for this request: {syntax.removeprefix('off: ')}" if syntax.startswith("off") else ""
        self.health.request_done(result.status, result.message, result.constraint.problem, result.engine_warning, note=note)
        return result, edit_range


_NOT_BUILT = object()


def _guarded(function: Callable, *args) -> None:
    try:
        function(*args)
    except Exception:
        logger.exception("sending a message to the client failed")


def _unquote(uri: str) -> str:
    from urllib.parse import unquote

    return unquote(uri)


def _client_supports_progress(server: LanguageServer) -> bool:
    try:
        window = server.client_capabilities.window
        return bool(window and window.work_done_progress)
    except Exception:
        return False


def _root_path(params: types.InitializeParams) -> str | None:
    from pygls.uris import to_fs_path

    uri = params.root_uri
    if uri is None and params.workspace_folders:
        uri = params.workspace_folders[0].uri
    if uri is not None:
        return to_fs_path(uri)
    return params.root_path


# -- conversions ------------------------------------------------------------------------------
def inline_items(answer: tuple[CompletionResult, types.Range] | None) -> types.InlineCompletionList:
    if answer is None:
        return types.InlineCompletionList(items=[])
    result, edit_range = answer
    cursor = types.Range(start=edit_range.end, end=edit_range.end)
    return types.InlineCompletionList(
        items=[types.InlineCompletionItem(insert_text=c.text, range=cursor) for c in result.candidates if c.text]
    )


def completion_list(answer: tuple[CompletionResult, types.Range] | None) -> types.CompletionList:
    if answer is None or answer[0].status == INDEXING:
        return types.CompletionList(is_incomplete=True, items=[])
    result, edit_range = answer
    word = result.request.typed_word if result.request is not None else ""
    items = []
    for rank, candidate in enumerate(result.candidates):
        new_text = word + candidate.text
        keyword = candidate.kind == "keyword"
        items.append(
            types.CompletionItem(
                label=new_text,
                kind=types.CompletionItemKind.Variable if keyword else types.CompletionItemKind.Text,
                detail=candidate.detail,
                sort_text=f"{rank:04d}",
                filter_text=new_text,
                text_edit=types.TextEdit(range=edit_range, new_text=new_text),
                data={
                    "logprob": candidate.logprob if math.isfinite(candidate.logprob) else None,
                    "valid": candidate.valid,
                    "counters": result.counters,
                    "constraint": result.constraint.as_dict(),
                },
            )
        )
    return types.CompletionList(is_incomplete=False, items=items)


# -- the server and its handlers ------------------------------------------------------------------
def create_server(service_factory: Callable[..., CompletionService] = CompletionService) -> AdaptrackServer:
    server = AdaptrackServer(service_factory=service_factory)

    @server.feature(types.INITIALIZE)
    def initialize(ls: AdaptrackServer, params: types.InitializeParams) -> None:
        try:
            ls.settings, problems = parse_settings(params.initialization_options, ls.settings)
            ls.pending_problems.extend(problems)
            ls.service = ls.attach(ls.service_factory(ls.settings, workspace_root=_root_path(params)))
        except Exception as error:
            logger.exception("initialize failed")
            ls.pending_problems.append(f"initialization problem: {error}")

    @server.feature(types.INITIALIZED)
    def initialized(ls: AdaptrackServer, params: types.InitializedParams) -> None:
        # synchronous: the first load is recorded before the next message is read, so a
        # configuration sent right after `initialized` (as Neovim does) finds the same
        # model fields already loading and starts no second load
        ls.loop = asyncio.get_running_loop()
        try:
            ls.report_problems(ls.pending_problems)
            ls.pending_problems.clear()
            if ls.service is None:
                ls.service = ls.attach(ls.service_factory(ls.settings))
            ls.background(ls.start_model_load(ls.service.begin_load()))
            ls.report_environment()
        except Exception as error:
            logger.exception("starting the model load failed")
            ls.send_status("error", f"could not start loading the model: {error}")

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: AdaptrackServer, params: types.DidChangeConfigurationParams) -> None:
        # synchronous: the settings hold for every request read after this notification
        try:
            settings, problems = parse_settings(params.settings, ls.settings)
            ls.report_problems(problems)
            previous, ls.settings = ls.settings, settings
            if ls.service is None:
                return
            if ls.service.update_settings(settings):
                ls.background(ls.start_model_load(ls.service.begin_load()))
            ls.diagnostics.settings_changed(previous)
            ls.report_environment()
        except Exception:
            logger.exception("didChangeConfiguration failed")

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: AdaptrackServer, params: types.DidOpenTextDocumentParams) -> None:
        try:  # first: the warm-up's import learning finds the analysis by the text
            ls.analyses.opened(_unquote(params.text_document.uri), params.text_document.text)
        except Exception:
            logger.exception("analysing the document failed")
        try:
            if ls.service is not None:
                ls.service.warm_up(params.text_document.text, document=_unquote(params.text_document.uri))
        except Exception:
            logger.exception("warming up the API index failed")
        _guarded(ls.diagnostics.opened, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: AdaptrackServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = _unquote(params.text_document.uri)
        document = ls.workspace.text_documents.get(uri)
        try:
            if document is not None:
                encoding = getattr(document.position_codec.encoding, "value", None) or "utf-16"
                ls.analyses.changed(uri, params.content_changes, document.source, encoding)
        except Exception:
            logger.exception("analysing the document failed")
        try:
            if ls.service is not None and document is not None:
                ls.service.warm_up(document.source, document=uri)
        except Exception:
            logger.exception("warming up the API index failed")
        _guarded(ls.diagnostics.changed, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: AdaptrackServer, params: types.DidSaveTextDocumentParams) -> None:
        _guarded(ls.diagnostics.saved, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: AdaptrackServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.analyses.closed(_unquote(params.text_document.uri))
        _guarded(ls.diagnostics.closed, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DIAGNOSTIC, DIAGNOSTIC_OPTIONS)
    async def document_diagnostic(ls: AdaptrackServer, params: types.DocumentDiagnosticParams):
        try:
            return await ls.diagnostics.pull(params)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("document diagnostics failed")
            return types.RelatedFullDocumentDiagnosticReport(items=[])

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(ls: AdaptrackServer, params: types.InlineCompletionParams):
        try:
            return inline_items(await ls.run_completion(params, "inline"))
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("inline completion failed")
            return types.InlineCompletionList(items=[])

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=TRIGGER_CHARACTERS))
    async def completion(ls: AdaptrackServer, params: types.CompletionParams):
        try:
            return completion_list(await ls.run_completion(params, "list"))
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("completion failed")
            return types.CompletionList(is_incomplete=True, items=[])

    register_code_actions(server)  # textDocument/codeAction: quick fixes of the version diagnostics

    # the protocol contract advertises `inlineCompletionProvider: true` (pygls' option
    # type check only accepts the options object, so the value is set after registering)
    server.protocol.fm.feature_options[types.TEXT_DOCUMENT_INLINE_COMPLETION] = True

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: AdaptrackServer, params: None) -> None:
        ls.shutdown_requested = True
        ls.diagnostics.close()
        if ls.service is not None:
            ls.service.close()

    @server.feature(types.EXIT)
    def exit_now(ls: AdaptrackServer, params: None) -> None:
        """End the process now.  Left to pygls and the interpreter, exit waits for the
        worker threads (a model load or a decode in progress) and for torch's teardown:
        seconds, past the 2 s editors give a server before they kill it.  Nothing is left
        to write: the shutdown answer has been sent and the service holds no user data."""
        if ls.service is not None:
            ls.service.close()
        for cleanup in ls.exit_cleanups:  # e.g. the --tcp token file
            with contextlib.suppress(Exception):
                cleanup()
        logging.shutdown()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0 if ls.shutdown_requested else 1)

    return server


def serve(
    tcp: bool = False,
    host: str = "127.0.0.1",
    port: int = 2087,
    settings: dict | None = None,
    token_file: str | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> int:
    """Run the server on stdio (default) or TCP bound to `host` (127.0.0.1), where the
    client must authenticate with a token (`lsp_server.tcp`); returns the process exit
    code (1 when the client sent `exit` without `shutdown`)."""
    server = create_server()
    server.max_message_bytes = max_message_bytes
    if settings:
        server.settings, problems = parse_settings(settings, server.settings)
        server.pending_problems.extend(problems)
    if tcp:
        from adaptrack_lsp.lsp_server import tcp as tcp_transport

        tcp_transport.start(server, host, port, token_file)
    else:
        server.start_io()
    return server.exit_code
