"""Uses that the standard library's, NumPy's and SciPy's test suites make and that run
here (benchmarks/check.py, section c): the checker reports none of them.  The
reference is the interpreter: each document runs without error.  Beside them, uses
that still fail are still reported, so the rules behind these cases stay narrow."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import pytest

from adaptrack_lsp.apis import introspect_worker
from adaptrack_lsp.checking.checker import Checker

from api_index_support import venv_index


@pytest.fixture(scope="module")
def checker():
    return Checker(venv_index())


def run_code(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


RUNNING = {
    # a class's metaclass members, read on the class (ABCMeta.register)
    "abc register": "import collections.abc\nclass S:\n    pass\ncollections.abc.Sequence.register(S)\n",
    "numbers register": "import numbers\nclass R:\n    pass\nnumbers.Rational.register(R)\n",
    "numpy abc register": "from numpy.random.bit_generator import ISeedSequence\nclass Q:\n    pass\nISeedSequence.register(Q)\n",
    # the private members a C object has
    "ufunc internals": "import numpy as np\nf = np.negative._get_strided_loop\n",
    # frozen modules, in no folder of sys.path
    "frozen modules": "import _frozen_importlib\nimport _frozen_importlib_external\n",
    # a module whose __getattr__ serves any name
    "module getattr": "import test.test_module.good_getattr as gga\nprint(gga.whatever)\n",
    # a class whose Python __new__ makes one of its subclasses
    "lti new": "from scipy import signal\nsystem = signal.lti([1], [1, 2])\nprint(system.num, system.den)\n",
    "statespace new": "from scipy import signal\ns = signal.StateSpace([[1]], [[1]], [[1]], [[1]])\ns.to_discrete(0.1)\n",
    # a Python function whose declared ndarray is the subclass it was given
    "expand_dims subclass": "import numpy as np\na = np.ma.array([1, 2], mask=[0, 1])\nb = np.expand_dims(a, 0)\nprint(b.mask)\n",
    # overloads that return different types: no call-free pick of one
    "randn overloads": "import numpy as np\nrng = np.random.RandomState(1)\nrng.randn(3).astype(int)\nnp.random.randn(2).astype(int)\n",
    # a declared Message that is an EmailMessage
    "email policy": (
        "import email\nfrom email import policy\n"
        "msg = email.message_from_bytes(b'Subject: x\\n\\nbody\\n', policy=policy.default)\nprint(msg.get_content())\n"
    ),
    # jedi infers a class and an instance for the result: several kinds of value
    "several inferred kinds": "import numpy as np\nfrom scipy import ndimage\nd = ndimage.binary_dilation(np.ones((3, 3)))\nd.view(np.uint8)\n",
    # a stub's typing.IO stands for a class that does not derive from it (ZipExtFile)
    "typing stand-in": (
        "import io, zipfile\nbuffer = io.BytesIO()\nwith zipfile.ZipFile(buffer, 'w') as z:\n    z.writestr('a', b'x')\n"
        "with zipfile.ZipFile(buffer) as z:\n    with z.open('a') as opened:\n        opened.read1(1)\n"
    ),
    # attributes another class sets with computed names on the instance it is handed
    "configparser converters": (
        "import configparser, decimal\nparser = configparser.ConfigParser(converters={'decimal': decimal.Decimal})\n"
        "parser.read_string('[s]\\no = 1.5\\n')\nprint(parser.getdecimal('s', 'o'))\n"
    ),
    # the first parameter of a function a decorator wraps is not the instance
    "decorated test function": """
import unittest
def with_list(function):
    def run(self):
        function([])
    return run
class T(unittest.TestCase):
    @with_list
    def test_a(output):
        output.append(1)
T('test_a').test_a()
""",
    # self of a test base whose subclass in the document binds the name
    "class attribute of a subclass": """
import io, unittest
class Base(unittest.TestCase):
    def check(self):
        return self.BytesIO(b"x")
class CTest(Base):
    BytesIO = io.BytesIO
    def test_a(self):
        self.check()
CTest('test_a').test_a()
""",
    # the document sets attributes of computed names on its classes
    "computed setattr": """
import io, unittest
class Base(unittest.TestCase):
    def test_a(self):
        self.StringIO("x")
for name in ["StringIO"]:
    setattr(Base, name, getattr(io, name))
Base('test_a').test_a()
""",
    # a name a class body imports
    "class-level import": """
import unittest
class T(unittest.TestCase):
    from test.support import check_syntax_error
    def test_a(self):
        self.check_syntax_error("1 +")
T('test_a').test_a()
""",
    # a value read from self: the document's class overrides the library's class attribute
    "value read from self": """
import cProfile
from test.test_profile import ProfileTest
class CTest(ProfileTest):
    profilerclass = cProfile.Profile
    def test_a(self):
        prof = self.profilerclass()
        prof.enable()
        prof.disable()
CTest('test_a').test_a()
""",
}


@pytest.mark.parametrize("code", list(RUNNING.values()), ids=list(RUNNING))
def test_uses_that_run_here_are_not_reported(checker, code):
    ran = run_code(code)
    assert ran.returncode == 0, ran.stderr
    found = checker.check(textwrap.dedent(code)).findings
    assert [(f.kind, f.name, f.message) for f in found] == []


FAILING = {
    # what a class's metaclass offers is not its instances'
    "instance lacks metaclass member": ("import fractions\nfractions.Fraction(1, 2).register\n", "fractions.Fraction(1,2).register"),
    # no subclass of lti has this
    "lti lacks": ("from scipy import signal\nsystem = signal.lti([1], [1, 2])\nsystem.no_such_member\n", "system.no_such_member"),
    # a C function's documented class is exact
    "zeros exact": ("import numpy as np\nnp.zeros(3).ptp()\n", "np.zeros(3).ptp"),
}


@pytest.mark.parametrize(("code", "name"), list(FAILING.values()), ids=list(FAILING))
def test_uses_that_fail_here_are_still_reported(checker, code, name):
    ran = run_code(code)
    assert ran.returncode != 0 and "AttributeError" in ran.stderr.splitlines()[-1], ran.stderr
    found = checker.check(code).findings
    assert [f.name for f in found] == [name]


def test_the_worker_rules_agree_with_the_runtime():
    import collections.abc

    from scipy import signal

    # metaclass names are read on the class: each one that is listed works there
    names = introspect_worker.metaclass_names(collections.abc.Sequence)
    assert "register" in names and hasattr(collections.abc.Sequence, "register")
    # frozen modules import, and are listed at the top level
    frozen = introspect_worker.frozen_modules()
    assert {"_frozen_importlib", "_frozen_importlib_external"} <= frozen
    for name in frozen:
        importlib.import_module(name)
    # a module __getattr__ that returns for any name, against NumPy's that refuses
    good = importlib.import_module("test.test_module.good_getattr")
    assert introspect_worker.serves_any_name(good) and good.anything_at_all
    import numpy

    assert not introspect_worker.serves_any_name(numpy) and not hasattr(numpy, introspect_worker._UNLIKELY_NAME)
    # exactness, against what the calls make
    assert not introspect_worker.made_exactly(signal.lti) and type(signal.lti([1], [1, 2])) is not signal.lti
    assert introspect_worker.made_exactly(numpy.zeros) and type(numpy.zeros(2)) is numpy.ndarray
    assert introspect_worker.made_exactly(collections.OrderedDict)
    masked = numpy.ma.array([1])
    assert not introspect_worker.made_exactly(numpy.expand_dims) and type(numpy.expand_dims(masked, 0)) is not numpy.ndarray
