"""Time-limited checks of the Python interpreter whose APIs validate completions.

jedi runs the configured interpreter to learn its version and `sys.path`, with no time
limit: an interpreter that hangs blocked the index forever (every completion then waited
its whole budget), and one that fails (``/bin/false``) or prints something else left the
constraint dropped with no reason given.  `check_interpreter` runs the interpreter once,
in its own process group, from a neutral working directory with a minimal environment,
and says in words what is wrong; `call_with_time_limit` bounds any other call that may
start it (``jedi.create_environment``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from typing import TypeVar

#: how long an interpreter may take to print its version
CHECK_TIMEOUT_S = 10.0
#: how long jedi may take to start an environment
ENVIRONMENT_TIMEOUT_S = 20.0

_MARK = "adaptrack-interpreter-check"
_SCRIPT = f"import sys; print({_MARK!r}, '%d.%d.%d' % sys.version_info[:3])"

T = TypeVar("T")


def check_interpreter(python: str, timeout_s: float = CHECK_TIMEOUT_S) -> str:
    """"" when `python` runs and reports a Python 3 version, else why it cannot be used."""
    env = {name: os.environ[name] for name in ("PATH", "SYSTEMROOT", "LANG") if name in os.environ}
    try:
        process = subprocess.Popen(
            [python, "-I", "-S", "-c", _SCRIPT],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tempfile.gettempdir(),
            env=env,
            start_new_session=True,
        )
    except OSError as error:
        return f"python interpreter {python} cannot be started: {error.strerror or error}"
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return f"python interpreter {python} did not answer within {timeout_s:g} s"
    finally:
        _kill_group(process)
    text = out.decode("utf-8", "replace")
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == _MARK and parts[1].startswith("3."):
            return ""
    if process.returncode:
        detail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return f"python interpreter {python} exited with status {process.returncode}" + (
            f" ({detail[0][:200]})" if detail[0] else ""
        )
    shown = (text.strip() or err.decode("utf-8", "replace").strip())[:80]
    return f"{python} does not behave like a Python 3 interpreter (it printed {shown!r})"


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def call_with_time_limit(function: Callable[[], T], timeout_s: float, what: str) -> T:
    """`function()`, or TimeoutError naming `what` after `timeout_s` (the call is left to
    finish on a daemon thread: Python cannot interrupt it)."""
    outcome: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = function()
        except BaseException as error:  # handed to the caller
            outcome["error"] = error
        finally:
            done.set()

    threading.Thread(target=run, name="time-limited", daemon=True).start()
    if not done.wait(timeout_s):
        raise TimeoutError(f"{what} did not finish within {timeout_s:g} s")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
