"""Typed receivers where users meet them (apis/receivers.py, the checker and the
completion constraint alike): classes of the standard library implemented in C or
returned by functions, ``with ... as name``, ``self`` / ``cls`` of classes whose bases
are known, return types jedi infers from library code, literals and builtins, keyword
names from numpydoc signature lines, and the project's own classes in a trusted
workspace.  The reference for every verdict is running the code here: each rejected
document raises the error named, each accepted one runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from adaptrack_lsp.apis.index import CALL
from adaptrack_lsp.apis.receivers import assigned_attribute_names, receiver_bindings
from adaptrack_lsp.checking.checker import Checker

from api_index_support import venv_index

#: run before each document when it is run for reference: a file to open and parse, and
#: `requests.get` answering without the network (it returns a `requests.models.Response`,
#: the type its source gives)
REFERENCE_SETUP = """
import pathlib, requests
pathlib.Path("p").write_text("<a><b/></a>")
requests.get = lambda *args, **kwargs: requests.models.Response()
"""

# (document, the name flagged (None: nothing), the error running it raises ("": none),
#  what makes it run: a call appended for the reference)
CASES = [
    ("import datetime\nd = datetime.date.today()\nd.iso()\n", "d.iso", "AttributeError", ""),
    ("import datetime\nd = datetime.date.today()\nd.isoformat()\n", None, "", ""),
    ("import array\nbuf = array.array('b')\nbuf.fromstring(b'x')\n", "buf.fromstring", "AttributeError", ""),
    ("import array\nbuf = array.array('b')\nbuf.frombytes(b'x')\n", None, "", ""),
    ("import xml.etree.ElementTree as ET\nroot = ET.parse('p').getroot()\nroot.getiterator()\n", "root.getiterator", "AttributeError", ""),
    ("import xml.etree.ElementTree as ET\nroot = ET.parse('p').getroot()\nlist(root.iter())\n", None, "", ""),
    ("import collections\ncollections.OrderedDict().iteritems()\n", "collections.OrderedDict().iteritems", "AttributeError", ""),
    ("with open('p') as fh:\n    fh.xreadlines()\n", "fh.xreadlines", "AttributeError", ""),
    # jedi infers one type for fftconvolve() from one of its three returns (scipy's
    # dispatch machinery) and nothing for the other two: the result is unknown
    ("import scipy.signal\nx = scipy.signal.fftconvolve([1.0], [1.0])\nprint(x.dtype, x.shape)\n", None, "", ""),
    ("with open('p') as fh:\n    print(fh.mode, fh.name, fh.read())\n", None, "", ""),  # data open() sets
    ("with open('p', 'rb') as fb:\n    fb.readtext()\n", "fb.readtext", "AttributeError", ""),
    ("with open('p', 'rb') as fb:\n    fb.read1(1)\n", None, "", ""),
    ("import zipfile, io\nwith zipfile.ZipFile(io.BytesIO(), 'w') as z:\n    z.namelst()\n", "z.namelst", "AttributeError", ""),
    ("import tempfile\nwith tempfile.TemporaryDirectory() as d:\n    d.upper()\n", None, "", ""),  # __enter__ gives a str
    # `self` is typed (its members are the class's and the base's: no false finding on
    # them), but a name missing there is not reported: the instance may be of a subclass,
    # in another file, that has it (`self.locktype` in the standard library's lock tests);
    # only a version target that shows a version having it makes it a finding
    ("import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqaul(1, 1)\n",
     None, "AttributeError", "T('test_a').test_a()\n"),
    ("import unittest\nclass T(unittest.TestCase):\n    def helper(self):\n        return 1\n"
     "    def test_a(self):\n        self.assertEqual(self.helper(), 1)\n        self.value = 2\n        self.assertEqual(self.value, 2)\n",
     None, "", "T('test_a').test_a()\n"),
    ("import unittest\nclass T(unittest.TestCase):\n    @classmethod\n    def setUpClass(cls):\n        cls.shared = 1\n        cls.assertEqaul\n",
     None, "AttributeError", "T.setUpClass()\n"),
    # a mixin without bases is not typed (its self may be anything it is mixed into)
    ("import unittest\nclass Mixin:\n    def check(self):\n        self.assertEqual(1, 1)\nclass T(Mixin, unittest.TestCase):\n"
     "    def test_a(self):\n        self.check()\n", None, "", "T('test_a').test_a()\n"),
    # a class that takes any attribute is not typed
    ("import unittest\nclass T(unittest.TestCase):\n    def __getattr__(self, name):\n        return lambda *a: None\n"
     "    def test_a(self):\n        self.anything()\n", None, "", "T('test_a').test_a()\n"),
    ("import requests\nr = requests.get('http://example.invalid')\nr.json_data()\n", "r.json_data", "AttributeError", ""),
    ("import requests\nr = requests.get('http://example.invalid')\nr.raise_for_status\n", None, "", ""),
    ("import numpy as np\na = np.zeros(3)\na.mean(axes=0)\n", "a.mean(axes=)", "TypeError", ""),
    ("import numpy as np\na = np.zeros(3)\na.mean(axis=0, keepdims=True)\n", None, "", ""),
    ("x = []\nx.push(1)\n", "x.push", "AttributeError", ""),
    ("x = {}\nx.has_key(1)\n", "x.has_key", "AttributeError", ""),
    ("'abc'.decode()\n", "'abc'.decode", "AttributeError", ""),
    ("', '.join(['a'])\nb'x'.decode()\n", None, "", ""),
    ("print(1, flie=None)\n", "print(flie=)", "TypeError", ""),
    ("open('p', encodign='utf-8')\n", "open(encodign=)", "TypeError", ""),
    # a document that binds the builtin's name: not the builtin
    ("def open(*args, **kwargs):\n    return []\nopen('p', encodign=1).append\n", None, "", ""),
]


@pytest.fixture(scope="module")
def checker():
    return Checker(venv_index())


def _reference(code: str, folder) -> str:
    """The exception class name running `code` raises here ("" when it runs)."""
    done = subprocess.run([sys.executable, "-c", REFERENCE_SETUP + code], capture_output=True, text=True, timeout=120, cwd=folder)
    if done.returncode == 0:
        return ""
    last = [line for line in done.stderr.strip().splitlines() if line and not line.startswith(" ")][-1]
    return last.split(":", 1)[0]


@pytest.mark.parametrize(("code", "name", "error", "run"), CASES, ids=[c[1] or f"ok-{i}" for i, c in enumerate(CASES)])
def test_receivers_users_meet_are_checked_and_agree_with_running_the_code(checker, tmp_path, code, name, error, run):
    assert _reference(code + run, tmp_path) == error, "the reference changed"
    found = [(f.kind, f.name) for f in checker.check(code).findings]
    if name is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0][1] == name, found


def test_the_completion_constraint_sees_the_same_receivers():
    """receiver_bindings (the cursor's view, what completions constrain with) types the
    same names as the checker."""
    document = textwrap.dedent(
        """\
        import unittest, datetime
        d = datetime.date.today()
        x = []
        with open('p', 'rb') as fb:
            pass
        class T(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                pass
            def test_a(self):
                self.value = 1
        """
    )
    roots = {"unittest": ("unittest",), "datetime": ("datetime",)}
    bound = receiver_bindings(document, document.index("self.value") + len("self.value = 1"), roots)
    assert bound["d"] == ("datetime", "date", "today", CALL)
    assert bound["x"] == ("builtins", "list", CALL)
    assert bound["fb"] == ("io", "BufferedReader", CALL, "__enter__", CALL)
    assert bound["self"] == ("unittest", "TestCase", CALL)
    inside = document.index("pass", document.index("setUpClass"))
    assert receiver_bindings(document, inside, roots)["cls"] == ("unittest", "TestCase")
    # what the document's classes define is never rejected on a typed receiver
    assert {"test_a", "setUpClass", "value"} <= assigned_attribute_names(document)


@pytest.fixture(scope="module")
def explainer():
    from adaptrack_lsp.checking.explainer import Explainer
    from adaptrack_lsp.config import parse_settings

    settings, problems = parse_settings({"pythonPath": sys.executable})
    assert not problems
    found = Explainer(settings, ["api", "kwargs"])
    yield found
    found.close()


@pytest.mark.parametrize(
    ("prefix", "text", "accepted"),
    [
        ("import datetime\nd = datetime.date.today()\n", "d.iso()\n", False),
        ("import datetime\nd = datetime.date.today()\n", "d.isoformat()\n", True),
        ("with open('p') as fh:\n    ", "fh.xreadlines()\n", False),
        ("with open('p') as fh:\n    ", "fh.readlines()\n", True),
        ("import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        ", "self.assertEqaul(1, 1)\n", False),
        ("import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        ", "self.assertEqual(1, 1)\n", True),
        # a new attribute being written cannot be told from a read by its prefix: allowed, not called
        ("import unittest\nclass T(unittest.TestCase):\n    def setUp(self):\n        ", "self.total = 0\n", True),
        ("import unittest\nclass T(unittest.TestCase):\n    @classmethod\n    def setUpClass(cls):\n        ", "cls.assertEqaul(1, 1)\n", False),
        ("import numpy as np\na = np.zeros(3)\n", "a.mean(axes=0)\n", False),
        ("import numpy as np\na = np.zeros(3)\n", "a.mean(keepdims=True)\n", True),
    ],
)
def test_completions_reject_what_the_checker_rejects(explainer, prefix, text, accepted):
    assert explainer.explain(prefix, text)["accepted"] is accepted


_CONNECTION = "import http.client\nc = http.client.HTTPConnection('example.invalid')\n"
_DATE = "import datetime\nd = datetime.date.today()\n"


@pytest.mark.parametrize(
    ("prefix", "text", "accepted"),
    [
        (_CONNECTION, "c.tag = 1\n", True),
        (_CONNECTION, "c.tag=1\n", True),
        (_CONNECTION, "c.tag == 1\n", False),  # a comparison reads it
        (_CONNECTION, "c.tag += 1\n", False),
        (_CONNECTION, "c.tag(1)\n", False),
        (_CONNECTION, "print(c.tag)\n", False),  # not a statement start: a read
        (_DATE, "d.tag = 1\n", False),  # no instance __dict__: the assignment fails
    ],
)
def test_a_new_attribute_may_be_assigned_where_a_statement_starts(explainer, prefix, text, accepted):
    """Before the cursor nothing says a name is new; at the start of a statement, on an
    instance whose class keeps an instance ``__dict__``, an assignment may create it.
    The reference is running the document: accepted ones run, rejected ones raise
    AttributeError."""
    verdict = explainer.explain(prefix, text)
    assert verdict["accepted"] is accepted, verdict["reason"]
    if not accepted:
        assert "tag" in verdict["reason"]
    namespace: dict = {}
    if accepted:
        exec(prefix + text, namespace)  # noqa: S102 - the reference: run it
    else:
        with pytest.raises(AttributeError):
            exec(prefix + text, namespace)  # noqa: S102


_GROWING = "import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        "


def test_a_class_still_being_written_may_call_helpers_it_will_define(explainer):
    """At the end of a class (nothing after it in the document), ``self.read_helper(``
    may be a method written next: accepted; a misspelling of a name the class has is
    still rejected.  Once the class is closed by what follows it, a name it lacks is
    rejected when called: running it raises AttributeError (the reference)."""
    assert explainer.explain(_GROWING, "self.read_helper(1)\n")["accepted"]
    assert not explainer.explain(_GROWING, "self.assertEqaul(1, 1)\n")["accepted"]
    assert not explainer.explain(_GROWING, "self.assertequal(1, 1)\n")["accepted"]
    closed_suffix = "\n\nclass U:\n    pass\n"
    assert not explainer.explain(_GROWING, "self.read_helper(1)\n", closed_suffix)["accepted"]
    assert explainer.explain(_GROWING, "self.read_helper(1)\n", "\n    def read_helper(self, x):\n        pass\n" + closed_suffix)["accepted"]
    namespace: dict = {}
    exec(_GROWING + "self.read_helper(1)\n" + closed_suffix, namespace)  # noqa: S102 - the reference: run it
    with pytest.raises(AttributeError):
        namespace["T"]("test_a").test_a()


def test_an_import_continued_by_a_backslash_is_one_statement(explainer):
    """``from scipy.optimize._trustregion_constr.projections \\`` + newline + ``import
    projections`` (SciPy's tests): the name is looked up in that module."""
    import scipy.optimize._trustregion_constr.projections as module

    prefix = "from scipy.optimize._trustregion_constr.projections \\\n    "
    assert hasattr(module, "projections") and not hasattr(module, "projectionz")
    assert explainer.explain(prefix, "import projections\n")["accepted"]
    assert not explainer.explain(prefix, "import projectionz\n")["accepted"]



PROJECT = {
    "inventory/__init__.py": "from .stock import Stock\n",
    "inventory/base.py": "class Base:\n    kind = 'base'\n\n    def describe(self):\n        return self.kind\n",
    "inventory/stock.py": (
        "import collections\nfrom .base import Base\n\n\nclass Stock(Base):\n    def __init__(self, items=()):\n"
        "        self.items = list(items)\n\n    def add(self, item):\n        self.items.append(item)\n\n\n"
        "class Bag(collections.UserDict):\n    def total(self):\n        return len(self.data)\n\n\n"
        "class Loose:\n    def __getattr__(self, name):\n        return lambda *a: None\n\n\n"
        "class Slotted:\n    __slots__ = ('x',)\n\n    def __init__(self):\n        self.x = 1\n"
    ),
    "use.py": (
        "from inventory import Stock\nfrom inventory.stock import Bag, Loose, Slotted\n\n\n"
        "def refill(stock: Stock, bag: Bag, loose: Loose, slotted: Slotted):\n"
        "    stock.add(1)\n    stock.describe()\n    stock.items.append(2)\n    bag.total()\n    bag.keys()\n"
        "    loose.anything()\n    slotted.x\n    {calls}\n\n\nrefill(Stock(), Bag(), Loose(), Slotted())\n"
    ),
}


@pytest.mark.parametrize("call, name", [("stock.close()", "stock.close"), ("bag.nope()", "bag.nope"), ("slotted.y", "slotted.y"), ("pass", None)])
def test_the_projects_own_classes_are_read_from_source_in_a_trusted_workspace(tmp_path, call, name):
    from adaptrack_lsp.apis.jedi_index import JediIndex

    for relative, text in PROJECT.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("{calls}", call))
    code = (tmp_path / "use.py").read_text()
    ran = subprocess.run([sys.executable, "use.py"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (ran.returncode == 0) == (name is None), ran.stderr  # the reference
    trusted = JediIndex(python=sys.executable, workspace=str(tmp_path), trusted_workspace=True, timeout_s=60, cache_dir=None)
    untrusted = JediIndex(python=sys.executable, workspace=str(tmp_path), trusted_workspace=False, timeout_s=60, cache_dir=None)
    try:
        found = [f.name for f in Checker(trusted).check(code, local_modules={"inventory"}).findings]
        assert found == ([name] if name else []), found
        assert Checker(untrusted).check(code, local_modules={"inventory"}).findings == []  # never read untrusted
    finally:
        trusted.close()
        untrusted.close()


def test_an_edited_project_file_is_read_again(tmp_path):
    from adaptrack_lsp.apis.jedi_index import JediIndex

    (tmp_path / "shop.py").write_text("class Stock:\n    def add(self):\n        pass\n")
    index = JediIndex(python=sys.executable, workspace=str(tmp_path), trusted_workspace=True, timeout_s=60, cache_dir=None)
    try:
        assert "close" not in index.members(("shop", "Stock", CALL))
        import os
        import time

        (tmp_path / "shop.py").write_text("class Stock:\n    def add(self):\n        pass\n\n    def close(self):\n        pass\n")
        later = time.time() + 5
        os.utime(tmp_path / "shop.py", (later, later))
        assert "close" in index.members(("shop", "Stock", CALL))
    finally:
        index.close()


_HELPER = "import http.client\n\n\ndef make():\n    conn = http.client.HTTPConnection('example.invalid')\n    conn.fakedata = b''\n    return conn\n"
_CONFTEST = "import http.client\n\n\ndef client():\n    made = http.client.HTTPConnection('example.invalid')\n    made.recorded = []\n    return made\n"
_USER = "import http.client\nfrom helper import make\n\n\ndef use(conn: http.client.HTTPConnection):\n    "


def test_names_the_files_a_document_leans_on_assign_are_accepted(tmp_path, explainer, checker):
    """A helper module beside the document (``from helper import make``) and a pytest
    conftest.py above it set attributes on the objects they make: those names are not
    rejected on a typed receiver, in completions and in `check`; a name no file assigns
    still is.  Reference: running the code."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "conftest.py").write_text(_CONFTEST)
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "helper.py").write_text(_HELPER)
    document = tests / "test_use.py"
    # the reference: each object, made where it is made, has its name; no object has "nothing"
    for name, maker, error in (("fakedata", "make()", ""), ("recorded", "conftest.client()", ""), ("nothing", "make()", "AttributeError")):
        code = f"{_USER}conn.{name}\n\n\nimport conftest\nuse({maker})\n"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tests,
                              env={"PYTHONPATH": f"{tests}:{tmp_path}", "PATH": ""})
        assert (error in done.stderr) if error else done.returncode == 0, done.stderr
    for name, accepted in (("fakedata", True), ("recorded", True), ("nothing", False)):
        assert explainer.explain(_USER, f"conn.{name}\n", path=str(document))["accepted"] is accepted, name
        found = [f.name for f in checker.check(_USER + f"conn.{name}\n", path=str(document), local_modules=["helper"]).findings]
        assert found == ([] if accepted else [f"conn.{name}"]), found
    # without the file the names are unknown: rejected (the files are what accepts them)
    assert not explainer.explain(_USER, "conn.fakedata\n")["accepted"]
    assert [f.name for f in checker.check(_USER + "conn.fakedata\n", local_modules=["helper"]).findings] == ["conn.fakedata"]


def test_self_of_a_class_made_inside_a_function_may_get_names_later(explainer):
    """A class defined in a function (``def fakehttp(): class FakeHTTPConnection(
    http.client.HTTPConnection)``, the standard library's tests) is read like one at
    module level: at its end its ``self`` may read an attribute assigned after it; a
    misspelled call of a name it has is still rejected."""
    prefix = "import http.client\n\n\ndef fakehttp(data):\n    class Fake(http.client.HTTPConnection):\n        def connect(self):\n            "
    assert explainer.explain(prefix, "print(self.fakedata)\n")["accepted"]
    assert not explainer.explain(prefix, "self.conect()\n")["accepted"]
    assert explainer.explain(prefix, "self.connect()\n")["accepted"]


def test_files_a_document_leans_on_are_looked_up_again(tmp_path, monkeypatch):
    """The files found for a document are kept for `STATUS_SECONDS` (typing asks on every
    keystroke); past it a new conftest.py is found, and an edited helper is read again."""
    from adaptrack_lsp import timed_cache
    from adaptrack_lsp.apis import project_attributes
    from adaptrack_lsp.apis.document import DocumentAnalysis

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "helper.py").write_text("def make(c):\n    c.first = 1\n")
    document = tmp_path / "test_use.py"
    analysis = DocumentAnalysis.parse("from helper import make\n")
    assert project_attributes.assigned_beside(document, analysis) == {"first"}
    (tmp_path / "conftest.py").write_text("def client(c):\n    c.second = 2\n")
    (tmp_path / "helper.py").write_text("def make(c):\n    c.first_renamed = 1\n")
    monkeypatch.setattr(timed_cache, "STATUS_SECONDS", 0.0)
    assert project_attributes.assigned_beside(document, analysis) == {"first_renamed", "second"}


def _reachable_definitions(node, byte_offset: int, found: list) -> None:
    """Every definition starting before the cursor that the scopes may consider: the
    walk into every statement that can hold one, pruned nowhere (the reference)."""
    from adaptrack_lsp.apis.receivers import _DEFINITIONS, _HOLDS_DEFINITIONS

    for child in node.children:
        if child.start_byte >= byte_offset:
            break
        if child.type in _DEFINITIONS:
            found.append(child)
        if child.type in _HOLDS_DEFINITIONS:
            _reachable_definitions(child, byte_offset, found)


@pytest.mark.parametrize("module", ["argparse", "dataclasses", "json.decoder", "asyncio.base_events", "unittest.case"])
def test_the_definitions_walked_for_the_cursors_scopes_are_every_one_that_encloses_it(module):
    """`_definitions` walks only into the statements that may still be open at the
    cursor; the definitions enclosing it (`_encloses`) are those of the unpruned walk, at
    random cursors of real modules: whole, cut at the cursor (the text being typed), and
    cut with a line begun after it at various indentations."""
    import importlib
    import random

    from adaptrack_lsp.apis.document import DocumentAnalysis
    from adaptrack_lsp.apis.receivers import _definitions, _encloses

    text = open(importlib.import_module(module).__file__, encoding="utf-8").read()
    rng = random.Random(module)
    for _ in range(30):
        offset = rng.randrange(len(text) + 1)
        begun = text[:offset] + "\n" + " " * rng.choice([0, 4, 8, 12]) + "x"
        for document, cursor in ((text, offset), (text[:offset], offset), (begun, len(begun))):
            analysis = DocumentAnalysis.parse(document)
            at = analysis.byte_offset(cursor)
            walked, every = [], []
            _definitions(analysis.tree.root_node, at, walked)
            _reachable_definitions(analysis.tree.root_node, at, every)
            assert {d.byte_range for d in walked} <= {d.byte_range for d in every}
            enclosing = {d.byte_range for d in walked if _encloses(analysis.data, d, at)}
            assert enclosing == {d.byte_range for d in every if _encloses(analysis.data, d, at)}, (module, cursor)


def test_the_module_bindings_are_read_once_per_text(monkeypatch):
    """The typed receivers at every cursor and the typed ``self`` of the document's
    classes share one reading of the module's bindings, kept with the document's other
    facts (it is the part that grows with the document: every keystroke paid it twice)."""
    from adaptrack_lsp.apis import receivers
    from adaptrack_lsp.apis.document import DocumentAnalysis

    reads = []
    collected = receivers._collected_module
    monkeypatch.setattr(receivers, "_collected_module", lambda tree: reads.append(tree) or collected(tree))
    text = "import numpy as np\nfrom sklearn.base import BaseEstimator\n\na = np.zeros(3)\n\nclass M(BaseEstimator):\n    def f(self):\n        b = a.copy()\n        return b\n"
    analysis = DocumentAnalysis.parse(text)
    roots = analysis.roots
    inside = text.index("return b")
    assert receivers.receivers_at(analysis, inside, roots) == {
        "a": ("numpy", "zeros", CALL), "b": ("numpy", "zeros", CALL, "copy", CALL), "self": ("sklearn", "base", "BaseEstimator", CALL)
    }
    assert receivers.receivers_at(analysis, len(text), roots) == {"a": ("numpy", "zeros", CALL)}
    assert ("sklearn", "base", "BaseEstimator", CALL) in receivers.assigned_names(analysis, roots).open_paths
    assert len(reads) == 1
    # a new text: read again
    receivers.receivers_at(DocumentAnalysis.parse(text + "c = a\n"), len(text), roots)
    assert len(reads) == 2


@pytest.mark.parametrize(
    "line, star",
    [
        ("from os.path import *", True),
        ("from os.path import  *", True),
        ("total = reimport * 2", False),
        ("total = éimport * 2", False),  # an identifier that ends in "import"
        ("total = _import * 2", False),
    ],
)
def test_a_builtin_class_is_typed_unless_a_star_import_may_shadow_it(line, star):
    from adaptrack_lsp.apis.document import DocumentAnalysis
    from adaptrack_lsp.apis.receivers import receivers_at

    text = f"{line}\ns = set()\n"
    expected = {} if star else {"s": ("builtins", "set", CALL)}
    assert receivers_at(DocumentAnalysis.parse(text), len(text), {}) == expected
