"""Version coverage beyond attribute chains on imported modules: import statements in the
generated text, names they bind, typed receivers (methods of objects whose type the
document states), private names, data proxies, and submodules a document imports.

Unit tests run on a `StaticIndex`; the installed-environment tests take their ground
truth from running the code in that environment (ImportError, AttributeError), never
from the checker."""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest

from adaptrack_lsp.apis.index import CALL, Member
from adaptrack_lsp.apis.receivers import receiver_bindings
from adaptrack_lsp.apis.static_index import StaticIndex
from adaptrack_lsp.constrainers.api import LINE_START, ApiMonitor, ConstraintContext
from adaptrack_lsp.constrainers.token_index import TokenIndex
from adaptrack_lsp.vocab import Vocabulary

NAMES = [
    "numpy.linalg.norm",
    "numpy.linalg.inv",
    "numpy.prod",
    "numpy.sum",
    "numpy.zeros",
    "numpy.ndarray",
    "os.path.join",
    "json.dumps",
]
MODULES = {
    "": ["numpy", "os", "json", "scipy"],
    "numpy": ["linalg", "random", "testing"],
    "numpy.linalg": [],
    "os": ["path"],
    "json": ["decoder", "encoder"],
}


class _Instances(StaticIndex):
    """A static index whose paths ending in "()" answer instance members."""

    def __init__(self, *args, instances=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.instances = {tuple(k.split(".")) + (CALL,): v for k, v in (instances or {}).items()}

    def members(self, path):
        if path and path[-1] == CALL:
            return self.instances.get(tuple(path))
        return super().members(path)


def index(**extra) -> StaticIndex:
    return StaticIndex(NAMES, modules=MODULES, versions={"numpy": "2.4.6"}, **extra)


def verdict(text: str, prefix: str = "", idx=None, roots=None) -> int | None:
    """None when `text` is accepted after `prefix`, else the offset of its first rejected character."""
    monitor = ApiMonitor(idx or index(), roots=roots)
    state = monitor.start(ConstraintContext(prefix, prefix))
    result, position = monitor.lex(state, text)
    return None if result is not None else position


def rejected_at(text: str, marker: str) -> int:
    return text.index(marker)


# -- import statements ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, bad",
    [
        ("import numpy\n", None),
        ("import numpy.linalg\n", None),
        ("import numpy.oldnumeric\n", "oldnumeric"),
        ("import nump\n", "\n"),  # not a complete module name
        ("import numpyx\n", "x"),
        ("import os.path, json.decoder as d\n", None),
        ("import os.path, json.nodecoder\n", "nodecoder"),
        ("from numpy import prod\n", None),
        ("from numpy import product\n", "uct"),  # "prod" is a name; "produ..." is none
        ("from numpy import linalg, random as r, testing\n", None),  # submodules too
        ("from numpy import (\n    prod,\n    sum as s,\n)\n", None),
        ("from numpy import (\n    prod,\n    sun,\n)\n", "n,\n)"),
        ("from numpy.linalg import norm, inv\n", None),
        ("from numpy.oldnumeric import x\n", "oldnumeric"),
        ("from numpy import *\n", None),
        ("from . import anything\nfrom .x import y\n", None),  # relative imports are the workspace's
        ("from scipy import misc\n", None),  # scipy's names are not known here: unknown
        ("raise E from nothing_known\n", None),  # not an import statement
        ("x = 1; import numpy.linalg as la\n", None),
        ("import numpy as np  # the rest is a comment: import zzz\n", None),
    ],
)
def test_import_statements_in_the_generated_text(text, bad):
    found = verdict(text)
    if bad is None:
        assert found is None, f"rejected at {found}: {text[found:]!r}"
    else:
        assert found == text.index(bad), f"{found} != {text.index(bad)} for {text!r}"


def test_names_an_import_binds_are_checked_for_the_rest_of_the_text():
    text = "import numpy.linalg as la\nla.norm(x)\nla.nrm(x)"
    assert verdict(text) == text.index("rm(x)", text.index("la.nrm"))
    text = "from numpy import linalg\nlinalg.inv(a)\nlinalg.invx(a)"
    assert verdict(text) == text.index("x(a)")
    text = "from numpy import linalg as L\nL.norm(x)"
    assert verdict(text) is None
    # a dotted plain import binds its first name without checking deeper chains (the
    # submodules it makes reachable are not known here): never a false rejection
    assert verdict("import numpy.linalg\nnumpy.linalg.norm(x)") is None
    # the binding ends where the statement ends: before it, the name is unknown
    assert verdict("la.nrm\nimport numpy.linalg as la\n") is None


def test_the_cursor_inside_a_multi_line_import_reads_the_statement_from_its_start():
    assert verdict("sun,\n)\n", prefix="from numpy import (\n    prod,\n    ") == 2
    assert verdict("sum,\n)\n", prefix="from numpy import (\n    prod,\n    ") is None


def test_rejections_name_the_module_or_the_name():
    monitor = ApiMonitor(index())
    state = monitor.start(ConstraintContext("", ""))
    assert monitor.rejection(state, "from numpy import product") == (
        "cannot import product from numpy in numpy 2.4.6 (members starting with prod: prod)"
    )
    assert monitor.rejection(state, "import numpy.oldnumeric").startswith("no module numpy.oldnumeric can be imported")
    assert "not installed" in monitor.rejection(state, "import tensorflow")


def test_the_document_folders_modules_are_importable(tmp_path):
    monitor = ApiMonitor(index(), local_modules=frozenset({"helper"}))
    state = monitor.start(ConstraintContext("", ""))
    assert monitor.check(state, "import helper\n") is not None
    assert monitor.check(state, "import helperx\n") is None


# -- private names, data proxies, imported submodules ------------------------------------------
def test_private_names_are_checked_against_what_the_answer_lists():
    # an answer that lists no private name (a snapshot of the public API) rejects them
    assert verdict("np._anything_private", prefix="import numpy as np\n") == len("np.")
    listed = _Instances(NAMES, instances={"numpy.ndarray": {n: Member(n, "function", False) for n in ("sum", "_private", "__len__")}})
    roots = {"a": ("numpy", "ndarray", CALL)}
    assert verdict("a._private", idx=listed, roots=roots) is None
    assert verdict("a._nope", idx=listed, roots=roots) == 3
    assert verdict("a.ptp()", idx=listed, roots=roots) == 2


def test_a_data_proxy_may_be_read_but_an_unlisted_name_not_called():
    frame = {"head": Member("head", "function", False), "*": Member("*", "values", False)}
    idx = _Instances(NAMES, instances={"pandas.DataFrame": frame})
    roots = {"df": ("pandas", "DataFrame", CALL)}
    assert verdict("df.price + df.head()", idx=idx, roots=roots) is None
    text = "df.append(row)"
    assert verdict(text, idx=idx, roots=roots) == text.index("(")
    monitor = ApiMonitor(idx, roots=roots)
    state = monitor.start(ConstraintContext("", ""))
    assert "is not a method" in monitor.rejection(state, text)
    # a class whose instances take any attribute is unknown
    anything = _Instances(NAMES, instances={"x.Proxy": {"*": Member("*", "any", False)}})
    assert verdict("p.whatever()", idx=anything, roots={"p": ("x", "Proxy", CALL)}) is None


def test_a_submodule_the_document_imports_is_a_member_of_its_parent():
    idx = StaticIndex(["sympy.Symbol", "sympy.physics.quantum.trace.Tr"])
    # sympy's own members do not list physics; "import sympy.physics.quantum" makes it exist
    del idx._members[("sympy",)]["physics"]
    document = "import sympy.physics.quantum\n"
    assert verdict("sympy.physics.quantum.trace.Tr(n)", prefix=document, idx=idx) is None
    assert verdict("sympy.physics.x", prefix="import sympy\n", idx=idx) == len("sympy.")


def test_a_call_on_a_known_chain_is_followed_to_its_result():
    ndarray = {n: Member(n, "function", False) for n in ("sum", "max", "copy")}
    idx = _Instances(NAMES, instances={"numpy.zeros": ndarray, "numpy.ndarray": ndarray})
    prefix = "import numpy as np\n"
    text = "np.zeros(3).ptp()"
    assert verdict(text, prefix=prefix, idx=idx) == text.index("ptp")
    assert verdict("np.zeros((2, [3][0])).max()", prefix=prefix, idx=idx) is None
    text = "y = np.prod([np.zeros(3).ptp(), 1])"  # nested inside another call
    assert verdict(text, prefix=prefix, idx=idx) == text.index("ptp")
    assert verdict("np.prod(x).anything", prefix=prefix, idx=idx) is None  # result unknown: unchecked
    assert verdict("np.zeros(3)\nimport numpy.linalg\n", prefix=prefix, idx=idx) is None


# -- typed receivers -------------------------------------------------------------------------------
ROOTS = {"np": ("numpy",), "pd": ("pandas",), "LinearRegression": ("sklearn", "linear_model", "LinearRegression")}


@pytest.mark.parametrize(
    "document, expected",
    [
        ("a = np.zeros(3)\n", {"a": ("numpy", "zeros", CALL)}),
        ("df = pd.read_csv(f).head()\n", {"df": ("pandas", "read_csv", CALL, "head", CALL)}),
        ("m = LinearRegression()\n", {"m": ("sklearn", "linear_model", "LinearRegression", CALL)}),
        ("a = np.zeros(3)\nb = a.copy()\n", {"a": ("numpy", "zeros", CALL), "b": ("numpy", "zeros", CALL, "copy", CALL)}),
        ("x: np.ndarray = g()\n", {"x": ("numpy", "ndarray", CALL)}),
        ("a = np.zeros(3)\na = np.ones(3)\n", {}),  # two types: unknown
        ("a = np.zeros(3)\nfor a in rows: pass\n", {}),  # rebound by a loop
        ("a = np.zeros(3)\ndel a\n", {}),
        ("a, b = np.zeros(3), 1\n", {}),
        ("a = g()\n", {}),  # an unresolved call
        ("a = np.pi\n", {}),  # not a call: its type is not stated
    ],
)
def test_receiver_bindings_at_module_level(document, expected):
    assert receiver_bindings(document, len(document), ROOTS) == expected


def test_receiver_bindings_follow_pythons_scopes():
    document = (
        "a = np.zeros(3)\n"
        "def f(x: np.ndarray, y, z: 'np.ndarray', *args):\n"
        "    w = np.ones(2)\n"
        "    return \n"
        "def g(a):\n"
        "    return \n"
        "class K:\n"
        "    k = np.ones(3)\n"
        "    def m(self):\n"
        "        return \n"
    )
    first = document.index("return ") + len("return ")
    assert receiver_bindings(document, first, ROOTS) == {
        "a": ("numpy", "zeros", CALL), "x": ("numpy", "ndarray", CALL), "w": ("numpy", "ones", CALL),
    }
    second = document.index("return ", first) + len("return ")
    assert receiver_bindings(document, second, ROOTS) == {}  # the parameter a shadows the module's
    third = document.rindex("return ") + len("return ")
    assert receiver_bindings(document, third, ROOTS) == {"a": ("numpy", "zeros", CALL)}  # K's body is not visible
    # the text being typed after the parse's end still belongs to the function
    typing = "def f(a: np.ndarray):\n    return "
    assert receiver_bindings(typing, len(typing), ROOTS) == {"a": ("numpy", "ndarray", CALL)}
    header = "def f(a: np.ndarray) -> float:\n"  # the body not written yet: the cursor begins it
    assert receiver_bindings(header, len(header), ROOTS) == {"a": ("numpy", "ndarray", CALL)}
    lam = "a = np.zeros(3)\nf = lambda a: a."
    assert receiver_bindings(lam, len(lam), ROOTS) == {}


# -- masks equal brute force over import and scoped states -----------------------------------------
PIECES = [
    "import", " import", "from", "from ", " numpy", "numpy", "nump", "y", ".", ".linalg", "linalg", " as", " la",
    "\n", "\nimport", "\nfrom", " prod", "prod", "uct", ",", " (", "(", ")", "la", ".n", "orm", "norm", "x", " ",
    "im", "port", "fr", "om", "_priv", "._", "np", "np.", " np.", "#", "'", "sum", " sum",
    "zeros", "zeros(", "3", ")", ").", ").s", "um", "[", "]", "(3)", "np.zeros(", " np",
]


def _vocabulary() -> Vocabulary:
    data = [p.encode() for p in dict.fromkeys(PIECES)]
    return Vocabulary(data, eos_ids=[len(data)], size=len(data) + 1)


@pytest.mark.parametrize("prefix", ["", "import numpy as np\n", "x = 1\nfrom numpy import (\n    "])
def test_masks_equal_brute_force_over_imports(prefix):
    vocab = _vocabulary()
    ndarray = {n: Member(n, "function", False) for n in ("sum", "max")}
    idx = _Instances(NAMES, modules=MODULES, instances={"numpy.zeros": ndarray})
    token_index = TokenIndex(ApiMonitor(idx), vocab, context=ConstraintContext(prefix, prefix))
    rng = random.Random(5)
    start = token_index.initial_state()
    states = {start}
    piece = {text: i for i, text in enumerate(dict.fromkeys(PIECES))}
    starts = [start]
    for path in (
        ["import", " numpy", " as", " la", "\n", "la", ".n", "orm"],
        ["from ", "numpy", " import", " prod", ",", " sum"],
        ["import", " numpy", " as", " np", "\n", "np.zeros(", "3"],
    ):
        state = start
        for text in path:
            state = token_index.advance(state, piece[text])
            if state is None:
                break
            states.add(state)
            starts.append(state)
    compared: set = set()

    def same(state) -> None:  # the fast mask against every token checked
        if state not in compared:
            compared.add(state)
            fast, slow = token_index.compute_mask(state), token_index.brute_force_mask(state)
            assert np.array_equal(fast, slow), (state, [vocab.text(int(i)) for i in np.flatnonzero(fast != slow)])

    for _ in range(400):
        state = rng.choice(starts)
        for _ in range(rng.randint(1, 10)):
            same(state)
            valid = [int(t) for t in np.flatnonzero(token_index.mask(state)[: vocab.num_defined]) if t not in vocab.eos_ids]
            if not valid:
                break
            state = token_index.advance(state, rng.choice(valid))
            states.add(state)
    kinds = {type(s).__name__ for s in states}
    assert len(states) > 50, kinds
    assert any(s[0] == 12 for s in states if isinstance(s, tuple))  # names bound by generated imports
    assert any((s[3] if s[0] == 12 else s)[0] == 11 for s in states if isinstance(s, tuple))  # inside import statements
    if not prefix:
        assert any(s[0] == 12 and s[2] for s in states if isinstance(s, tuple))  # inside a call on a known chain
    for state in states:
        fast, slow = token_index.compute_mask(state), token_index.brute_force_mask(state)
        assert np.array_equal(fast, slow), (state, [vocab.text(int(i)) for i in np.flatnonzero(fast != slow)])


def test_the_statement_start_state():
    monitor = ApiMonitor(index())
    assert monitor.start(ConstraintContext("x = 1\n", "x = 1\n")) == LINE_START


# -- the installed environment: ground truth by running the code --------------------------------------
def _runs(code: str) -> str:
    """"" when `code` runs in this interpreter, else the exception's class name."""
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120)
    if done.returncode == 0:
        return ""
    lines = [line for line in done.stderr.strip().splitlines() if line and not line.startswith(" ")]
    return lines[-1].split(":", 1)[0] if lines else "failed"


CASES = [
    ("", "from numpy import prod\n", ""),
    ("", "from numpy import product\n", "ImportError"),  # removed in NumPy 2.0
    ("", "import numpy.oldnumeric\n", "ModuleNotFoundError"),
    ("", "from numpy import linalg\nlinalg.norm([3.0, 4.0])\n", ""),
    ("", "import os.path\nos.path.join('a', 'b')\n", ""),
    ("import numpy as np\na = np.zeros(3)\n", "a.sum()\n", ""),
    ("import numpy as np\na = np.zeros(3)\n", "a.ptp()\n", "AttributeError"),  # removed from ndarray in NumPy 2.0
    ("import numpy as np\na = np.zeros(3)\n", "a.itemset(0, 1)\n", "AttributeError"),
    ("import numpy as np\na = np.zeros(3)\n", "a.newbyteorder()\n", "AttributeError"),
    ("import numpy as np\ndef f(a: np.ndarray):\n    return ", "a.ptp()\nf(np.zeros(2))\n", "AttributeError"),
    ("import numpy as np\ndef f(a: np.ndarray):\n    return ", "a.max()\nf(np.zeros(2))\n", ""),
    ("import json\nd = json.JSONDecoder()\n", "d.decode('1')\n", ""),
    ("import json\nd = json.JSONDecoder()\n", "d.decodex('1')\n", "AttributeError"),
    ("import argparse\np = argparse.ArgumentParser()\n", "p.add_argument('--x')\n", ""),
    ("import argparse\np = argparse.ArgumentParser()\n", "p.add_argumen('--x')\n", "AttributeError"),
    ("import numpy as np\n", "np.histogram([1.0], normed=True)\n", "TypeError"),
    ("import numpy as np\n", "np.zeros(3).ptp()\n", "AttributeError"),
    ("import numpy as np\n", "np.zeros(3).max()\n", ""),
    ("import json\n", "json.JSONDecoder().decode('1')\n", ""),
]


@pytest.fixture(scope="module")
def explainer():
    from adaptrack_lsp.checking.explainer import Explainer
    from adaptrack_lsp.config import parse_settings

    settings, problems = parse_settings({"pythonPath": sys.executable})
    assert not problems
    checker = Explainer(settings, ["api", "kwargs"])
    assert not checker.problem
    yield checker
    checker.close()


@pytest.mark.parametrize("prefix, text, expected", CASES)
def test_the_checks_agree_with_running_the_code(explainer, prefix, text, expected):
    if prefix.endswith("return "):
        ran = _runs(prefix + text)
    else:
        ran = _runs(prefix + text)
    assert ran == expected, f"the reference itself changed: {ran!r}"
    found = explainer.explain(prefix, text)
    if expected:
        assert found["accepted"] is False, found
    else:
        assert found["accepted"] is True and found["complete"] is True, found


def test_after_from_numpy_import_the_list_offers_only_names_that_exist(tmp_path):
    """A completion list at ``from numpy import ‸`` (the tiny model, the installed numpy):
    every candidate's name is one ``from numpy import`` accepts when run here."""
    import json
    import os

    pytest.importorskip("torch")
    source = tmp_path / "example.py"
    source.write_text("from numpy import \n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "adaptrack_lsp", "complete", f"{source}:1:19", "--model", "tiny", "--python", sys.executable,
         "--samples", "6", "--max-new-tokens", "4", "--timeout-ms", "120000", "--json"],
        capture_output=True, text=True, timeout=600, env=env,
    )
    assert done.returncode == 0, done.stderr
    import re

    # the name right after "import " (a text that starts otherwise, with a line break or a
    # comment, imports nothing)
    found = [re.match(r"[ \t]*([A-Za-z_]\w*)", c["text"]) for c in json.loads(done.stdout)["candidates"]]
    names = [m.group(1) for m in found if m]
    complete = names
    assert complete, names
    for name in complete:
        # the reference: the import itself, run in this interpreter (a name the model left
        # unfinished may be a prefix of a real one: the import of the whole text decides)
        ran = _runs(f"from numpy import {name}")
        assert ran == "" or any(real.startswith(name) for real in dir(np)), (name, ran)


def test_import_masks_equal_brute_force_on_the_tiny_tokenizer():
    """The structured import masks, on a real BPE vocabulary, against every token checked."""
    transformers = pytest.importorskip("transformers")
    from adaptrack_lsp.completion.lm.tiny import tiny_model_path
    from adaptrack_lsp.completion.tokenizer_bytes import vocabulary_from_tokenizer

    vocab = vocabulary_from_tokenizer(transformers.AutoTokenizer.from_pretrained(str(tiny_model_path())))
    idx = index()
    lines = [
        "import numpy.linalg as la, os.path\nla.norm(x)\n",
        "from numpy import (prod,\n    linalg as L)\nL.inv(a)\n",
        "from numpy.linalg import norm\nimport json\n",
        "from . import x\nfrom numpy import *\n",
        "from numpy.linalg \\\n    import norm as n, \\\n  inv\nimport numpy \\\n  as np\n",
    ]
    checked = 0
    for line in lines:
        for cut in range(0, len(line) + 1, 3 if "\\" not in line else 1):
            prefix = line[:cut]
            token_index = TokenIndex(ApiMonitor(idx), vocab, context=ConstraintContext(prefix, prefix))
            state = token_index.initial_state()
            fast, slow = token_index.compute_mask(state), token_index.brute_force_mask(state)
            assert np.array_equal(fast, slow), (prefix, state, [vocab.text(int(i)) for i in np.flatnonzero(fast != slow)[:10]])
            checked += 1
    assert checked > 40


@pytest.mark.parametrize(
    "prefix, text",
    [
        # an attribute the document gives a library object elsewhere
        ("import socketserver\nserver = socketserver.TCPServer(('', 0), None, bind_and_activate=False)\n"
         "def handle(self):\n    self.server.wfile = self.wfile\n", "server.wfile.write(b'x')\n"),
        # Enum('Name', ...) makes a class (its metaclass's __call__), not an Enum instance
        ("import enum\nMinor = enum.Enum('Minor', 'june july')\n", "Minor.june\n"),
        # an abstract method of a base class exists (its subclasses implement it)
        ("import mailbox\nbox = mailbox.Mailbox('path')\n", "box.add\n"),
        # Cls.__new__(Cls) says nothing of the type a checker could use
        ("import hmac\nh1 = hmac.HMAC.__new__(hmac.HMAC)\n", "h1.copy\n"),
    ],
)
def test_what_the_runtime_may_give_an_object_is_not_rejected(explainer, prefix, text):
    """Cases found over the standard library's test suite (benchmarks/version_receivers.py):
    each is valid Python that runs here."""
    found = explainer.explain(prefix, text)
    assert found["accepted"] is True, found


def test_an_attribute_the_document_never_assigns_is_still_rejected(explainer):
    prefix = "import socketserver\nserver = socketserver.TCPServer(('', 0), None, bind_and_activate=False)\n"
    assert explainer.explain(prefix, "server.wfile\n")["accepted"] is False
    assert explainer.explain(prefix + "server.wfile = 1\n", "server.wfile\n")["accepted"] is True
