"""The API monitor: roots from imports, lexing of generated Python, chain rules, start
states from the prompt, and bad input (syntax errors, unknown roots, failing indexes)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptrack_lsp.apis.index import APIIndex
from adaptrack_lsp.constrainers.api import (
    FRESH_CODE,
    LINE_START,
    ApiMonitor,
    ConstraintContext,
    StaticIndex,
    learn_roots,
    safe_lex_start,
)

NAMES = [
    "numpy.linalg.norm",
    "numpy.linalg.matrix_rank",
    "numpy.prod",
    "numpy.product_x",
    "numpy.array",
    "numpy.random.rand",
    "numpy.random.randint",
    "torch.linalg.matrix_rank",
    "torch.nn.Linear",
    "os.path.join",
]
DOCUMENT = "import numpy as np\nfrom torch import linalg, nn\nimport os.path\n"


def monitor_after(prefix: str, document: str = DOCUMENT, index: APIIndex | None = None):
    monitor = ApiMonitor(index or StaticIndex(NAMES))
    return monitor, monitor.start(ConstraintContext(document, document + prefix))


def accepts(text: str, prefix: str = "", complete: bool | None = None) -> bool:
    monitor, state = monitor_after(prefix)
    after = monitor.check(state, text)
    if after is None:
        return False
    return True if complete is None else monitor.is_complete(after) == complete


# -- imports ---------------------------------------------------------------------------------
def test_learn_roots_from_every_import_form():
    document = (
        "import a.b as c, d\n"
        "import numpy as np\n"
        "import os.path\n"
        "from torch import linalg, nn as N\n"
        "from a.b import (e as f,\n    g)\n"
        "from . import rel\n"
        "from .pkg import rel2\n"
        "from star import *\n"
        "def broken(:\n"
        "    import tensorflow as tf\n"
    )
    assert learn_roots(document) == {
        "c": ("a", "b"),
        "d": ("d",),
        "np": ("numpy",),
        "os": ("os",),
        "linalg": ("torch", "linalg"),
        "N": ("torch", "nn"),
        "f": ("a", "b", "e"),
        "g": ("a", "b", "g"),
        "tf": ("tensorflow",),
    }


def test_learn_roots_follows_edits_to_the_imports():
    body = "\n".join(f"def f{i}(x):\n    return x + {i}" for i in range(50))
    document = "import numpy as np\n" + body
    assert learn_roots(document) == {"np": ("numpy",)}
    # typing in the body keeps the answer; editing an import changes it
    assert learn_roots(document + "\ny = np.") == {"np": ("numpy",)}
    assert learn_roots(document.replace("import numpy as np", "import numpy as xp")) == {"xp": ("numpy",)}
    assert learn_roots("from torch import (\n    linalg,\n    nn as neural)\n" + body) == {
        "linalg": ("torch", "linalg"),
        "neural": ("torch", "nn"),
    }
    # an import inside a docstring is text, not code; closing the docstring earlier makes it code
    quoted = 'import os\n"""\nimport numpy as np\n"""\n'
    assert learn_roots(quoted) == {"os": ("os",)}
    assert learn_roots('import os\n""""""\nimport numpy as np\n"""\n') == {"os": ("os",), "np": ("numpy",)}


def test_learn_roots_tolerates_garbage():
    assert learn_roots("") == {}
    assert learn_roots("import \nfrom import as\n)))(((\x00") == {}
    assert learn_roots("if x:\n  import numpy as np\nelse:\n  import numpy as np") == {
        "np": ("numpy",)
    }


# -- chains ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, ok",
    [
        ("np.prod(x)", True),
        ("np.linalg.norm(x)", True),
        ("np.linalg .norm", True),  # spaces before a dot are fine
        ("np .prod", True),
        ("np . prod", False),
        ("np. prod", False),  # a name must follow the dot directly
        ("np.product(x)", False),
        ("np.pro(x)", False),  # only complete names end a chain
        ("np.linalg.svd", False),
        ("np.random.rand.x", False),  # a leaf has no members
        ("linalg.matrix_rank(m)", True),  # from torch import linalg
        ("linalg.norm", False),
        ("nn.Linear(3, 4)", True),
        ("os.path.join(a, b)", True),
        ("os.path.split", False),
        ("np.(", False),
    ],
)
def test_chain_rules(text, ok):
    assert accepts(text) is ok


@pytest.mark.parametrize(
    "text",
    [
        '"np.product"',
        "'np.product'",
        "'''\nnp.product\n'''",
        'rb"np.product"',
        "f'{x} np.product'",
        "# np.product\n",
        "x.np.product",  # np after an unknown dot is not a root
        "foo().np.product",
        "npx.product",  # another identifier
        "unknown.anything.goes",
        "1.5 + np.prod(2)",
        "'it\\'s' + 'np.product'",
        '"""a "" np.product"""',
        '"" + np.prod(x)',
        "np.random.rand(3).T.anything",  # after a call the value is unknown
    ],
)
def test_strings_comments_and_unknown_expressions_are_not_constrained(text):
    assert accepts(text)


def test_string_end_is_tracked():
    assert not accepts('"x" + np.product(')
    assert not accepts("'''a''' + np.product(")
    assert not accepts("# c\nnp.product(")
    assert not accepts('"""a "" b""" + np.product(')


def test_completion_requires_a_complete_member():
    monitor, state = monitor_after("")
    assert monitor.is_complete(monitor.check(state, "x = np.prod"))
    assert not monitor.is_complete(monitor.check(state, "x = np.pro"))
    assert not monitor.is_complete(monitor.check(state, "x = np."))
    assert monitor.is_complete(monitor.check(state, "x = np"))
    assert monitor.is_complete(monitor.check(state, "x = 'np.pro"))


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(alphabet="np.rodlialg()'\"#\n xf_", max_size=24),
    cuts=st.lists(st.integers(0, 24), max_size=4),
)
def test_checking_in_pieces_equals_checking_at_once(text, cuts):
    """Tokens that cross "." (or anything else) are handled character by character."""
    monitor, state = monitor_after("")
    whole = monitor.check(state, text)
    pieces, position = [], 0
    for cut in sorted({c for c in cuts if c <= len(text)}):
        pieces.append(text[position:cut])
        position = cut
    pieces.append(text[position:])
    stepwise = state
    for piece in pieces:
        stepwise = monitor.check(stepwise, piece)
        if stepwise is None:
            break
    assert stepwise == whole


# -- start states --------------------------------------------------------------------------------
def test_start_state_from_the_prompt_tail():
    monitor, state = monitor_after("x = np.lin")
    assert ApiMonitor.in_chain(state) and ApiMonitor.chain_path(state) == ("numpy",)
    assert state == (3, ("numpy",), "lin")
    assert monitor.check(state, "alg.norm(") is not None
    assert monitor.check(state, "e") is None
    monitor, state = monitor_after('x = "np.lin')
    assert not ApiMonitor.in_chain(state)
    monitor, state = monitor_after('"""doc\nx = np.lin')  # inside an open docstring
    assert not ApiMonitor.in_chain(state)
    assert (
        monitor.check(state, 'xxx"""\nnp.product(') is None
    )  # the string closes, then code
    monitor, state = monitor_after("x = 1  # np.lin")
    assert not ApiMonitor.in_chain(state)
    monitor, state = monitor_after("x = np")
    assert state == (0, "np", False)
    assert (
        monitor.check(state, ".prod") is not None
        and monitor.check(state, ".product(") is None
    )


def test_prompt_violations_are_lenient():
    """The user's own text is not rejected: a chain the index does not know becomes
    unconstrained, and lexing goes on."""
    monitor, state = monitor_after("x = np.float_.")
    assert state is not None and not ApiMonitor.in_chain(state)
    assert monitor.check(state, "anything") is not None
    text = "y = np.bad.x\nz = np."
    state2, violation = monitor.lex(FRESH_CODE, text, lenient=True)
    assert violation == text.index("bad") and ApiMonitor.in_chain(state2)


@settings(max_examples=200, deadline=None)
@given(prefix=st.text(alphabet="ab\"'#\\\n xnp.()r", max_size=40))
def test_safe_start_gives_the_same_state_as_lexing_everything(prefix):
    monitor = ApiMonitor(StaticIndex(NAMES), roots={"np": ("numpy",)})
    full, _ = monitor.lex(LINE_START, prefix, lenient=True)  # a document starts a statement
    tail, _ = monitor.lex(LINE_START, prefix[safe_lex_start(prefix) :], lenient=True)
    assert tail == full


def test_safe_start_skips_strings_and_comments():
    prefix = 'a = """x\ny\n"""\n# c "\nb = \'q\\\' "\' + np.'
    start = safe_lex_start(prefix)
    assert prefix[start:] == "b = 'q\\' \"' + np."
    assert safe_lex_start('s = """abc\ndef') == 0


# -- bad input ------------------------------------------------------------------------------------
class FailingIndex(APIIndex):
    source = "failing"

    def members(self, path):
        raise RuntimeError("index crashed")


def test_unknown_roots_and_failing_index_are_unconstrained():
    monitor, state = monitor_after(
        "", document="import nosuchmodule as m\nimport numpy as np\n"
    )
    assert monitor.check(state, "m.whatever.goes(1)") is not None
    monitor, state = monitor_after("", index=FailingIndex())
    assert monitor.check(state, "np.product(x)") is not None
    assert monitor.lookup_errors == 1
    monitor, state = monitor_after("", document="import numpy as np\ndef f(:\n  )))")
    assert monitor.check(state, "np.product(") is None


def test_one_monitor_per_document():
    monitor = ApiMonitor(StaticIndex(NAMES))
    monitor.start(ConstraintContext(DOCUMENT, DOCUMENT))
    monitor.start(ConstraintContext(DOCUMENT, DOCUMENT + "x = "))  # same document: fine
    with pytest.raises(ValueError, match="other imports"):
        monitor.start(ConstraintContext("import torch as np\n", ""))
    explicit = ApiMonitor(StaticIndex(NAMES), roots={"np": ("numpy",)})
    state = explicit.start(ConstraintContext("import torch as np\n", "x = np.pr"))
    assert state == (3, ("numpy",), "pr")


def test_source_and_describe():
    monitor, state = monitor_after("x = np.li")
    assert monitor.source == "static names"
    assert "numpy" in ApiMonitor.describe(state)
    assert ApiMonitor.describe(FRESH_CODE) == "code"


@pytest.mark.slow
def test_real_numpy_through_jedi_index_when_available():
    """Version truth end to end on the installed numpy (JediIndex from api_index)."""
    import sys

    import numpy

    from adaptrack_lsp.apis import index as api_index

    jedi_index_class = getattr(api_index, "JediIndex", None)
    if jedi_index_class is None:
        pytest.skip("JediIndex is not available")
    index = jedi_index_class(python=sys.executable, timeout_s=20)
    if index.members(("numpy",)) is None:
        pytest.skip("the JediIndex could not list numpy within its time budget")
    monitor, state = monitor_after("", document="import numpy as np\n", index=index)
    assert monitor.check(state, "np.prod(x)") is not None
    assert monitor.check(state, "np.linalg.norm(x)") is not None
    if int(numpy.__version__.split(".")[0]) >= 2:
        assert monitor.check(state, "np.product(x)") is None
        assert monitor.check(state, "np.alltrue(x)") is None
        assert monitor.check(state, "np.float_(x)") is None


# -- reasons in words (`adaptrack-lsp explain`) ----------------------------------------------------
@pytest.mark.parametrize(
    "text, reason",
    [
        # the whole name is in the text
        ("np.linalg.nrm(x)", "np.linalg.nrm does not exist in numpy 1.0"),
        ("np.product(x)", "np.product does not exist in numpy 1.0 (members starting with product: product_x)"),
        # the text stops at the first rejected character
        ("np.pq", "no member of np starts with pq in numpy 1.0 (members starting with p: prod, product_x)"),
        ("np.q", "no member of np starts with q in numpy 1.0"),
        ("np.prodx", "no member of np starts with prodx in numpy 1.0 (members starting with prod: prod, product_x)"),
        ("np.pro(", "np.pro does not exist in numpy 1.0 (members starting with pro: prod, product_x)"),
        ("np.linalg.svd", "np.linalg.svd does not exist in numpy 1.0"),
        ("np.random.rand.x", "np.random.rand has no members in numpy 1.0"),
        ("linalg.norm", "linalg.norm does not exist"),  # from torch import linalg; no version known
    ],
)
def test_rejection_reasons_name_the_chain_as_written(text, reason):
    monitor = ApiMonitor(StaticIndex(NAMES, versions={"numpy": "1.0"}))
    state = monitor.start(ConstraintContext(DOCUMENT, DOCUMENT))
    assert monitor.check(state, text) is None
    assert monitor.rejection(state, text) == reason


def test_rejection_of_an_accepted_text_falls_back_to_the_default():
    monitor, state = monitor_after("")
    assert "rejects" in monitor.rejection(state, "np.prod")


# -- what one request leaves the next ----------------------------------------------------------
class _AnsweringIndex(APIIndex):
    """An index whose answers are replaced between requests, as a live index's are when it
    learns more (a new mapping, never the old one changed)."""

    def __init__(self, answers):
        self.answers = dict(answers)

    def members(self, path):
        return self.answers.get(tuple(path))


def _members(*names):
    from adaptrack_lsp.apis.index import Member

    return {name: Member(name, "function") for name in names}


def test_the_next_request_sees_a_new_answer_and_shares_an_unchanged_one():
    """Requests share what a path's members cost to prepare (names, prefixes, token
    groups) while the index gives the same answer; an answer replaced since, a document
    that assigns other attributes, or a path opened for new attributes gets its own."""
    from adaptrack_lsp.completion.lm.loading import load_model
    from adaptrack_lsp.constrainers.token_index import TokenIndex

    vocab = load_model("tiny", device="cpu").vocab
    document = "import numpy as np\n"
    index = _AnsweringIndex({("numpy",): _members("zeros", "zebra", "ones")})

    def request(assigned=frozenset()):
        monitor = ApiMonitor(index, assigned_attributes=assigned)
        context = ConstraintContext(document, document + "x = np.z")
        tokens = TokenIndex(monitor, vocab, context=context)
        state = tokens.initial_state()
        mask = tokens.mask(state)
        allowed = {vocab.texts[t] for t in range(vocab.num_defined) if mask[t] and vocab.texts[t].isidentifier()}
        return monitor, state, allowed

    first, state, allowed = request()
    assert {"e", "er", "ero"} <= allowed  # zeros, zebra
    second, _, again = request()
    assert second.path_info(("numpy",)) is first.path_info(("numpy",))
    assert again == allowed
    # the index learned more: a new answer without `zeros`
    index.answers[("numpy",)] = _members("zebra", "ones")
    third, state, after = request()
    assert third.path_info(("numpy",)) is not first.path_info(("numpy",))
    assert "e" in after and not {"er", "ero"} & after and third.check(state, "ero") is None
    assert first.check(first.start(ConstraintContext(document, document + "x = np.z")), "ero") is not None
    # other assigned attributes (an instance path's extra names) and an opened path
    instance = ("numpy", "ndarray", "()")
    index.answers[instance] = _members("sum")
    plain = ApiMonitor(index).path_info(instance)
    names = ApiMonitor(index, assigned_attributes=frozenset({"total"})).path_info(instance)
    assert "total" in names.members and "total" not in plain.members
    assert not plain.open_values


def test_a_paths_token_groups_drop_the_least_recently_used(monkeypatch):
    """A path's token groups (one per partial name) are kept up to `GROUPS_PER_PATH`,
    the least recently used dropped first: a partial the search meets again is not
    computed again because others came since (emptying them all at the limit had a
    search that meets more partials than the limit compute each again every time)."""
    from adaptrack_lsp.completion.lm.loading import load_model
    from adaptrack_lsp.constrainers import api
    from adaptrack_lsp.constrainers.token_index import TokenIndex

    vocab = load_model("tiny", device="cpu").vocab
    document = "import numpy as np\n"
    index = _AnsweringIndex({("numpy",): _members("zeros", "zebra", "ones", "empty")})
    computed = []
    groups = api._ApiMasks._groups
    monkeypatch.setattr(api._ApiMasks, "_groups", staticmethod(lambda table, info, partial: computed.append(partial) or groups(table, info, partial)))

    def mask(partial):
        monitor = ApiMonitor(index)
        tokens = TokenIndex(monitor, vocab, context=ConstraintContext(document, document + "x = np." + partial))
        return tokens.mask(tokens.initial_state())

    mask("z")
    per_partial = len(computed)  # one per token table the mask reads
    assert per_partial >= 1 and set(computed) == {"z"}
    monkeypatch.setattr(api, "GROUPS_PER_PATH", 2 * per_partial)
    first_o = mask("o")
    mask("z")  # kept: now the most recently used
    mask("e")  # full: drops the least recently used, "o"
    computed.clear()
    mask("z")
    assert computed == []
    assert (mask("o") == first_o).all() and set(computed) == {"o"}
