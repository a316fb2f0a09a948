"""Declared version targets (apis/targets.py): targets read from project files, the walk's
typed-receiver additions answered by SnapshotIndex, the intersection of the live index
with one snapshot per target version, and messages that name the version lacking a name.

Two kinds of environments: a fixture package installed in two versions into a venv
built here (fast, no download), and real numpy releases from the package index
(``numpy>=1.24,<3``: its lowest and highest release with a wheel for this Python), built
in the cache root like a user's targets (CI builds them once per run).  References come
from running code in those environments, not from the index.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from adaptrack_lsp.apis.environments import EnvironmentBuildError, find_environment
from adaptrack_lsp.apis.index import CALL, Member, Signature
from adaptrack_lsp.apis.snapshot import SnapshotIndex, write_snapshot
from adaptrack_lsp.apis.targets import (
    TargetsIndex,
    concrete_versions,
    intersect_members,
    intersect_signatures,
    parse_target,
    snapshot_path,
    targets_from_file,
    walk_environment,
)
from adaptrack_lsp.checking.explainer import Explainer
from adaptrack_lsp.config import parse_settings

from api_index_support import install_fake_package, make_fixture_venv

RECPKG_V1 = '''
"""A package in two versions: version 2 removed product, Frame.append and two keywords."""


class Frame:
    def __init__(self, rows=()):
        self.rows = list(rows)

    def head(self, n=5) -> "Frame":
        return Frame(self.rows[:n])

    def append(self, row, ignore_index=False):
        return Frame(self.rows + [row])

    def to_csv(self, path, line_terminator="\\n"):
        return path


class Record:
    def __getattr__(self, name):
        return 1


def load(path) -> Frame:
    return Frame()


def product(values):
    return 0


def prod(values):
    return 0


def reshape(a, newshape):
    return a
'''

RECPKG_V2 = '''
"""Version 2."""


class Frame:
    def __init__(self, rows=()):
        self.rows = list(rows)

    def head(self, n=5) -> "Frame":
        return Frame(self.rows[:n])

    def to_csv(self, path, lineterminator="\\n"):
        return path


class Record:
    def __getattr__(self, name):
        return 1


def load(path) -> Frame:
    return Frame()


def prod(values):
    return 0


def reshape(a, shape):
    return a
'''


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ADAPTRACK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# -- targets declared in files ------------------------------------------------------------------
def test_targets_are_read_from_pyproject_and_requirements_files(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "demo"\ndependencies = ["numpy>=1.24,<3", "pandas==1.5.3; python_version < \'3\'",'
        ' "requests @ https://example.org/requests.whl"]\n'
        '[project.optional-dependencies]\ntest = ["pytest>=8"]\n'
    )
    declared = targets_from_file(pyproject)
    assert declared.targets == ["numpy>=1.24,<3"]
    assert any("pandas==1.5.3" in s and "marker" in s for s in declared.skipped)
    assert any("requests @" in s and "URL" in s for s in declared.skipped)
    assert targets_from_file(f"{pyproject}[test]").targets == ["numpy>=1.24,<3", "pytest>=8"]
    with pytest.raises(ValueError, match="no optional-dependencies group 'docs'"):
        targets_from_file(f"{pyproject}[docs]")

    requirements = tmp_path / "requirements.txt"
    requirements.write_text(
        "# pinned for the service\n-r base.txt\n--index-url https://example.org/simple\n"
        "pandas==1.5.3  # the deployed one\nscikit-learn>=1.2,\\\n  <1.6\n"
        "git+https://github.com/x/y.git#egg=y\n./local/pkg\n-e .\nnot a requirement!\n"
    )
    declared = targets_from_file(requirements)
    assert declared.targets == ["pandas==1.5.3", "scikit-learn>=1.2, <1.6"]
    reasons = "\n".join(declared.skipped)
    for skipped in ("-r base.txt", "--index-url", "git+https://", "./local/pkg", "-e .", "not a requirement!"):
        assert skipped in reasons, reasons
    assert "requirements.txt:3:" in reasons  # the line number is said

    dynamic = tmp_path / "dyn" / "pyproject.toml"
    dynamic.parent.mkdir()
    dynamic.write_text('[project]\nname = "d"\ndynamic = ["dependencies"]\n')
    with pytest.raises(ValueError, match="dynamic"):
        targets_from_file(dynamic)


def test_the_setting_takes_a_list_of_requirement_specifiers():
    settings, problems = parse_settings({"versionTargets": ["numpy>=1.24,<3", "pandas==1.5.3"]})
    assert settings.version_targets == ("numpy>=1.24,<3", "pandas==1.5.3") and not problems
    for bad, said in (("numpy", "a list of strings"), (["numpy>=>1"], "not a requirement specifier"), (["x @ https://a/b.whl"], "URL")):
        settings, problems = parse_settings({"versionTargets": bad})
        assert settings.version_targets == () and len(problems) == 1 and said in problems[0], problems


def test_a_pin_needs_no_index_and_a_range_without_wheels_is_named():
    assert concrete_versions(parse_target("numpy==1.24.4")) == ["1.24.4"]
    with pytest.raises(ValueError, match="URL"):
        parse_target("numpy @ https://example.org/numpy.whl")


# -- intersection ---------------------------------------------------------------------------
def test_a_name_is_valid_only_where_every_index_that_knows_the_path_has_it():
    old = {"prod": Member("prod", "function", False), "product": Member("product", "function", False), "linalg": Member("linalg", "module")}
    new = {"prod": Member("prod", "function", False), "linalg": Member("linalg", "module"), "new_fn": Member("new_fn", "function", False)}
    assert set(intersect_members([old, new])) == {"prod", "linalg"}
    assert intersect_members([None, new]) is new  # unknown there: no rejection
    assert intersect_members([None, None]) is None
    anything = {"x": Member("x", "instance"), "*": Member("*", "any", False)}
    both = intersect_members([anything, new])
    assert set(both) == {"prod", "linalg", "new_fn"}  # any attribute in one: the other decides
    assert "*" not in both
    proxy = intersect_members([anything, {"*": Member("*", "values", False), "y": Member("y", "function", False)}])
    assert proxy["*"].kind == "values" and set(proxy) == {"x", "y", "*"}

    old_signature = Signature.from_list(["a", "newshape", "order"])
    new_signature = Signature.from_list(["a", "/", "shape", "order", "*", "copy"])
    both = intersect_signatures([old_signature, new_signature])
    assert both.keyword_problem("order") is None
    assert both.keyword_problem("newshape") and both.keyword_problem("shape") and both.keyword_problem("copy")
    assert intersect_signatures([None, new_signature]) is new_signature
    assert intersect_signatures([Signature.from_list(["**kwargs"]), old_signature]).keyword_problem("shape") == "unknown"


# -- the fixture package in two versions ------------------------------------------------------
@pytest.fixture(scope="module")
def recpkg(tmp_path_factory):
    """Snapshots of recpkg 1.0 and 2.0 walked in a venv, and the interpreters' answers
    (the reference: what each version's objects have at runtime)."""
    python = make_fixture_venv(tmp_path_factory.mktemp("recenv") / "env")
    snapshots, truth = {}, {}
    probe = (
        "import json, inspect, recpkg; f = recpkg.load('x'); "
        "print(json.dumps({'top': [n for n in dir(recpkg) if not n.startswith('_')], "
        "'frame': [n for n in dir(f) if not n.startswith('_')], "
        "'to_csv': list(inspect.signature(f.to_csv).parameters), 'reshape': list(inspect.signature(recpkg.reshape).parameters)}))"
    )
    for version, source in (("1.0", RECPKG_V1), ("2.0", RECPKG_V2)):
        install_fake_package(python, "recpkg", version, source)
        snapshots[version] = walk_environment(python, "recpkg", version)
        truth[version] = json.loads(subprocess.run([python, "-I", "-c", probe], capture_output=True, text=True, timeout=60, check=True).stdout)
    return python, snapshots, truth


def test_the_walk_writes_instance_members_class_paths_returns_and_bound_signatures(recpkg):
    _, snapshots, truth = recpkg
    data = snapshots["1.0"]
    assert data["class_paths"]["recpkg.Frame"] == "recpkg.Frame"
    assert data["returns"]["recpkg.load"] == "recpkg.Frame"
    assert data["returns"]["recpkg.Frame().head"] == "recpkg.Frame"
    assert data["classes"]["recpkg.Frame"]["dynamic"] is None and data["classes"]["recpkg.Record"]["dynamic"] == "any"
    assert data["signatures"]["recpkg.Frame().to_csv()"] == ["path", "line_terminator"]
    index = SnapshotIndex(data=data)
    # what a live instance has (the reference) is what the snapshot says an instance has
    def public(members):  # instance members list private names too (the checks compare them)
        return {n for n in members if not n.startswith("_")}

    assert public(index.members(("recpkg", "Frame", CALL))) == set(truth["1.0"]["frame"])
    assert public(index.members(("recpkg", "load", CALL))) == set(truth["1.0"]["frame"])  # through the return annotation
    assert public(index.members(("recpkg", "load", CALL, "head", CALL))) == set(truth["1.0"]["frame"])  # a method's result
    assert "*" in index.members(("recpkg", "Record", CALL))
    assert index.members(("recpkg", "prod", CALL)) is None  # no return class: unknown
    assert index.signature(("recpkg", "load", CALL, "to_csv", CALL)).to_list() == truth["1.0"]["to_csv"]
    assert index.signature(("recpkg", "Frame", CALL, "head", CALL)).to_list() == ["n"]


def _cached_target(version_snapshot: dict, name: str, version: str) -> None:
    path = snapshot_path(name, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_snapshot(version_snapshot, path)


def test_targets_index_rejects_what_one_version_lacks_and_names_it(recpkg, cache, monkeypatch):
    _, snapshots, truth = recpkg
    _offline(monkeypatch)  # a pinned target whose snapshot is cached needs no network
    # the targets' snapshots are in the cache (as after a first build): pins need no index
    for version, data in snapshots.items():
        _cached_target(data, "recpkg", version)
    live = SnapshotIndex(data=snapshots["2.0"])  # the installed version
    lines: list[str] = []
    index = TargetsIndex(live, ["recpkg==1.0"], progress=lines.append)
    assert not index.ready(("recpkg",))  # nothing is answered before the targets are prepared
    assert index.prepare() == "" and index.ready(("recpkg",))
    assert any("recpkg 1.0" in line for line in lines)
    top = index.members(("recpkg",))
    reference = set(truth["1.0"]["top"]) & set(truth["2.0"]["top"])
    assert {n for n in top if not n.startswith("_")} == reference and "product" not in top and "prod" in top
    assert index.absence(("recpkg",), "product") == "not in recpkg 2.0 (present in 1.0)"
    assert index.absence(("recpkg",), "prod") is None and index.absence(("recpkg",), "nothing") is None
    frame = index.members(("recpkg", "load", CALL))
    assert {n for n in frame if not n.startswith("_")} == set(truth["1.0"]["frame"]) & set(truth["2.0"]["frame"])
    assert index.absence(("recpkg", "Frame", CALL), "append") == "not in recpkg 2.0 (present in 1.0)"
    to_csv = index.signature(("recpkg", "load", CALL, "to_csv", CALL))
    assert to_csv.keyword_problem("line_terminator") and to_csv.keyword_problem("lineterminator")
    assert index.absence(("recpkg", "reshape", CALL), "newshape", keyword=True) == "not in recpkg 2.0 (present in 1.0)"
    assert index.absence(("recpkg", "reshape", CALL), "shape", keyword=True) == "not in recpkg 1.0 (present in 2.0)"
    assert index.packages()["recpkg"] == "1.0, 2.0"


def test_explain_says_which_target_lacks_a_name_or_keyword(recpkg, cache):
    _, snapshots, _ = recpkg
    for version, data in snapshots.items():
        _cached_target(data, "recpkg", version)
    snapshot = cache / "live.json"
    write_snapshot(snapshots["2.0"], snapshot)
    settings, problems = parse_settings({"apiSnapshot": str(snapshot), "versionTargets": ["recpkg==1.0"]})
    assert not problems
    explainer = Explainer(settings, ["api", "kwargs"])
    try:
        assert explainer.problem == ""
        prefix = "import recpkg as rp\nx = "
        verdict = explainer.explain(prefix, "rp.product([1])")
        assert not verdict["accepted"] and verdict["reason"] == "rp.product: not in recpkg 2.0 (present in 1.0)", verdict
        assert explainer.explain(prefix, "rp.prod([1])")["complete"]
        verdict = explainer.explain(prefix, "rp.reshape(a, newshape=(2, 3))")
        assert not verdict["accepted"] and verdict["reason"] == "rp.reshape: keyword newshape not in recpkg 2.0 (present in 1.0)", verdict
        verdict = explainer.explain(prefix, "rp.reshape(a, shape=(2, 3))")
        assert not verdict["accepted"] and "keyword shape not in recpkg 1.0 (present in 2.0)" in verdict["reason"], verdict
    finally:
        explainer.close()


# -- real numpy releases from the package index --------------------------------------------------
NUMPY_RANGE = "numpy>=1.24,<3"


def _run_in(python, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def numpy_targets():
    """`numpy>=1.24,<3` prepared as a user's targets (built in the cache root on first use;
    the time it took is printed), over the live index of this interpreter."""
    settings, problems = parse_settings({"pythonPath": sys.executable, "versionTargets": [NUMPY_RANGE]})
    assert not problems
    lines: list[str] = []
    started = time.monotonic()
    explainer = Explainer(settings, ["api", "kwargs"], target_progress=lines.append)
    seconds = time.monotonic() - started
    print(f"\n{NUMPY_RANGE} prepared in {seconds:.1f} s:\n  " + "\n  ".join(lines))
    assert explainer.problem == "", explainer.problem
    yield explainer
    explainer.close()


def _environments(explainer) -> dict[str, str]:
    """version -> interpreter of the environment each numpy target was indexed in (as
    `targets.target_environment` finds it: resolved as of the release's time where the
    package index gives it, else as of today)."""
    from adaptrack_lsp.apis.dated_resolution import ReleaseDatesUnavailable, cutoff

    found = {}
    for target in explainer.index.targets:
        try:
            as_of = cutoff("numpy", target.version)
        except ReleaseDatesUnavailable:
            as_of = None
        environment = find_environment([f"numpy=={target.version}"], as_of=as_of)
        assert environment is not None and environment.version_of("numpy") == target.version
        found[target.version] = str(environment.python)
    return found


@pytest.mark.slow
def test_numpy_product_is_rejected_naming_the_release_that_lacks_it(numpy_targets):
    versions = [target.version for target in numpy_targets.index.targets]
    assert len(versions) == 2 and versions[0].startswith("1.24.") and versions[1].startswith("2.")
    prefix = "import numpy as np\nx = "
    verdict = numpy_targets.explain(prefix, "np.product(a)")
    assert not verdict["accepted"], verdict
    # the reference: run each release
    having = {v: _run_in(p, "import numpy; print(hasattr(numpy, 'product'))").stdout.strip() == "True" for v, p in _environments(numpy_targets).items()}
    lacking = sorted(v for v, has in having.items() if not has)
    present = sorted(v for v, has in having.items() if has)
    assert lacking and present, having
    assert verdict["reason"] == f"np.product: not in numpy {', '.join(lacking)} (present in {', '.join(present)})", verdict
    accepted = numpy_targets.explain(prefix, "np.prod(a)")
    assert accepted["accepted"] and accepted["complete"], accepted
    assert set(versions) <= set(numpy_targets.index.packages()["numpy"].split(", "))


@pytest.mark.slow
def test_numpy_keyword_removed_between_releases_is_rejected(numpy_targets):
    prefix = "import numpy as np\nx = "
    code = "import numpy as np; np.reshape(np.zeros(6), newshape=(2, 3))"
    runs = {v: _run_in(p, code) for v, p in _environments(numpy_targets).items()}
    failing = sorted(v for v, done in runs.items() if "unexpected keyword" in done.stderr or "newshape" in done.stderr and done.returncode)
    passing = sorted(v for v, done in runs.items() if done.returncode == 0)
    assert failing and passing, {v: d.stderr[-300:] for v, d in runs.items()}
    verdict = numpy_targets.explain(prefix, "np.reshape(a, newshape=(2, 3))")
    assert not verdict["accepted"], verdict
    assert verdict["reason"] == f"np.reshape: keyword newshape not in numpy {', '.join(failing)} (present in {', '.join(passing)})", verdict
    assert numpy_targets.explain(prefix, "np.reshape(a, (2, 3), order='C')")["complete"]


@pytest.mark.slow
def test_numpy_instance_members_follow_the_targets(numpy_targets):
    index = numpy_targets.index
    having = {v: _run_in(p, "import numpy as np; print(hasattr(np.zeros(3), 'ptp'))").stdout.strip() == "True" for v, p in _environments(numpy_targets).items()}
    lacking = sorted(v for v, has in having.items() if not has)
    present = sorted(v for v, has in having.items() if has)
    members = index.members(("numpy", "ndarray", CALL))
    assert members is not None and "sum" in members and "ptp" not in members
    assert index.absence(("numpy", "ndarray", CALL), "ptp") == f"not in numpy {', '.join(lacking)} (present in {', '.join(present)})"


@pytest.mark.slow
def test_cached_targets_need_no_network(numpy_targets, monkeypatch):
    _offline(monkeypatch)
    versions = [target.version for target in numpy_targets.index.targets]
    assert concrete_versions(parse_target(NUMPY_RANGE)) == versions  # the list of releases is kept a day
    live = SnapshotIndex(data={"package": "numpy", "root": "numpy", "names": ["numpy.prod"]})
    index = TargetsIndex(live, [NUMPY_RANGE, *(f"numpy=={v}" for v in versions)])
    assert index.prepare() == "" and [t.version for t in index.targets] == versions * 2


@pytest.mark.slow
def test_the_cli_takes_targets_from_a_pyproject_and_index_writes_one_release(numpy_targets, tmp_path):
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "demo"\ndependencies = ["{NUMPY_RANGE}"]\n')
    (tmp_path / "use.py").write_text("import numpy as np\nx = ")
    done = subprocess.run(
        [sys.executable, "-m", "adaptrack_lsp", "explain", "use.py", "--text", "np.product(a)", "--python", sys.executable,
         "--target-from", "pyproject.toml", "--json"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    assert not verdict["accepted"] and verdict["reason"].startswith("np.product: not in numpy ")
    assert "version targets ready" in done.stderr  # progress on stderr
    low = numpy_targets.index.targets[0].version
    output = tmp_path / f"numpy-{low}.json.gz"
    done = subprocess.run(
        [sys.executable, "-m", "adaptrack_lsp", "index", "--requirement", f"numpy=={low}", "-o", str(output)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    written = SnapshotIndex(output)
    assert written.version == low and "product" in written.members(("numpy",))
    assert "ptp" in written.members(("numpy", "ndarray", CALL))


# -- offline: a clear message, never the installed version in its place -------------------------
def _offline(monkeypatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no extra indexes from the user's pip.conf
    for name in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.slow
def test_offline_targets_fail_with_the_package_version_and_fix(cache, monkeypatch, tmp_path):
    _offline(monkeypatch)
    (tmp_path / "use.py").write_text("import numpy as np\nx = ")
    for target, named in (("numpy==1.26.4", "numpy==1.26.4"), (NUMPY_RANGE, "numpy")):
        command = [sys.executable, "-m", "adaptrack_lsp", "explain", "use.py", "--text", "np.prod(a)", "--target", target]
        done = subprocess.run([*command, "--strict-targets"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
        message = done.stderr.strip().splitlines()[-1]
        assert named in message and "cannot be reached" in message and "connect to the network once" in message, message
        assert not done.stdout  # no verdict: nothing is checked against fewer versions than asked
        # without --strict-targets: named with the fix, numpy unchecked under it, the rest checked
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == 0 and done.stdout.startswith("accepted"), (done.returncode, done.stdout, done.stderr)
        assert named in done.stderr and "connect to the network once" in done.stderr and "numpy is unchecked under that target" in done.stderr
    # complete prepares the targets before it loads a model: the same message, no candidates
    done = subprocess.run(
        [sys.executable, "-m", "adaptrack_lsp", "complete", "use.py", "--model", "tiny", "--target", NUMPY_RANGE, "--strict-targets"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert done.returncode == 3 and not done.stdout, (done.returncode, done.stdout, done.stderr)
    assert "numpy" in done.stderr and "cannot be reached" in done.stderr
    with pytest.raises(EnvironmentBuildError) as caught:
        concrete_versions(parse_target(NUMPY_RANGE))
    assert caught.value.requirement == "numpy" and caught.value.fix


def test_a_target_that_cannot_be_built_is_the_index_problem_with_strict_targets(cache, monkeypatch):
    _offline(monkeypatch)
    live = SnapshotIndex(data={"package": "numpy", "root": "numpy", "names": ["numpy.prod"]})
    finished: list[str] = []
    index = TargetsIndex(live, [NUMPY_RANGE], finished=finished.append, strict=True)
    index.start()
    assert index.wait_ready([("numpy",)], 300)
    deadline = time.monotonic() + 10
    while not finished and time.monotonic() < deadline:  # told right after the index is done
        time.sleep(0.05)
    assert finished == [index.problem] and NUMPY_RANGE in index.problem and "cannot be reached" in index.problem
    assert index.members(("numpy",)) is None  # the constraint is off (the server says degraded), never the live index alone
    # without strict targets: named, and numpy is checked against the other versions only
    finished.clear()
    lenient = TargetsIndex(live, [NUMPY_RANGE], finished=finished.append)
    assert lenient.prepare() == "" and finished == [""]
    assert NUMPY_RANGE in lenient.failures[0] and "cannot be reached" in lenient.failures[0]
    assert set(lenient.members(("numpy",))) == {"prod"}
