"""The wheel installs into a clean virtual environment and serves a completion.

The wheel is built from this tree (`pip wheel --no-deps`) and installed with
`pip install --no-deps --no-index` into a new virtual environment, whose dependencies
come from the test interpreter's already-installed site-packages through a `.pth` line
after the environment's own (so the test needs no package index; the index install is
what `benchmarks/core_install.py` measures).  The server then runs from that
environment, the wheel's code (not this tree's: no PYTHONPATH), with the packages of the
extras made absent through the import guard, as in a light core install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from lsp_support import RawClient, inline_params, server_env, write_numpy_snapshot

ROOT = Path(__file__).resolve().parents[2]
GUARD = str(Path(__file__).with_name("import_guard.py"))
HEAVY = "torch,transformers,llama_cpp,gguf,llguidance,matplotlib,scipy"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out, tree = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("tree")
    for name in ("pyproject.toml", "README.md"):  # a copy: building writes egg-info beside the sources
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src" / "adaptrack_lsp", tree / "src" / "adaptrack_lsp", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(tree)],
                   check=True, timeout=300, env=clean_env(tree / "build.log"))
    return next(out.glob("adaptrack_lsp-*-py3-none-any.whl"))


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel) -> Path:
    folder = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, timeout=300, env=clean_env(folder / "install.log"))
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    dependencies = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz_dependencies.pth").write_text("\n".join(sorted(dependencies)) + "\n")
    return folder


def clean_env(log: Path) -> dict[str, str]:
    env = {key: value for key, value in server_env().items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    log.touch()
    return {**env, "ADAPTRACK_TEST_WATCH": HEAVY, "ADAPTRACK_TEST_ABSENT": "1", "ADAPTRACK_TEST_IMPORT_LOG": str(log), "HF_HUB_OFFLINE": "1"}


def test_the_wheel_carries_the_package_data_and_requires_no_torch(wheel):
    from adaptrack_lsp import __version__

    assert wheel.name == f"adaptrack_lsp-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(f"adaptrack_lsp-{__version__}.dist-info/METADATA").decode()
    assert "adaptrack_lsp/constrainers/python_syntax.lark" in names
    assert any(name.startswith("adaptrack_lsp/data/") and name.endswith(".json.gz") for name in names)
    required = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert required and not [line for line in required if any(heavy in line for heavy in ("torch", "transformers", "llama-cpp", "llguidance"))]
    assert "Provides-Extra: transformers" in metadata


def test_the_installed_wheel_serves_a_completion(venv, tmp_path, builtin_model):
    log = tmp_path / "imports.log"
    env = clean_env(log)
    python = str(venv / "bin" / "python")
    where = subprocess.run([python, "-c", "import adaptrack_lsp; print(adaptrack_lsp.__file__)"], capture_output=True, text=True, env=env, check=True)
    assert where.stdout.strip().startswith(str(venv)), where.stdout
    snapshot = write_numpy_snapshot(tmp_path / "numpy.json")
    client = RawClient(command=[python, GUARD, "serve"], env=env)
    try:
        client.initialize({"model": "builtin", "maxNewTokens": 12, "timeoutMs": 60000, "apiSnapshot": str(snapshot)})
        assert client.wait_status()["state"] == "ready"
        uri = (tmp_path / "wheel.py").as_uri()
        client.open(uri, "import numpy as np\n\nvalues = np.")
        response = client.request_settled("textDocument/inlineCompletion", inline_params(uri, 2, len("values = np.")))
        assert response["result"]["items"] and response["result"]["items"][0]["insertText"], response
    finally:
        client.close()
    assert log.read_text() == ""
    doctor = subprocess.run([python, GUARD, "doctor"], capture_output=True, text=True, env=env, timeout=120)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "info  extra transformers: not installed" in doctor.stdout and os.path.basename(python) in doctor.stdout
