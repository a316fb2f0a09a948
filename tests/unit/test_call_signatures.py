"""Where call signatures come from: runtime introspection and jedi in a real environment
(a fixture package in a fresh virtualenv, and the venv's numpy), the disk cache, the
"pending" machinery, snapshots (with and without signatures, the TF v1 setting, bad
input), the `index` command, and workspace trust (an untrusted folder's code never runs)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
import time

import pytest

from adaptrack_lsp.apis.index import Signature, call_key
from adaptrack_lsp.apis.jedi_index import JediIndex
from adaptrack_lsp.apis.ready_index import ReadyOnlyIndex
from adaptrack_lsp.apis.snapshot import (
    SnapshotError,
    SnapshotIndex,
    compat_v1_as_root,
    names_to_snapshot,
    read_snapshot,
    validate_snapshot,
    write_snapshot,
)
from adaptrack_lsp.constrainers.api import ConstraintContext
from adaptrack_lsp.constrainers.call_arguments import KeywordArguments

from api_index_support import install_fake_package, make_fixture_venv

PACKAGE = textwrap.dedent(
    '''
    import functools
    import math

    __all__ = ["plain", "pos_only", "takes_kwargs", "Model", "make_model", "decorated", "opaque", "c_function"]


    def plain(a, b=1, *, c=2):
        return a


    def pos_only(a, /, b):
        return a


    def takes_kwargs(a, **options):
        return a


    class Model:
        def __init__(self, alpha=1.0, *, fit_intercept=True):
            self.alpha = alpha

        def fit(self, X, y, sample_weight=None):
            return self

        @staticmethod
        def make(seed=0):
            return Model()

        @classmethod
        def load(cls, path, strict=True):
            return cls()


    def make_model(alpha=1.0) -> Model:
        return Model(alpha)


    def _wrap(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            return function(*args, **kwargs)

        return wrapper


    def _hide(function):
        def wrapper(*args, **kwargs):
            return function(*args, **kwargs)

        return wrapper


    @_wrap
    def decorated(x, rate=0.5):
        return x


    @_hide
    def opaque(x, rate=0.5):
        return x


    c_function = math.hypot
    '''
)


@pytest.fixture(scope="module")
def fixture_python(tmp_path_factory):
    python = make_fixture_venv(tmp_path_factory.mktemp("sigenv") / "env")
    install_fake_package(python, "sigpkg", "1.2.3", PACKAGE)
    return python


def lists(index, *calls) -> list:
    found = []
    for call in calls:
        signature = index.signature(call_key(call))
        found.append(None if signature is None else signature.to_list())
    return found


@pytest.mark.parametrize("runtime", [True, False])
def test_signatures_of_a_fixture_package(fixture_python, tmp_path, runtime):
    index = JediIndex(python=fixture_python, runtime_introspection=runtime, cache_dir=tmp_path, timeout_s=120, runtime_timeout_s=120)
    try:
        assert lists(
            index,
            ("sigpkg", "plain"),
            ("sigpkg", "pos_only"),
            ("sigpkg", "takes_kwargs"),
            ("sigpkg", "Model"),  # a class: its constructor, without self
            ("sigpkg", "Model", "()", "fit"),  # a method of an instance: bound
            ("sigpkg", "Model", "()", "make"),  # a staticmethod keeps its first parameter
            ("sigpkg", "Model", "()", "load"),  # a classmethod is bound to the class
            ("sigpkg", "make_model", "()", "fit"),  # the result type of a function, from jedi
        ) == [
            ["a", "b", "*", "c"],
            ["a", "/", "b"],
            ["a", "**options"],
            ["alpha", "*", "fit_intercept"],
            ["X", "y", "sample_weight"],
            ["seed"],
            ["path", "strict"],
            ["X", "y", "sample_weight"],
        ]
        decorated, opaque, c_function = lists(index, ("sigpkg", "decorated"), ("sigpkg", "opaque"), ("sigpkg", "c_function"))
        assert decorated == ["x", "rate"]  # inspect follows functools.wraps; jedi the decorated function
        # a wrapper without functools.wraps: (*args, **kwargs) at runtime, every keyword
        # passes; jedi names the function it forwards to
        assert opaque == (["*args", "**kwargs"] if runtime else ["x", "rate"])
        assert c_function is None or Signature.from_list(c_function).any_keyword or c_function == ["*coordinates"]
        assert index.signature(call_key(("sigpkg", "no_such"))) is None
        assert index.signature(("sigpkg", "bad key")) is None  # not a call key: unknown, no lookup
    finally:
        index.close()


def test_runtime_answers_signatures_with_the_members_and_from_disk(fixture_python, tmp_path):
    index = JediIndex(python=fixture_python, runtime_introspection=True, cache_dir=tmp_path, timeout_s=120, runtime_timeout_s=120)
    try:
        assert index.members(("sigpkg",)) is not None
        # the members answer carried the signatures of the callables: no lookup needed
        assert index.ready(call_key(("sigpkg", "plain"))) and index.ready(call_key(("sigpkg", "Model")))
        assert not index.ready(call_key(("sigpkg", "Model", "()", "fit")))  # a method is asked on its own
    finally:
        index.close()
    again = JediIndex(python=fixture_python, runtime_introspection=True, cache_dir=tmp_path, timeout_s=120)
    try:
        started = time.perf_counter()
        assert again.signature(call_key(("sigpkg", "plain"))).to_list() == ["a", "b", "*", "c"]
        assert again.ready(call_key(("sigpkg", "Model")))  # the package's cache file is read
        assert time.perf_counter() - started < 5.0
        assert again._introspector is None  # from the disk cache: the worker was never started
    finally:
        again.close()


def test_a_signature_not_computed_yet_is_pending_never_waited_for(fixture_python, tmp_path):
    index = JediIndex(python=fixture_python, runtime_introspection=False, cache_dir=tmp_path, timeout_s=120)
    try:
        view = ReadyOnlyIndex(index)
        key = call_key(("sigpkg", "Model", "()", "fit"))
        started = time.perf_counter()
        assert view.signature(key) is None and view.pending == [key]
        assert time.perf_counter() - started < 1.0
        assert index.wait_ready([key], 120)
        assert ReadyOnlyIndex(index).signature(key).to_list() == ["X", "y", "sample_weight"]
        # a key the caller gave up on is unknown without being pending again
        gone = ReadyOnlyIndex(index, unknown=[call_key(("sigpkg", "opaque"))])
        if not index.ready(call_key(("sigpkg", "opaque"))):
            assert gone.signature(call_key(("sigpkg", "opaque"))) is None and not gone.pending
    finally:
        index.close()


def test_the_constraint_on_a_live_environment(fixture_python, tmp_path):
    index = JediIndex(python=fixture_python, runtime_introspection=True, cache_dir=tmp_path, timeout_s=120, runtime_timeout_s=120)
    document = "import sigpkg\nfrom sigpkg import Model\nm = Model(alpha=2)\n"
    try:
        constrainer = KeywordArguments(index)
        state = constrainer.start(ConstraintContext(document, document))
        assert constrainer.check(state, "sigpkg.plain(1, c=3)") is not None
        assert constrainer.check(state, "sigpkg.plain(1, d=3)") is None
        assert constrainer.check(state, "sigpkg.pos_only(a=3)") is None
        assert constrainer.check(state, "sigpkg.takes_kwargs(1, anything=3)") is not None
        assert constrainer.check(state, "m.fit(X, y, weights=w)") is None
        assert constrainer.check(state, "m.fit(X, y, sample_weight=w)") is not None
        assert constrainer.check(state, "Model(beta=1)") is None
        assert constrainer.check(state, "sigpkg.opaque(1, anything=3)") is not None
        assert constrainer.rejection(state, "m.fit(X, y, weights=w") == (
            "m.fit takes no keyword weights in sigpkg 1.2.3 (parameters: X, y, sample_weight)"
        )
    finally:
        index.close()


def test_numpy_signatures_from_the_venv():
    from api_index_support import venv_index

    index = venv_index()
    histogram = index.signature(call_key(("numpy", "histogram")))
    assert histogram is not None and "density" in histogram.keywords and "normed" not in histogram.keywords


# ------------------------------------------------------------------ workspace trust


def test_an_untrusted_workspace_never_runs_its_code_for_signatures(tmp_path, monkeypatch):
    """The document imports a module of the workspace and calls it: its signature comes
    from jedi's static analysis only; neither the module nor the workspace interpreter
    runs."""
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    workspace = tmp_path / "repo"
    marker = tmp_path / "ran"
    bin_dir = workspace / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(f"#!/bin/sh\necho interpreter >> {marker}\nexec {sys.executable} \"$@\"\n")
    (bin_dir / "python").chmod(0o755)
    (workspace / "localmod.py").write_text(
        f"open({str(marker)!r}, 'a').write('module')\n\n"
        "def run(x, speed=1):\n    return x\n\n"
        "class Thing:\n    def go(self, fast=False):\n        return self\n"
    )
    document = "import localmod\nt = localmod.Thing()\n"
    index = JediIndex(workspace=workspace, runtime_introspection=True, cache_dir=None, timeout_s=120)
    try:
        assert index.runtime_introspection is True  # the server's own interpreter: its packages, never the workspace's modules
        constrainer = KeywordArguments(index)
        state = constrainer.start(ConstraintContext(document, document))
        constrainer.check(state, "localmod.run(1, slow=2) + t.go(fast=True)")
        run = index.signature(call_key(("localmod", "run")))
        assert run is None or run.to_list() == ["x", "speed"]
    finally:
        index.close()
    assert not marker.exists()


# ------------------------------------------------------------------ snapshots


def test_snapshots_store_signatures_and_old_snapshots_still_load(tmp_path):
    data = names_to_snapshot(
        "pkg", "2.0", ["pkg.f", "pkg.g", "pkg.sub.h"], {"pkg.sub": "module"}, {"pkg.f()": ["x", "*", "rate"], "pkg.sub.h()": ["a", "/"]}
    )
    path = tmp_path / "pkg.json.gz"
    write_snapshot(data, path)
    index = SnapshotIndex(path)
    assert index.signature(call_key(("pkg", "f"))).to_list() == ["x", "*", "rate"]
    assert index.signature(call_key(("pkg", "sub", "h"))).positional_only == {"a"}
    assert index.signature(call_key(("pkg", "g"))) is None and index.signature_count == 2
    old = {key: value for key, value in data.items() if key != "signatures"}
    assert SnapshotIndex(data=old).signature(call_key(("pkg", "f"))) is None  # unconstrained
    constrainer = KeywordArguments(SnapshotIndex(data=old))
    state = constrainer.start("import pkg\n")
    assert constrainer.check(state, "pkg.f(1, keep=2)") is not None
    constrainer = KeywordArguments(index)
    state = constrainer.start("import pkg\n")
    assert constrainer.check(state, "pkg.f(1, keep=2)") is None


def test_snapshot_signatures_bad_input():
    base = names_to_snapshot("pkg", "1", ["pkg.f"])
    for signatures, message in (
        ([], "'signatures' must be an object"),
        ({"pkg.f": ["x"]}, "must end in ()"),
        ({"pkg.f()": "x"}, "list of parameter strings"),
        ({"pkg.f()": ["x", "1y"]}, "not an identifier"),
    ):
        with pytest.raises(SnapshotError, match=message):
            validate_snapshot({**base, "signatures": signatures})


def test_tf_v1_setting_keeps_the_compat_v1_signatures():
    data = names_to_snapshot(
        "tensorflow",
        "2.21.0",
        ["tensorflow.nn.dropout", "tensorflow.compat.v1.nn.dropout"],
        signatures={
            "tensorflow.nn.dropout()": ["x", "rate", "noise_shape", "seed", "name"],
            "tensorflow.compat.v1.nn.dropout()": ["x", "keep_prob", "noise_shape", "seed", "name", "rate"],
        },
    )
    v1 = SnapshotIndex(data=compat_v1_as_root(data))
    assert "keep_prob" in v1.signature(call_key(("tensorflow", "nn", "dropout"))).keywords


def test_module_snapshot_has_signatures():
    from adaptrack_lsp.apis.snapshot import module_snapshot

    data = module_snapshot("json")
    assert "indent" in data["signatures"]["json.dumps()"]


def test_index_command_stores_signatures(fixture_python, tmp_path):
    output = tmp_path / "sigpkg.json"
    done = subprocess.run(
        [sys.executable, "-m", "adaptrack_lsp", "index", "--python", fixture_python, "--package", "sigpkg", "-o", str(output)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "signatures" in done.stderr
    data = read_snapshot(output)
    assert data["signatures"]["sigpkg.plain()"] == ["a", "b", "*", "c"]
    assert data["signatures"]["sigpkg.Model()"] == ["alpha", "*", "fit_intercept"]
    assert "sigpkg.Model" in data["names"]
    json.dumps(data)  # plain JSON


def test_a_signature_that_fails_to_load_is_unknown_and_logged_at_debug_level(monkeypatch, caplog):
    index = JediIndex(python=sys.executable, runtime_introspection=False, cache_dir=None, timeout_s=60)

    def broken(key):
        raise RuntimeError("stub file is garbage")

    monkeypatch.setattr(index, "_lookup_signature", broken)
    try:
        with caplog.at_level(logging.DEBUG, logger="adaptrack_lsp.apis.jedi_index"):
            assert index.signature(call_key(("json", "dumps"))) is None
        assert "stub file is garbage" in caplog.text
        assert not [record for record in caplog.records if record.levelno >= logging.WARNING]
        # answered "unknown" for now; retried later (not cached as a definitive answer)
        assert not index._signatures
    finally:
        index.close()
