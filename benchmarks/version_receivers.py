"""Typed receivers and import statements: false rejections over real code, and the
share of removed APIs caught.

Two measures (the `receivers` section of benchmarks/versions.py; also runnable alone):

1. **False rejections over corpora.**  In every file of the standard library's test
   suite, NumPy's and SciPy's test suites and this project's tests/, each attribute
   access on a typed receiver (a name `apis.receivers` types at that point: ``a =
   np.zeros(3)`` … ``a.sum``, ``with open(p) as fh`` … ``fh.read``, ``self`` in a
   ``unittest.TestCase`` subclass, ``x = []`` …), the keyword names of a method called
   on one (``a.mean(axis=0)``) and each import statement is checked as a completion
   would be, with the code before it as the document (`Explainer`, the server
   interpreter, runtime introspection).  A test suite also holds code for other
   platforms and versions, guarded where it runs (``import _winapi``, ``arr.tostring()``
   for NumPy 1), so each rejection is checked by running code: the import statement
   itself (ImportError: right); the receiver's class (no such attribute, and instances
   without a ``__dict__``: right); for ``self`` / ``cls``, the corpus file imported as its
   suite does, the class holding the line and every subclass then loaded (none has it,
   and no file of the suite defines the name: right); for a keyword, the method's
   signature (no such parameter, no ``**kwargs``) or a call on an instance (the
   unexpected-keyword TypeError).  What running code does not confirm counts as a false
   rejection; each is printed with its reason.
2. **Removed APIs caught.**  Methods and attributes the NumPy 2.0, pandas 2.0, SciPy 1.14
   and requests release notes and the "Removed" sections of Python 3.8–3.11's What's New
   remove, used through receivers whose type the document states or a library infers
   (``a = np.zeros(3)``, ``t = threading.Thread()``, ``r = requests.get(u)``).  Ground
   truth: the code is run in that version's environment (the server interpreter for
   NumPy, the standard library, SciPy and requests; pandas 2.2: a cached environment,
   `apis.environments`); only entries that raise AttributeError, ImportError or
   TypeError there count.  The share the constraint rejects is the catch rate; misses
   are counted by kind.

Last line: ``receivers_files=… receivers_checks=… receivers_false_rejections=…
receiver_keywords_checks=… receiver_keywords_false_rejections=… imports_checks=…
imports_false_rejections=… removed_cases=… removed_caught=…``.  ``--corpora`` picks
suites.  ``--smoke`` checks a few files and the NumPy and standard-library cases only
(no environment is built).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import sysconfig
import time
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

#: (library, source of the removal, setup code, expression): removed in the release the
#: source names (release notes, What's New "Removed" sections), on objects whose type the
#: setup states or a library infers; the library decides the environment of the ground truth
_NP = "import numpy as np\na = np.zeros(3)\n"
_DF = "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\n"
_SERIES = "import pandas as pd\ns = pd.Series([1, 2])\n"
_RESPONSE = "import requests\nr = requests.get('https://example.invalid')\n"
_SPARSE = "import scipy.sparse\nm = scipy.sparse.{}((2, 2))\n"
REMOVED = [
    ("numpy", "NumPy 2.0", _NP, "a.ptp()"),
    ("numpy", "NumPy 2.0", _NP, "a.itemset(0, 1.0)"),
    ("numpy", "NumPy 2.0", _NP, "a.newbyteorder()"),
    ("numpy", "NumPy 2.0", "import numpy as np\na = np.arange(3)\n", "a.tostring()"),
    ("numpy", "NumPy 2.0", "import numpy as np\ndef f(a: np.ndarray):\n    return ", "a.ptp()"),
    ("numpy", "NumPy 2.0", "import numpy as np\nrng = np.random.default_rng(0)\n", "rng.randint(3)"),
    ("numpy", "NumPy 2.0", "import numpy as np\n", "np.product([1, 2])"),
    ("numpy", "NumPy 2.0", "import numpy as np\n", "np.cumproduct([1, 2])"),
    ("numpy", "NumPy 2.0", "import numpy as np\n", "np.alltrue([True])"),
    ("numpy", "NumPy 2.0", "import numpy as np\n", "np.asfarray([1])"),
    ("numpy", "NumPy 2.0", "", "from numpy import product"),
    ("numpy", "NumPy 2.0", "", "from numpy import float_"),
    ("pandas", "pandas 2.0", _DF, "df.append({'a': 2}, ignore_index=True)"),
    ("pandas", "pandas 2.0", _DF, "df.iteritems()"),
    ("pandas", "pandas 2.0", _DF, "df.lookup([0], ['a'])"),
    ("pandas", "pandas 2.0", _DF, "df.mad()"),
    ("pandas", "pandas 2.0", _DF, "df.tshift(1)"),
    ("pandas", "pandas 2.0", _DF, "df.slice_shift(1)"),
    ("pandas", "pandas 2.0", _DF, "df.set_axis(['b'], axis=1, inplace=True)"),
    ("pandas", "pandas 2.0", _DF, "df.groupby('a').pad()"),
    ("pandas", "pandas 2.0", _SERIES, "s.append(s)"),
    ("pandas", "pandas 2.0", _SERIES, "s.iteritems()"),
    ("pandas", "pandas 2.0", _SERIES, "s.mad()"),
    ("pandas", "pandas 2.0", _SERIES, "s.is_monotonic"),
    ("pandas", "pandas 2.0", "import pandas as pd\ni = pd.Index([1, 2])\n", "i.is_monotonic"),
    ("pandas", "pandas 2.0", "import pandas as pd\ni = pd.Index([1, 2])\n", "i.is_mixed()"),
    ("pandas", "pandas 2.0", "import pandas as pd\nt = pd.Timestamp('2020-01-01')\n", "t.freq"),
    ("pandas", "pandas 2.0", "import pandas as pd\nc = pd.Categorical(['a'])\n", "c.set_categories(['a'], inplace=True)"),
    ("pandas", "pandas 2.0", "import pandas as pd\n", "pd.Int64Index([1])"),
    ("pandas", "pandas 2.0", "", "from pandas import Int64Index"),
    ("stdlib", "Python 3.8", "import xml.etree.ElementTree as ET\n", "ET.XMLParser(html=0)"),
    ("stdlib", "Python 3.8", "import fileinput\n", "fileinput.FileInput([], bufsize=0)"),
    ("stdlib", "Python 3.8", "import time\n", "time.clock()"),
    ("stdlib", "Python 3.8", "import platform\n", "platform.popen('ls')"),
    ("stdlib", "Python 3.8", "import cgi\n", "cgi.escape('<')"),
    ("stdlib", "Python 3.8", "import tarfile\n", "tarfile.filemode(0)"),
    ("stdlib", "Python 3.8", "import sys\n", "sys.set_coroutine_wrapper(None)"),
    ("stdlib", "Python 3.9", "import asyncio\n", "asyncio.Task.all_tasks()"),
    ("stdlib", "Python 3.9", "import base64\n", "base64.encodestring(b'')"),
    ("stdlib", "Python 3.9", "import sys\n", "sys.getcheckinterval()"),
    ("stdlib", "Python 3.9", "import plistlib\n", "plistlib.readPlist('x')"),
    ("stdlib", "Python 3.10", "import gettext\n", "gettext.bind_textdomain_codeset('x')"),
    ("stdlib", "Python 3.11", "import inspect\n", "inspect.getargspec(len)"),
    ("stdlib", "Python 3.11", "import asyncio\n", "asyncio.coroutine(len)"),
    ("stdlib", "Python 3.9", "import array\na = array.array('b', [1])\n", "a.tostring()"),
    ("stdlib", "Python 3.9", "import array\na = array.array('b')\n", "a.fromstring(b'x')"),
    ("stdlib", "Python 3.9", "import xml.etree.ElementTree as ET\ne = ET.Element('a')\n", "e.getchildren()"),
    ("stdlib", "Python 3.9", "import xml.etree.ElementTree as ET\ne = ET.Element('a')\n", "e.getiterator()"),
    ("stdlib", "Python 3.9", "import xml.etree.ElementTree as ET\nt = ET.ElementTree(ET.Element('a'))\n", "t.getiterator()"),
    ("stdlib", "Python 3.9", "import xml.etree.ElementTree as ET\nroot = ET.fromstring('<a/>')\n", "root.getchildren()"),
    ("stdlib", "Python 3.9", "import xml.etree.ElementTree as ET\np = ET.XMLParser()\n", "p.doctype('a', 'b', 'c')"),
    ("stdlib", "Python 3.9", "import threading\nt = threading.Thread()\n", "t.isAlive()"),
    ("stdlib", "Python 3.9", "import threading\nt = threading.current_thread()\n", "t.isAlive()"),
    ("stdlib", "Python 3.9", "import html.parser\np = html.parser.HTMLParser()\n", "p.unescape('&amp;')"),
    ("stdlib", "Python 3.10", "import html.parser\np = html.parser.HTMLParser()\n", "p.error('x')"),
    ("stdlib", "Python 3.11", "import gettext\nt = gettext.NullTranslations()\n", "t.lgettext('x')"),
    ("stdlib", "Python 3.11", "import gettext\nt = gettext.NullTranslations()\n", "t.lngettext('a', 'b', 1)"),
    ("stdlib", "Python 3.11", "import gettext\nt = gettext.NullTranslations()\n", "t.output_charset()"),
    ("stdlib", "Python 3.11", "import gettext\nt = gettext.NullTranslations()\n", "t.set_output_charset('utf-8')"),
    ("stdlib", "Python 3.11", "import inspect\nsig = inspect.signature(len)\n", "sig.from_function(len)"),
    ("stdlib", "Python 3.11", "import inspect\nsig = inspect.signature(len)\n", "sig.from_builtin(len)"),
    ("stdlib", "Python 3.11", "import random\nr = random.Random(0)\n", "r.shuffle([1, 2], random=r.random)"),
    ("requests", "requests 1.0", _RESPONSE, "r.error"),
    ("requests", "requests 1.0", _RESPONSE, "r.cached"),
    ("requests", "requests 1.0", _RESPONSE, "r.read()"),
    ("requests", "requests 1.0", "import requests\ns = requests.Session()\n", "s.config"),
    ("requests", "requests 1.0", "import requests\ns = requests.Session()\n", "s.prefetch"),
    ("requests", "requests 2.x (redirect cache)", "import requests\ns = requests.Session()\n", "s.redirect_cache"),
    ("requests", "requests 1.0", "import requests\nreq = requests.Request('GET', 'https://example.invalid')\n", "req.send()"),
    ("requests", "requests 1.0", "import requests\nreq = requests.Request('GET', 'https://example.invalid')\n", "req.response"),
    ("scipy", "SciPy 1.14", _SPARSE.format("csr_matrix"), "m.A"),
    ("scipy", "SciPy 1.14", _SPARSE.format("csr_matrix"), "m.H"),
    ("scipy", "SciPy 1.14", _SPARSE.format("csc_matrix"), "m.A"),
    ("scipy", "SciPy 1.14", _SPARSE.format("coo_matrix"), "m.H"),
    ("scipy", "SciPy 1.14", _SPARSE.format("lil_matrix"), "m.A"),
    ("scipy", "SciPy 1.14", _SPARSE.format("bsr_matrix"), "m.A"),
]
#: run before a case's ground truth: `requests.get` answers without the network with what
#: its source returns (a `requests.models.Response`)
_OFFLINE_REQUESTS = "import requests\nrequests.get = lambda *args, **kwargs: requests.models.Response()\n"
PANDAS = "pandas==2.2.3"


def _settings(python: str):
    from adaptrack_lsp.config import parse_settings

    settings, problems = parse_settings({"pythonPath": str(python)})
    if problems:
        raise SystemExit("; ".join(problems))
    return settings


def corpus_files(smoke: bool, corpora: tuple[str, ...] = ("stdlib", "numpy", "scipy", "tests")) -> list[tuple[str, Path]]:
    """(corpus, file) pairs: the standard library's tests, NumPy's and SciPy's test
    suites, tests/."""
    import numpy
    import scipy

    stdlib = Path(sysconfig.get_paths()["stdlib"]) / "test"
    groups = {
        "stdlib": sorted(stdlib.glob("test_*.py")),
        "numpy": sorted(Path(numpy.__file__).parent.rglob("tests/test_*.py")),
        "scipy": sorted(Path(scipy.__file__).parent.rglob("tests/test_*.py")),
        "tests": sorted((ROOT / "tests").rglob("test_*.py")),
    }
    per_group = 3 if smoke else 10**6
    return [(name, path) for name in corpora for path in groups[name][:per_group]]


def module_name(path: Path) -> tuple[str, str]:
    """(folder to put on sys.path, module name) to import a corpus file as its suite does."""
    for root in (Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])):
        try:
            relative = path.relative_to(root)
        except ValueError:
            continue
        return str(root), ".".join(relative.with_suffix("").parts)
    return str(path.parent), path.stem


def cut_points(text: str, roots: dict) -> tuple[list[int], list[tuple[int, int]]]:
    """Offsets of the dots after names (receiver candidates) and (start, end) of import
    statements, found with Python's own tokenizer (strings and comments never count)."""
    dots: list[int] = []
    imports: list[tuple[int, int]] = []
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position) -> int:
        return starts[position[0] - 1] + position[1]

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return [], []
    statement_start = True
    for i, token in enumerate(tokens):
        if token.type == tokenize.NAME and statement_start and token.string in ("import", "from"):
            end = next((t for t in tokens[i:] if t.type == tokenize.NEWLINE), None)
            if end is not None:
                imports.append((offset(token.start), offset(end.end)))
        if token.type == tokenize.OP and token.string == "." and i and tokens[i - 1].type == tokenize.NAME:
            before = tokens[i - 2] if i > 1 else None
            if not (before is not None and before.type == tokenize.OP and before.string == "."):
                dots.append(offset(token.start))
        statement_start = token.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL) or (
            token.type == tokenize.OP and token.string == ";"
        )
    return dots, imports


_CONFIRM_RECEIVER = """
import inspect, json, sys
sys.path.insert(0, sys.argv[1])
import introspect_worker as worker
path, name, hints, called = json.loads(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), sys.argv[5] == "call"
try:
    cls = worker.resolve_value_type(path, hints)
except Exception:
    print("unknown")
else:
    # gone for sure: not on the class and its instances keep no __dict__ to receive it;
    # io's file objects keep data only in theirs (a call of an unlisted name fails)
    data_only = cls.__module__ in worker.DATA_DICT_MODULES and called
    print("gone" if not hasattr(cls, name) and (not getattr(cls, "__dictoffset__", 0) or data_only) else "may exist")
"""

#: `self` / `cls` of a class of the corpus file: import the file as its suite does, find
#: the innermost class whose source holds the line; the name is gone when neither it nor
#: any subclass loaded then has it (instances: and no __dict__ entry is set by the
#: document, which the check already exempts)
_CONFIRM_SELF = """
import importlib, inspect, json, sys
folder, module_name, line, name = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sys.path.insert(0, folder)
try:
    module = importlib.import_module(module_name)
except BaseException as error:
    print("unknown: %s" % error)
    raise SystemExit(0)
found = []
def visit(cls, depth=0):
    try:
        lines, start = inspect.getsourcelines(cls)
    except Exception:
        return
    if start <= line < start + len(lines):
        found.append((start, cls))
    if depth < 3:
        for value in vars(cls).values():
            if isinstance(value, type) and value.__qualname__.startswith(cls.__qualname__ + "."):
                visit(value, depth + 1)
for value in list(vars(module).values()):
    if isinstance(value, type) and getattr(value, "__module__", None) == module.__name__:
        visit(value)
if not found:
    print("unknown: no class holds the line")
    raise SystemExit(0)
cls = max(found, key=lambda item: item[0])[1]
family, stack = [], [cls]
while stack:
    klass = stack.pop()
    family.append(klass)
    stack.extend(klass.__subclasses__())
print("gone" if not any(hasattr(klass, name) for klass in family) else "may exist")
"""

_CONFIRM_KEYWORD = """
import inspect, json, sys
sys.path.insert(0, sys.argv[1])
import introspect_worker as worker
path, method, keyword, hints = json.loads(sys.argv[2]), sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
try:
    cls = worker.resolve_value_type(path, hints)
    function = getattr(cls, method)
except Exception:
    print("unknown")
    raise SystemExit(0)
try:
    signature = inspect.signature(function)
except Exception:
    signature = None
if signature is not None and not any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
    print("gone" if keyword not in signature.parameters else "may exist")
    raise SystemExit(0)
instance = None
try:
    import numpy
    if issubclass(cls, numpy.ndarray):
        instance = numpy.zeros(2).view(cls)
except Exception:
    pass
if instance is None:
    try:
        instance = cls()
    except Exception:
        print("unknown: no instance to call")
        raise SystemExit(0)
try:
    getattr(instance, method)(**{keyword: None})
except TypeError as error:
    print("gone" if keyword in str(error) and ("unexpected" in str(error) or "invalid" in str(error)) else "may exist")
except Exception:
    print("may exist")
else:
    print("may exist")
"""


def _worker_folder() -> str:
    from adaptrack_lsp.apis import introspect_worker

    return str(Path(introspect_worker.__file__).parent)


def type_hints(index, path: tuple) -> dict[str, str]:
    """What jedi infers for each call of `path` (the hints the index gives the runtime)."""
    from adaptrack_lsp.apis.index import CALL, dotted

    hints = {}
    result_type = getattr(index, "_result_type", None)
    if result_type is None:
        return hints
    try:
        index._ensure_environment()
    except Exception:
        return hints
    for position, part in enumerate(path):
        if part == CALL and position:
            found = result_type(tuple(path[:position]))
            if found is not None:
                hints[dotted(path[:position])] = ".".join(found)
    return hints


def confirmed_receiver(path: tuple, name: str, hints: dict | None = None, called: bool = False) -> bool:
    """Whether running code says that an instance of `path`'s type cannot have `name`
    (the class lacks it and its instances have no ``__dict__``): then the rejection is
    right, whatever the corpus's code did (it runs under another version or platform)."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", _CONFIRM_RECEIVER, _worker_folder(), json.dumps(list(path)), name, json.dumps(hints or {}),
         "call" if called else "read"],
        capture_output=True, text=True, timeout=120,
    )
    return done.stdout.strip() == "gone"


def confirmed_self(file: Path, line: int, name: str) -> bool:
    """Whether running code says the class (and every subclass loaded with it) of the
    corpus file's line has no `name`, and no file of its suite defines it."""
    folder = file.parent
    pattern = re.compile(rf"(def\s+{re.escape(name)}\b|\b{re.escape(name)}\s*=|['\"]{re.escape(name)}['\"])")
    for other in folder.glob("*.py"):
        try:
            if pattern.search(other.read_text(encoding="utf-8", errors="replace")):
                return False  # a class of its suite defines it (a subclass may give it)
        except OSError:
            continue
    root, module = module_name(file)
    done = subprocess.run(
        [sys.executable, "-c", _CONFIRM_SELF, root, module, str(line), name],
        capture_output=True, text=True, timeout=300, cwd=str(file.parent),
    )
    return done.stdout.strip().splitlines()[-1:] == ["gone"]


def confirmed_keyword(path: tuple, method: str, keyword: str, hints: dict | None = None) -> bool:
    """Whether running code says the method does not take `keyword`: its signature has no
    such parameter and no ``**kwargs``, or a call on an instance raises the
    unexpected-keyword TypeError."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", _CONFIRM_KEYWORD, _worker_folder(), json.dumps(list(path)), method, keyword, json.dumps(hints or {})],
        capture_output=True, text=True, timeout=120,
    )
    return done.stdout.strip() == "gone"


def _call_end(text: str, start: int, limit: int = 600) -> int | None:
    """The offset after the ``)`` closing the call whose ``(`` is at `start`."""
    depth = 0
    for position in range(start, min(len(text), start + limit)):
        char = text[position]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return position + 1
    return None


def confirmed_import(statement: str, folder: Path) -> bool:
    """Whether running the import statement here (the file's folder on sys.path) fails
    with ImportError: then the rejection is right (a module of another platform, one a
    test creates while it runs, one not installed)."""
    code = f"import sys\nsys.path.insert(0, {str(folder)!r})\ntry:\n    {statement.strip()}\nexcept ImportError:\n    print('fails')\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(folder))
    return done.stdout.strip() == "fails"


def typed_names(text: str, roots: dict):
    """A quick test of whether the name at a character offset is typed there, by the
    checker's reading of the whole document (`receivers.DocumentScopes`): dots after
    names it does not type are not asked about at the cursor (where the completion's
    reading, `receiver_bindings`, decides)."""
    from adaptrack_lsp.apis.document import DocumentAnalysis
    from adaptrack_lsp.apis.receivers import DocumentScopes

    analysis = DocumentAnalysis.parse(text)
    source, tree = analysis.data, analysis.tree
    scopes = DocumentScopes(tree, roots, source)

    def typed(offset: int, name: str) -> bool:
        start = len(text[:offset].encode("utf-8", "surrogatepass"))
        node = tree.root_node.descendant_for_byte_range(start, start + len(name.encode()))
        if node is None or node.type != "identifier":
            return True  # not read here: let the cursor's reading decide
        return scopes.typed(node, name) is not None

    return typed


def false_rejections(smoke: bool, cuts_per_file: int, corpora: tuple[str, ...] = ("stdlib", "numpy", "scipy", "tests")) -> dict:
    from adaptrack_lsp.apis.imports import learn_roots
    from adaptrack_lsp.apis.receivers import receiver_bindings
    from adaptrack_lsp.checking.explainer import Explainer

    explainer = Explainer(_settings(sys.executable), ["api", "kwargs"], workspace_root=str(ROOT))
    found = {
        "files": 0, "receiver_checks": 0, "receiver_rejections": 0, "receiver_confirmed": 0,
        "keyword_checks": 0, "keyword_rejections": 0, "keyword_confirmed": 0,
        "import_checks": 0, "import_rejections": 0, "import_confirmed": 0,
    }
    per_corpus: dict[str, list[int]] = {}
    examples: list[str] = []
    files = corpus_files(smoke, corpora)
    try:
        from tqdm import tqdm

        for corpus, path in tqdm(files, desc="corpus files", unit="file", file=sys.stderr, disable=smoke):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if len(text) > 400_000:
                continue
            found["files"] += 1
            counts = per_corpus.setdefault(corpus, [0, 0, 0, 0])
            counts[0] += 1
            roots = learn_roots(text)
            dots, imports = cut_points(text, roots)
            is_typed = typed_names(text, roots)
            checked = keywords = 0
            for dot in dots:
                if checked >= cuts_per_file:
                    break
                name_start = dot
                while name_start and (text[name_start - 1].isalnum() or text[name_start - 1] == "_"):
                    name_start -= 1
                name = text[name_start:dot]
                if not is_typed(name_start, name):
                    continue  # not typed where it stands (the whole document's reading, quick)
                bound = receiver_bindings(text, name_start, roots)
                if name not in bound:
                    continue
                attribute = re.match(r"\.\s*(\w*)", text[dot:])
                if attribute is None or not attribute.group(1):
                    continue
                # the receiver's own attribute, ended by the character after it
                checked_text = text[dot : dot + attribute.end() + 1]
                verdict = explainer.explain(text[:dot], checked_text, path=str(path))
                checked += 1
                counts[1] += 1
                found["receiver_checks"] += 1
                line = text.count("\n", 0, dot) + 1
                typed = bound[name]
                if not verdict["accepted"]:
                    found["receiver_rejections"] += 1
                    counts[2] += 1
                    member = attribute.group(1)
                    if name in ("self", "cls"):
                        sure = confirmed_self(path, line, member)
                    else:
                        sure = confirmed_receiver(typed, member, type_hints(explainer.index, typed), checked_text.endswith("("))
                    found["receiver_confirmed"] += sure
                    counts[3] += not sure
                    label = "right (running code agrees)" if sure else "FALSE"
                    examples.append(f"  receiver {label} {corpus} {path.name}:{line}: {name}{checked_text!r} ({'.'.join(typed)}): {verdict['reason']}")
                    continue
                # keyword names of a method called on the receiver
                call_start = dot + attribute.end()
                if keywords >= cuts_per_file or text[call_start : call_start + 1] != "(":
                    continue
                end = _call_end(text, call_start)
                if end is None or not re.search(r"[(,]\s*\w+\s*=(?!=)", text[call_start:end]):
                    continue
                keywords += 1
                found["keyword_checks"] += 1
                verdict = explainer.explain(text[:dot], text[dot:end], path=str(path))
                rejected = re.search(r"keyword (\w+)", verdict["reason"] or "")
                if verdict["accepted"] or rejected is None:
                    continue
                found["keyword_rejections"] += 1
                counts[2] += 1
                sure = confirmed_keyword(typed, attribute.group(1), rejected.group(1), type_hints(explainer.index, typed))
                found["keyword_confirmed"] += sure
                counts[3] += not sure
                label = "right (running code agrees)" if sure else "FALSE"
                examples.append(f"  keyword {label} {corpus} {path.name}:{line}: {name}{text[dot:end][:60]!r}: {verdict['reason']}")
            for start, end in imports[:cuts_per_file]:
                verdict = explainer.explain(text[:start], text[start:end], path=str(path))
                found["import_checks"] += 1
                if not verdict["accepted"]:
                    found["import_rejections"] += 1
                    sure = confirmed_import(text[start:end], path.parent)
                    found["import_confirmed"] += sure
                    label = "right (running code agrees)" if sure else "FALSE"
                    examples.append(f"  import {label} {corpus} {path.name}: {text[start:end].strip()[:70]!r}: {verdict['reason']}")
    finally:
        explainer.close()
    for line in sorted(examples, key=lambda line: "FALSE" not in line)[:80]:
        print(line)
    for corpus, (files_seen, checks, rejections, false) in per_corpus.items():
        print(f"  {corpus}: {files_seen} files, {checks} receiver checks, {rejections} rejections (receivers and keywords), {false} false")
    return found


def _raises(python: str, code: str) -> str:
    done = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=300)
    if done.returncode == 0:
        return ""
    lines = [line for line in done.stderr.strip().splitlines() if line and not line.startswith(" ")]
    return lines[-1].split(":", 1)[0] if lines else "failed"


def _kind(setup: str, expression: str) -> str:
    """What a removal is used through: an import, a module attribute, a keyword, a
    receiver's member."""
    if expression.startswith(("from ", "import ")):
        return "import"
    if re.search(r"\(\s*[^)]*\b\w+=", expression) and "=" in expression.split("(", 1)[-1]:
        return "keyword"
    head = expression.split(".", 1)[0]
    return "module attribute" if re.search(rf"^import \w+ as {head}$|^import {head}$", setup, re.M) else "receiver"


def removed_caught(smoke: bool) -> dict:
    from adaptrack_lsp.checking.explainer import Explainer

    pythons = {"numpy": sys.executable, "stdlib": sys.executable}
    if not smoke:
        from adaptrack_lsp.apis.environments import environment_for

        pythons["pandas"] = str(environment_for([PANDAS], progress=lambda line: print(f"  {line}", file=sys.stderr)).python)
        pythons["requests"] = sys.executable
        pythons["scipy"] = sys.executable
    cases = caught = 0
    misses: dict[str, int] = {}
    by_source: dict[str, list[int]] = {}
    for library, python in pythons.items():
        explainer = Explainer(_settings(python), ["api", "kwargs"])
        try:
            for case_library, source, setup, expression in REMOVED:
                if case_library != library:
                    continue
                code = setup + expression + ("\nf(np.zeros(2))" if setup.endswith("return ") else "")
                error = _raises(python, (_OFFLINE_REQUESTS if library == "requests" else "") + code)
                if error not in ("AttributeError", "ImportError", "TypeError"):
                    print(f"  not removed here ({error or 'runs'}): {library}: {expression}")
                    continue
                cases += 1
                verdict = explainer.explain(setup, expression + "\n")  # a line, as a completion ends
                hit = not verdict["accepted"]
                caught += hit
                counts = by_source.setdefault(source, [0, 0])
                counts[0] += hit
                counts[1] += 1
                if not hit:
                    kind = _kind(setup, expression)
                    misses[kind] = misses.get(kind, 0) + 1
                print(f"  {'caught' if hit else 'MISSED'}: {source}: {expression}: {verdict['reason'] or 'accepted'}")
        finally:
            explainer.close()
    for source, (hit, total) in sorted(by_source.items()):
        print(f"  {source}: {hit}/{total} caught")
    print(f"  misses by kind: {', '.join(f'{k} {v}' for k, v in sorted(misses.items())) or 'none'}")
    return {"cases": cases, "caught": caught}


def receivers(smoke: bool = False, cuts_per_file: int = 12, corpora: tuple[str, ...] = ("stdlib", "numpy", "scipy", "tests")) -> dict:
    """The figures of this benchmark (the `receivers` section of benchmarks/versions.py)."""
    started = time.perf_counter()
    corpus = false_rejections(smoke, cuts_per_file, corpora)
    removed = removed_caught(smoke)
    return {
        "receivers_files": corpus["files"],
        "receivers_checks": corpus["receiver_checks"],
        "receivers_rejections": corpus["receiver_rejections"],
        "receivers_false_rejections": corpus["receiver_rejections"] - corpus["receiver_confirmed"],
        "receiver_keywords_checks": corpus["keyword_checks"],
        "receiver_keywords_rejections": corpus["keyword_rejections"],
        "receiver_keywords_false_rejections": corpus["keyword_rejections"] - corpus["keyword_confirmed"],
        "imports_checks": corpus["import_checks"],
        "imports_rejections": corpus["import_rejections"],
        "imports_false_rejections": corpus["import_rejections"] - corpus["import_confirmed"],
        "removed_cases": removed["cases"],
        "removed_caught": round(removed["caught"] / removed["cases"], 3) if removed["cases"] else 0.0,
        "receivers_seconds": round(time.perf_counter() - started, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few files, the NumPy cases only")
    parser.add_argument("--cuts-per-file", type=int, default=12, help="most checks of each kind per file")
    parser.add_argument("--corpora", default="stdlib,numpy,scipy,tests", help="test suites to read (comma-separated)")
    args = parser.parse_args()
    figures = receivers(args.smoke, args.cuts_per_file, tuple(c.strip() for c in args.corpora.split(",") if c.strip()))
    print(" ".join(f"{name}={value}" for name, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
