"""Throwaway environments under the cache root (apis/environments.py): built once with
real pip and venv, found again without pip, errors that name the requirement and the fix."""

from __future__ import annotations

import subprocess

import pytest

from adaptrack_lsp.apis.environments import (
    EnvironmentBuildError,
    environment_for,
    find_environment,
    requirement_name,
)


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ADAPTRACK_CACHE", str(tmp_path))
    return tmp_path


def test_an_environment_is_built_once_and_holds_exactly_the_pinned_version(cache):
    lines: list[str] = []
    built = environment_for(["six==1.16.0"], progress=lines.append)
    assert built.version_of("six") == "1.16.0"
    assert built.build_seconds > 0
    assert any("wheels only" in line for line in lines)
    # the reference: the environment's own interpreter imports that version
    done = subprocess.run([str(built.python), "-c", "import six; print(six.__version__)"], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "1.16.0"
    again = environment_for(["six==1.16.0"], progress=lines.append)
    assert again.folder == built.folder and again.build_seconds == 0.0
    assert find_environment(["six==1.16.0"]) == built
    assert find_environment(["six==1.15.0"]) is None


def test_a_broken_environment_is_built_again(cache):
    built = environment_for(["six==1.16.0"])
    built.python.unlink()  # deleted files
    assert find_environment(["six==1.16.0"]) is None
    rebuilt = environment_for(["six==1.16.0"])
    assert rebuilt.python.exists() and rebuilt.version_of("six") == "1.16.0"


def test_a_version_without_a_wheel_for_this_python_is_named_with_the_fix(cache):
    # numpy 1.19.5 has no wheel for Python >= 3.10: pip would have to compile it
    with pytest.raises(EnvironmentBuildError) as caught:
        environment_for(["numpy==1.19.5"])
    error = caught.value
    assert "numpy==1.19.5" in str(error) and "wheel" in error.reason
    assert error.fix
    assert not any(p.name.startswith("numpy") for p in (cache / "envs").iterdir() if p.is_dir())  # nothing half-built is kept


def test_requirements_are_read_or_refused():
    assert requirement_name("Scikit_Learn>=1.0,<2") == "scikit-learn"
    with pytest.raises(ValueError, match="not a requirement"):
        requirement_name("==1.0")
    with pytest.raises(ValueError, match="no requirements"):
        environment_for([" "])


def test_a_pin_without_a_wheel_is_named_even_when_a_pip_constraint_names_the_package(cache, tmp_path, monkeypatch):
    # with a constraint file naming the package pip words a missing wheel as a conflict
    # ("The user requested numpy==1.19.5" / "(constraint) numpy<3"); the builder asks the
    # index which versions have wheels and names the real reason
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("numpy<3\n")
    monkeypatch.setenv("PIP_CONSTRAINT", str(constraints))
    with pytest.raises(EnvironmentBuildError) as caught:
        environment_for(["numpy==1.19.5"])
    assert caught.value.reason.startswith("no wheel of numpy==1.19.5 for Python 3.") and "wheels exist for" in caught.value.reason
    assert caught.value.requirement == "numpy==1.19.5"


def test_pins_that_contradict_each_other_are_named_as_pip_lists_them(cache):
    with pytest.raises(EnvironmentBuildError) as caught:
        environment_for(["flask==2.0.0", "werkzeug==1.0.1"])
    reason = caught.value.reason
    assert reason.startswith("conflicting requirements:") and "werkzeug==1.0.1" in reason and "Werkzeug>=2.0" in reason
