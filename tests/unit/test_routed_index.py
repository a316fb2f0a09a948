"""`apis.routed`: a snapshot answers for its package, the environment for the others;
bundled snapshots by name; which packages an interpreter lacks."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from adaptrack_lsp.apis.index import CALL, bundled_snapshot, path_exists
from adaptrack_lsp.apis.routed import (
    RoutedIndex,
    bundled_snapshot_names,
    not_installed,
    resolve_snapshot,
    snapshot_index_factory,
)
from adaptrack_lsp.apis.snapshot import SnapshotIndex
from adaptrack_lsp.apis.static_index import StaticIndex


def tensorflow_snapshot() -> dict:
    """The reference: the bundled snapshot as JSON, read without the code under test."""
    with gzip.open(bundled_snapshot("tensorflow"), "rt", encoding="utf-8") as handle:
        return json.load(handle)


def routed() -> RoutedIndex:
    live = StaticIndex(
        ["numpy.prod", "numpy.linalg.norm", "tensorflow.placeholder"],
        signatures={"numpy.prod()": ["a", "axis"]},
        versions={"numpy": "2.4.6", "tensorflow": "1.15.0"},
    )
    snapshot = SnapshotIndex(bundled_snapshot("tensorflow"))
    return RoutedIndex(live, {"tensorflow": snapshot}, {"tensorflow": "tensorflow 2.21.0 snapshot"}, source="snapshot")


def test_each_root_is_answered_by_its_own_index():
    index = routed()
    reference = set(tensorflow_snapshot()["names"])
    # tensorflow: the snapshot (the base's TF 1 name does not count)
    assert path_exists(index, ("tensorflow", "placeholder")) is False
    assert "tensorflow.placeholder" not in reference
    assert path_exists(index, ("tensorflow", "compat", "v1", "placeholder")) is True
    assert "tensorflow.compat.v1.placeholder" in reference
    assert set(index.members(("tensorflow",))) == {n.split(".")[1] for n in reference if n.count(".") >= 1}
    # every other root: the base
    assert path_exists(index, ("numpy", "prod")) is True
    assert path_exists(index, ("numpy", "product")) is False
    assert index.signature(("numpy", "prod", CALL)).to_list() == ["a", "axis"]
    assert index.members(("os",)) is None  # neither knows it: unknown, never empty
    assert index.has_root("tensorflow") and index.has_root("numpy") and not index.has_root("os")
    assert index.ready(("tensorflow", "compat")) and index.wait_ready([("tensorflow",), ("numpy",)], 1.0)
    # versions: the snapshot's for its root, the base's for the rest
    assert index.packages() == {"numpy": "2.4.6", "tensorflow": tensorflow_snapshot()["version"]}
    assert index.source == "snapshot"
    assert index.describe().startswith("tensorflow from the tensorflow 2.21.0 snapshot; other packages from the ")


def test_without_a_base_other_roots_are_unknown():
    index = RoutedIndex(None, {"tensorflow": SnapshotIndex(bundled_snapshot("tensorflow"))})
    assert index.members(("numpy",)) is None and index.signature(("numpy", "prod", CALL)) is None
    assert path_exists(index, ("tensorflow", "placeholder")) is False
    assert index.problem == "" and index.ready(("numpy",))


def test_snapshots_by_package_name_or_file(tmp_path):
    assert "tensorflow" in bundled_snapshot_names()
    assert resolve_snapshot("tensorflow") == bundled_snapshot("tensorflow")
    own = tmp_path / "mine.json"
    own.write_text(json.dumps({"package": "p", "root": "p", "names": ["p.a"]}))
    assert resolve_snapshot(str(own)) == str(own)
    with pytest.raises(FileNotFoundError, match=r"no_such: no such snapshot file.*bundled: tensorflow"):
        resolve_snapshot("no_such")


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("bare-env")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    return str(folder / "bin" / "python")


def importable(python: str, roots) -> dict[str, bool]:
    """The reference: importlib.util.find_spec, run in that interpreter."""
    script = "import importlib.util, json, sys; print(json.dumps({r: importlib.util.find_spec(r) is not None for r in sys.argv[1:]}))"
    done = subprocess.run([python, "-I", "-c", script, *roots], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def test_not_installed_agrees_with_find_spec_in_that_interpreter(bare_python):
    roots = ["tensorflow", "numpy", "json", "adaptrack_absent_package"]
    for python in (bare_python, sys.executable):
        expected = [root for root, found in importable(python, roots).items() if not found]
        assert not_installed(roots, python) == expected
    assert not_installed(roots, bare_python)[:2] == ["tensorflow", "numpy"]  # the bare environment has neither
    # an interpreter that cannot be asked: nothing is claimed missing (the index says why)
    assert not_installed(roots, "/no/such/python") == []


def test_the_factory_puts_the_snapshot_in_front_of_the_live_environment(bare_python):
    """A file importing numpy and tensorflow, with --snapshot tensorflow: tensorflow from
    the snapshot, numpy from the live environment (here the bare one: numpy is unknown
    there, so unconstrained, never judged by the snapshot)."""
    from adaptrack_lsp.config import Settings

    index = snapshot_index_factory([resolve_snapshot("tensorflow")])(Settings(python_path=bare_python), None)
    try:
        assert isinstance(index, RoutedIndex) and index.source == "snapshot"
        assert index.notes == {"tensorflow": "tensorflow 2.21.0 snapshot"}
        assert path_exists(index, ("tensorflow", "placeholder")) is False
        assert index.base.python == bare_python
        assert index.wait_ready([("json",)], 60)
        assert path_exists(index, ("json", "dumps")) is True  # the standard library of that environment
    finally:
        index.close()
