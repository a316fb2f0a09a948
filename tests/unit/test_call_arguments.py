"""Keyword arguments: the rules of `KeywordArguments` (which ``name=`` a resolved call
takes), the document context (open calls, keywords already given, typed receivers),
bad input (unknown callees, failing indexes), the reasons in words, prefix-closedness,
fast masks against brute force, and exact sampling under the constraint."""

from __future__ import annotations

import itertools
import logging
import random
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptrack_lsp.apis.index import Signature, dotted
from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
from adaptrack_lsp.constrainers.api import ApiMonitor, ConstraintContext, StaticIndex
from adaptrack_lsp.constrainers.call_arguments import (
    FRESH,
    KeywordArguments,
    KeywordChoice,
    statement_start,
)
from adaptrack_lsp.constrainers.compose import AllOf
from adaptrack_lsp.constrainers.token_index import TokenIndex
from adaptrack_lsp.evaluation.tasks import Task, chi_square, counts_of
from adaptrack_lsp.vocab import Vocabulary

NAMES = [
    "tensorflow.nn.dropout",
    "tensorflow.reduce_sum",
    "tensorflow.positional",
    "tensorflow.anything",
    "tensorflow.nosig",
    "sklearn.linear_model.LinearRegression",
    "numpy.histogram",
]
SIGNATURES = {
    "tensorflow.nn.dropout()": ["x", "rate", "noise_shape", "seed", "name"],
    "tensorflow.reduce_sum()": ["input_tensor", "axis", "keepdims", "name"],
    "tensorflow.positional()": ["a", "/", "b", "*", "c"],
    "tensorflow.anything()": ["a", "/", "b", "**kwargs"],
    "sklearn.linear_model.LinearRegression()": ["*", "fit_intercept", "copy_X", "tol", "n_jobs", "positive"],
    "sklearn.linear_model.LinearRegression().fit()": ["X", "y", "sample_weight"],
    "numpy.histogram()": ["a", "bins", "range", "density", "weights"],
}
VERSIONS = {"tensorflow": "2.21.0", "numpy": "2.4.6", "sklearn": "1.9.1"}
DOCUMENT = (
    "import tensorflow as tf\n"
    "import numpy as np\n"
    "from sklearn.linear_model import LinearRegression\n"
    "model = LinearRegression()\n"
)


def index() -> StaticIndex:
    return StaticIndex(NAMES, signatures=SIGNATURES, versions=VERSIONS)


def after(prefix: str = "", document: str = DOCUMENT, idx=None):
    constrainer = KeywordArguments(idx or index())
    return constrainer, constrainer.start(ConstraintContext(document, document + prefix))


def verdict(text: str, prefix: str = "") -> int | None:
    """None when `text` is accepted, else the index of its first rejected character."""
    constrainer, state = after(prefix)
    result, position = constrainer.lex(state, text)
    assert (result is None) == (position >= 0)
    return None if result is not None else position


# -- the rules --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, rejected_at",
    [
        ("tf.nn.dropout(x, rate=0.5)", None),
        ("tf.nn.dropout(x, keep_prob=0.5)", "=0.5)"),  # judged at its "="
        ("tf.nn.dropout(x, keep_prob = 0.5)", " 0.5)"),  # spaces around = are still a keyword
        ("tf.nn.dropout(x, keep_prob == 0.5)", None),  # a comparison
        ("tf.nn.dropout(x, keep_prob==0.5)", "==0.5)"),  # "name=" with no space is a keyword
        ("tf.nn.dropout(x, keep_prob)", None),  # a positional argument named like a keyword
        ("tf.nn.dropout(x, rate=0.5, rate=0.1)", "=0.1)"),  # already given
        ("tf.nn.dropout(x, x=1)", "=1)"),  # bound by the first positional argument
        ("tf.nn.dropout(x, 0.5, rate=1)", "=1)"),
        ("tf.nn.dropout(*args, x=1)", None),  # after *args the positional count is unknown
        ("tf.nn.dropout(x, **opts, seed=1)", None),
        ("tf.nn.dropout(x, f(keep_prob=1))", None),  # a nested call is not the callee
        ("tf.nn.dropout(x, [keep_prob == 1], {'keep_prob': 1})", None),
        ("tf.nn.dropout(x, rate=lambda a, keep_prob=1: a, seed=2)", None),  # lambda parameters
        ("tf.nn.dropout(lambda q: q, x=1)", "=1)"),
        ("tf.nn.dropout(x, 'keep_prob=1', \"keep_prob=1\")", None),  # strings
        ("tf.nn.dropout(x, f'{keep_prob=}')", None),
        ("tf.nn.dropout(x, # keep_prob=1\n seed=1)", None),  # comments
        ("tf.nn.dropout(x,\n    keep_prob=1)", "=1)"),  # line breaks inside the brackets
        ("tf.nn.dropout (x, keep_prob=1)", "=1)"),
        ("tf.nn.dropout(tf.nn.dropout(y, seed=1), seed=2)", None),
        ("tf.nn.dropout(tf.nn.dropout(y, seed=1), seed=2, seed=3)", "=3)"),
        ("tf.nn.dropout(x)(keep_prob=1)", None),  # calling the result: unresolved
        ("tf.nn.dropout(x).keep(keep_prob=1)", None),
        ("tf.positional(a=1)", "=1)"),  # positional-only
        ("tf.positional(1, b=2, c=3)", None),
        ("tf.positional(1, d=2)", "=2)"),
        ("tf.anything(1, a=2, zzz=3)", None),  # **kwargs takes anything (a positional-only name too)
        ("tf.anything(1, b=2)", None),
        ("tf.nosig(whatever=1)", None),  # no signature: any keyword
        ("tf.not_a_member(whatever=1)", None),  # not in the index: not looked up
        ("tf.reduce_sum(x, keep_dims=True)", "=True)"),
        ("tf.reduce_sum(x, axis=0, keepdims=True)", None),
        ("LinearRegression(normalize=True)", "=True)"),  # from ... import
        ("LinearRegression(fit_intercept=False)", None),
        ("model.fit(X, y, sample_weight=w)", None),  # a method of a bound instance
        ("model.fit(X, y, sample_weights=w)", "=w)"),
        ("model.predict(X, anything=1)", None),  # a method without a signature
        ("np.histogram(a, normed=True)", "=True)"),
        ("np.histogram(a, density=True)", None),
        ("def read(keep_prob=1): pass", None),  # definitions are not calls
        ("class Drop(tf.nn.dropout, keep_prob=1): pass", None),  # class keywords
        ("@tf.nn.dropout(x, keep_prob=1)", "=1)"),  # decorators are calls
        ("unknown.dropout(keep_prob=1)", None),
        ("x = 'tf.nn.dropout(keep_prob=1)'", None),
    ],
)
def test_keyword_rules(text, rejected_at):
    expected = None if rejected_at is None else len(text) - len(rejected_at)
    assert verdict(text) == expected


def test_keywords_in_the_document_and_multi_line_calls():
    prefix = "y = tf.nn.dropout(\n    x,\n    rate=0.3,  # (keep_prob=\n    "
    assert verdict("seed=1)", prefix) is None
    assert verdict("rate=1)", prefix) == 4  # given in the document
    assert verdict("keep_prob=1)", prefix) == 9
    assert verdict("x=1)", prefix) == 1  # bound by the positional argument in the document
    # after the call closes, the outer context is back: unconstrained
    assert verdict("seed=1)\nz = f(keep_prob=1)", prefix) is None
    # a bad keyword in the document is the user's: recorded, never rejected
    constrainer, state = after("y = tf.nn.dropout(x, keep_prob=1, ")
    assert state is not None and constrainer.check(state, "seed=1)") is not None
    # the cursor inside a string argument
    assert verdict("a', keep_prob=1)", "tf.nn.dropout('") == 13


def test_statement_start():
    assert statement_start("a = 1\nb = 2\n") == 12
    assert statement_start("a = (1,\n2\n") == 0
    assert statement_start("s = '''(\n'''\nx = f(\n") == 13
    assert statement_start("x = 1 \\\n+ 2") == 0  # a backslash continues the line
    assert statement_start("x = ')'\n(") == 8
    assert statement_start("x = 1)\ny") == 7  # unbalanced closers are noise


def test_the_bindings_are_the_names_the_analysis_types_where_the_generation_starts():
    """The constraint resolves ``model.fit(`` through the names the document's analysis
    types at the end of the prefix (`receivers_at`, what the API monitor resolves), not
    through a reading of its own: scopes count (a parameter of another function does not
    shadow a module-level name), and a name bound otherwise too has no type."""
    from adaptrack_lsp.apis.document import DocumentAnalysis
    from adaptrack_lsp.apis.receivers import receivers_at

    document = (
        "from sklearn.linear_model import LinearRegression as LR\n"
        "import pandas as pd\n"
        "model = LR(fit_intercept=False)\n"
        "df = pd.read_csv('a.csv')\n"
        "loop = LR()\nfor loop in models: pass\n"
        "param = LR()\ndef f(param): pass\n"
        "tup = LR()\na, tup = 1, 2\n"
        "unknown = thing()\n"
        "pd = pd.read_csv('b')\n"
    )
    constrainer = KeywordArguments(StaticIndex(NAMES, signatures=SIGNATURES))
    constrainer.start(ConstraintContext(document=document, prefix=document))
    model = ("sklearn", "linear_model", "LinearRegression", "()")
    assert constrainer.bindings == {"model": model, "df": ("pandas", "read_csv", "()"), "param": model}
    analysis = DocumentAnalysis.parse(document)
    assert constrainer.bindings == receivers_at(analysis, len(document), analysis.roots)
    # inside f, `param` is f's parameter: untyped
    inside = document.replace("def f(param): pass\n", "def f(param):\n    ")
    cut = inside.index("def f(param):\n    ") + len("def f(param):\n    ")
    constrainer = KeywordArguments(StaticIndex(NAMES, signatures=SIGNATURES))
    constrainer.start(ConstraintContext(document=inside, prefix=inside[:cut]))
    assert "param" not in constrainer.bindings and constrainer.bindings["model"] == model
    # given roots are every name the caller resolved (its typed names too): none learned beside
    given = KeywordArguments(StaticIndex(NAMES, signatures=SIGNATURES), roots={"LR": model[:-1]})
    given.start(ConstraintContext(document=document, prefix=document))
    assert given.bindings == {} and given.roots == {"LR": model[:-1]}


def test_a_bound_name_is_a_callee():
    """A method of a typed name takes only its signature's keywords."""
    document = DOCUMENT + "def g(m: LinearRegression):\n    m.fit(X, "
    constrainer = KeywordArguments(StaticIndex(NAMES, signatures=SIGNATURES))
    state = constrainer.start(ConstraintContext(document=document, prefix=document))
    assert constrainer.check(state, "sample_weight=w)") is not None
    assert constrainer.check(state, "weights=w)") is None


# -- bad input -----------------------------------------------------------------------------
class RaisingIndex(StaticIndex):
    def signature(self, key):
        raise RuntimeError("signature cache corrupt")


def test_a_failing_index_allows_every_keyword_and_says_why_at_debug_level(caplog):
    constrainer, state = after(idx=RaisingIndex(NAMES, signatures=SIGNATURES))
    with caplog.at_level(logging.DEBUG, logger="adaptrack_lsp.constrainers.call_arguments"):
        assert constrainer.check(state, "tf.nn.dropout(x, keep_prob=1)") is not None
    assert constrainer.lookup_errors == 1
    assert "signature of tensorflow.nn.dropout() failed to load" in caplog.text
    assert "signature cache corrupt" in caplog.text


def test_unknown_callees_are_not_looked_up_and_logged(caplog):
    asked = []

    class Recording(StaticIndex):
        def signature(self, key):
            asked.append(key)
            return super().signature(key)

    constrainer, state = after(idx=Recording(NAMES, signatures=SIGNATURES))
    with caplog.at_level(logging.DEBUG, logger="adaptrack_lsp.constrainers.call_arguments"):
        assert constrainer.check(state, "tf.no_such(keep=1) + tf.nosig(keep=1)") is not None
    assert asked == [("tensorflow", "nosig", "()")]
    assert "tensorflow.no_such is not a known member" in caplog.text
    assert "no signature for tensorflow.nosig()" in caplog.text


def test_no_index_and_no_imports_constrain_nothing():
    constrainer = KeywordArguments(None)
    state = constrainer.start("x = 1\n")
    assert constrainer.is_free(state)
    assert constrainer.check(state, "f(keep_prob=1)") is not None
    assert KeywordArguments(index()).start(None) == FRESH


# -- reasons in words ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, reason",
    [
        (
            "tf.nn.dropout(x, keep_prob=",
            "tf.nn.dropout takes no keyword keep_prob in tensorflow 2.21.0 (parameters: x, rate, noise_shape, seed, name)",
        ),
        ("tf.nn.dropout(x, rate=0.5, rate=", "tf.nn.dropout: keyword rate is already given"),
        ("tf.positional(a=", "tf.positional: a is positional-only in tensorflow 2.21.0 (parameters: a, /, b, *, c)"),
        ("tf.nn.dropout(x, x=", "tf.nn.dropout: x is already given as a positional argument (1 given)"),
        ("model.fit(X, y, weights=", "model.fit takes no keyword weights in sklearn 1.9.1 (parameters: X, y, sample_weight)"),
        ("LinearRegression(normalize=", "LinearRegression takes no keyword normalize in sklearn 1.9.1 (parameters: *, fit_intercept, copy_X, tol, n_jobs, positive)"),
    ],
)
def test_rejection_reasons(text, reason):
    constrainer, state = after()
    assert constrainer.check(state, text) is None and constrainer.check(state, text[:-1]) is not None
    assert constrainer.rejection(state, text) == reason


def test_rejection_through_all_of_names_the_keyword():
    monitor = ApiMonitor(index())
    composed = AllOf(monitor, KeywordArguments(index()))
    state = composed.start(ConstraintContext(DOCUMENT, DOCUMENT))
    assert composed.rejection(state, "tf.nn.dropout(x, keep_prob=0").startswith("tf.nn.dropout takes no keyword keep_prob")


# -- prefix-closed, and lexing in pieces equals lexing at once -------------------------------------
PIECES = ["tf", ".", "nn", "dropout", "(", "x", ",", " ", "rate", "keep_prob", "=", "==", "0", ")", "'", "#", "\n", "lambda", ":", "*", "model", "fit", "y", "sample_weight"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=14))
def test_prefix_closed_and_piecewise(pieces):
    text = "".join(pieces)
    constrainer, start = after()
    whole, position = constrainer.lex(start, text)
    state = start
    for index, piece in enumerate(pieces):
        state = constrainer.check(state, piece) if state is not None else None
        if state is None:
            assert whole is None
            assert sum(len(p) for p in pieces[:index]) <= position < sum(len(p) for p in pieces[: index + 1])
            break
    if whole is not None:
        assert state == whole
    else:
        # every extension of a rejected text is rejected, every proper prefix before the position accepted
        assert constrainer.check(start, text[: position + 1]) is None
        assert constrainer.check(start, text[:position]) is not None


# -- masks ----------------------------------------------------------------------------------
MASK_PIECES = [
    "tf", ".", "nn", ".dropout", "dropout(", "(", "x", ", ", ",", " ", "rate", "keep_prob", "keep", "_prob", "=", "==",
    "=0", "=(", " =", "= ", "0", ")", "),", "'", "\"", "#", "\n", "lambda", ":", "*", "**", "model", ".fit(", "y", "=True",
    "(keep_prob=", "np.histogram(", "normed", "density", "a==b", "x=1", "f(", "[", "]", "seed=", "LinearRegression(",
    # one token that opens a resolved call and writes a bad keyword in it
    "dropout(x, keep_prob=0", "tf.nn.dropout(keep_prob=1", "(normed=1)",
]


def mask_vocabulary() -> Vocabulary:
    pieces = list(dict.fromkeys(MASK_PIECES))
    data = [p.encode() for p in pieces] + [b"", b"<special>"]
    eos = len(pieces)
    return Vocabulary(data, eos_ids=[eos], size=len(data) + 2, special_ids=[len(data) - 1])


def walk_states(index: TokenIndex, rng: random.Random, walks: int, steps: int) -> set:
    start = index.initial_state()
    states = {start}
    vocab = index.vocab
    for _ in range(walks):
        state = start
        for _ in range(rng.randint(0, steps)):
            valid = [int(t) for t in np.flatnonzero(index.mask(state)[: vocab.num_defined]) if t not in vocab.eos_ids]
            if not valid:
                break
            state = index.advance(state, rng.choice(valid))
            states.add(state)
    return states


def assert_masks_equal_brute_force(index: TokenIndex, states) -> int:
    for state in states:
        fast, slow = index.compute_mask(state), index.brute_force_mask(state)
        if not np.array_equal(fast, slow):
            diff = [(index.vocab.text(int(i)), bool(fast[i]), bool(slow[i])) for i in np.flatnonzero(fast != slow)[:8]]
            raise AssertionError(f"mask differs from brute force in {state!r}: {diff}")
    return len(states)


@pytest.mark.parametrize("prefix", ["", "y = tf.nn.dropout(x, ", "y = tf.nn.dropout(x, rate=1, "])
def test_masks_equal_brute_force(prefix):
    vocab = mask_vocabulary()
    constrainer = KeywordArguments(index())
    token_index = TokenIndex(constrainer, vocab, context=ConstraintContext(DOCUMENT, DOCUMENT + prefix))
    states = walk_states(token_index, random.Random(3), walks=600, steps=9)
    assert any(constrainer.keywords_at(s) for s in states)  # the walks reach argument starts
    # and states where a keyword is judged: "bad_name =" (spaced: decided by the next
    # character), "bad_name" whose "=" is rejected, or an argument start refusing "keep_prob="
    assert any(
        (s[0] == 5 and not constrainer.is_complete(s))
        or (s[0] == 4 and constrainer.check(s, "=") is None)
        or (constrainer.keywords_at(s) and constrainer.check(s, "keep_prob=") is None)
        for s in states
    )
    assert assert_masks_equal_brute_force(token_index, states) > 100


def test_mask_check_detects_a_wrong_mask():
    vocab = mask_vocabulary()
    constrainer = KeywordArguments(index())
    token_index = TokenIndex(constrainer, vocab, context=ConstraintContext(DOCUMENT, DOCUMENT + "tf.nn.dropout(x, keep_prob"))
    state = token_index.initial_state()
    wrong = token_index.compute_mask(state)
    wrong[vocab.texts.index("=True")] = True
    token_index.compute_mask = lambda s: wrong  # type: ignore[method-assign]
    with pytest.raises(AssertionError):
        assert_masks_equal_brute_force(token_index, [state])


def test_tiny_tokenizer_masks_equal_brute_force():
    from transformers import AutoTokenizer

    from adaptrack_lsp.completion.lm.tiny import tiny_model_path
    from adaptrack_lsp.completion.tokenizer_bytes import vocabulary_from_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_path()))
    vocab = vocabulary_from_tokenizer(tokenizer, logits_size=len(tokenizer))
    constrainer = KeywordArguments(index())
    token_index = TokenIndex(constrainer, vocab, context=ConstraintContext(DOCUMENT, DOCUMENT + "y = tf.nn.dropout(x, "))
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)
    states = {token_index.initial_state()}
    for text in ["keep_prob=0.5)", "rate=0.5, seed=1)\nz = np.histogram(a, normed=True)", "x, keep_prob == 1, lambda a=1: a)"]:
        state = token_index.initial_state()
        for token in encode(text):
            state = token_index.advance(state, token)
            if state is None:
                break
            states.add(state)
    states |= walk_states(token_index, random.Random(5), walks=8, steps=3)
    assert assert_masks_equal_brute_force(token_index, sorted(states, key=repr)[:40]) >= 10


# -- exact sampling under the constraint ------------------------------------------------------------
SAMPLE_TOKENS = ["rate", "keep_prob", "=", "==", "1", ", ", ")", "$"]
SAMPLE_PREFIX = DOCUMENT + "y = tf.nn.dropout(x, "


def sample_constraint(vocab: Vocabulary) -> TokenIndex:
    return TokenIndex(KeywordArguments(index()), vocab, context=ConstraintContext(DOCUMENT, SAMPLE_PREFIX))


def keyword_task(seed: int) -> Task:
    """A random tabular LM over `SAMPLE_TOKENS` after ``tf.nn.dropout(x, ``, which likes
    ``keep_prob=1`` (TF 1 code); valid: every sequence of at most 4 tokens then EOS that
    `KeywordArguments` accepts (enumerated)."""
    rng = np.random.default_rng(seed)
    vocab = Vocabulary.from_strings(SAMPLE_TOKENS, "$")
    constraint = sample_constraint(vocab)
    eos = SAMPLE_TOKENS.index("$")
    valid, table = [], {}
    for length in range(0, 5):
        for body in itertools.product(range(eos), repeat=length):
            state = constraint.initial_state()
            for token in body:
                state = constraint.advance(state, token)
                if state is None:
                    break
            if state is not None and constraint.advance(state, eos) is not None:
                valid.append((*body, eos))
    for sequence in valid:
        for cut in range(len(sequence)):
            table.setdefault(sequence[:cut], rng.dirichlet(np.ones(len(SAMPLE_TOKENS))))
    ids = {name: i for i, name in enumerate(SAMPLE_TOKENS)}
    likes = {(): {"keep_prob": 0.7, "rate": 0.2, "$": 0.1}, ("keep_prob",): {"=": 0.9, "$": 0.1}, ("keep_prob", "="): {"1": 0.9, "=": 0.1}}
    for prefix, probabilities in likes.items():
        row = np.zeros(len(SAMPLE_TOKENS))
        for name, value in probabilities.items():
            row[ids[name]] = value
        table[tuple(ids[name] for name in prefix)] = row
    return Task(tokens=SAMPLE_TOKENS, eos="$", default=rng.dirichlet(np.ones(len(SAMPLE_TOKENS))), table=table, valid=valid)


def sample_requests(task: Task, decoder: str, requests: int) -> list:
    """Samples of `requests` requests of 5 samples, each on a fresh constraint and tree."""
    samples = []
    for request in range(requests):
        result = get_decoder(decoder).decode(
            task.language_model(),
            sample_constraint(task.vocab),
            DecodeRequest(prompt_ids=[], num_samples=5, seed=request, max_new_tokens=task.max_length),
        )
        samples += [tuple(s.token_ids) for s in result.samples if s.complete]
    return samples


@pytest.mark.parametrize("decoder", ["exact", "cars"])
def test_exact_samplers_stay_exact_under_the_keyword_constraint(decoder):
    task = keyword_task(seed=7)
    reference = task.exact_distribution()
    texts = ["".join(task.names(s[:-1])) for s in reference]
    assert any("keep_prob==" in text for text in texts)  # a comparison is valid
    # a keyword is not (until the call is closed)
    assert not any(re.search(r"(?:^|, )keep_prob=(?!=)", text.split(")")[0]) for text in texts)
    samples = sample_requests(task, decoder, requests=200)
    fit = chi_square(counts_of(samples), reference)
    assert fit.impossible == 0 and fit.p_value > 1e-4, fit


def test_greedy_masking_is_detected_as_distorted():
    task = keyword_task(seed=7)
    samples = sample_requests(task, "constrained", requests=200)
    assert chi_square(counts_of(samples), task.exact_distribution()).p_value < 1e-9


# -- completion-list keyword names -----------------------------------------------------------------
def test_keywords_at_argument_starts_and_keyword_choice():
    constrainer, state = after("y = tf.nn.dropout(x, rate=1, ")
    assert constrainer.keywords_at(state) == ("tf.nn.dropout (tensorflow 2.21.0)", ["noise_shape", "seed", "name"])
    _, inside = after("y = tf.nn.dropout(x, rate=1")
    assert constrainer.keywords_at(inside) is None
    _, unknown = after("y = tf.nosig(")
    assert constrainer.keywords_at(unknown) is None
    choice = KeywordChoice(["rate", "seed"])
    state = choice.start()
    assert choice.check(state, "ra") == "ra" and choice.check(state, "rx") is None
    assert choice.is_complete(choice.check(state, "rate=")) and not choice.is_complete(choice.check(state, "rate"))
    assert choice.check(choice.check(state, "seed="), "anything") == "seed="
    with pytest.raises(ValueError):
        KeywordChoice([])


def test_signature_notation_round_trip():
    import inspect

    from adaptrack_lsp.apis.introspect_worker import signature_items

    def f(a, b, /, c, *args, d, e=1, **kw): ...

    def g(a, /, b, *, c): ...

    for function in (f, g, lambda: 0, lambda *, x: 0, lambda a, b: 0, print, dict.get, json_dumps()):
        try:
            signature = inspect.signature(function)
        except ValueError:
            continue
        items = signature_items(signature)
        assert Signature.from_list(items) == Signature.from_parameters(signature.parameters.values()), items
        assert Signature.from_list(items).to_list() == items
    assert Signature.from_list(["a", "/", "b", "*", "c"]).parameter_list() == "a, /, b, *, c"
    for bad in (["*", "/"], ["1x"], "ab", [3]):
        with pytest.raises(ValueError):
            Signature.from_list(bad)
    assert dotted(("pandas", "read_csv", "()", "to_csv", "()")) == "pandas.read_csv().to_csv()"


def json_dumps():
    import json

    return json.dumps
