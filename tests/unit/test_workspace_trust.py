"""Opening a folder must not run its code: each test is an attack from a cloned
repository (or a careless file) and checks that it no longer works.

Module shadowing (`python -m` in the workspace), workspace interpreters, the sandbox of
runtime introspection, model ids that name a folder of the workspace, snapshot bombs.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adaptrack_lsp.apis import introspection
from adaptrack_lsp.apis.introspection import RuntimeIntrospector
from adaptrack_lsp.apis.jedi_index import JediIndex, find_python
from adaptrack_lsp.apis.snapshot import (
    MAX_SNAPSHOT_BYTES,
    SnapshotError,
    SnapshotIndex,
    read_snapshot,
    validate_snapshot,
)
from adaptrack_lsp.completion.service import CompletionService
from adaptrack_lsp.config import Settings, model_argument, parse_settings

posix_only = pytest.mark.skipif(os.name != "posix", reason="process groups and resource limits are POSIX")


def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


# ------------------------------------------------------------------ 1. module shadowing


def test_workspace_modules_named_like_the_standard_library_do_not_run_in_the_server(tmp_path):
    workspace = tmp_path / "repo"
    workspace.mkdir()
    for name in ("queue", "token", "logging"):
        marker = tmp_path / f"ran-{name}"
        (workspace / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(17)\n")
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}}}
    # the way an editor would start it without a neutral directory: cwd = the workspace
    completed = subprocess.run(
        [sys.executable, "-m", "adaptrack_lsp", "serve"],
        cwd=workspace,
        input=_frame(initialize),
        capture_output=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert b'"serverInfo"' in completed.stdout, completed.stderr.decode(errors="replace")[-2000:]
    assert sorted(p.name for p in tmp_path.glob("ran-*")) == []


def test_the_entry_point_refuses_to_run_after_an_import_from_the_working_directory(tmp_path):
    # what `python -m` would do if a module of the working directory were imported before
    # adaptrack_lsp/__main__.py runs: the second guard notices and stops
    (tmp_path / "imported_early.py").write_text("VALUE = 1\n")
    script = (
        "import sys, runpy\n"
        "sys.path.insert(0, '')\n"
        "import imported_early\n"
        "runpy.run_module('adaptrack_lsp', run_name='__main__')\n"
    )
    completed = subprocess.run([sys.executable, "-c", script, "--version"], cwd=tmp_path, capture_output=True,
                               text=True, timeout=120)
    assert completed.returncode == 2
    assert "'imported_early' was imported from the working directory" in completed.stderr
    assert "python -P -m adaptrack_lsp" in completed.stderr


# ------------------------------------------------------------------ 2. workspace interpreters


def _hostile_workspace(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace whose .venv/bin/python is a script that leaves a marker when run."""
    workspace = tmp_path / "repo"
    marker = tmp_path / "interpreter-ran"
    bin_dir = workspace / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(f"#!/bin/sh\necho ran >> {marker}\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    (workspace / "main.py").write_text("import json\njson.\n")
    return workspace, marker


def test_an_untrusted_workspace_interpreter_is_never_run(tmp_path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    workspace, marker = _hostile_workspace(tmp_path)
    for introspect in (False, True):
        index = JediIndex(workspace=workspace, runtime_introspection=introspect, cache_dir=None, timeout_s=60)
        try:
            members = index.members(("json",))
        finally:
            index.close()
        assert members is not None and "dumps" in members  # answered by the server's interpreter
        assert index.python == sys.executable and index.found_by == "server interpreter"
        # imports only in trusted environments: the server's own counts, the workspace's .venv does not
        assert index.runtime_introspection is introspect
        assert "not trusted" in index.describe() and ".venv" in index.describe()
    assert not marker.exists()


def test_a_trusted_workspace_interpreter_must_still_pass_the_safety_check(tmp_path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    workspace, marker = _hostile_workspace(tmp_path)
    assert find_python(None, workspace, trusted_workspace=True)[1] == "workspace .venv (trusted workspace)"
    index = JediIndex(workspace=workspace, trusted_workspace=True, runtime_introspection=False, cache_dir=None, timeout_s=60)
    try:
        assert index.members(("json",)) is None  # refused: not an interpreter jedi calls safe
    finally:
        index.close()
    assert "is not used" in index.problem and "pythonPath" in index.problem
    assert not marker.exists()


def test_an_explicit_python_path_is_used_and_may_introspect(tmp_path):
    index = JediIndex(python=sys.executable, workspace=tmp_path, cache_dir=None)
    assert index.found_by == "setting" and index.runtime_introspection is True
    index.close()


def test_the_service_says_which_environment_validates_and_why(tmp_path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    workspace, marker = _hostile_workspace(tmp_path)
    service = CompletionService(Settings(), workspace_root=str(workspace))
    try:
        _, info = service.api_index()
        assert info.environment == sys.executable
        assert "server interpreter" in info.reason and "not trusted" in info.reason
        trusted = Settings(trusted_workspace=True)
        assert service.update_settings(trusted) is True  # model not loaded: True either way
        _, info = service.api_index()
        assert info.environment == str(workspace / ".venv" / "bin" / "python")
        assert "trusted workspace" in info.reason
        assert service.describe_constraint() == info.reason
    finally:
        service.close()
    assert not marker.exists()


def test_complete_in_a_cloned_repository_does_not_run_its_interpreter_unless_trusted(tmp_path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    workspace, marker = _hostile_workspace(tmp_path)
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    command = [sys.executable, "-m", "adaptrack_lsp", "complete", "main.py:2:6", "--model", "tiny",
               "--max-new-tokens", "2", "--timeout-ms", "60000"]
    done = subprocess.run(command, cwd=workspace, capture_output=True, text=True, timeout=300,
                          env={**env, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    assert "# environment:" in done.stdout and "not trusted" in done.stdout
    assert not marker.exists()
    from adaptrack_lsp.cli import build_parser
    from adaptrack_lsp.commands.complete import build_settings

    trusted, _ = build_settings(build_parser().parse_args(["complete", "main.py", "--trust-workspace"]))
    untrusted, _ = build_settings(build_parser().parse_args(["complete", "main.py"]))
    assert trusted.trusted_workspace is True and untrusted.trusted_workspace is False


def test_trusted_workspace_setting_defaults_to_false():
    assert Settings().trusted_workspace is False
    parsed, problems = parse_settings({"trustedWorkspace": True})
    assert parsed.trusted_workspace is True and problems == []
    parsed, problems = parse_settings({"trustedWorkspace": "yes"})
    assert parsed.trusted_workspace is False and len(problems) == 1


# ------------------------------------------------------------------ 3. introspection sandbox


def _environment_with(tmp_path: Path, module_name: str, source: str) -> str:
    """A virtual environment (no pip) with one module in its site-packages."""
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()
    Path(site, f"{module_name}.py").write_text(source)
    return str(python)


def _dead(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _wait_dead(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _dead(pid):
            return True
        time.sleep(0.05)
    return _dead(pid)


PROBE = '''
import json, os, resource, subprocess
child = subprocess.Popen(["sleep", "300"])
limits = {name: resource.getrlimit(getattr(resource, name))[0]
          for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_CORE")}
with open(REPORT, "w") as report:
    json.dump({"env": dict(os.environ), "cwd": os.getcwd(), "limits": limits, "child": child.pid}, report)
visible = 1
'''


@posix_only
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process states read from /proc")
def test_introspection_sees_no_secrets_gets_limits_and_its_processes_die_with_it(tmp_path, monkeypatch):
    report = tmp_path / "report.json"
    python = _environment_with(tmp_path, "sandbox_probe", f"REPORT = {str(report)!r}\n" + PROBE)
    monkeypatch.setenv("ADAPTRACK_TEST_SECRET", "s3cret-token")
    worker = RuntimeIntrospector(python, timeout_s=60)
    try:
        answer = worker.members(("sandbox_probe",))
        assert answer.members is not None and "visible" in answer.members, answer.error
        seen = json.loads(report.read_text())
        sandbox = worker._sandbox_dir
        assert "ADAPTRACK_TEST_SECRET" not in seen["env"]
        assert not any("s3cret" in value for value in seen["env"].values())
        assert seen["env"]["HOME"] == sandbox and seen["cwd"] == os.path.realpath(sandbox)
        assert seen["cwd"] != os.getcwd()
        assert seen["limits"] == {
            "RLIMIT_AS": introspection.MEMORY_LIMIT_BYTES,
            "RLIMIT_CPU": introspection.CPU_LIMIT_S,
            "RLIMIT_FSIZE": introspection.FILE_SIZE_LIMIT_BYTES,
            "RLIMIT_CORE": 0,
        }
        assert worker.limits()["core"] == 0
        child = seen["child"]
        assert not _dead(child)
    finally:
        worker.close()
    assert _wait_dead(child), "a process started by the imported module outlived the worker"
    assert not Path(sandbox).exists()


@posix_only
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process states read from /proc")
def test_the_index_walk_is_contained(tmp_path, monkeypatch):
    """`adaptrack-lsp index` (and `eval --python`) import the package they walk: the walk
    sees no secrets, runs outside the working folder, and a process the package starts
    dies with it (before, it inherited the environment and held the walk open)."""
    from adaptrack_lsp.apis.snapshot import walk_snapshot

    report = tmp_path / "report.json"
    python = _environment_with(tmp_path, "sandbox_probe", f"REPORT = {str(report)!r}\n" + PROBE)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("ADAPTRACK_TEST_SECRET", "s3cret-token")
    started = time.monotonic()
    data = walk_snapshot(python, "sandbox_probe", timeout_s=120)
    assert time.monotonic() - started < 60  # not held open by the child's pipes
    assert any(name.endswith("visible") for name in data["names"]), data["names"]
    seen = json.loads(report.read_text())
    assert "ADAPTRACK_TEST_SECRET" not in seen["env"]
    assert os.path.realpath(seen["cwd"]) != os.path.realpath(work) and not list(work.iterdir())
    assert _wait_dead(seen["child"]), "a process started by the walked package outlived the walk"


@posix_only
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process states read from /proc")
def test_the_worker_group_dies_when_the_server_process_exits(tmp_path):
    report = tmp_path / "report.json"
    python = _environment_with(tmp_path, "sandbox_probe", f"REPORT = {str(report)!r}\n" + PROBE)
    # a server process that starts a worker and exits without closing anything
    script = (
        "import sys\n"
        "from adaptrack_lsp.apis.introspection import RuntimeIntrospector\n"
        f"worker = RuntimeIntrospector({python!r}, timeout_s=60)\n"
        "assert worker.members(('sandbox_probe',)).members is not None\n"
        "print(worker.pid, worker._sandbox_dir, flush=True)\n"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    worker_pid, sandbox = completed.stdout.split()
    assert _wait_dead(int(worker_pid)) and _wait_dead(json.loads(report.read_text())["child"])
    assert not Path(sandbox).exists()


def test_closing_the_service_closes_its_indexes():
    from adaptrack_lsp.constrainers.api import StaticIndex

    closed = []

    class Recorded(StaticIndex):
        def close(self) -> None:
            closed.append(True)

    service = CompletionService(Settings(), index_factory=lambda settings, root: Recorded(["json.dumps"]))
    service.api_index()
    service.close()  # what `shutdown` does
    assert closed == [True]


@posix_only
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process states read from /proc")
def test_a_hanging_import_is_killed_with_its_whole_process_group(tmp_path):
    pid_file = tmp_path / "child.pid"
    source = (
        "import subprocess, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(subprocess.Popen(['sleep', '300']).pid))\n"
        "time.sleep(600)\n"
    )
    python = _environment_with(tmp_path, "hangs_on_import", source)
    worker = RuntimeIntrospector(python, timeout_s=60)
    try:
        answer = worker.members(("hangs_on_import",), timeout_s=5)
        assert answer.transient and "killed" in answer.error
        assert _wait_dead(int(pid_file.read_text()))
    finally:
        worker.close()


# ------------------------------------------------------------------ 5. model ids and paths


def test_a_folder_named_like_the_default_model_in_the_working_directory_is_not_loaded(tmp_path, monkeypatch):
    from adaptrack_lsp.completion.lm.hf import ModelError
    from adaptrack_lsp.completion.lm.loading import load_model
    from adaptrack_lsp.completion.lm.tiny import tiny_model_path

    shutil.copytree(tiny_model_path(), tmp_path / "Qwen" / "Qwen2.5-Coder-1.5B")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError, match="Hugging Face hub"):
        load_model("Qwen/Qwen2.5-Coder-1.5B")  # a hub id, not ./Qwen/Qwen2.5-Coder-1.5B
    with pytest.raises(ModelError, match="relative"):
        load_model("./Qwen/Qwen2.5-Coder-1.5B")  # no configuration to be relative to
    lm = load_model("./Qwen/Qwen2.5-Coder-1.5B", relative_to=tmp_path)  # a path says so
    assert lm.vocab.size > 0


def test_command_line_model_paths_are_made_absolute_where_they_were_typed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert model_argument("tiny") == "tiny"
    assert model_argument("Qwen/Qwen2.5-Coder-1.5B") == "Qwen/Qwen2.5-Coder-1.5B"
    assert model_argument("./models/m") == str(tmp_path / "models" / "m")
    assert model_argument("~/m") == os.path.expanduser("~/m")


# ------------------------------------------------------------------ 6. snapshot caps


def _gzip_bomb(path: Path, megabytes: int) -> Path:
    """A valid snapshot whose JSON is `megabytes` MiB of whitespace (gzip: ~0.1% of it)."""
    chunk = b" " * (1024 * 1024)
    with gzip.open(path, "wb", compresslevel=9) as handle:
        handle.write(b'{"package": "p", "root": "p", "names": [')
        for _ in range(megabytes):
            handle.write(chunk)
        handle.write(b"]}")
    return path


def test_a_gzip_bomb_snapshot_is_refused_with_a_clear_message(tmp_path):
    bomb = _gzip_bomb(tmp_path / "bomb.json.gz", MAX_SNAPSHOT_BYTES // (1024 * 1024) + 36)
    assert bomb.stat().st_size < 1024 * 1024
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(SnapshotError, match=r"larger than 64 MiB of JSON once decompressed"):
        SnapshotIndex(bomb)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 200, f"reading the bomb grew the peak RSS by {grown_mb:.0f} MB"
    service = CompletionService(Settings(api_snapshot=str(bomb)))
    try:
        index, info = service.api_index()
        assert index is None and "64 MiB" in info.problem
    finally:
        service.close()


def test_snapshot_name_count_is_capped(tmp_path):
    data = {"package": "p", "root": "p", "names": ["p.a", "p.b", "p.c"]}
    validate_snapshot(data, max_names=3)
    with pytest.raises(SnapshotError, match="more than the limit of 2"):
        validate_snapshot(data, max_names=2)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SnapshotError, match="limit"):
        read_snapshot(path, max_names=2)
    with pytest.raises(SnapshotError, match="larger than"):
        read_snapshot(path, max_bytes=10)
    assert read_snapshot(path)["names"] == data["names"]
