"""The on-disk API index cache: reuse across processes, invalidation, bad files, bad
folders, and an interpreter that hangs."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from adaptrack_lsp.apis.index import JediIndex
from adaptrack_lsp.apis.index_cache import CACHE_FORMAT, EnvironmentFacts, IndexCache, worker_digest

from api_index_support import install_fake_package, make_fixture_venv, site_packages

OLD_NUMPY = "def old_api():\n    return 1\n\n\nclass ndarray:\n    def reshape(self):\n        pass\n"
NEW_NUMPY = "def new_api():\n    return 2\n\n\nclass ndarray:\n    def reshape(self):\n        pass\n"


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory):
    return make_fixture_venv(tmp_path_factory.mktemp("fixture-venv") / "venv")


def new_index(python, cache_dir, **options) -> JediIndex:
    """What a new process does: an index with nothing in memory."""
    return JediIndex(python=python, timeout_s=120, runtime_timeout_s=120, cache_dir=cache_dir, **options)


def numpy_members(python, cache_dir, **options) -> tuple[set[str], str]:
    index = new_index(python, cache_dir, **options)
    try:
        members = index.members(("numpy",))
        assert members is not None
        return set(members), index.packages()["numpy"]
    finally:
        index.close()


def cache_files(cache_dir):
    return sorted(p for p in cache_dir.rglob("*.json"))


def test_upgraded_package_is_recomputed_and_unchanged_one_is_loaded(venv_python, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    install_fake_package(venv_python, "numpy", "1.0.0", OLD_NUMPY)
    members, version = numpy_members(venv_python, cache)
    assert {"old_api", "ndarray"} <= members and "new_api" not in members and version == "1.0.0"

    install_fake_package(venv_python, "numpy", "2.0.0", NEW_NUMPY)  # the upgrade
    members, version = numpy_members(venv_python, cache)
    assert {"new_api", "ndarray"} <= members and "old_api" not in members and version == "2.0.0"
    suffix = f"runtime.v{CACHE_FORMAT}-{worker_digest()}.json"  # the worker's source is part of the key
    assert [p.name for p in cache_files(cache)] == [f"numpy-1.0.0.{suffix}", f"numpy-2.0.0.{suffix}"]

    # unchanged: a new process answers from disk without jedi or the runtime worker
    def must_not_run(*args, **kwargs):
        raise AssertionError("answered from disk, nothing is recomputed")

    monkeypatch.setattr(JediIndex, "_jedi_members", must_not_run)
    monkeypatch.setattr(JediIndex, "_introspection", must_not_run)
    index = new_index(venv_python, cache)
    assert index.wait_ready([("numpy",)], 60)
    assert "new_api" in index.members(("numpy",))
    index.close()


def test_edited_module_with_the_same_version_is_recomputed(venv_python, tmp_path):
    cache = tmp_path / "cache"
    install_fake_package(venv_python, "numpy", "3.0.0", OLD_NUMPY)
    assert "old_api" in numpy_members(venv_python, cache, runtime_introspection=False)[0]
    init = site_packages(venv_python) / "numpy" / "__init__.py"
    init.write_text(NEW_NUMPY + "\n\ndef edited_api():\n    pass\n", encoding="utf-8")  # an editable install, edited
    members = numpy_members(venv_python, cache, runtime_introspection=False)[0]
    assert "edited_api" in members and "old_api" not in members


@pytest.mark.parametrize(
    "content",
    [
        "{not json",  # corrupt
        f'{{"format": {CACHE_FORMAT}, "package": "numpy", "version": "4.0.0", "paths": {{"numpy": {{"via": "jedi", "memb',  # partial
        json.dumps({"format": CACHE_FORMAT, "package": "numpy", "version": "4.0.0",
                    "paths": {"numpy": {"via": "jedi", "members": {"forged": "yes"}, "files": {}}}}),  # wrong shape
        json.dumps({"format": CACHE_FORMAT, "package": "numpy", "version": "4.0.0",
                    "paths": {"numpy": {"via": "jedi", "members": {"forged": ["function", False]}, "files": {"/no/such/file.py": [1, 2]}}}}),
    ],
    ids=["corrupt", "partial", "wrong-shape", "stale-files"],
)
def test_bad_cache_files_are_ignored_and_rebuilt(venv_python, tmp_path, content):
    cache = tmp_path / "cache"
    install_fake_package(venv_python, "numpy", "4.0.0", OLD_NUMPY)
    numpy_members(venv_python, cache)
    [file] = cache_files(cache)
    file.write_text(content, encoding="utf-8")
    members, _ = numpy_members(venv_python, cache)
    assert "old_api" in members and "forged" not in members
    rebuilt = json.loads(file.read_text(encoding="utf-8"))
    assert set(rebuilt["paths"]["numpy"]["members"]) == members


def test_unwritable_cache_folder_works_without_disk_cache_and_logs_once(venv_python, tmp_path, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    install_fake_package(venv_python, "numpy", "5.0.0", OLD_NUMPY)
    index = new_index(venv_python, blocker / "cache", runtime_introspection=False)
    with caplog.at_level(logging.WARNING, logger="adaptrack_lsp.apis.index_cache"):
        assert "old_api" in index.members(("numpy",))
        assert "reshape" in index.members(("numpy", "ndarray"))
        assert index.members(("json",)) is not None
    index.close()
    warnings = [r for r in caplog.records if "not writable" in r.getMessage()]
    assert len(warnings) == 1 and "working without the disk cache" in warnings[0].getMessage()


def test_concurrent_writers_leave_a_complete_file(tmp_path):
    environment = EnvironmentFacts("/usr/bin/python3", "3.11.7", ())
    writers = [IndexCache(tmp_path) for _ in range(4)]  # as if four processes
    file = writers[0].file(environment, "numpy", "1.0", "runtime")

    def write(writer, number):
        for round_ in range(25):
            entry = {"via": "jedi", "members": {f"name{number}_{round_}": ["function", False]}, "files": {}}
            writer.store(file, "numpy", "1.0", {f"numpy.m{number}_{round_}": entry})

    threads = [threading.Thread(target=write, args=(writer, n)) for n, writer in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    loaded = IndexCache(tmp_path).load(file, "numpy", "1.0")
    assert loaded  # a complete, valid file (each write is atomic)
    assert not list(tmp_path.rglob("*.tmp"))


def test_interpreter_that_hangs_is_unconstrained_with_a_problem(tmp_path):
    hanging = tmp_path / "python"
    hanging.write_text("#!/bin/sh\nsleep 60\n")
    hanging.chmod(0o755)
    index = JediIndex(python=str(hanging), timeout_s=30, cache_dir=tmp_path / "cache")
    index.probe_timeout_s = 0.5
    started = time.monotonic()
    assert index.members(("json",)) is None
    assert time.monotonic() - started < 20
    assert "did not say its version within 0.5 s" in index.problem
    assert index.ready(("json",))  # nothing is pending: the answer is "unconstrained"
    index.close()
