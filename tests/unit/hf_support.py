"""Shared pieces of the Hugging Face backend tests: fresh-forward references and the
comparison of log-probability vectors."""

from __future__ import annotations

import numpy as np

from adaptrack_lsp.completion.lm.base import normalize_logprobs


def full_forward(lm, ids) -> np.ndarray:
    """log P(. | ids) from one fresh forward pass without any cache."""
    import torch

    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([list(ids)], device=lm.device)).logits[0, -1]
    values = logits.double().cpu().numpy()
    values[lm.vocab.num_defined :] = -np.inf
    return normalize_logprobs(values)


def max_diff(a: np.ndarray, b: np.ndarray) -> float:
    """Largest absolute difference; both must give probability 0 to the same tokens."""
    finite = np.isfinite(b)
    assert np.array_equal(np.isfinite(a), finite)
    return float(np.abs(a[finite].astype(np.float64) - b[finite]).max())
