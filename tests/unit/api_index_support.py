"""Shared, process-wide API indexes for the tests on real installed packages.

jedi needs seconds per package cold and the introspection worker imports the package
once, so every test file that asks the venv's packages uses the same `JediIndex`.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import sys
import tempfile

import pytest

from adaptrack_lsp.apis.index import JediIndex

#: long enough that answers on a loaded CI machine are definitive, not "unknown yet"
LOOKUP_TIMEOUT_S = 600.0

requires_tensorflow = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="tensorflow is not installed")


@functools.cache
def venv_index(python: str = sys.executable, runtime_introspection: bool = True) -> JediIndex:
    cache = tempfile.TemporaryDirectory(prefix="adaptrack-api-index-")
    index = JediIndex(
        python=python,
        timeout_s=LOOKUP_TIMEOUT_S,
        runtime_timeout_s=LOOKUP_TIMEOUT_S,
        runtime_introspection=runtime_introspection,
        cache_dir=cache.name,
    )
    atexit.register(cache.cleanup)
    atexit.register(index.close)
    return index


def make_fixture_venv(folder) -> str:
    """A virtual environment (no pip) at `folder`; returns its interpreter."""
    import subprocess
    from pathlib import Path

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    return str(Path(folder) / "bin" / "python")


def site_packages(python: str):
    """The site-packages folder of the venv of `python`."""
    from pathlib import Path

    return next((Path(python).parent.parent / "lib").glob("python3*/site-packages"))


def install_fake_package(python: str, name: str, version: str, source: str) -> None:
    """Install (or replace) a one-file package `name` at `version` in the venv of
    `python`, the way pip lays it out (``name/__init__.py`` + ``name-version.dist-info``)."""
    import shutil

    site = site_packages(python)
    for old in site.glob(f"{name}-*.dist-info"):
        shutil.rmtree(old)
    package = site / name
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text(source, encoding="utf-8")
    dist = site / f"{name}-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    (dist / "top_level.txt").write_text(f"{name}\n", encoding="utf-8")
    (dist / "RECORD").write_text(f"{name}/__init__.py,,\n", encoding="utf-8")
