"""Exact sampling under the composition the editors use: `token_constraint` with clean
text, API chains, keyword names and Python syntax all on (what `pipeline.py` builds for
a request).  Each part is prefix-closed, so their AND is, and the exact samplers follow
P(s | c) per request against the enumerated reference; greedy masking does not."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
from adaptrack_lsp.constrainers.api import StaticIndex
from adaptrack_lsp.constrainers.environment import token_constraint
from adaptrack_lsp.evaluation.tasks import Task, chi_square, counts_of
from adaptrack_lsp.vocab import Vocabulary

NAMES = ["tensorflow.nn.dropout", "tensorflow.compat.v1.placeholder"]
SIGNATURES = {"tensorflow.nn.dropout()": ["x", "rate", "noise_shape", "seed", "name"]}
DOCUMENT = "import tensorflow as tf\nx = 1\n"
PREFIX = DOCUMENT + "y = tf.nn.dropout("
# each part has tokens it rejects: `placeholder` after `tf.` (API), `keep_prob=` (keyword
# names), `)` with no argument open, `,` twice, and EOS before the call closes (syntax)
TOKENS = ["x", ", ", "rate=", "keep_prob=", "1", ")", "tf.", "nn", "placeholder", "$"]
MAX_BODY = 5


def composed(vocab: Vocabulary):
    index = StaticIndex(NAMES, signatures=SIGNATURES, versions={"tensorflow": "2.21.0"})
    return token_constraint(
        vocab, index=index, keywords_index=index, syntax=True, clean=True, document=DOCUMENT, prefix=PREFIX
    )


def composed_task(seed: int) -> Task:
    """A random tabular LM after ``y = tf.nn.dropout(`` that likes TF 1 code
    (``keep_prob=`` in the call, ``tf.placeholder``); valid: every body of at most `MAX_BODY`
    tokens that the composition accepts and after which it accepts EOS (enumerated)."""
    rng = np.random.default_rng(seed)
    vocab = Vocabulary.from_strings(TOKENS, "$")
    constraint = composed(vocab)
    assert not constraint.off, constraint.off
    eos = TOKENS.index("$")
    valid, table = [], {}
    for length in range(MAX_BODY + 1):
        for body in itertools.product(range(eos), repeat=length):
            state = constraint.initial_state()
            for token in body:
                state = constraint.advance(state, token)
                if state is None:
                    break
            if state is not None and constraint.advance(state, eos) is not None:
                valid.append((*body, eos))
    ending = np.eye(len(TOKENS))[eos]  # half of each row on EOS: few paths reach the length cap

    def random_row():
        return 0.5 * ending + 0.5 * rng.dirichlet(np.ones(len(TOKENS)))

    for sequence in valid:
        for cut in range(len(sequence)):
            table.setdefault(sequence[:cut], random_row())
    ids = {name: i for i, name in enumerate(TOKENS)}
    # where the model goes: to `tf.placeholder` (API), to `keep_prob=` in the call (keyword
    # names), to EOS or a second comma before the call closes (syntax); greedy masking sends
    # that mass to the valid siblings, the exact samplers weigh each branch by its valid mass
    likes = {
        (): {"x": 0.5, "tf.": 0.5},
        ("x",): {")": 0.45, ", ": 0.45, "$": 0.1},
        ("x", ")"): {"$": 1.0},
        ("x", ", "): {"keep_prob=": 0.8, ")": 0.1, ", ": 0.1},
        ("x", ", ", ")"): {"$": 1.0},
        ("tf.",): {"placeholder": 0.8, "nn": 0.2},
        ("tf.", "nn"): {")": 1.0},
        ("tf.", "nn", ")"): {"$": 1.0},
    }
    for prefix, probabilities in likes.items():
        row = np.zeros(len(TOKENS))
        for name, value in probabilities.items():
            row[ids[name]] = value
        table[tuple(ids[name] for name in prefix)] = row
    return Task(tokens=TOKENS, eos="$", default=random_row(), table=table, valid=valid)


def sample_requests(task: Task, decoder: str, requests: int) -> list:
    """Samples of `requests` requests of 5 samples, each on a fresh composition and tree."""
    samples = []
    for request in range(requests):
        result = get_decoder(decoder).decode(
            task.language_model(),
            composed(task.vocab),
            DecodeRequest(prompt_ids=[], num_samples=5, seed=request, max_new_tokens=task.max_length),
        )
        samples += [tuple(s.token_ids) for s in result.samples if s.complete]
    return samples


def test_every_part_of_the_composition_rejects_something():
    task = composed_task(seed=3)
    texts = {"".join(task.names(s[:-1])) for s in task.valid}
    assert {"x, rate=1)", "x)", "x, )", "tf.nn)"} <= texts and "tf.x)" not in texts
    # keyword names inside the call (after it, ``y = f(x), keep_prob = 1`` is an assignment)
    assert not [t for t in texts if "keep_prob=" in t.split(")")[0]]
    assert [t for t in texts if "keep_prob=" in t]
    # API chains (``xtf.placeholder`` is another name's chain)
    assert not [t for t in texts if re.search(r"(?<![\w.])tf\.placeholder", t)]
    assert [t for t in texts if "placeholder" in t]
    assert not [t for t in texts if ")" not in t]  # syntax: EOS only once the call is closed
    assert not [t for t in texts if ", , " in t.split(")")[0]]  # syntax: two commas in the call
    assert not [t for t in texts if re.search(r"(?<!\w)\d+[a-z_]", t)]  # syntax: ``1x`` is no token


@pytest.mark.parametrize("decoder", ["exact", "cars", "ars", "rsft", "rs"])
def test_exact_samplers_stay_exact_under_the_composed_constraint(decoder):
    task = composed_task(seed=3)
    samples = sample_requests(task, decoder, requests=120)
    assert len(samples) >= 590  # the rest reached the length cap
    fit = chi_square(counts_of(samples), task.exact_distribution())
    assert fit.impossible == 0 and fit.p_value > 1e-4, fit


def test_greedy_masking_under_the_composed_constraint_is_detected_as_distorted():
    task = composed_task(seed=3)
    samples = sample_requests(task, "constrained", requests=120)
    fit = chi_square(counts_of(samples), task.exact_distribution())
    assert fit.impossible == 0 and fit.p_value < 1e-9, fit
