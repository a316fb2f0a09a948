"""Typed receivers and import statements: false rejections over real code, and the
share of removed methods caught.

Two measures (the `receivers` section of benchmarks/versions.py; also runnable alone):

1. **False rejections over corpora.**  In every file of the standard library's test
   suite, NumPy's test suites and this project's tests/, each attribute access on a
   typed receiver (a name `apis.receivers` types at that point: ``a = np.zeros(3)`` …
   ``a.sum``) and each import statement is checked as a completion would be, with the
   code before it as the document (`Explainer`, the server interpreter, runtime
   introspection).  A test suite also holds code for other platforms and versions,
   guarded where it runs (``import _winapi``, ``arr.tostring()`` for NumPy 1), so each
   rejection is checked by running code: the import statement itself (ImportError:
   right), or the receiver's class (no such attribute, and instances without a
   ``__dict__``: right).  What running code does not confirm counts as a false
   rejection; each is printed with its reason.
2. **Removed methods caught.**  Methods and attributes the NumPy 2.0 and pandas 2.0
   release notes remove, called on objects whose type the document states
   (``a = np.zeros(3)``, ``df = pd.DataFrame(...)``).  Ground truth: the code is run in
   that version's environment (NumPy: the server interpreter's; pandas 2.2: a cached
   environment, `apis.environments`); only entries that raise AttributeError there
   count.  The share the constraint rejects is the catch rate.

Last line: ``receivers_files=… receivers_checks=… receivers_false_rejections=…
imports_checks=… imports_false_rejections=… removed_cases=… removed_caught=…``.
``--smoke`` checks a few files and the NumPy cases only (no environment is built).
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

#: (library, setup code, expression): removed in NumPy 2.0 / pandas 2.0 (release notes),
#: on objects whose type the setup states
REMOVED = [
    ("numpy", "import numpy as np\na = np.zeros(3)\n", "a.ptp()"),
    ("numpy", "import numpy as np\na = np.zeros(3)\n", "a.itemset(0, 1.0)"),
    ("numpy", "import numpy as np\na = np.zeros(3)\n", "a.newbyteorder()"),
    ("numpy", "import numpy as np\na = np.arange(3)\n", "a.tostring()"),
    ("numpy", "import numpy as np\ndef f(a: np.ndarray):\n    return ", "a.ptp()"),
    ("numpy", "import numpy as np\nrng = np.random.default_rng(0)\n", "rng.randint(3)"),
    ("numpy", "import numpy as np\n", "np.product([1, 2])"),
    ("numpy", "import numpy as np\n", "np.cumproduct([1, 2])"),
    ("numpy", "import numpy as np\n", "np.alltrue([True])"),
    ("numpy", "import numpy as np\n", "np.asfarray([1])"),
    ("numpy", "", "from numpy import product"),
    ("numpy", "", "from numpy import float_"),
    ("pandas", "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\n", "df.append({'a': 2}, ignore_index=True)"),
    ("pandas", "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\n", "df.iteritems()"),
    ("pandas", "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\n", "df.lookup([0], ['a'])"),
    ("pandas", "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\n", "df.mad()"),
    ("pandas", "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\n", "df.tshift(1)"),
    ("pandas", "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\n", "df.slice_shift(1)"),
    ("pandas", "import pandas as pd\ns = pd.Series([1, 2])\n", "s.append(s)"),
    ("pandas", "import pandas as pd\ns = pd.Series([1, 2])\n", "s.iteritems()"),
    ("pandas", "import pandas as pd\ns = pd.Series([1, 2])\n", "s.mad()"),
    ("pandas", "import pandas as pd\ni = pd.Index([1, 2])\n", "i.is_monotonic"),
    ("pandas", "import pandas as pd\ni = pd.Index([1, 2])\n", "i.is_mixed()"),
    ("pandas", "import pandas as pd\n", "pd.Int64Index([1])"),
    ("pandas", "", "from pandas import Int64Index"),
]
PANDAS = "pandas==2.2.3"


def _settings(python: str):
    from adaptrack_lsp.config import parse_settings

    settings, problems = parse_settings({"pythonPath": str(python)})
    if problems:
        raise SystemExit("; ".join(problems))
    return settings


def corpus_files(smoke: bool) -> list[tuple[str, Path]]:
    """(corpus, file) pairs: the standard library's tests, NumPy's tests, tests/."""
    import numpy

    stdlib = Path(sysconfig.get_paths()["stdlib"]) / "test"
    numpy_root = Path(numpy.__file__).parent
    groups = [
        ("stdlib", sorted(stdlib.glob("test_*.py"))),
        ("numpy", sorted(p for p in numpy_root.rglob("tests/test_*.py"))),
        ("tests", sorted((ROOT / "tests").rglob("test_*.py"))),
    ]
    per_group = 3 if smoke else 10**6
    return [(name, path) for name, files in groups for path in files[:per_group]]


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
import json, sys
sys.path.insert(0, sys.argv[1])
import introspect_worker as worker
path, name = json.loads(sys.argv[2]), sys.argv[3]
try:
    cls = worker.resolve_value_type(path)
except Exception:
    print("unknown")
else:
    # gone for sure: not on the class and its instances keep no __dict__ to receive it
    print("gone" if not hasattr(cls, name) and not getattr(cls, "__dictoffset__", 0) else "may exist")
"""


def confirmed_receiver(path: tuple, name: str) -> bool:
    """Whether running code says that an instance of `path`'s type cannot have `name`
    (the class lacks it and its instances have no ``__dict__``): then the rejection is
    right, whatever the corpus's code did (it runs under another version or platform)."""
    from adaptrack_lsp.apis import introspect_worker

    done = subprocess.run(
        [sys.executable, "-I", "-c", _CONFIRM_RECEIVER, str(Path(introspect_worker.__file__).parent), json.dumps(list(path)), name],
        capture_output=True, text=True, timeout=120,
    )
    return done.stdout.strip() == "gone"


def confirmed_import(statement: str, folder: Path) -> bool:
    """Whether running the import statement here (the file's folder on sys.path) fails
    with ImportError: then the rejection is right (a module of another platform, one a
    test creates while it runs, one not installed)."""
    code = f"import sys\nsys.path.insert(0, {str(folder)!r})\ntry:\n    {statement.strip()}\nexcept ImportError:\n    print('fails')\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(folder))
    return done.stdout.strip() == "fails"


def false_rejections(smoke: bool, cuts_per_file: int) -> dict:
    from adaptrack_lsp.apis.imports import learn_roots
    from adaptrack_lsp.apis.receivers import receiver_bindings
    from adaptrack_lsp.commands.explain import Explainer

    explainer = Explainer(_settings(sys.executable), ["api", "kwargs"], workspace_root=str(ROOT))
    found = {
        "files": 0, "receiver_checks": 0, "receiver_rejections": 0, "receiver_confirmed": 0,
        "import_checks": 0, "import_rejections": 0, "import_confirmed": 0,
    }
    examples: list[str] = []
    files = corpus_files(smoke)
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
            roots = learn_roots(text)
            dots, imports = cut_points(text, roots)
            checked = 0
            for dot in dots:
                if checked >= cuts_per_file:
                    break
                name_start = dot
                while name_start and (text[name_start - 1].isalnum() or text[name_start - 1] == "_"):
                    name_start -= 1
                name = text[name_start:dot]
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
                found["receiver_checks"] += 1
                if not verdict["accepted"]:
                    found["receiver_rejections"] += 1
                    sure = confirmed_receiver(bound[name], attribute.group(1))
                    found["receiver_confirmed"] += sure
                    label = "right (running code agrees)" if sure else "FALSE"
                    examples.append(f"  receiver {label} {corpus} {path.name}: {name}{checked_text!r}: {verdict['reason']}")
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
    for line in sorted(examples, key=lambda line: "FALSE" not in line)[:60]:
        print(line)
    return found


def _raises(python: str, code: str) -> str:
    done = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=300)
    if done.returncode == 0:
        return ""
    lines = [line for line in done.stderr.strip().splitlines() if line and not line.startswith(" ")]
    return lines[-1].split(":", 1)[0] if lines else "failed"


def removed_caught(smoke: bool) -> dict:
    from adaptrack_lsp.commands.explain import Explainer

    pythons = {"numpy": sys.executable}
    if not smoke:
        from adaptrack_lsp.apis.environments import environment_for

        pythons["pandas"] = str(environment_for([PANDAS], progress=lambda line: print(f"  {line}", file=sys.stderr)).python)
    cases = caught = 0
    for library, python in pythons.items():
        explainer = Explainer(_settings(python), ["api", "kwargs"])
        try:
            for case_library, setup, expression in REMOVED:
                if case_library != library:
                    continue
                code = setup + expression + ("\nf(np.zeros(2))" if setup.endswith("return ") else "")
                error = _raises(python, code)
                if error not in ("AttributeError", "ImportError"):
                    print(f"  not removed here ({error or 'runs'}): {library}: {expression}")
                    continue
                cases += 1
                verdict = explainer.explain(setup, expression + "\n")  # a line, as a completion ends
                hit = not verdict["accepted"]
                caught += hit
                print(f"  {'caught' if hit else 'MISSED'}: {library}: {expression}: {verdict['reason'] or 'accepted'}")
        finally:
            explainer.close()
    return {"cases": cases, "caught": caught}


def receivers(smoke: bool = False, cuts_per_file: int = 12) -> dict:
    """The figures of this benchmark (the `receivers` section of benchmarks/versions.py)."""
    started = time.perf_counter()
    corpus = false_rejections(smoke, cuts_per_file)
    removed = removed_caught(smoke)
    return {
        "receivers_files": corpus["files"],
        "receivers_checks": corpus["receiver_checks"],
        "receivers_rejections": corpus["receiver_rejections"],
        "receivers_false_rejections": corpus["receiver_rejections"] - corpus["receiver_confirmed"],
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
    args = parser.parse_args()
    figures = receivers(args.smoke, args.cuts_per_file)
    print(" ".join(f"{name}={value}" for name, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
