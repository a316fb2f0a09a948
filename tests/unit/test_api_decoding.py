"""Decoding with the API constraint through the engine's decoders on the tiny model:
every sample spells only real attribute chains (200 samples per decoder from one shared
tree, and 200 independent seeds per decoder, each with its own tree), while unconstrained
sampling from the same model does not."""

from __future__ import annotations

import functools
import re

import pytest

from adaptrack_lsp.apis.snapshot import module_snapshot
from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
from adaptrack_lsp.constrainers.api import ApiMonitor, ConstraintContext, StaticIndex
from adaptrack_lsp.constrainers.token_index import TokenIndex

DOCUMENT = "import numpy as np\n"
PROMPT = DOCUMENT + "x = np."
NUM_SAMPLES = 200
MAX_NEW_TOKENS = 4


@functools.lru_cache(maxsize=1)
def numpy_names() -> tuple[str, ...]:
    return tuple(module_snapshot("numpy", ("linalg", "random", "fft"))["names"])


@pytest.fixture(scope="module")
def setup():
    from adaptrack_lsp.completion.lm.loading import load_model

    lm = load_model("tiny", device="cpu")
    names = numpy_names()
    index = StaticIndex(names)
    constraint = TokenIndex(
        ApiMonitor(index), lm.vocab, context=ConstraintContext(DOCUMENT, PROMPT)
    )
    return lm, constraint, set(names), lm.encode(PROMPT)


def chain_is_valid(generated: str, complete: bool, dotted: set[str]) -> bool:
    """Independent oracle for the chain the prompt opened (``np.`` + generated text):
    every name is a member of the path before it; the last one must be complete when
    the chain ended (something other than an identifier character follows)."""
    run = re.match(r"[\w.]*", generated).group()
    parts = run.split(".")
    ended = len(run) < len(generated) or complete
    path = "numpy"
    for position, name in enumerate(parts):
        last = position == len(parts) - 1
        if not last or ended:
            if f"{path}.{name}" not in dotted:
                return False
        elif not any(d.startswith(f"{path}.{name}") for d in dotted):
            return False
        path = f"{path}.{name}"
    return True


def relex_is_valid(generated: str) -> bool:
    """The generated text re-checked in one piece by a fresh monitor (no token caches)."""
    monitor = ApiMonitor(StaticIndex(numpy_names()))
    state = monitor.start(ConstraintContext(DOCUMENT, PROMPT))
    return monitor.check(state, generated) is not None


def decode_all(
    decoder_name: str,
    setup,
    seeds,
    num_samples: int = 1,
    max_new_tokens: int = MAX_NEW_TOKENS,
):
    """Samples of one decoder: one request per seed, `num_samples` from its shared tree."""
    lm, constraint, _, prompt_ids = setup
    decoder = get_decoder(decoder_name)
    samples = []
    for seed in seeds:
        request = DecodeRequest(
            prompt_ids=prompt_ids,
            num_samples=num_samples,
            temperature=1.0,
            max_new_tokens=max_new_tokens,
            seed=seed,
            stop=lambda text, checked=0: "\n" in text,
        )
        result = decoder.decode(lm, constraint, request)
        assert result.status in ("ok", "partial"), result.message
        samples.extend(result.samples)
    return samples


def assert_all_valid(samples, dotted) -> None:
    bad = [
        s.text
        for s in samples
        if not chain_is_valid(s.text, s.complete, dotted) or not relex_is_valid(s.text)
    ]
    assert not bad, f"{len(bad)} invalid samples, e.g. {bad[:5]}"
    assert all(s.valid for s in samples)


@pytest.mark.parametrize("decoder_name", ["adaptrack", "constrained"])
def test_constrained_decoders_only_write_real_chains(setup, decoder_name):
    _, _, dotted, _ = setup
    samples = decode_all(decoder_name, setup, [0], num_samples=NUM_SAMPLES)
    assert len(samples) == NUM_SAMPLES
    assert_all_valid(samples, dotted)
    # the samples are diverse (the constraint does not force one answer)
    assert len({re.match(r"\w*", s.text).group() for s in samples}) >= 20


@pytest.mark.parametrize("decoder_name", ["adaptrack", "constrained"])
def test_200_independent_seeds_each_with_its_own_tree(setup, decoder_name):
    _, _, dotted, _ = setup
    samples = decode_all(decoder_name, setup, range(1, 201))
    assert len(samples) == 200
    assert_all_valid(samples, dotted)


def test_unconstrained_sampling_breaks_chains(setup):
    """The oracle detects the wrong answer: the same model without the constraint
    writes names numpy does not have."""
    _, _, dotted, _ = setup
    samples = decode_all("unconstrained", setup, [0], num_samples=40)
    bad = [s.text for s in samples if not chain_is_valid(s.text, s.complete, dotted)]
    assert len(bad) >= 20
