"""Time-limited checks of the Python interpreter whose APIs validate completions.

jedi starts the configured interpreter with no time limit: an interpreter that hangs
blocked the index forever (every completion then waited its whole budget).  The
interpreter is first run once, time-limited, by `index_cache.probe_environment` (which
says in words what is wrong); `call_with_time_limit` bounds the calls that start it
again (``jedi.create_environment``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from typing import TypeVar

#: how long jedi may take to start an environment
ENVIRONMENT_TIMEOUT_S = 20.0

T = TypeVar("T")


def run_contained(command: list[str], timeout_s: float) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `command` run in its own process group, from a
    temporary folder, with only PATH/LANG in its environment; the whole group is killed
    when it ends or after `timeout_s` (then TimeoutError).  A child the command leaves
    behind cannot hold the call (or the pipes) open.  OSError when it cannot start."""
    env = {name: os.environ[name] for name in ("PATH", "SYSTEMROOT", "LANG") if name in os.environ}
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tempfile.gettempdir(),
        env=env,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"{command[0]} did not finish within {timeout_s:g} s") from None
    finally:
        _kill_group(process)
    return process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


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
