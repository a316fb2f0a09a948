"""Suite-wide settings: one torch thread (the tiny model is ~20x faster that way on a busy
2-core machine, and server subprocesses inherit the variable)."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_configure(config):
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency
        return
    torch.set_num_threads(1)
