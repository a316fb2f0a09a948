"""How many of the checker's findings get a quick fix, and how many of those fixes run
(docs/check.md, "Quick fixes").

    python benchmarks/check_fixes.py                     # the two example files, the built-in model
    python benchmarks/check_fixes.py --intent-weight 0   # the model alone (no copy of the flagged name)
    python benchmarks/check_fixes.py --smoke             # a tiny built-in model, the NumPy file, a NumPy snapshot (seconds)

For each file (default ``examples/tf_compat_v1.py``, TensorFlow 1 code, and
``benchmarks/data/numpy1/numpy1_habits.py``, NumPy 1 code) every finding of ``adaptrack-lsp check``
(against this interpreter's environment; deprecations left out) is given to
`checking.fixes.Suggester`, as ``check --suggest`` does; a finding *has a fix* when at
least one replacement is offered.

What *runs* means: the fixed statement is executed by this interpreter (the
environment the check used) after the statements before it, in one namespace, a
top-level statement at a time, so that what the program has built by then is there.
The statements before it run as the file's *reference migration* writes them (the
replacements NumPy's and TensorFlow's migration guides give, `REFERENCES`, applied to
the file: ``np.float_`` -> ``np.float64``; ``tf.placeholder`` ->
``tf.compat.v1.placeholder`` with eager execution off, as a TF 1 graph script needs),
so that an earlier finding does not leave a name undefined; a file without one runs its
own statements, those that raise skipped.  A finding is *executable* when its statement
is a top-level statement that is not a definition (a function's body runs only when
called) and, unfixed, raises there the error the finding predicts (AttributeError for
an attribute or a method, TypeError for a keyword, ImportError for an import).  The top
fix of an executable finding *runs* when its statement then raises nothing; it is *the
reference* when that statement is the one the reference migration writes (spaces
aside).  A fix that runs is not necessarily right (``np.arange(x)`` for
``np.sometrue(x)`` runs): the lines above the figures show what was offered.

The last line: ``files=... findings=... fixed=... executable=... fixed_executable=...
runs=... reference=... fix_rate=... run_rate=...`` and the same counts per file
(``<file stem>.findings=...``); ``fix_rate`` is fixed / findings, ``run_rate`` runs /
fixed_executable.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "examples" / "tf_compat_v1.py", ROOT / "benchmarks" / "data" / "numpy1" / "numpy1_habits.py"]
#: the error a finding predicts when its statement runs
ERRORS = {
    "attribute": ("AttributeError",),
    "receiver": ("AttributeError",),
    "keyword": ("TypeError",),
    "import": ("ImportError", "ModuleNotFoundError"),
}
#: the model of `--smoke`: the first 300 kB of the standard library, a 1k-token BPE, 4-grams
SMOKE_RECIPE = {"packages": [["stdlib", ""]], "vocab_size": 1000, "order": 4, "max_corpus_bytes": 300_000}
#: the reference migration of each example file: (old, new) replacements of its text
REFERENCES = {
    "numpy1_habits.py": [
        ("np.float_", "np.float64"),
        ("np.in1d(", "np.isin("),
        ("readings.ptp(axis=1)", "np.ptp(readings, axis=1)"),
        ("np.product(", "np.prod("),
        ("np.cumproduct(", "np.cumprod("),
        ("normed=True", "density=True"),
        ("np.trapz(", "np.trapezoid("),
        ("np.alltrue(", "np.all("),
        ("np.sometrue(", "np.any("),
        ("np.NaN", "np.nan"),
        ("readings.newbyteorder()", "readings.view(readings.dtype.newbyteorder())"),
        ("np.row_stack(", "np.vstack("),
    ],
    "tf_compat_v1.py": [
        ("import tensorflow as tf\n", "import tensorflow as tf; tf.compat.v1.disable_eager_execution()\n"),
        ("tf.placeholder(", "tf.compat.v1.placeholder("),
    ],
}
#: runs the statements of the reference text before line `line`, then the statement at
#: `line` of the original text (the control) and of the fixed text; writes their errors
RUNNER = r"""
import ast, json, sys
with open(sys.argv[1], encoding="utf-8") as handle:
    spec = json.load(handle)
namespace = {"__name__": "__main__", "__file__": spec["path"]}

def statements(text):
    try:
        return ast.parse(text).body
    except SyntaxError:
        return []

def run(statement):
    try:
        exec(compile(ast.Module([statement], []), spec["path"], "exec"), namespace)
    except BaseException as error:
        return f"{type(error).__name__}: {error}"[:300]
    return None

line = spec["line"]
for statement in statements(spec["reference"]):
    if statement.lineno < line:
        run(statement)
result = {}
for name in ("control", "fixed"):
    if spec.get(name) is not None:
        found = [s for s in statements(spec[name]) if s.lineno == line]
        result[name] = run(found[0]) if found else "SyntaxError: no statement at that line"
with open(sys.argv[2], "w", encoding="utf-8") as handle:
    json.dump(result, handle)
"""


def run_statement(spec: dict, python: str, workdir: Path) -> dict:
    """{"control": error or None, "fixed": error or None} for one runner `spec`."""
    (workdir / "runner.py").write_text(RUNNER, encoding="utf-8")
    (workdir / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    result = workdir / "result.json"
    result.unlink(missing_ok=True)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run(
        [python, str(workdir / "runner.py"), str(workdir / "spec.json"), str(result)],
        cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600, env=env,
    )  # fmt: skip
    return json.loads(result.read_text(encoding="utf-8")) if result.exists() else {}


def reference_text(path: Path, text: str) -> str:
    """The file as its reference migration writes it (the file itself when it has none)."""
    for old, new in REFERENCES.get(path.name, ()):
        text = text.replace(old, new)
    return text


def parsable(text: str) -> str:
    """`text` up to the line before its first syntax error (the example TF file ends in
    an unfinished line, a completion's cursor)."""
    for _ in range(100):
        try:
            ast.parse(text)
            return text
        except SyntaxError as error:
            text = "".join(text.splitlines(True)[: max(0, (error.lineno or 1) - 1)])
    return ""


def statement_line(text: str, line: int) -> int | None:
    """The first line of the top-level statement holding `line`, or None when it is in a
    definition (whose body runs only when called) or after the file's first syntax error."""
    for statement in ast.parse(parsable(text)).body:
        if statement.lineno <= line <= (statement.end_lineno or statement.lineno):
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                return None
            return statement.lineno
    return None


def same_statement(a: str, b: str, line: int) -> bool:
    """Whether the top-level statements at `line` of `a` and `b` are the same, spaces aside."""

    def segment(text: str) -> str | None:
        for statement in ast.parse(text).body:
            if statement.lineno == line:
                return "".join((ast.get_source_segment(text, statement) or "").split())
        return None

    found = segment(parsable(a))
    return found is not None and found == segment(parsable(b))


def apply(text: str, suggestion: dict) -> str:
    lines = text.split("\n")

    def offset(point) -> int:
        return sum(len(line) + 1 for line in lines[: point["line"] - 1]) + point["column"] - 1

    return text[: offset(suggestion["start"])] + suggestion["text"] + text[offset(suggestion["end"]) :]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="Python files (default: the two examples)")
    parser.add_argument("--model", default="builtin", help="the model the fixes are decoded with (default: builtin)")
    parser.add_argument("--intent-weight", type=float, default=None, help="weight of the copy of the flagged name (default: the Suggester's)")
    parser.add_argument("--smoke", action="store_true", help="a tiny built-in model, the NumPy file only, a snapshot of numpy (seconds)")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    cache = tempfile.TemporaryDirectory(prefix="adaptrack-check-fixes-")
    files = [Path(f) for f in args.files] or (FILES[1:] if args.smoke else FILES)

    model_loader = None
    if args.smoke:  # a model built in seconds, in a cache of its own
        os.environ["ADAPTRACK_CACHE"] = cache.name
        from adaptrack_lsp.completion.lm import builtin

        lm = builtin.load_builtin_model(recipe={**builtin.BUILTIN_RECIPE, **SMOKE_RECIPE}, show_bar=False)
        model_loader = lambda settings, progress: lm  # noqa: E731

    from adaptrack_lsp.checking.checker import Checker
    from adaptrack_lsp.checking.fixes import INTENT_WEIGHT, Suggester
    from adaptrack_lsp.config import parse_settings
    from adaptrack_lsp.constrainers.environment import ConstraintEnvironment

    raw = {"model": args.model, "pythonPath": sys.executable}
    if args.smoke:  # validity from a snapshot of numpy: no jedi process to start
        from adaptrack_lsp.apis.snapshot import module_snapshot, write_snapshot

        snapshot = Path(cache.name) / "numpy-snapshot.json"
        write_snapshot(module_snapshot("numpy", ("linalg", "random")), snapshot)
        raw["apiSnapshot"] = str(snapshot)
    settings, problems = parse_settings(raw)
    if problems:
        sys.exit("; ".join(problems))
    environment = ConstraintEnvironment(str(ROOT))
    index, info = environment.api_index(settings)
    if index is None:
        sys.exit(f"no API index: {info.problem}")
    weight = INTENT_WEIGHT if args.intent_weight is None else args.intent_weight
    checker = Checker(index)
    suggester = Suggester(settings, environment, checker=checker, model_loader=model_loader, intent_weight=weight)
    print(f"# model {args.model}{' (smoke)' if args.smoke else ''}, intent weight {weight}, environment {sys.executable}", flush=True)
    totals = dict.fromkeys(("findings", "fixed", "executable", "fixed_executable", "runs", "reference"), 0)
    per_file: dict[str, dict[str, int]] = {}
    seconds = 0.0
    workdir = Path(cache.name) / "run"
    workdir.mkdir()
    for path in files:
        text = path.read_text(encoding="utf-8")
        reference = reference_text(path, text)
        findings = [f for f in checker.check(text).findings if not f.deprecated]
        counts = dict.fromkeys(totals, 0)
        for finding in findings:
            started = time.perf_counter()
            suggestions = suggester.suggest(text, finding, path=str(path))
            seconds += time.perf_counter() - started
            counts["findings"] += 1
            counts["fixed"] += bool(suggestions)
            line = statement_line(text, finding.line)
            verdict = "not executable"
            if line is not None:
                fixed = apply(text, suggestions[0]) if suggestions else None
                spec = {"path": str(path), "line": line, "reference": parsable(reference), "control": parsable(text)}
                spec["fixed"] = parsable(fixed) if fixed is not None else None
                ran = run_statement(spec, sys.executable, workdir)
                error = ran.get("control")
                if error and error.split(":", 1)[0] in ERRORS.get(finding.kind, ()):
                    counts["executable"] += 1
                    verdict = "not fixed"
                    if fixed is not None:
                        counts["fixed_executable"] += 1
                        raised = ran.get("fixed", "no result")
                        counts["runs"] += raised is None
                        verdict = "runs" if raised is None else f"raises {raised.splitlines()[0][:100]}"
                        if raised is None and same_statement(fixed, reference, line):
                            counts["reference"] += 1
                            verdict += ", the reference"
            fixes = " | ".join(s["text"] for s in suggestions) or "(no fix)"
            print(f"# {path.name}:{finding.line}:{finding.column} {finding.name} -> {fixes}  [{verdict}]", flush=True)
        per_file[path.stem] = counts
        for key in totals:
            totals[key] += counts[key]
        print(
            f"# {path.name}: {counts['findings']} findings, {counts['fixed']} with a fix; {counts['executable']} executable, "
            f"{counts['fixed_executable']} of them fixed, {counts['runs']} fixes run ({counts['reference']} the reference)",
            flush=True,
        )
    suggester.close()
    environment.close()
    fix_rate = totals["fixed"] / totals["findings"] if totals["findings"] else 0.0
    run_rate = totals["runs"] / totals["fixed_executable"] if totals["fixed_executable"] else 0.0
    figures = [
        f"files={len(files)}",
        *(f"{key}={value}" for key, value in totals.items()),
        f"fix_rate={fix_rate:.3f}",
        f"run_rate={run_rate:.3f}",
        f"seconds_per_finding={seconds / max(1, totals['findings']):.2f}",
        f"intent_weight={weight}",
        *(f"{stem}.{key}={value}" for stem, counts in per_file.items() for key, value in counts.items()),
    ]
    print(" ".join(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
