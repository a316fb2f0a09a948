"""A small built-in model for the tests of the model and its library shards: the
standard library only, a 600-token vocabulary, order 4 (built in seconds, once per test
module, in that module's own cache root)."""

from __future__ import annotations

import pytest

from adaptrack_lsp.completion.lm import builtin

SMALL = {**builtin.BUILTIN_RECIPE, "packages": [["stdlib", ""]], "vocab_size": 600, "order": 4, "max_corpus_bytes": 300_000}


def small_model_in_own_cache(tmp_path_factory):
    """Yields (the small model, its cache root): the body of each module's
    ``small_model`` fixture."""
    cache = tmp_path_factory.mktemp("cache")
    patch = pytest.MonkeyPatch()
    patch.setenv("ADAPTRACK_CACHE", str(cache))
    try:
        yield builtin.load_builtin_model(recipe=SMALL, show_bar=False), cache
    finally:
        patch.undo()
