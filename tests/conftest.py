"""Suite-wide settings: one torch thread (the tiny model is ~20x faster that way on a busy
2-core machine, and server subprocesses inherit the variable), and the built-in model
built once per session before any server that loads it starts."""

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_configure(config):
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency
        return
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def builtin_model():
    """The built-in model, built into the cache root on first use (one to two minutes on a
    fresh 2-core machine, once; later sessions load it in well under a second), so that
    servers started by the tests find it ready instead of building it under a time limit."""
    from adaptrack_lsp.completion.lm.builtin import load_builtin_model

    return load_builtin_model()

#: test-shaped data files (the GitChameleon fixture's hidden tests) are inputs, not tests
collect_ignore = ["data"]
