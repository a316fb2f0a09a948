"""The model host: loading the language model and the one thread that runs it.

Owns the model's life: "idle" | "loading" | "ready" | "error" with a message; loads
on the model thread (background-capable, with a progress callback), one per change of
the model fields (`begin_load` tickets: a later load supersedes one not yet started);
whether new settings need a load; and the prompt builder for the loaded tokenizer,
whose budget follows the request's `maxNewTokens`.  Every model call happens on the
single model thread (`submit`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

from adaptrack_lsp.config import Settings

logger = logging.getLogger(__name__)

#: progress(message, percentage or None)
ProgressCallback = Callable[[str, "int | None"], None]
ModelLoader = Callable[[Settings, ProgressCallback], Any]


class ServiceNotReady(RuntimeError):
    """The model is not loaded (yet, or it failed to load)."""


def default_model_loader(settings: Settings, progress: ProgressCallback):
    """Load `settings.model` on its backend (`lm.loading.load_for_settings`; the built-in
    model is built on first use with `progress`)."""
    from adaptrack_lsp.completion.lm import loading

    progress(f"loading {settings.model}", 10)
    return loading.load_for_settings(settings, progress=progress)


def model_load_message(model: str, error: BaseException, backend: str = "transformers") -> str:
    """A load failure, always naming the way out (the built-in model or a local folder;
    for the server backend the error names its own fix)."""
    if backend == "server":  # the server backend's errors name their own fix
        return f"could not start the server backend: {error}"
    text = f"could not load model {model!r}: {error}"
    if "builtin" not in str(error) and model != "builtin":
        text += (
            '; use the built-in offline model (setting model = "builtin", the default; `--model builtin`) '
            "or the path of a local model folder"
        )
    return text


class ModelHost:
    """The loaded model, its prompt builder and the model thread."""

    def __init__(self, model_loader: ModelLoader | None = None):
        self._model_loader = model_loader or default_model_loader
        self.model = None
        self.builder = None
        self.state = "idle"
        self.message = ""
        self.settings = Settings()
        self._loaded_key: tuple | None = None
        self._requested_key: tuple | None = None
        #: held while the model is replaced or used
        self.lock = threading.Lock()
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="adaptrack-model")
        self._load_lock = threading.Lock()
        self._load_ticket = 0
        #: hears the model's background work after loading (the built-in model learning
        #: a library a document imports): progress(message), "" when it is done
        self.library_progress: Callable[[str], None] | None = None

    @property
    def ready(self) -> bool:
        return self.state == "ready" and self.model is not None

    def require_ready(self) -> None:
        if not self.ready:
            raise ServiceNotReady(self.message or "the model is not loaded")

    def submit(self, job: Callable, *args) -> concurrent.futures.Future:
        """Run `job(*args)` on the model thread (after the jobs queued before it)."""
        return self._thread.submit(job, *args)

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)

    # -- loads --------------------------------------------------------------------------
    def needs_reload(self, settings: Settings) -> bool:
        """Whether `settings` need a model load: their model fields differ from the
        model loaded or being loaded, or the last load failed."""
        if self.state == "error":
            return True
        target = self._requested_key if self._requested_key is not None else self._loaded_key
        return target != settings.model_key()

    def begin_load(self, settings: Settings) -> int:
        """Record that `settings`' model is to be loaded (state "loading"); returns the
        ticket of that load.  A later ticket supersedes it."""
        with self._load_lock:
            self._load_ticket += 1
            self._requested_key = settings.model_key()
            self.settings = settings
            self.state, self.message = "loading", f"loading {settings.model}"
            return self._load_ticket

    def superseded_load(self, ticket: int | None) -> bool:
        return ticket is not None and ticket != self._load_ticket

    def load(self, settings: Settings, progress: ProgressCallback | None = None, ticket: int | None = None) -> None:
        """Load the model of `settings` (blocking; raises `ServiceNotReady` on failure)."""
        progress = progress or (lambda message, percentage=None: None)
        if ticket is None:
            ticket = self.begin_load(settings)
        self.state, self.message = "loading", f"loading {settings.model}"
        try:
            with self.lock:
                self.model = None
                self.builder = None
                lm = self._model_loader(settings, progress)
                progress("preparing the prompt builder", 80)
                from adaptrack_lsp.completion.context import PromptBuilder

                self.builder = PromptBuilder.for_model(
                    lm, max_new_tokens=settings.max_new_tokens, context_tokens=settings.context_tokens
                )
                progress("preparing the model for requests", 90)
                lm.warm_up(self.builder.max_prompt_tokens, settings.max_new_tokens)
                if settings.syntax_constraint:
                    progress("preparing the Python syntax constraint", 95)
                    from adaptrack_lsp.constrainers.python_syntax import warm_up

                    warm_up(lm.vocab)
                self.model = lm
                self._loaded_key = settings.model_key()
        except Exception as error:
            self.state = "error"
            self.message = model_load_message(settings.model, error, settings.backend)
            logger.info("model load failed: %s", error, exc_info=logger.isEnabledFor(logging.DEBUG))
            raise ServiceNotReady(self.message) from error
        if self.superseded_load(ticket):
            return  # a newer load is queued: the state stays "loading"
        self.state, self.message = "ready", f"{getattr(self.model, 'name', settings.model)} ready"
        progress("ready", 100)

    def load_in_background(
        self,
        settings: Callable[[], Settings],
        progress: ProgressCallback | None = None,
        done: Callable[[str, str], None] | None = None,
        ticket: int | None = None,
    ) -> concurrent.futures.Future:
        """Load on the model thread the settings in force when the load starts
        (`settings()`); `done(state, message)` is called after, with state "superseded"
        when a newer load was asked for meanwhile (then that one reports)."""
        if ticket is None:
            ticket = self.begin_load(settings())

        def job():
            if self.superseded_load(ticket):
                if done is not None:
                    done("superseded", "a newer model load was requested")
                return
            current = settings()
            try:
                self.load(current, progress, ticket)
            except ServiceNotReady:
                pass
            except BaseException as error:  # never leave the state at "loading"
                self.state, self.message = "error", model_load_message(current.model, error, current.backend)
            finally:
                if done is not None:
                    try:
                        done("superseded" if self.superseded_load(ticket) else self.state, self.message)
                    except Exception:
                        logger.exception("load callback failed")

        return self._thread.submit(job)

    # -- per request -----------------------------------------------------------------------
    def prompt_builder(self, settings: Settings, heal: bool):
        """The prompt builder for a request: token healing on or off, and prompt and
        context budgets that leave room for the request's `maxNewTokens` (not the one at
        load time) and follow its `contextTokens`.  Call with `lock` held."""
        from adaptrack_lsp.completion.context import context_budget, prompt_budget

        builder = self.builder
        budget = prompt_budget(self.model, settings.max_new_tokens)
        context = context_budget(self.model, settings.max_new_tokens, settings.context_tokens)
        if builder.heal != heal or builder.max_prompt_tokens != budget or builder.context_tokens != context:
            builder = dataclasses.replace(builder, heal=heal, max_prompt_tokens=budget, context_tokens=context)
        return builder
