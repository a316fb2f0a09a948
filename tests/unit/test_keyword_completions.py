"""Keyword arguments through the completion service, on an exact tabular model that
learned TF 1 (it prefers ``keep_prob=``): ghost text and lists take the constraint
alike, lists offer the call's keyword names ranked by the model, a signature still
being computed answers "indexing", and the setting turns it all off."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from adaptrack_lsp.completion.lm.tabular import TabularLM
from adaptrack_lsp.completion.pipeline import INDEXING
from adaptrack_lsp.completion.request import CompletionRequest
from adaptrack_lsp.completion.service import CompletionService
from adaptrack_lsp.config import Settings
from adaptrack_lsp.constrainers.api import StaticIndex
from adaptrack_lsp.vocab import Vocabulary

WORDS = ["import", "tensorflow", "as", "tf", "y", "nn", "dropout", "x", "keep_prob", "rate", "seed", "name", "noise_shape", "0.5"]
TOKENS = ["<eos>", *WORDS, " ", "\n", ".", "(", ")", ",", "=", "se", "ed"]
DOCUMENT = "import tensorflow as tf\ny = tf.nn.dropout(x, "
#: what the model writes after the prompt: a keyword name, then "=0.5)"
FIRST = {"keep_prob": 0.6, "rate": 0.2, "seed": 0.1, "name": 0.05, "noise_shape": 0.03, ")": 0.02}
SIGNATURES = {"tensorflow.nn.dropout()": ["x", "rate", "noise_shape", "seed", "name"]}


def tf1_model() -> TabularLM:
    vocab = Vocabulary.from_strings(TOKENS, eos="<eos>")
    index = {t: i for i, t in enumerate(TOKENS)}

    def conditional(path):
        probs = np.full(len(TOKENS), 1e-4)
        last = TOKENS[path[-1]] if path else None
        follow = {None: FIRST, "=": {"0.5": 1.0}, "0.5": {")": 1.0}, ")": {"<eos>": 1.0}, "se": {"ed": 1.0}}
        for token, p in follow.get(last, {"=": 1.0}).items():
            probs[index[token]] = p
        return probs / probs.sum()

    return TabularLM(vocab, conditional=conditional)


class SignatureIndex(StaticIndex):
    """TensorFlow's dropout; its signature takes `delay_s` to compute (from the first ask)."""

    def __init__(self, delay_s: float = 0.0):
        super().__init__(["tensorflow.nn.dropout"], source="tensorflow test", signatures=SIGNATURES, versions={"tensorflow": "2.21.0"})
        self.delay_s = delay_s
        self.done = threading.Event()
        if not delay_s:
            self.done.set()
        self.timer = None

    def _start(self):
        if self.timer is None and not self.done.is_set():
            self.timer = threading.Timer(self.delay_s, self.done.set)
            self.timer.daemon = True
            self.timer.start()

    def ready(self, path):
        return not (path and path[-1] == "()") or self.done.is_set()

    def prefetch(self, path):
        self._start()

    def wait_ready(self, paths, timeout_s):
        self._start()
        return self.done.wait(timeout_s)


def service_with(index=None, **settings) -> CompletionService:
    service = CompletionService(
        Settings(model="tabular", timeout_ms=60_000, max_new_tokens=6, **settings),
        model_loader=lambda s, progress: tf1_model(),
        index_factory=lambda s, root: index or SignatureIndex(),
    )
    service.load()
    return service


def test_ghost_text_takes_the_installed_keyword():
    service = service_with()
    try:
        result = service.complete(DOCUMENT, len(DOCUMENT))
        assert [c.text for c in result.candidates] == ["rate=0.5)"]  # not keep_prob, the model's favourite
    finally:
        service.close()
    off = service_with(keyword_arguments=False)
    try:
        assert [c.text for c in off.complete(DOCUMENT, len(DOCUMENT)).candidates] == ["keep_prob=0.5)"]
    finally:
        off.close()


def test_lists_offer_the_keyword_names_ranked_by_the_model():
    service = service_with(num_samples=8)
    try:
        result = service.complete(DOCUMENT, len(DOCUMENT), mode="list")
    finally:
        service.close()
    completions = [c for c in result.candidates if c.kind == "completion"]
    keywords = [c for c in result.candidates if c.kind == "keyword"]
    assert completions and all("keep_prob=" not in c.text for c in completions)
    # every name the call still takes (x is bound by position), none it does not
    assert sorted(c.text for c in keywords) == ["name=", "noise_shape=", "rate=", "seed="]
    drawn = [c for c in keywords if math.isfinite(c.logprob)]
    assert drawn and drawn[0].text == "rate="  # the model's favourite among the valid names
    assert [c.logprob for c in drawn] == sorted((c.logprob for c in drawn), reverse=True)
    assert keywords[: len(drawn)] == drawn  # drawn names first, then the rest
    assert all(c.detail == "keyword of tf.nn.dropout (tensorflow 2.21.0)" for c in keywords)
    assert result.candidates.index(keywords[0]) == len(completions)  # after the model's completions


def test_list_keyword_names_follow_the_typed_word_and_the_given_keywords():
    service = service_with(num_samples=4)
    try:
        typed = DOCUMENT + "se"
        result = service.complete(typed, len(typed), mode="list")
        assert [c.text for c in result.candidates if c.kind == "keyword"] == ["ed="]
        given = DOCUMENT + "rate=0.5, "
        result = service.complete(given, len(given), mode="list")
        assert sorted(c.text for c in result.candidates if c.kind == "keyword") == ["name=", "noise_shape=", "seed="]
        comma = DOCUMENT.rstrip()
        result = service.complete(comma, len(comma), mode="list")
        assert " seed=" in [c.text for c in result.candidates if c.kind == "keyword"]  # right after "," the item brings its space
        outside = "import tensorflow as tf\ny = "
        result = service.complete(outside, len(outside), mode="list")
        assert not [c for c in result.candidates if c.kind == "keyword"]
    finally:
        service.close()


def test_no_keyword_items_when_the_setting_is_off():
    service = service_with(num_samples=4, keyword_arguments=False)
    try:
        result = service.complete(DOCUMENT, len(DOCUMENT), mode="list")
        assert not [c for c in result.candidates if c.kind == "keyword"]
    finally:
        service.close()


def test_a_signature_being_computed_answers_indexing_then_completes():
    """A list waits for the call's signature ("indexing"); ghost text answers now without
    any keyword name (the call counts as taking none until its signature is known), then
    with the keyword the signature allows."""
    index = SignatureIndex(delay_s=0.5)
    service = service_with(index)
    key = ("tensorflow", "nn", "dropout", "()")
    try:
        listed = service.complete(DOCUMENT, len(DOCUMENT), mode="list")
        assert listed.status == INDEXING and listed.pending == (key,)
        assert "tensorflow.nn.dropout()" in listed.message
        ghost = service.complete(DOCUMENT, len(DOCUMENT))
        assert [c.text for c in ghost.candidates] == [")"]  # not keep_prob=, the model's favourite (not a TF 2 parameter)
        assert ghost.pending == (key,) and ghost.indexing == "indexing tensorflow"
        assert index.done.wait(10)
        second = service.complete(DOCUMENT, len(DOCUMENT))
        assert [c.text for c in second.candidates] == ["rate=0.5)"] and not second.pending
    finally:
        service.close()


def test_the_request_needs_the_open_call():
    request = CompletionRequest.build(DOCUMENT, len(DOCUMENT))
    assert request.needed_paths == (("tensorflow",), ("tensorflow", "nn"), ("tensorflow", "nn", "dropout", "()"))
    off = CompletionRequest.build(DOCUMENT, len(DOCUMENT), settings=Settings(keyword_arguments=False))
    assert off.needed_paths == (("tensorflow",),)
    closed = "import tensorflow as tf\ny = tf.nn.dropout(x)\n"
    assert CompletionRequest.build(closed, len(closed)).needed_paths == (("tensorflow",),)


@pytest.mark.parametrize(
    ("typed", "needed"),
    [
        ("tf.nn.dropout(\n        x,\n        ", (("tensorflow", "nn"), ("tensorflow", "nn", "dropout", "()"))),
        ("tf . nn. dropout(x, ra", (("tensorflow", "nn"), ("tensorflow", "nn", "dropout", "()"))),
        ("model.fit(X, ", (("sklearn", "linear_model", "LinearRegression", "()", "fit", "()"),)),
        ("layer(", (("tensorflow", "keras", "layers", "Dense", "()", "()"),)),
        ("LinearRegression(", (("sklearn", "linear_model"), ("sklearn", "linear_model", "LinearRegression", "()"))),
        ("tf.nn.dropout(x, f(", ()),  # the innermost call does not resolve
        ("tf.nn.dropout(x, [1, ", ()),  # inside a list within the arguments
        ("a.b().c(", ()),  # no dotted callee
        ("g(", ()),
    ],
)
def test_the_request_asks_for_the_signature_of_the_innermost_open_call_that_resolves(typed, needed):
    """Read from the document's analysis (its open call at the cursor) and the names the
    request resolves (import aliases, typed receivers)."""
    document = (
        "import tensorflow as tf\nfrom sklearn.linear_model import LinearRegression\n"
        "model = LinearRegression()\nlayer = tf.keras.layers.Dense(3)\n"
        "def f():\n    y = " + typed
    )
    request = CompletionRequest.build(document, len(document))
    assert request.needed_paths[2:] == needed


@pytest.mark.parametrize("decoder", ["exact", "cars", "map", "beam", "constrained"])
def test_every_decoder_keeps_keyword_ghost_text_valid(decoder):
    service = service_with(decoder=decoder)
    try:
        result = service.complete(DOCUMENT, len(DOCUMENT))
        assert result.candidates and all("keep_prob=0" not in c.text for c in result.candidates)
    finally:
        service.close()
