"""Shared pieces of the llama.cpp backend tests: the skip when llama-cpp-python is not
built, the tiny model's GGUF, and fresh references computed by llama.cpp itself."""

from __future__ import annotations

import numpy as np
import pytest

#: why llama.cpp tests skip (CI builds the wheel: `.ci/install-llama-cpp`)
SKIP_REASON = "llama-cpp-python is not installed (`.ci/install-llama-cpp` builds it; `make test` runs it)"

#: max abs difference of log-probabilities between two ways of reaching a node whose
#: tokens went through llama.cpp in the same batch shapes (KV cells laid out differently):
#: in practice 0
TOLERANCE = 1e-4
#: ... and where the tokens went through in other batch shapes (a prompt fed in two parts,
#: several nodes in one decode, a dropped branch re-fed at once): llama.cpp's CPU flash
#: attention rounds queries to f16, so results depend on the chunking by up to ~2e-2 in
#: the log-probability of unlikely tokens; the distributions stay within CHUNKED_TVD
CHUNKED_TOLERANCE = 5e-2
CHUNKED_TVD = 2e-3
#: against transformers on the f32 GGUF (same f16 rounding inside llama.cpp)
HF_TOLERANCE = 5e-2
HF_TVD = 2e-3


def tvd(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(np.exp(a.astype(np.float64)) - np.exp(b.astype(np.float64))).sum())


def close_enough(a: np.ndarray, b: np.ndarray) -> bool:
    """Within llama.cpp's chunking noise (CHUNKED_TOLERANCE and CHUNKED_TVD)."""
    from hf_support import max_diff

    return max_diff(a, b) <= CHUNKED_TOLERANCE and tvd(a, b) <= CHUNKED_TVD


def require_llama_cpp():
    return pytest.importorskip("llama_cpp", reason=SKIP_REASON)


def straight_line(reference, prompt, path) -> np.ndarray:
    """log P(. | prompt + path) from a fresh state, the path fed one token at a time as a
    plain generation would (no branch ever switched)."""
    reference.clear_cache()
    reference.set_prompt(list(prompt))
    result = reference.next_logprobs([])
    for end in range(1, len(path) + 1):
        result = reference.next_logprobs(list(path[:end]))
    return result
