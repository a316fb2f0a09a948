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


def run_contained(command: list[str], timeout_s: float, extra_env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `command` run in its own process group, from a
    temporary folder, with only PATH/LANG (and `extra_env`) in its environment; the whole
    group is killed when it ends or after `timeout_s` (then TimeoutError).  A child the
    command leaves behind cannot hold the call (or the pipes) open.  OSError when it
    cannot start."""
    env = {name: os.environ[name] for name in ("PATH", "SYSTEMROOT", "LANG") if name in os.environ}
    env.update(extra_env or {})
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tempfile.gettempdir(),
        env=env,
        start_new_session=True,
    )
    # the pipes are read on threads and the call ends when the command does: a child it
    # leaves behind holds the pipes open, and is killed with the group below
    output: dict[str, list[bytes]] = {"out": [], "err": []}
    readers = [
        threading.Thread(target=_drain, args=(stream, output[key]), name="contained-output", daemon=True)
        for stream, key in ((process.stdout, "out"), (process.stderr, "err"))
    ]
    for reader in readers:
        reader.start()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"{command[0]} did not finish within {timeout_s:g} s") from None
    finally:
        _kill_group(process)
        for reader in readers:
            reader.join(timeout=5)
    out, err = b"".join(output["out"]), b"".join(output["err"])
    return process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _drain(stream, into: list[bytes]) -> None:
    try:
        for chunk in iter(lambda: stream.read(65536), b""):
            into.append(chunk)
    except (OSError, ValueError):
        pass
    finally:
        stream.close()


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
