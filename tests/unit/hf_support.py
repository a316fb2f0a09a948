"""Shared pieces of the Hugging Face backend tests: fresh-forward references, the
comparison of log-probability vectors and random walks over a prefix tree."""

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


def random_walk(lm, prompt, switches: int, seed: int, max_depth: int = 10, cache_key=None):
    """Evaluate new nodes all over a growing tree; returns {path: logprobs} and switch count.

    Children are drawn from the parent's top tokens (so branches share prefixes like a
    decoder's tree); the parent is the last node about a third of the time (extension)
    and a random evaluated node otherwise (a branch switch).
    """
    rng = np.random.default_rng(seed)
    lm.set_prompt(prompt, cache_key=cache_key)
    nodes: dict[tuple[int, ...], np.ndarray] = {(): lm.next_logprobs([])}
    keys: list[tuple[int, ...]] = [()]
    last: tuple[int, ...] = ()
    switched = 0
    excluded = set(lm.vocab.special_ids)
    while switched < switches:
        parent = last if rng.random() < 0.35 and len(last) < max_depth else keys[int(rng.integers(len(keys)))]
        if len(parent) >= max_depth:
            continue
        top = [int(t) for t in np.argsort(-nodes[parent])[:12] if int(t) not in excluded]
        child = parent + (top[int(rng.integers(len(top)))],)
        if child in nodes:
            continue
        if parent != last:
            switched += 1
        nodes[child] = lm.next_logprobs(list(child))
        keys.append(child)
        last = child
    return nodes, switched


#: max abs difference of log-probabilities allowed between cache paths (fp32)
TOLERANCE = 1e-4

#: a numpy prompt ending in `np.`, shared by the cache tests
PROMPT = (
    "import numpy as np\n\n\n"
    "def normalise(matrix):\n"
    "    scale = np.linalg.norm(matrix, axis=1, keepdims=True)\n"
    "    return matrix / scale\n\n\n"
    "result = np."
)
