"""Long-lived runtime introspection subprocess in the user's environment.

`RuntimeIntrospector` starts ``python -I introspect_worker.py --serve`` with the user's
interpreter, sends one JSON line per request and waits a bounded time for the answer.
A request that runs past its time limit gets the process killed; a process that dies
is restarted on the next request.  Meanwhile the answer is "unknown" (``None``
members, ``transient=True``), never an exception and never a hang.
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import os
import queue
import subprocess
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from adaptrack_lsp.constrainers.api_index import Member

log = logging.getLogger(__name__)

WORKER_SCRIPT = Path(__file__).with_name("introspect_worker.py")

#: after this many failures in a row (timeouts, crashes), wait before starting again
MAX_CONSECUTIVE_FAILURES = 3
RESTART_BACKOFF_S = 30.0


@dataclass(frozen=True)
class IntrospectionAnswer:
    """What the worker said about one path."""

    #: name -> Member, or None when the path could not be resolved or no answer came
    members: Mapping[str, Member] | None
    #: why `members` is None ("" when it is not)
    error: str = ""
    #: True when the failure says nothing about the path (timeout, crash, not started)
    transient: bool = False


class RuntimeIntrospector:
    """Asks a subprocess running `python` for the public members of dotted paths."""

    def __init__(
        self,
        python: str,
        timeout_s: float = 60.0,
        *,
        command: Sequence[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ):
        self.python = python
        self.timeout_s = float(timeout_s)
        self.command = list(command) if command else [python, "-I", str(WORKER_SCRIPT), "--serve"]
        self.cwd = cwd
        self.env = dict(env) if env is not None else {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
        self.restarts = 0  # processes started after the first one
        self._started_once = False
        self._process: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        self._stderr_tail: collections.deque = collections.deque(maxlen=40)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._consecutive_failures = 0
        self._retry_after = 0.0
        self._finalizer = weakref.finalize(self, _kill, [None])

    # ------------------------------------------------------------------ process

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def _start(self) -> None:
        lines: queue.Queue = queue.Queue()
        process = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            cwd=self.cwd,
            env=self.env,
        )
        threading.Thread(target=_pump, args=(process.stdout, lines.put), daemon=True).start()
        tail = self._stderr_tail
        threading.Thread(target=_pump, args=(process.stderr, lambda line: line is not None and tail.append(line)), daemon=True).start()
        if self._started_once:
            self.restarts += 1
        self._started_once = True
        self._process, self._lines = process, lines
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _kill, [process])
        log.debug("introspection worker started (pid %d): %s", process.pid, " ".join(self.command))

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            _kill([process])

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _failed(self, reason: str) -> IntrospectionAnswer:
        self._consecutive_failures += 1
        if self._consecutive_failures >= MAX_CONSECUTIVE_FAILURES:
            self._retry_after = time.monotonic() + RESTART_BACKOFF_S
        tail = " | ".join(list(self._stderr_tail)[-3:])
        message = reason + (f" (stderr: {tail})" if tail else "")
        log.warning("runtime introspection: %s", message)
        self._stop()
        return IntrospectionAnswer(None, message, transient=True)

    # ------------------------------------------------------------------ requests

    def request(self, payload: dict, timeout_s: float | None = None) -> tuple[dict | None, IntrospectionAnswer | None]:
        """Send one request; (answer dict, None) or (None, transient failure)."""
        limit = self.timeout_s if timeout_s is None else float(timeout_s)
        deadline = time.monotonic() + limit
        if not self._lock.acquire(timeout=limit):
            return None, IntrospectionAnswer(None, "worker busy", transient=True)
        try:
            if self._process is None or self._process.poll() is not None:
                if self._process is not None:
                    self._failed(f"worker exited with code {self._process.returncode}")
                if time.monotonic() < self._retry_after:
                    return None, IntrospectionAnswer(None, "worker failing, waiting before restart", transient=True)
                try:
                    self._start()
                except OSError as error:
                    return None, self._failed(f"cannot start {self.command[0]}: {error}")
            request_id = next(self._ids)
            try:
                self._process.stdin.write(json.dumps({**payload, "id": request_id}) + "\n")
                self._process.stdin.flush()
            except (OSError, ValueError) as error:
                return None, self._failed(f"worker stdin closed: {error}")
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None, self._failed(f"no answer within {limit:g} s, worker killed")
                try:
                    line = self._lines.get(timeout=remaining)
                except queue.Empty:
                    continue
                if line is None:
                    return None, self._failed("worker died")
                try:
                    answer = json.loads(line)
                except ValueError:
                    log.debug("introspection worker printed a non-protocol line: %r", line[:200])
                    continue
                if answer.get("id") != request_id:
                    continue
                self._consecutive_failures = 0
                return answer, None
        finally:
            self._lock.release()

    def ping(self, timeout_s: float | None = None) -> str | None:
        """The worker's Python version, or None when it does not answer."""
        answer, _ = self.request({"op": "ping"}, timeout_s)
        return answer.get("python") if answer else None

    def members(self, path: Sequence[str], extra: Sequence[str] = (), timeout_s: float | None = None) -> IntrospectionAnswer:
        """Public members of `path` in the worker's environment."""
        answer, failure = self.request({"op": "members", "path": list(path), "extra": sorted(set(extra))}, timeout_s)
        if failure is not None:
            return failure
        raw = answer.get("members")
        if raw is None:
            return IntrospectionAnswer(None, str(answer.get("error", "unresolvable")), transient=False)
        members = {name: Member(name, str(kind), bool(flag)) for name, (kind, flag) in raw.items()}
        return IntrospectionAnswer(members)


def _pump(stream, put) -> None:
    try:
        for line in stream:
            put(line.rstrip("\n"))
    except (OSError, ValueError):
        pass
    finally:
        put(None)


def _kill(holder: list) -> None:
    process = holder[0]
    if process is None or process.poll() is not None:
        return
    process.kill()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - kill -9 does not wait long
        pass
