"""Version truth on real packages: the index says what the installed version provides."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from adaptrack_lsp.apis.index import path_exists

from api_index_support import requires_tensorflow, venv_index

NUMPY_126_VENV = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "adaptrack-lsp-tests" / "numpy126"


@pytest.fixture(scope="module")
def index():
    return venv_index()


def test_numpy_2_rejects_removed_aliases_and_accepts_prod(index):
    import numpy

    assert int(numpy.__version__.split(".")[0]) >= 2
    assert path_exists(index, ("numpy", "prod")) is True
    for removed in ("product", "alltrue", "float_"):
        assert path_exists(index, ("numpy", removed)) is False, removed
    assert index.packages()["numpy"] == numpy.__version__
    assert f"numpy {numpy.__version__}" in index.source


def test_numpy_submodule_and_class_members(index):
    assert path_exists(index, ("numpy", "linalg", "norm")) is True
    assert path_exists(index, ("numpy", "linalg", "no_such_function")) is False
    assert path_exists(index, ("numpy", "ndarray", "reshape")) is True
    # a function has no members to chain on
    assert path_exists(index, ("numpy", "prod", "anything")) is False


def test_torch_placeholders_are_absent(index):
    pytest.importorskip("torch")
    for removed in ("matrix_rank", "symeig", "lstsq", "solve", "eig"):
        assert path_exists(index, ("torch", removed)) is False, removed
    assert path_exists(index, ("torch", "linalg", "matrix_rank")) is True
    assert path_exists(index, ("torch", "linalg", "solve")) is True


def test_torch_placeholders_are_absent_from_jedi_alone():
    """Without the runtime worker, the placeholder is found from the source jedi points to."""
    pytest.importorskip("torch")
    static = venv_index(sys.executable, runtime_introspection=False)
    assert path_exists(static, ("torch", "matrix_rank")) is False
    assert path_exists(static, ("torch", "linalg", "matrix_rank")) is True
    assert static.members(("torch",))["linalg"].kind == "module"


def _make_numpy_126_venv() -> Path:
    python = NUMPY_126_VENV / "bin" / "python"
    marker = NUMPY_126_VENV / ".complete"
    if marker.is_file() and python.is_file():
        return python
    building = NUMPY_126_VENV.with_name(f"numpy126.building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(building)], check=True, timeout=300)
    completed = subprocess.run(
        [str(building / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "numpy==1.26.4"],
        capture_output=True, text=True, timeout=600,
    )
    if completed.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        pytest.skip(f"pip install numpy==1.26.4 failed: {completed.stderr.strip().splitlines()[-1:]}")
    (building / ".complete").write_text("numpy==1.26.4\n")
    shutil.rmtree(NUMPY_126_VENV, ignore_errors=True)
    os.replace(building, NUMPY_126_VENV)
    # the venv was built under another directory name: its scripts point there, but
    # bin/python and site-packages are found relative to pyvenv.cfg, which is enough
    return python


@pytest.fixture(scope="session")
def numpy_126_python() -> Path:
    NUMPY_126_VENV.parent.mkdir(parents=True, exist_ok=True)
    return _make_numpy_126_venv()


@pytest.mark.slow
def test_numpy_126_environment_accepts_float_(numpy_126_python):
    index = venv_index(str(numpy_126_python))
    assert path_exists(index, ("numpy", "float_")) is True
    assert path_exists(index, ("numpy", "product")) is True
    assert path_exists(index, ("numpy", "prod")) is True
    assert index.packages()["numpy"] == "1.26.4"


@pytest.mark.needs_tensorflow
@requires_tensorflow
def test_tensorflow_versions(index):
    assert path_exists(index, ("tensorflow", "compat", "v1", "losses", "mean_pairwise_squared_error")) is True
    assert path_exists(index, ("tensorflow", "losses", "mean_pairwise_squared_error")) is False
    assert path_exists(index, ("tensorflow", "compat", "v1", "placeholder")) is True
    assert path_exists(index, ("tensorflow", "placeholder")) is False


@pytest.mark.needs_tensorflow
@requires_tensorflow
def test_tensorflow_keras_lazy_loaders(index):
    # jedi sees nothing behind Keras-3 lazy loaders: the runtime worker answers
    assert path_exists(index, ("tensorflow", "keras", "layers", "Dense")) is True
    assert path_exists(index, ("tensorflow", "keras", "layers", "NoSuchLayer")) is False
    # with Keras 3 and no tf_keras these raise on access: not valid here
    assert path_exists(index, ("tensorflow", "compat", "v1", "layers", "Dense")) is False
    assert path_exists(index, ("tensorflow", "compat", "v1", "nn", "rnn_cell", "LSTMCell")) is False
