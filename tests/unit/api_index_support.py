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

from adaptrack_lsp.constrainers.api_index import JediIndex

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
