"""Long-lived runtime introspection subprocess in the user's environment.

`RuntimeIntrospector` starts ``python -I -B introspect_worker.py --serve`` with the user's
interpreter, sends one JSON line per request and waits a bounded time for the answer.
A request that runs past its time limit gets the process killed; a process that dies
is restarted on the next request.  Meanwhile the answer is "unknown" (``None``
members, ``transient=True``), never an exception and never a hang.

Importing a module runs its code, so the worker is confined as far as an unprivileged
process can be (POSIX):

- environment: only `sandbox_environment` (PATH, locale, HOME/TMPDIR/XDG_* pointing at
  the worker's own temporary directory); none of the server's variables (tokens,
  credentials) are passed on; ``-I`` ignores PYTHON* variables, the user site and the
  working directory; ``-B`` writes no bytecode into the environment (no file of the
  user's is written, and a package upgraded within a second is never read from a stale
  ``.pyc``);
- working directory: a fresh temporary directory, deleted when the worker stops;
- resource limits set by the worker on itself before any import: address space
  `MEMORY_LIMIT_BYTES`, CPU time `CPU_LIMIT_S` (over the worker's life; past it the
  worker is killed and restarted), file size `FILE_SIZE_LIMIT_BYTES`, no core files;
- its own session and process group: on a timeout, on close and at server exit the
  whole group is killed (SIGKILL), children included.

What it does not restrict: network access, reading any file the user can read, writing
files below the size limit anywhere the user can write, and a process that leaves the
group (``setsid``/double fork) before it is killed.
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from adaptrack_lsp.apis.index import Member

log = logging.getLogger(__name__)

WORKER_SCRIPT = Path(__file__).with_name("introspect_worker.py")

#: after this many failures in a row (timeouts, crashes), wait before starting again
MAX_CONSECUTIVE_FAILURES = 3
RESTART_BACKOFF_S = 30.0

#: resource limits of the worker (POSIX): address space, CPU seconds over its life,
#: largest file it may write, core files
MEMORY_LIMIT_BYTES = 8 * 1024**3
CPU_LIMIT_S = 600
FILE_SIZE_LIMIT_BYTES = 16 * 1024**2
#: variables copied from the server's environment (nothing else is passed on)
PASSED_VARIABLES = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "SYSTEMROOT", "TZ")


def limits_argument(
    memory_bytes: int = MEMORY_LIMIT_BYTES, cpu_s: int = CPU_LIMIT_S, file_size_bytes: int = FILE_SIZE_LIMIT_BYTES
) -> str:
    """The worker's ``--limits`` value."""
    return f"as={int(memory_bytes)},cpu={int(cpu_s)},fsize={int(file_size_bytes)},core=0"


def sandbox_environment(home: str) -> dict[str, str]:
    """The worker's environment variables: PATH and locale from the server, every
    home/cache/temporary directory pointing at `home` (the worker's temporary dir)."""
    env = {name: os.environ[name] for name in PASSED_VARIABLES if name in os.environ}
    env.setdefault("PATH", os.defpath)
    for name in ("HOME", "TMPDIR", "TEMP", "TMP", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "USERPROFILE"):
        env[name] = home
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@dataclass(frozen=True)
class IntrospectionAnswer:
    """What the worker said about one path."""

    #: name -> Member, or None when the path could not be resolved or no answer came
    members: Mapping[str, Member] | None
    #: why `members` is None ("" when it is not)
    error: str = ""
    #: True when the failure says nothing about the path (timeout, crash, not started)
    transient: bool = False
    #: member name -> parameters (`Signature.to_list` notation) of the callable members,
    #: when asked for
    signatures: Mapping[str, Sequence[str]] | None = None


@dataclass(frozen=True)
class SignatureAnswer:
    """What the worker said about one call."""

    #: parameters in `Signature.to_list` notation, None when there is none / no answer
    items: Sequence[str] | None
    error: str = ""
    #: True when the failure says nothing about the call (timeout, crash, not started)
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
        """`command`, `cwd`, `env`: replace the sandboxed defaults (tests); by default the
        worker runs in a temporary directory with `sandbox_environment` and the limits
        of `limits_argument`."""
        self.python = python
        self.timeout_s = float(timeout_s)
        self.command = (
            list(command) if command else [python, "-I", "-B", str(WORKER_SCRIPT), "--serve", "--limits", limits_argument()]
        )
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self._sandbox_dir: str | None = None
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
        cwd, env = self.cwd, self.env
        if cwd is None or env is None:
            if self._sandbox_dir is None:
                self._sandbox_dir = tempfile.mkdtemp(prefix="adaptrack-introspect-")
            cwd = cwd if cwd is not None else self._sandbox_dir
            env = env if env is not None else sandbox_environment(self._sandbox_dir)
        process = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            cwd=cwd,
            env=env,
            start_new_session=_POSIX,  # its own process group, killed as a whole
        )
        threading.Thread(target=_pump, args=(process.stdout, lines.put), daemon=True).start()
        tail = self._stderr_tail
        threading.Thread(target=_pump, args=(process.stderr, lambda line: line is not None and tail.append(line)), daemon=True).start()
        if self._started_once:
            self.restarts += 1
        self._started_once = True
        self._process, self._lines = process, lines
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _kill, [process], self._sandbox_dir)
        log.debug("introspection worker started (pid %d): %s", process.pid, " ".join(self.command))

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            _kill([process])

    def close(self) -> None:
        """Kill the worker's process group and delete its temporary directory."""
        with self._lock:
            self._stop()
            if self._sandbox_dir is not None:
                shutil.rmtree(self._sandbox_dir, ignore_errors=True)
                self._sandbox_dir = None

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

    def limits(self, timeout_s: float | None = None) -> dict[str, int] | None:
        """The resource limits in force in the worker ({} where the platform has none)."""
        answer, _ = self.request({"op": "ping"}, timeout_s)
        return dict(answer.get("limits") or {}) if answer else None

    def members(
        self,
        path: Sequence[str],
        extra: Sequence[str] = (),
        timeout_s: float | None = None,
        signatures: bool = False,
        private: bool = False,
        types: dict[str, str] | None = None,
    ) -> IntrospectionAnswer:
        """Public members of `path` in the worker's environment (with `private`, the
        ``_`` names too; with `signatures`, the parameters of its callable members;
        `types`: ``{dotted call: class path}`` for calls of a path ending in ``"()"``
        that the runtime cannot type, `introspect_worker.resolve_value_type`)."""
        payload = {"op": "members", "path": list(path), "extra": sorted(set(extra))}
        if types:
            payload["types"] = dict(types)
        if signatures:
            payload["signatures"] = True
        if private:
            payload["private"] = True
        answer, failure = self.request(payload, timeout_s)
        if failure is not None:
            return failure
        raw = answer.get("members")
        if raw is None:
            return IntrospectionAnswer(None, str(answer.get("error", "unresolvable")), transient=False)
        members = {name: Member.from_list(name, items) for name, items in raw.items()}
        found = answer.get("signatures")
        return IntrospectionAnswer(members, signatures=dict(found) if isinstance(found, dict) else None)

    def signature(self, path: Sequence[str], timeout_s: float | None = None, types: dict[str, str] | None = None) -> SignatureAnswer:
        """The parameters of the callable `path` (``"()"``: what the call before it
        returns; `types` as for `members`)."""
        payload: dict = {"op": "signature", "path": list(path)}
        if types:
            payload["types"] = dict(types)
        answer, failure = self.request(payload, timeout_s)
        if failure is not None:
            return SignatureAnswer(None, failure.error, transient=True)
        items = answer.get("signature")
        if not isinstance(items, list):
            return SignatureAnswer(None, str(answer.get("error", "no signature")))
        return SignatureAnswer(items)


def _pump(stream, put) -> None:
    try:
        for line in stream:
            put(line.rstrip("\n"))
    except (OSError, ValueError):
        pass
    finally:
        put(None)


_POSIX = os.name == "posix"


def _kill(holder: list, sandbox_dir: str | None = None) -> None:
    """Kill the worker and everything in its process group (also after the worker
    itself exited: what it started may still run)."""
    process = holder[0]
    if process is not None:
        if _POSIX:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if process.poll() is None:
            process.kill()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - kill -9 does not wait long
            pass
    if sandbox_dir is not None:
        shutil.rmtree(sandbox_dir, ignore_errors=True)
