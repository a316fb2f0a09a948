"""Whether completions work, told to the user: `adaptrack/status` and one message.

A request can come back empty for reasons the user must hear about: every decode raises
(e.g. a model that produces NaN), the inference server of the `server` backend cannot be
used (down, slow, a reply that is not usable, a mismatch found at connect), or the API
constraint was dropped (the configured interpreter does not run, does not answer in
time, ...).  A note about one request (the syntax check was off for it) is added to the
ready status while it holds.  `CompletionHealth` turns each request's outcome into the
status (`error` while requests fail, `degraded` while the engine is unavailable or
completions are not API-constrained or not exact, `ready` again once they are fine: a
server that returns recovers at the next request) and shows each distinct problem once
with `window/showMessage`.
"""

from __future__ import annotations

from collections.abc import Callable

from lsprotocol import types

#: how many distinct problem texts are remembered as already shown
MAX_REMEMBERED = 64


class CompletionHealth:
    """Status and messages from request outcomes (callbacks are thread-safe senders)."""

    def __init__(
        self,
        send_status: Callable[[str, str], None],
        show_message: Callable[[str, types.MessageType], None],
        ready_message: Callable[[], str],
        log: Callable[[str], None] | None = None,
    ):
        self._send_status = send_status
        self._show_message = show_message
        self._ready_message = ready_message
        self._log = log
        self._shown: dict[str, None] = {}
        self._note = ""
        self.state = "ready"

    def _tell_once(self, text: str, kind: types.MessageType) -> None:
        if text in self._shown:
            return
        if len(self._shown) >= MAX_REMEMBERED:
            self._shown.pop(next(iter(self._shown)))
        self._shown[text] = None
        self._show_message(text, kind)

    def request_failed(self, reason: str) -> None:
        """A completion request raised: nothing could be answered."""
        self.state = "error"
        message = f"completions fail: {reason}"
        self._send_status("error", message)
        self._tell_once(f"adaptrack: {message}", types.MessageType.Error)

    def engine_unavailable(self, reason: str) -> None:
        """The model's engine (an inference server) could not answer: `reason` names the
        fix.  Status `degraded`; the next request tries the engine again."""
        self.state = "degraded"
        self._send_status("degraded", reason)
        self._tell_once(f"adaptrack: {reason}", types.MessageType.Warning)

    def constraint_unavailable(self, problem: str) -> None:
        """The API constraint cannot check completions (its interpreter failed, a
        version target could not be built): status `degraded` naming the problem."""
        self.state = "degraded"
        text = f"completions are not checked against the installed APIs: {problem}"
        self._send_status("degraded", text)
        self._tell_once(f"adaptrack: {text}", types.MessageType.Warning)

    def request_done(
        self, status: str, message: str, constraint_problem: str, engine_warning: str = "", *, note: str = ""
    ) -> None:
        """A completion request answered (`status`/`message` from the decoder;
        `engine_warning`: a standing problem of the engine, e.g. a server whose model is
        only the top-K truncation; `note`: something about this request only, added to
        the ready status, e.g. the syntax check was off because the text before the
        cursor has a syntax error)."""
        if status == "failed":
            self.request_failed(message or "the decoder failed")
        elif engine_warning:
            self.engine_unavailable(engine_warning)
        elif constraint_problem:
            self.constraint_unavailable(constraint_problem)
        elif self.state != "ready" or note != self._note:
            self.state = "ready"
            self._send_status("ready", self._ready_message() + (f" ({note})" if note else ""))
        if note and note != self._note and self._log is not None:
            self._log(f"adaptrack: {note}")
        self._note = note
