"""The server backend's exactness case of sequences ended by end-of-generation tokens in
the tail, shared by its suites (llama-server's own protocol, the OpenAI protocol on
llama-server and on vLLM).

A flat model (the tiny one at temperature 1: its most probable token holds 1-2 % of the
mass), eight one-word lines after ``values = np.`` as `sample --allowed` gives them:
each sample is one line, then an end of sequence; no text stop rule.  At the end of
every line the end-of-generation tokens lie outside the top-K list, so a sequence ends
only through tail draws (and the enumerated tails).

The reference P(line | prompt) is computed with llama.cpp itself (`llama_cpp` on the
tiny model's f32 GGUF, never through the backend): every tokenization of every line,
each ended by any token `llama_vocab_is_eog` names (where llama.cpp stops), summed per
line.  The wrong answer the suites must reject is the same sum ended only by the end
tokens the tokenizer named before (without llama.cpp's FIM pad and repository markers):
what the backend drew while its sequences ended elsewhere than the engine's.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pytest

PROMPT = "import numpy as np\n\nvalues = np."
LINES = ("floor", "any", "min", "log", "all", "abs", "max", "nan")
SAMPLES = 3000
#: llama.cpp's end-of-generation markers that tokenizers do not name an end of sequence
FIM_END_MARKERS = ("<|fim_pad|>", "<|repo_name|>")


@lru_cache(maxsize=1)
def reference() -> tuple[dict[str, float], dict[str, float], tuple[int, ...]]:
    """(P(line | prompt) ended by every end-of-generation token, the same ended without
    the FIM markers, the end-of-generation ids), from llama.cpp directly."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python computes the reference")
    from llama_cpp import llama_cpp as low
    from llama_server_support import tiny_gguf

    model = llama_cpp.Llama(str(tiny_gguf()), n_ctx=256, logits_all=True, verbose=False)
    vocab = low.llama_model_get_vocab(model._model.model)
    size = low.llama_vocab_n_tokens(vocab)
    ends = tuple(t for t in range(size) if low.llama_vocab_is_eog(vocab, t))
    markers = {t for t in ends if model.detokenize([t], special=True).decode() in FIM_END_MARKERS}
    assert len(markers) == len(FIM_END_MARKERS)
    pieces = [model.detokenize([t]) for t in range(size)]
    ordinary = [t for t in range(size) if pieces[t] and not low.llama_vocab_is_control(vocab, t) and t not in ends]
    prompt = model.tokenize(PROMPT.encode(), add_bos=False, special=False)
    cache: dict[tuple[int, ...], np.ndarray] = {}

    def logprobs(path: tuple[int, ...]) -> np.ndarray:
        if path not in cache:
            model.reset()
            model.eval(prompt + list(path))
            logits = np.asarray(model.scores[len(prompt) + len(path) - 1], dtype=np.float64)
            top = logits.max()
            cache[path] = logits - (top + math.log(float(np.exp(logits - top).sum())))
        return cache[path]

    def tokenizations(data: bytes, start: int = 0) -> list[tuple[int, ...]]:
        if start == len(data):
            return [()]
        found = []
        for token in ordinary:
            if data.startswith(pieces[token], start):
                found += [(token, *rest) for rest in tokenizations(data, start + len(pieces[token]))]
        return found

    every, without = {}, {}
    for line in LINES:
        mass = mass_without = 0.0
        for tokens in tokenizations(line.encode()):
            value = math.fsum(logprobs(tokens[:k])[t] for k, t in enumerate(tokens))
            after = logprobs(tokens)
            mass += math.fsum(math.exp(value + after[e]) for e in ends)
            mass_without += math.fsum(math.exp(value + after[e]) for e in ends if e not in markers)
        every[line], without[line] = mass, mass_without
    return normalised(every), normalised(without), ends


def normalised(masses: dict[str, float]) -> dict[str, float]:
    total = math.fsum(masses.values())
    return {key: value / total for key, value in masses.items()}


def end_tokens_in_tails(lm, ends) -> list[str]:
    """The lines at whose end (their tokenizer's tokenization) some end token is listed in
    the server's top-K: none, for the case to test tail draws."""
    lm.set_prompt(lm.encode(PROMPT), max_new_tokens=8)
    listed = []
    for line in LINES:
        top = lm.next_top(lm.encode(line))
        if set(top.ids.tolist()) & set(ends):
            listed.append(line)
    return listed


def draw(lm, samples: int = SAMPLES, seed: int = 9):
    """`samples` exact samples of the allowed lines in one request (one shared tree, as
    `sample --allowed ... --decoder exact`): (count per line, the decode's result)."""
    from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
    from adaptrack_lsp.constrainers.allowed_lines import allowed_lines_constraint

    constraint = allowed_lines_constraint(lm.vocab, LINES, source="end-of-generation case")
    request = DecodeRequest(prompt_ids=lm.encode(PROMPT), num_samples=samples, seed=seed, max_new_tokens=8, timeout_s=1800)
    result = get_decoder("exact").decode(lm, constraint, request)
    assert result.status == "ok", (result.status, result.message)
    found: dict[str, int] = {}
    for sample in result.samples:
        assert sample.complete and sample.valid and sample.token_ids[-1] in lm.vocab.eos_ids
        found[sample.text] = found.get(sample.text, 0) + 1
    return found, result


def assert_exact_with_end_tokens_in_the_tail(lm) -> None:
    """The case, on the server `lm` is connected to (see the module docstring)."""
    from test_exactness import ALPHA, REJECT_BELOW

    from adaptrack_lsp.evaluation.tasks import chi_square

    exact, without_markers, ends = reference()
    assert set(ends) <= lm.vocab.eos_ids  # sequences end at every token llama.cpp ends generation at
    assert not end_tokens_in_tails(lm, ends)
    found, result = draw(lm)
    assert result.counters.tail_draws > 0
    test = chi_square(found, exact)
    assert test.p_value > ALPHA, f"chi2={test.statistic:.1f}, p={test.p_value:.2g}: {found} vs {exact}"
    assert chi_square(found, without_markers).p_value < REJECT_BELOW  # power: sequences ended elsewhere are told apart
