"""Version targets that hold on real projects (apis/targets.py, apis/dated_resolution.py,
apis/environments.py): snapshots that reach every public submodule and name what does not
import, walks that import nothing are errors, a target that cannot be built stops no
other, a range moves to the nearest releases that work here (by bisection), the
project's ``requires-python`` is said, and a release gets the dependencies of its time.

Fast tests use fixture packages installed into a venv built here; the slow ones build
real releases from the package index in the cache root (once per run) and take their
reference from running code in those environments (``dir()`` of each module, imports)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

from adaptrack_lsp.apis.environments import EnvironmentBuildError
from adaptrack_lsp.apis.snapshot import SnapshotIndex, write_snapshot
from adaptrack_lsp.apis.targets import (
    Probe,
    TargetsIndex,
    choose_versions,
    parse_target,
    python_note,
    snapshot_path,
    target_snapshot,
    targets_from_file,
    walk_environment,
)

from api_index_support import install_fake_package, make_fixture_venv, site_packages

#: public submodules the package does not import itself, one that needs a missing
#: dependency, a private one and a test suite (neither is API)
SUBPKG = {
    "__init__.py": '"""A package whose submodules are imported by their users."""\n\nversion_name = "one"\n',
    "colors.py": "RED = 1\n\n\ndef get_cmap(name):\n    return name\n\n\nclass Colormap:\n    def __init__(self):\n        self.name = 'x'\n",
    "extra/__init__.py": "",
    "extra/deep.py": "def helper(x, scale=1):\n    return x * scale\n",
    "broken.py": "raise ImportError('the optional dependency qtpy is not installed')\n",
    "_private.py": "SECRET = 1\n",
    "tests/__init__.py": "",
    "tests/test_colors.py": "import pytest\n",
}

#: the reference listing, computed in the environment without the product: every public
#: submodule (pkgutil over the installed files) and the names ``dir()`` gives for each
#: (less removed-API placeholders: functions whose body is only a ``raise``)
REFERENCE = textwrap.dedent(
    """
    import ast, importlib, inspect, json, pkgutil, sys, textwrap

    def removed(value):  # a function whose body is only a raise: a removed API's placeholder
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(value))).body[0].body
        except Exception:
            return False
        body = body[1:] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else body
        return inspect.isfunction(value) and len(body) == 1 and isinstance(body[0], ast.Raise)

    def public(module):  # every name dir() gives (private ones too), the placeholders left out
        return sorted(n for n in dir(module) if not removed(getattr(module, n, None)))

    root = importlib.import_module(sys.argv[1])
    found, failed = {sys.argv[1]: public(root)}, []
    for info in pkgutil.walk_packages(root.__path__, sys.argv[1] + ".", onerror=lambda name: failed.append(name)):
        parts = info.name.split(".")
        if any(p.startswith("_") or p in ("tests", "test", "conftest", "setup") for p in parts[1:]):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:
            failed.append(info.name)
            continue
        found[info.name] = public(module)
    print(json.dumps({"modules": found, "failed": sorted(set(failed))}))
    """
)


def _install_tree(python: str, name: str, version: str, files: dict[str, str]) -> None:
    install_fake_package(python, name, version, files["__init__.py"])
    package = site_packages(python) / name
    for relative, text in files.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _reference(python: str, package: str) -> dict:
    done = subprocess.run([python, "-I", "-c", REFERENCE, package], capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout)


def _module_names(data: dict, module: str) -> set[str]:
    """The names the snapshot holds directly under `module`."""
    prefix = module + "."
    return {name[len(prefix):] for name in data["names"] if name.startswith(prefix) and "." not in name[len(prefix):]}


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ADAPTRACK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def subpkg(tmp_path_factory):
    python = make_fixture_venv(tmp_path_factory.mktemp("subenv") / "env")
    _install_tree(python, "subpkg", "1.0", SUBPKG)
    return python, walk_environment(python, "subpkg", "1.0")


def test_a_walk_reaches_every_public_submodule_and_names_those_that_do_not_import(subpkg):
    python, data = subpkg
    reference = _reference(python, "subpkg")
    assert set(data["modules"]) == set(reference["modules"])  # colors and extra.deep, never imported by the package
    for module, names in reference["modules"].items():
        assert _module_names(data, module) >= set(names), module
        assert not {n for n in _module_names(data, module) - set(names) if n not in ("colors", "extra", "deep", "broken")}, module
    assert set(data["skipped_modules"]) == set(reference["failed"]) == {"subpkg.broken"}
    assert "qtpy" in data["skipped_modules"]["subpkg.broken"]
    assert data["signatures"]["subpkg.extra.deep.helper()"] == ["x", "scale"]
    assert not any(".tests" in name or "_private" in name for name in data["names"])


def test_a_walk_that_imports_nothing_is_an_error_of_the_target(tmp_path):
    python = make_fixture_venv(tmp_path / "env")
    install_fake_package(python, "dead", "1.0", "raise ImportError('numpy.core.multiarray failed to import')\n")
    with pytest.raises(RuntimeError, match=r"dead 1.0: the walk of dead failed: .*numpy.core.multiarray failed to import"):
        walk_environment(python, "dead", "1.0")
    install_fake_package(python, "hollow", "1.0", "")
    with pytest.raises(RuntimeError, match="found no public name"):
        walk_environment(python, "hollow", "1.0")


def _cached(data: dict, name: str, version: str) -> None:
    path = snapshot_path(name, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_snapshot({**data, "version": version}, path)


def _offline(monkeypatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for name in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)


def test_under_a_target_a_module_its_snapshot_could_not_import_is_unchecked(subpkg, cache, monkeypatch):
    _offline(monkeypatch)
    python, data = subpkg
    _cached(data, "subpkg", "1.0")
    live = SnapshotIndex(data={"package": "subpkg", "root": "subpkg", "names": ["subpkg.broken.Widget", "subpkg.colors.RED"]})
    index = TargetsIndex(live, ["subpkg==1.0"])
    assert index.prepare() == ""
    assert index.members(("subpkg", "broken")) is not None  # the live environment still answers
    assert "subpkg.broken" in index.unchecked_modules and "does not import there" in index.unchecked_modules["subpkg.broken"]
    assert "subpkg.broken" in index.status_note()
    from adaptrack_lsp.checking.explainer import Explainer
    from adaptrack_lsp.config import parse_settings

    snapshot = cache / "live.json"
    write_snapshot({"package": "subpkg", "root": "subpkg", "names": ["subpkg.broken.Widget", "subpkg.colors.RED"]}, snapshot)
    settings, problems = parse_settings({"apiSnapshot": str(snapshot), "versionTargets": ["subpkg==1.0"]})
    explainer = Explainer(settings, ["api"])
    try:
        verdict = explainer.explain("import subpkg.broken as b\nx = ", "b.Widget")
        assert verdict["accepted"] and "subpkg.broken is unchecked under subpkg 1.0" in verdict["unchecked"][0], verdict
    finally:
        explainer.close()


def test_one_target_that_cannot_be_built_stops_no_other(subpkg, cache, monkeypatch):
    _offline(monkeypatch)  # numpy==1.26.4 cannot be built: the index is out of reach
    _, data = subpkg
    _cached(data, "subpkg", "1.0")
    live = SnapshotIndex(data={**data, "names": [n for n in data["names"] if n != "subpkg.version_name"], "version": "2.0"})
    lines: list[str] = []
    index = TargetsIndex(live, ["numpy==1.26.4", "subpkg==1.0"], progress=lines.append)
    assert index.prepare() == ""
    assert [t.version for t in index.targets] == ["1.0"]
    (failure,) = index.failures
    assert "numpy==1.26.4" in failure and "cannot be reached" in failure and "connect to the network once" in failure
    assert any("numpy is unchecked under that target" in line for line in lines)
    assert "numpy==1.26.4" in index.status_note() and "numpy==1.26.4" in index.describe()
    # the other target is checked: a name only its version has
    assert index.absence(("subpkg",), "version_name") == "not in subpkg 2.0 (present in 1.0)"
    strict = TargetsIndex(live, ["numpy==1.26.4", "subpkg==1.0"], strict=True)
    assert "numpy==1.26.4" in strict.prepare() and strict.members(("subpkg",)) is None


def test_the_cli_names_a_failed_target_and_strict_targets_make_it_an_error(subpkg, cache, tmp_path):
    _, data = subpkg
    # as a built target records it: the environment its snapshot was walked in
    data = {**data, "environment": {"as_of": "2024-01-02T00:00Z", "installed": {"subpkg": "1.0", "six": "1.16.0"}, "notes": []}}
    env = {**os.environ, "ADAPTRACK_CACHE": str(cache), "PIP_INDEX_URL": "http://127.0.0.1:9/", "PIP_CONFIG_FILE": os.devnull}
    for name in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL"):
        env.pop(name, None)
    subprocess.run([sys.executable, "-c", f"from adaptrack_lsp.apis.targets import snapshot_path\n"
                    f"from adaptrack_lsp.apis.snapshot import write_snapshot\nimport json\np = snapshot_path('subpkg', '1.0')\n"
                    f"p.parent.mkdir(parents=True, exist_ok=True)\nwrite_snapshot(json.loads({json.dumps(json.dumps(data))}), p)"],
                   env=env, check=True, timeout=120)
    live = tmp_path / "live.json"
    write_snapshot(data, live)
    (tmp_path / "use.py").write_text("import subpkg\nx = ")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\nrequires-python = ">=3.9"\ndependencies = ["subpkg==1.0", "numpy==1.26.4"]\n')
    command = [sys.executable, "-m", "adaptrack_lsp", "explain", "use.py", "--text", "subpkg.version_nam", "--snapshot", str(live),
               "--target-from", "pyproject.toml", "--constraints", "api"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "accepted" in done.stdout
    assert "version target numpy==1.26.4" in done.stderr and "unchecked under that target" in done.stderr, done.stderr
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert f"standard-library names are checked for Python {here} only" in done.stderr, done.stderr
    strict = subprocess.run([*command, "--strict-targets"], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert strict.returncode == 3 and not strict.stdout and "numpy==1.26.4" in strict.stderr, (strict.returncode, strict.stderr)
    # -v: each target's environment; doctor: the same, and the target not built with its fix
    verbose = subprocess.run([*command, "-v"], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert "subpkg 1.0: dependencies as of 2024-01-02: six 1.16.0, subpkg 1.0" in verbose.stderr, verbose.stderr
    assert "subpkg 1.0: 1 submodules do not import there (unchecked): subpkg.broken" in verbose.stderr
    doctor = subprocess.run([sys.executable, "-m", "adaptrack_lsp", "doctor", "--json", "--snapshot", str(live), "--target-from", "pyproject.toml"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    checks = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "version target"]
    assert any(c["level"] == "ok" and c["detail"].startswith("subpkg 1.0: dependencies as of 2024-01-02") for c in checks), checks
    failed = [c for c in checks if "numpy==1.26.4" in c["detail"]]
    assert failed and failed[0]["level"] == "warn" and "connect to the network once" in failed[0]["fix"], checks


def test_requires_python_is_read_and_said_when_it_allows_other_pythons(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "d"\nrequires-python = ">=3.9,<3.13"\ndependencies = ["numpy>=1.24"]\n')
    assert targets_from_file(pyproject).requires_python == ">=3.9,<3.13"
    note = python_note(">=3.9,<3.13", "3.11")
    assert "also allows Python 3.9, 3.10, 3.12" in note and "checked for Python 3.11 only" in note
    assert python_note(">=3.11,<3.12", "3.11") == "" and python_note("", "3.11") == ""
    assert "3.12 to 3.15" in python_note(">=3.11", "3.11")


RELEASES = [f"2.{minor}.0" for minor in range(40)]


@pytest.mark.parametrize(("first", "last"), [(0, 39), (7, 39), (0, 31), (12, 20), (39, 39)])
def test_a_range_moves_to_the_nearest_releases_that_work_found_by_bisection(first, last):
    """Releases that work form one run (`first` to `last`); the probes are counted."""
    asked: list[str] = []

    def probe(name, version, **_):
        asked.append(version)
        position = RELEASES.index(version)
        return Probe(first <= position <= last, "" if first <= position <= last else "does not import: ImportError: x")

    choice = choose_versions(parse_target("demo>=2"), releases=RELEASES, probe=probe)
    assert choice.versions == list(dict.fromkeys([RELEASES[first], RELEASES[last]]))
    assert len(asked) <= 3 + 2 * math.ceil(math.log2(len(RELEASES))) < len(RELEASES) / 2
    if first:
        assert choice.notes[0] == (f"version target demo>=2: 2.0.0 to 2.{first - 1}.0 do not install or import on Python "
                                   f"{sys.version_info[0]}.{sys.version_info[1]} (2.0.0 does not import: ImportError: x); "
                                   f"checking 2.{first}.0 as the lowest")
    if last < 39:
        assert choice.notes[-1].endswith(f"checking 2.{last}.0 as the highest")
    assert choose_versions(parse_target("demo==2.3.0"), releases=RELEASES, probe=probe).versions == ["2.3.0"]  # a pin stays


def test_no_release_that_works_is_an_error_naming_the_reasons():
    with pytest.raises(EnvironmentBuildError, match=r"no release of demo matching >=2 installs and imports .*2\.0\.0: does not import"):
        choose_versions(parse_target("demo>=2"), releases=RELEASES, probe=lambda n, v, **_: Probe(False, "does not import: E"))


# -- real releases from the package index ---------------------------------------------------------
def _run(python, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_release_gets_the_dependencies_of_its_time():
    """pandas 1.5.1 with today's NumPy 2 does not import; as of its release it gets a
    NumPy 1, and imports."""
    from adaptrack_lsp.apis.targets import target_environment

    environment = target_environment("pandas", "1.5.1")
    assert environment.as_of.startswith("2022-10-2"), environment.as_of
    numpy = environment.version_of("numpy")
    assert numpy is not None and numpy.startswith("1."), environment.installed
    done = _run(environment.python, "import pandas, numpy; print(pandas.__version__, numpy.__version__)")
    assert done.returncode == 0 and done.stdout.split() == ["1.5.1", numpy], done.stderr


@pytest.mark.slow
def test_a_range_whose_lowest_release_does_not_import_moves_up():
    from adaptrack_lsp.apis.targets import target_environment

    choice = choose_versions(parse_target("requests>=2.17,<2.21"))
    low = choice.versions[0]
    assert low != "2.17.0" and "do not install or import" in choice.notes[0] and f"checking {low} as the lowest" in choice.notes[0]
    # the reference: the release before the one chosen does not import, the one chosen does
    releases = ["2.17.0", "2.17.1", "2.17.2", "2.17.3", "2.18.0", "2.18.1", "2.18.2", "2.18.3", "2.18.4", "2.19.0", "2.19.1", "2.20.0", "2.20.1"]
    before = releases[releases.index(low) - 1]
    assert _run(target_environment("requests", low).python, "import requests").returncode == 0
    failing = _run(target_environment("requests", before).python, "import requests")
    assert failing.returncode != 0 and "Error" in failing.stderr


#: three libraries, two releases each: their snapshots against ``dir()`` of every public
#: submodule in each release's own environment
LIBRARIES = [("idna", "2.10"), ("idna", "3.7"), ("packaging", "21.3"), ("packaging", "24.1"), ("click", "7.1.2"), ("click", "8.1.7")]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "version"), LIBRARIES)
def test_snapshots_of_real_releases_hold_every_public_submodule(name, version):
    from adaptrack_lsp.apis.targets import target_environment

    data, _, _ = target_snapshot(name, version)
    environment = target_environment(name, version)
    reference = _reference(str(environment.python), name)
    assert set(data["modules"]) >= set(reference["modules"]), sorted(set(reference["modules"]) - set(data["modules"]))
    assert set(data.get("skipped_modules") or {}) == set(reference["failed"])
    for module, names in reference["modules"].items():
        held = _module_names(data, module)
        assert held >= set(names), (module, sorted(set(names) - held))
        # what the snapshot has beyond dir(): submodules the walk imported (importable:
        # the reference lists the public ones; private ones its submodules import),
        # names a module's __getattr__ serves
        extra = {n for n in held - set(names) if f"{module}.{n}" not in reference["modules"]}
        check = _run(environment.python, f"import importlib, {module} as m\nfor n in {sorted(extra)!r}:\n"
                     f"    getattr(m, n) if hasattr(m, n) else importlib.import_module('{module}.' + n)")
        assert check.returncode == 0, (module, extra, check.stderr)


def test_a_modules_private_names_are_unknown_in_a_snapshot_not_absent(subpkg, cache, monkeypatch):
    """A walk lists public names only: ``module.__name__`` (which every module has, as
    running code shows) is not rejected under a target."""
    _offline(monkeypatch)
    python, data = subpkg
    _cached(data, "subpkg", "1.0")
    assert _run(python, "import subpkg; print(subpkg.__name__)").stdout.strip() == "subpkg"
    live = SnapshotIndex(data={**data, "names": [*data["names"], "subpkg.__name__", "subpkg._private"]})
    index = TargetsIndex(live, ["subpkg==1.0"])
    assert index.prepare() == ""
    members = index.members(("subpkg",))
    assert "__name__" in members and "_private" in members and "colors" in members
