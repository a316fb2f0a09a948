"""A real llama.cpp `llama-server` on 127.0.0.1 for the server backend's tests, and the
fault proxy in front of it.

The binary is the one `.ci/install-llama-cpp` builds (`make llama-cpp`) under the cache
root, or `$ADAPTRACK_LLAMA_SERVER`; without it the tests that need it skip, naming the
command that builds it.  The model is the built-in `tiny` written as GGUF (f32, cached
beside the model folder, the same file the llamacpp backend's tests use).

`FaultProxy` starts `fault_proxy.py` (a real HTTP server process) that forwards to a
llama-server and injects one fault at a time (HTTP 500, malformed or truncated JSON, a
slow answer, no log-probabilities, an ignored `logit_bias`, an oversized reply, a
web server that is not an inference server), switched through `POST /__fault`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

LLAMA_CPP_VERSION = "0.3.36"
HERE = Path(__file__).resolve().parent
BUILD_HINT = "llama-server is not built: run `make llama-cpp` (.ci/install-llama-cpp) or set ADAPTRACK_LLAMA_SERVER"


def llama_server_binary() -> Path | None:
    explicit = os.environ.get("ADAPTRACK_LLAMA_SERVER")
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    from adaptrack_lsp.config import cache_root

    path = cache_root() / f"llama.cpp-{LLAMA_CPP_VERSION}" / "bin" / "llama-server"
    return path if path.is_file() else None


def tiny_gguf() -> Path:
    """The built-in tiny model as an f32 GGUF, built once in the cache."""
    from adaptrack_lsp.cache import cached_build
    from adaptrack_lsp.completion.lm.gguf_export import export_gguf
    from adaptrack_lsp.completion.lm.tiny import tiny_model_path

    folder = tiny_model_path()

    def build(target: Path) -> None:
        export_gguf(folder, target / "tiny-f32.gguf", "f32", name="tiny")

    return cached_build(f"{folder.name}-gguf-f32", build, marker="tiny-f32.gguf") / "tiny-f32.gguf"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _open(url_or_request, timeout: float, context=None):
    """urlopen straight to 127.0.0.1 (no proxy from the environment)."""
    handlers = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers).open(url_or_request, timeout=timeout)


def _wait_http(url: str, process: subprocess.Popen, limit: float, log: Path | None = None, context=None) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if process.poll() is not None:
            detail = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
            raise RuntimeError(f"{url}: the process exited with {process.returncode}\n{detail}")
        try:
            with _open(url, 2, context) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up within {limit:.0f} s")


class LlamaServer:
    """One llama-server process serving `gguf` on 127.0.0.1:`port`."""

    def __init__(self, gguf: Path, port: int | None = None, log_dir: Path | None = None, alias: str = "tiny", extra: tuple[str, ...] = ()):
        self.gguf = gguf
        self.extra = tuple(extra)
        self.port = port or free_port()
        self.alias = alias
        self.log = (log_dir or Path(os.environ.get("TMPDIR", "/tmp"))) / f"llama-server-{self.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LlamaServer:
        binary = llama_server_binary()
        if binary is None:
            pytest.skip(BUILD_HINT)
        command = [
            str(binary), "-m", str(self.gguf), "--host", "127.0.0.1", "--port", str(self.port),
            "-c", "2048", "-np", "1", "-t", "1", "--alias", self.alias, "--no-webui", *self.extra,
        ]  # fmt: skip
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        _wait_http(f"{self.url}/health", self.process, 120, self.log)
        return self

    def kill(self) -> None:
        """SIGKILL: the server dies as a crash would end it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


class FaultProxy:
    """`fault_proxy.py` in front of `upstream`, on its own port."""

    def __init__(self, upstream: str, port: int | None = None, tls: tuple[Path, Path] | None = None):
        self.upstream = upstream
        self.port = port or free_port()
        self.tls = tls
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def _context(self):
        if not self.tls:
            return None
        import ssl

        return ssl.create_default_context(cafile=str(self.tls[0]))

    def start(self) -> FaultProxy:
        command = [sys.executable, str(HERE / "fault_proxy.py"), "--port", str(self.port), "--upstream", self.upstream]
        if self.tls:
            command += ["--tls", str(self.tls[0]), str(self.tls[1])]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_http(f"{self.url}/__fault", self.process, 60, context=self._context())
        return self

    def fault(self, mode: str, **parameters) -> None:
        body = json.dumps({"mode": mode, **parameters}).encode()
        request = urllib.request.Request(f"{self.url}/__fault", data=body, method="POST", headers={"Content-Type": "application/json"})
        with _open(request, 10, self._context()) as response:
            assert response.status == 200

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def stop(self) -> None:
        self.kill()


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """A llama-server serving the tiny GGUF for the whole session (skips when unbuilt)."""
    if llama_server_binary() is None:
        pytest.skip(BUILD_HINT)
    server = LlamaServer(tiny_gguf(), log_dir=tmp_path_factory.mktemp("llama-server")).start()
    yield server
    server.stop()


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by itself (openssl), and its key."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


@contextlib.contextmanager
def fault_proxy(upstream: str, tls: tuple[Path, Path] | None = None):
    proxy = FaultProxy(upstream, tls=tls).start()
    try:
        yield proxy
    finally:
        proxy.stop()
