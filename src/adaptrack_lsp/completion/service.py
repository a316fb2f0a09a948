"""The completion service: what the language server and the CLI hold.

It composes three parts and adds request scheduling:

- `ModelHost` (`model_host.py`): the model, its loads and the model thread;
- `ConstraintEnvironment` (`constrainers/environment.py`): the API index per
  environment and its look-ups in the background;
- the pipeline (`pipeline.run`): one `CompletionRequest` to ranked candidates.

Scheduling: requests run on the model thread; a newer request for the same document
and mode supersedes an older one (it stops between LM calls); a request whose API
members are still being computed is answered at once with status "indexing" without
waiting for the model thread.  Cancellation, supersession and "index pending" reach the
decoder through the request's `RequestControl`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from adaptrack_lsp.completion.model_host import ModelHost, ModelLoader, ProgressCallback, ServiceNotReady
from adaptrack_lsp.completion.pipeline import (
    INDEX_WAIT_LIMIT_S,
    CompletionCancelled,
    CompletionResult,
    indexing_result,
    run,
)
from adaptrack_lsp.completion.project_context import ContextSources
from adaptrack_lsp.completion.request import CompletionRequest, RequestControl
from adaptrack_lsp.config import Settings
from adaptrack_lsp.constrainers.environment import ConstraintEnvironment, IndexFactory

logger = logging.getLogger(__name__)

__all__ = ["CompletionService", "ServiceNotReady"]


class CompletionService:
    """Model, constraint environment and request scheduling for completions."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        model_loader: ModelLoader | None = None,
        workspace_root: str | None = None,
        index_factory: IndexFactory | None = None,
    ):
        self.settings = settings or Settings()
        self.host = ModelHost(model_loader)
        self.constraints = ConstraintEnvironment(workspace_root, index_factory)
        self._generations: dict[str, int] = {}
        self._generation_lock = threading.Lock()
        self._closed = False
        from adaptrack_lsp.completion.memory import FreeMemoryReleaser

        self._memory = FreeMemoryReleaser()
        #: document -> the latest text whose libraries are to be prepared (`warm_up`)
        self._library_texts: dict[str, tuple[str, Settings]] = {}
        self._library_lock = threading.Lock()

    # -- the model (delegated to the host) ----------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.host.ready

    @property
    def state(self) -> str:
        return self.host.state

    @property
    def message(self) -> str:
        """The model's state, and what the version targets leave unchecked (a target that
        could not be built, a module a target's snapshot does not hold)."""
        message = self.host.message
        note = self.constraints.target_note()
        return f"{message} ({note})" if note and message else message

    @property
    def model(self):
        return self.host.model

    def needs_reload(self, settings: Settings) -> bool:
        return self.host.needs_reload(settings)

    def engine_problem(self) -> str:
        """Why the loaded model's engine cannot be used now (an inference server that
        could not be reached at load), or its standing warning; "" when none."""
        model = self.host.model
        return (getattr(model, "connect_error", "") or getattr(model, "warning", "") or "") if model is not None else ""

    def update_settings(self, settings: Settings) -> bool:
        """Adopt new settings; True when the model must be loaded again (a load of the
        same model fields already under way counts as loaded)."""
        reload = self.host.needs_reload(settings)
        if self.constraints.key(settings) != self.constraints.key(self.settings):
            self.constraints.forget()
        self.settings = settings
        return reload

    def begin_load(self) -> int:
        """Record that the current settings' model is to be loaded; returns the ticket."""
        return self.host.begin_load(self.settings)

    def load(self, progress: ProgressCallback | None = None, ticket: int | None = None) -> None:
        """Load the model for the current settings (blocking; raises on failure)."""
        self.host.load(self.settings, progress, ticket)

    def load_in_background(
        self,
        progress: ProgressCallback | None = None,
        done: Callable[[str, str], None] | None = None,
        ticket: int | None = None,
    ) -> concurrent.futures.Future:
        """Load on the model thread; `done(state, message)` after (state "superseded" when
        a newer load was asked for meanwhile).  `ticket`: from `begin_load`."""
        return self.host.load_in_background(lambda: self.settings, progress, done, ticket)

    def close(self) -> None:
        self._closed = True
        with self._generation_lock:
            for key in list(self._generations):
                self._generations[key] += 1
        self.host.close()
        self.constraints.close()

    # -- the constraint (delegated to the environment) ----------------------------------------
    def api_index(self, settings: Settings | None = None) -> tuple[Any, Any]:
        """(APIIndex or None, ConstraintInfo) for the settings' environment."""
        return self.constraints.api_index(settings or self.settings)

    def describe_constraint(self, settings: Settings | None = None) -> str:
        return self.constraints.describe(settings or self.settings)

    def warm_up(self, text: str, settings: Settings | None = None, document: str = "") -> concurrent.futures.Future | None:
        """Start the API look-ups of the document's imports on the index thread, and the
        model's preparation of the libraries it imports (the built-in model's shards,
        built in the background on first import)."""
        if self._closed:
            return None
        self._warm_libraries(text, settings or self.settings, document)
        return self.constraints.warm_up(settings or self.settings, text, document)

    def _warm_libraries(self, text: str, settings: Settings, document: str) -> None:
        """On the model thread (after a load in progress), the model's `prepare_libraries`
        for the document's imports; calls for a document while one is queued only update
        the text it reads."""
        with self._library_lock:
            queued = document in self._library_texts
            self._library_texts[document] = (text, settings)
            if queued:
                return

        def job() -> None:
            with self._library_lock:
                latest, current = self._library_texts.pop(document, (text, settings))
            prepare = getattr(self.host.model, "prepare_libraries", None)
            if prepare is None or self._closed:
                return
            from adaptrack_lsp.apis.imports import document_roots

            try:
                prepare(
                    imports=document_roots(latest),
                    python_path=current.python_path,
                    workspace_root=self.constraints.workspace_root,
                    trusted=current.trusted_workspace,
                    progress=self.host.library_progress,
                )
            except Exception:
                logger.exception("preparing the library shards failed")

        try:
            self.host.submit(job)
        except RuntimeError:  # shut down
            with self._library_lock:
                self._library_texts.pop(document, None)

    # -- requests ---------------------------------------------------------------------------
    def request(
        self,
        text: str,
        offset: int,
        *,
        mode: str = "inline",
        document: str = "",
        version: int | None = None,
        settings: Settings | None = None,
        seed: int | None = None,
        open_documents: tuple[tuple[str, str], ...] = (),
        analysis=None,
    ) -> CompletionRequest:
        """A request for a cursor at character `offset` of `text`, with the settings in
        force now (unless `settings` are given).  Its project context comes from
        `open_documents` ((path, text) of the documents open in the editor) and, in a
        trusted workspace, the workspace modules `document` imports; `analysis`: the
        document's syntax where the caller keeps it (`apis.document`)."""
        settings = settings or self.settings
        sources = ContextSources(self.constraints.workspace_root, settings.trusted_workspace, tuple(open_documents))
        return CompletionRequest.build(
            text, offset, mode=mode, settings=settings, document=document, version=version, seed=seed, sources=sources,
            analysis=analysis,
        )

    def begin_request(self, key: str) -> Callable[[], bool]:
        """Register a new request for `key`; returns its `superseded()` check.  Every
        request for the same key supersedes the ones registered before it."""
        with self._generation_lock:
            generation = self._generations.get(key, 0) + 1
            self._generations[key] = generation
        return lambda: self._closed or self._generations.get(key) != generation

    def indexing_answer(self, request: CompletionRequest) -> CompletionResult | None:
        """The "indexing" answer when API members `request` needs are still being
        computed (their look-ups are started), else None.  Cheap: waits for nothing."""
        started = time.perf_counter()
        index, info = self.constraints.api_index(request.settings)
        pending = self.constraints.pending(index, request.paths_before_decoding)
        return indexing_result(request, pending, info, started, index) if pending else None

    def when_indexed(self, result: CompletionResult, callback: Callable[[bool], None]) -> None:
        """For an answer with paths still being computed (an "indexing" answer, or ghost
        text answered without them): `callback(answered)` once they are computed (the
        client may ask again then); nothing for other answers."""
        if result.pending and result.request is not None:
            self.constraints.when_ready(result.request.settings, result.pending, callback, INDEX_WAIT_LIMIT_S)

    def submit(self, request: CompletionRequest, cancelled: Callable[[], bool] | None = None) -> concurrent.futures.Future:
        """Run `request` on the model thread.  A later submit for the same document and
        mode supersedes this one (its future raises `CompletionCancelled("superseded")`).
        When API members the cursor needs are still being computed, the future is already
        done with status "indexing" (the model thread is not waited for)."""
        self.host.require_ready()
        control = RequestControl(cancelled, self.begin_request(f"{request.mode}:{request.document}"))
        indexing = self.indexing_answer(request)
        if indexing is not None:
            answered: concurrent.futures.Future = concurrent.futures.Future()
            answered.set_result(indexing)
            return answered

        def job():
            reason = control.cancelled_by_client()
            if reason is not None:
                raise CompletionCancelled(reason)
            return run(request, self.host, self.constraints, control)

        answered = self.host.submit(job)
        # next on the model thread, once the answer is out: the request's prefix tree is
        # garbage then, and the collection's time is not the request's
        self.host.submit(self._memory.after_request)
        return answered

    def complete(
        self,
        text: str,
        offset: int,
        *,
        mode: str = "inline",
        cancelled: Callable[[], bool] | None = None,
        settings: Settings | None = None,
        seed: int | None = None,
        document: str = "",
        wait_for_index: bool = False,
        index_progress: Callable[[str], None] | None = None,
        open_documents: tuple[tuple[str, str], ...] = (),
    ) -> CompletionResult:
        """Candidates for a cursor at character `offset` of `text`, on the calling thread.

        `mode` "inline": ghost text — greedy at temperature 0 (one candidate), otherwise
        `numSamples` samples at `temperature`.  "list": `numSamples` samples at
        max(temperature, 1.0) with `listDecoder` (default `exact`: exact samples of
        P(s|c) under the constraint, per request).  Without a `seed` the samples are
        seeded from the text, the cursor and the mode (asking again at the same place
        gives the same list).  `timeoutMs` bounds decoding only; API members not computed
        yet are waited for (`wait_for_index`, with `index_progress`) or answered with
        status "indexing" (see `pipeline.run`).  Counters: `index_seconds`,
        `index_wait_seconds`, `wall_seconds`, `service_seconds`.  `document` (a path or
        ``file:`` URI) and `open_documents` give the project context (`request`).
        """
        request = self.request(
            text, offset, mode=mode, document=document, settings=settings, seed=seed, open_documents=open_documents
        )
        self.host.require_ready()
        control = RequestControl(cancelled)
        return run(request, self.host, self.constraints, control, wait_for_index=wait_for_index, index_progress=index_progress)
