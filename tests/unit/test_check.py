"""The checker of existing code on the packages installed here (numpy 2, the standard
library), each verdict held against running the code: every finding's statement raises
in this environment, and every file the checker passes runs without error."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from adaptrack_lsp.checking.checker import Checker

from api_index_support import venv_index


@pytest.fixture(scope="module")
def checker():
    return Checker(venv_index())


def run_code(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def findings(checker, code: str, **kwargs):
    return checker.check(textwrap.dedent(code), **kwargs).findings


# Each case: the document, the line that fails, the kind, the name as written.  The
# reference is the interpreter: the document up to that line runs, the line raises.
FAILING = [
    # (document, kind, name as written, error raised, the flagged text)
    ("import numpy as np\nx = np.float_(1.0)\n", "attribute", "np.float_", "AttributeError", "float_"),
    ("import numpy as np\nx = np.product([1, 2])\n", "attribute", "np.product", "AttributeError", "product"),
    ("import numpy as np\nx = np.in1d([1], [1])\n", "attribute", "np.in1d", "AttributeError", "in1d"),
    ("import numpy as np\na = np.zeros(3)\nb = a.ptp()\n", "receiver", "a.ptp", "AttributeError", "ptp"),
    ("import numpy as np\nb = np.zeros(3).ptp()\n", "receiver", "np.zeros(3).ptp", "AttributeError", "ptp"),
    ("import numpy as np\ndef f(a: np.ndarray):\n    return a.newbyteorder()\nf(np.zeros(2))\n", "receiver", "a.newbyteorder", "AttributeError", "newbyteorder"),
    ("import numpy as np\nh = np.histogram([1, 2], normed=True)\n", "keyword", "np.histogram(normed=)", "TypeError", "normed"),
    ("from numpy import trapz\n", "import", "numpy.trapz", "ImportError", "trapz"),
    ("import numpy.no_such_module\n", "import", "numpy.no_such_module", "ModuleNotFoundError", "numpy.no_such_module"),
    ("import no_such_top_level_module_xyz\n", "import", "no_such_top_level_module_xyz", "ModuleNotFoundError", "no_such_top_level_module_xyz"),
    ("import inspect\nspec = inspect.getargspec(len)\n", "attribute", "inspect.getargspec", "AttributeError", "getargspec"),
    ("import os\np = os.path.joinn('a', 'b')\n", "attribute", "os.path.joinn", "AttributeError", "joinn"),
    ("import numpy as np\nn = np.linalg.nrm(np.zeros(2))\n", "attribute", "np.linalg.nrm", "AttributeError", "nrm"),
    ("from numpy import linalg\nn = linalg.nrm([1.0])\n", "attribute", "linalg.nrm", "AttributeError", "nrm"),
]


@pytest.mark.parametrize(("code", "kind", "name", "error", "flagged"), FAILING, ids=[case[2] for case in FAILING])
def test_each_finding_is_a_statement_that_fails_here(checker, code, kind, name, error, flagged):
    found = findings(checker, code)
    assert [(f.kind, f.name) for f in found] == [(kind, name)]
    finding = found[0]
    lines = code.splitlines()
    # the reference: the document raises, and its innermost frame is the flagged line
    ran = run_code(code)
    assert ran.returncode != 0 and ran.stderr.splitlines()[-1].startswith(error), ran.stderr
    frames = re.findall(r'File "<string>", line (\d+)', ran.stderr)
    assert frames and int(frames[-1]) == finding.line, ran.stderr
    # the range is the flagged text, in characters and in line/column terms alike
    assert code[finding.start : finding.end] == flagged
    assert lines[finding.line - 1][finding.column - 1 : finding.end_column - 1] == flagged


def test_messages_name_the_version_that_lacks_the_name(checker):
    import numpy

    (finding,) = findings(checker, "import numpy as np\nx = np.product([1])\n")
    assert finding.message == f"np.product does not exist in numpy {numpy.__version__}"
    assert finding.targets == (f"numpy {numpy.__version__}",)
    (keyword,) = findings(checker, "import numpy as np\nnp.histogram([1], normed=True)\n")
    assert keyword.message.startswith(f"np.histogram takes no keyword normed in numpy {numpy.__version__} (parameters: a, bins")
    (receiver,) = findings(checker, "import numpy as np\na = np.zeros(3)\na.ptp()\n")
    assert receiver.message == f"a.ptp does not exist in numpy {numpy.__version__} (a is what np.zeros() returns)"


# Correct code the checker must leave alone: each file RUNS here (the reference), and
# most name an API that does not exist, in a way written to span versions.
PASSING = {
    "try_import_shim": """
        try:
            from numpy import trapezoid
        except ImportError:
            from numpy import trapz as trapezoid
        """,
    "try_attribute_shim": """
        import numpy as np
        try:
            product = np.product
        except AttributeError:
            product = np.prod
        """,
    "hasattr_guard": """
        import numpy as np
        if hasattr(np, "float_"):
            x = np.float_(1)
        else:
            x = np.float64(1)
        y = np.float_ if hasattr(np, "float_") else np.float64
        z = hasattr(np, "in1d") and np.in1d([1], [1])
        """,
    "version_guard": """
        import sys
        import numpy as np
        if np.__version__.startswith("1."):
            p = np.product([1])
        if sys.version_info < (3, 0):
            import cPickle
        """,
    "early_return_guard": """
        import numpy as np
        def total(values):
            if not hasattr(np, "product"):
                return np.prod(values)
            return np.product(values)
        total([1, 2])
        """,
    "type_checking": """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from numpy import no_such_type_only_name
        """,
    "alias_from_two_imports": """
        def norm_of(values):
            from numpy import linalg as la
            return la.norm(values)
        import os.path as la
        j = la.join("a", "b")
        n = norm_of([1.0])
        """,
    "submodule_loaded_by_another_import": """
        import urllib.request
        error = urllib.error.URLError
        """,
    "internals_and_module_state": """
        import ctypes
        import numpy as np
        loop = np.negative._resolve_dtypes_and_context
        function = ctypes.pythonapi.PyBytes_FromFormat
        """,
    "expected_to_fail_in_a_call": """
        import unittest
        from collections import Counter
        unittest.TestCase().assertRaises(NotImplementedError, Counter.fromkeys, "abc")
        """,
    "module_imported_under_a_guard": """
        import sys
        if sys.platform == "win32":
            import msvcrt
        def report_modes(old_modes):
            for mode in old_modes:  # only set on Windows
                msvcrt.CrtSetReportMode(msvcrt.CRT_WARN, mode)
        report_modes([])
        try:
            import no_such_accelerator as fast
        except ImportError:
            fast = None
        def speed():
            return fast.turbo() if fast is not None else 1
        speed()
        """,
    "typing_annotations": """
        from typing import Any, Optional
        import numpy as np
        def f(obj: Any, arr: Optional[np.ndarray] = None):
            return obj.items(), arr
        f({})
        """,
    "getattr_default": """
        import numpy as np
        f = getattr(np, "float_", np.float64)
        """,
    "assigned_on_module": """
        import numpy as np
        np.float_ = np.float64
        x = np.float_(1.0)
        """,
    "alias_rebound": """
        import numpy as np
        class Fake:
            float_ = float
        np = Fake()
        x = np.float_(1.0)
        """,
    "unknown_receiver": """
        import numpy as np
        def f(a):
            return a.ptp()
        class P:
            def ptp(self):
                return 0
        f(P())
        """,
    "dunders_and_real_members": """
        import numpy as np
        import os.path
        v = np.__version__
        n = np.linalg.norm(np.zeros(2)) + np.zeros(3).sum()
        j = os.path.join("a", "b")
        h = np.histogram([1, 2], density=True)
        """,
    "postponed_annotations": """
        from __future__ import annotations
        import numpy as np
        def f(x: np.float_) -> np.float_:
            return x
        """,
    "suppress": """
        import contextlib
        import numpy as np
        with contextlib.suppress(AttributeError):
            np.float_(1)
        """,
    "expected_failures": """
        import warnings
        import numpy as np
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
        try:
            np.float_
        except AttributeError:
            pass
        """,
    "skip_marker": """
        import unittest
        import numpy as np
        class T(unittest.TestCase):
            @unittest.skipUnless(hasattr(np, "float_"), "NumPy 1 only")
            def test_old(self):
                np.float_(1)
        unittest.main(argv=["t"], exit=False)
        """,
    "platform_and_while": """
        import sys
        if sys.platform == "win32":
            import winreg
            winreg.HKEY_CURRENT_USER
        import numpy as np
        while not hasattr(np, "float_"):
            break
        """,
    "asserted_guard": """
        import os
        import unittest
        def flags(path):
            st = os.stat(path)
            assert hasattr(st, "st_flags"), "BSD and macOS only"
            return st.st_flags
        class T(unittest.TestCase):
            def test_flags(self):
                st = os.stat(".")
                self.assertTrue(hasattr(st, "st_flags"))
                st.st_flags
        try:
            flags(".")
        except AssertionError:
            pass
        unittest.main(argv=["t"], exit=False)
        """,
    "relative_and_star_imports_in_a_function": """
        def later():
            from . import sibling
            from .pkg import thing
        from os.path import *
        """,
}


@pytest.mark.parametrize("name", sorted(PASSING))
def test_correct_code_that_spans_versions_is_not_reported(checker, name):
    code = textwrap.dedent(PASSING[name])
    ran = run_code(code)
    assert ran.returncode == 0, ran.stderr  # the reference: it runs here
    assert findings(checker, code) == []


def test_uses_inside_expected_failures_are_not_reported(checker):
    code = textwrap.dedent("""
        import numpy as np
        import pytest
        def test_removed():
            with pytest.raises(AttributeError):
                np.float_(1)
            with pytest.warns(DeprecationWarning):
                np.product([1])
        """)
    assert findings(checker, code) == []
    # the same uses outside the guard are reported
    assert [f.name for f in findings(checker, code.replace("with pytest.raises(AttributeError):", "if True:"))] == ["np.float_"]


def test_the_projects_own_modules_are_not_checked(checker, tmp_path):
    (tmp_path / "helper.py").write_text("def thing():\n    return 1\n")
    code = "import helper\nfrom helper import thing, missing_name\n"
    assert findings(checker, code, local_modules=frozenset({"helper"})) == []
    # not the project's: not installed, in both statements
    assert [f.name for f in findings(checker, code)] == ["helper", "helper"]


def test_a_file_that_does_not_parse_is_checked_where_it_parses(checker):
    code = "import numpy as np\nx = np.float_(1)\ndef broken(:\n    pass\ny = np.product([1])\n"
    result = checker.check(code)
    assert [f.name for f in result.findings] == ["np.float_", "np.product"]
    assert result.unparsed and result.unparsed[0][0] == 3 and "not checked" in result.unparsed[0][2]


def test_a_use_is_reported_once(checker):
    # np.product is missing: what follows it cannot be checked, and is not reported again
    code = "import numpy as np\nx = np.product.something.deeper([1])\n"
    assert [f.name for f in findings(checker, code)] == ["np.product"]


def test_unicode_columns_are_characters(checker):
    code = "import numpy as np\nμ = 'é'; x = np.float_(1)\n"
    (finding,) = findings(checker, code)
    assert code.splitlines()[1][finding.column - 1 : finding.end_column - 1] == "float_"
    assert code[finding.start : finding.end] == "float_"
