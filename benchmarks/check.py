"""`adaptrack-lsp check` (docs/check.md): what it catches against executed failures and
the tools that went before it, what it reports over code that runs, and its speed;
one function per section, the figures of all sections on the last line.

Sections (``--sections a,b,c,d``; all by default):

- ``a``, NumPy 1 code on NumPy 2 (the interpreter running this script: its numpy is
  the NumPy 2 under test), against ruff's ``NPY201`` rule.  The corpus: the
  GitChameleon 2.0 NumPy records pinned below 2.0 (``--data DIR``, the benchmark's
  dataset folder, fetched by the user and never part of the project, read by
  `evaluation.gitchameleon.load_records`; each record's program runs with its visible
  test after it, as the benchmark runs it; kept: the records whose program fails for a
  missing API, and those that pass), and the NumPy 1 scripts in
  ``benchmarks/data/numpy1/``.  Every file runs statement by statement
  (``benchmarks/_statement_runner.py``: each statement at any depth is wrapped, so
  every line runs, not only those before the first error); a line fails when running
  it raises an ImportError, an AttributeError (on a module or an object, not None) or
  an unexpected-keyword TypeError.  Ground truth is the failing lines, from execution
  only.  Both tools check the same files (``adaptrack-lsp check
  --format json``; ``ruff check --select NPY201 --output-format json``); a finding
  matches a failure when it lies on the failing line (or inside the failing
  statement's span).  Figures: ``numpy_failures``, ``recall`` and ``false_findings``
  (ours), ``ruff_recall``, ``ruff_false_findings``.  Deprecation notes of ours are
  counted apart (``deprecation_notes``): they are hints on names that still exist.
- ``b``, TensorFlow 1 code on TensorFlow 2 (the installed one), against
  ``tf_upgrade_v2``: ``examples/tf_compat_v1.py`` (cut to the lines that parse: its
  last line is left unfinished on purpose) and the scripts in ``benchmarks/data/tf1/``.
  Every ``Renamed 'OLD' to 'NEW'`` and ``Renamed keyword argument for F from A to B``
  of its report whose old name is absent from the installed TensorFlow (``getattr``
  down the path, ``inspect.signature`` for keywords, in a separate interpreter) must be
  one of our findings: on that line, naming a part of the old name (or the keyword).
  Figures: ``tf_renames`` (absent ones), ``tf_covered``; its other changes that name an
  absent API (``Changed tf.to_float call``, ``Changing keep_prob arg``,
  ``Changing dataset.make_one_shot_iterator()``) are scored apart (``tf_other``).
- ``c``, findings over code that runs on the installed versions: the standard
  library's test suite, NumPy's and SciPy's (``**/tests``), checked by
  `checking.checker.Checker` with the index the CLI gets (local modules: the names of
  each file's own folder).  Every finding is then run: a module attribute or an import
  is looked up (``getattr`` down the path, the import tried with the file's folder on
  ``sys.path``), a keyword against ``inspect.signature`` of the callee, a receiver's
  member against the class of the typed value; a submodule read as an attribute after
  the file's own imports ran.  What running code shows present is a false finding;
  what it cannot settle (instances that keep a ``__dict__``, a value whose type the
  runtime cannot name) is looked up in `HAND` and `HAND_RULES`: verdicts given by
  reading the code, printed with each finding.  Figures: ``corpus_files``, ``corpus_lines``,
  ``corpus_findings``, ``corpus_confirmed``, ``corpus_false``, ``corpus_unsettled``,
  ``corpus_seconds``.
- ``d``, speed: lines per second over NumPy's tests with an empty cache
  (``ADAPTRACK_CACHE`` and ``XDG_CACHE_HOME``, jedi's and parso's caches, in a fresh
  folder) and again with the index cached (a second process), each in its own process;
  the time of one check after a one-line edit of a 500-line file (`Checker` with the
  document's key, as the editor runs it, on an index that has seen the edit's names
  once; goal <= 300 ms); peak resident memory (``VmHWM``) of the checking process and
  of the largest process it started (the introspection worker).

``--smoke``: every section at tiny sizes (the project's GitChameleon-shaped records in
tests/data/gitchameleon, one TF file, a few files per suite, a few files for speed).

Usage: python benchmarks/check.py [--smoke] [--sections a,b,c,d] [--data DIR]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DATA = ROOT / "benchmarks" / "data"
RUNNER = Path(__file__).with_name("_statement_runner.py")
SMOKE_GITCHAMELEON = ROOT / "tests" / "data" / "gitchameleon"
BIN = Path(sys.executable).parent
#: seconds one statement-by-statement run, one tool run or one confirmation may take
RUN_TIMEOUT_S = 300
CONFIRM_TIMEOUT_S = 120
#: the 500-line file of the edit timing
EDIT_FILE_LINES = 500

#: verdicts given by reading the code, for findings that running code cannot settle
#: (a receiver whose instances keep a ``__dict__``, a callee without a signature):
#: (suite, path inside the suite, line, name) -> ("right" | "false", why)
HAND: dict[tuple[str, str, int, str], tuple[str, str]] = {
    ("stdlib", "test_codecs.py", 3389, "encodings.ascii"): ("false", "codecs.lookup('ascii') on the line before loads encodings.ascii"),
    ("stdlib", "test_codecs.py", 3433, "encodings.ascii"): ("false", "codecs.lookup('ascii') on the line before loads encodings.ascii"),
    ("stdlib", "test_codecs.py", 3444, "encodings.ascii"): ("false", "codecs.lookup('ascii') on the line before loads encodings.ascii"),
    ("numpy", "typing/tests/data/fail/modules.pyi", 14, "np.lib.recfunctions"): (
        "right", "a type-checking failure case: `import numpy as np; np.lib.recfunctions` raises AttributeError until numpy.lib.recfunctions is imported"),
    ('stdlib', 'support/os_helper.py', 639, 'msvcrt.CRT_WARN'): ('false', "msvcrt is imported only under `if sys.platform == 'win32'`; these uses run only when that branch set old_modes"),
    ('stdlib', 'support/os_helper.py', 640, 'msvcrt.CRT_ERROR'): ('false', "msvcrt is imported only under `if sys.platform == 'win32'`; these uses run only when that branch set old_modes"),
    ('stdlib', 'support/os_helper.py', 641, 'msvcrt.CRT_ASSERT'): ('false', "msvcrt is imported only under `if sys.platform == 'win32'`; these uses run only when that branch set old_modes"),
    ('stdlib', 'support/os_helper.py', 642, 'msvcrt.CrtSetReportMode'): ('false', "msvcrt is imported only under `if sys.platform == 'win32'`; these uses run only when that branch set old_modes"),
    ('numpy', 'ma/tests/test_core.py', 3685, 'sortedx._data'): ('false', 'numpy.ma.sort returns a MaskedArray (type(np.ma.sort(np.ma.array([3, 1]))) is MaskedArray), which has _data and _mask'),
    ('numpy', 'ma/tests/test_core.py', 3689, 'sortedx._data'): ('false', 'numpy.ma.sort returns a MaskedArray (type(np.ma.sort(np.ma.array([3, 1]))) is MaskedArray), which has _data and _mask'),
    ('numpy', 'ma/tests/test_core.py', 3707, 'sortedx._data'): ('false', 'numpy.ma.sort returns a MaskedArray (type(np.ma.sort(np.ma.array([3, 1]))) is MaskedArray), which has _data and _mask'),
    ('numpy', 'ma/tests/test_core.py', 3710, 'sortedx._data'): ('false', 'numpy.ma.sort returns a MaskedArray (type(np.ma.sort(np.ma.array([3, 1]))) is MaskedArray), which has _data and _mask'),
    ('numpy', 'ma/tests/test_core.py', 3734, 'sortedx._data'): ('false', 'numpy.ma.sort returns a MaskedArray (type(np.ma.sort(np.ma.array([3, 1]))) is MaskedArray), which has _data and _mask'),
    ('numpy', 'ma/tests/test_core.py', 3686, 'sortedx._mask'): ('false', 'numpy.ma.sort returns a MaskedArray (type(np.ma.sort(np.ma.array([3, 1]))) is MaskedArray), which has _data and _mask'),
    ('numpy', 'ma/tests/test_core.py', 3690, 'sortedx._mask'): ('false', 'numpy.ma.sort returns a MaskedArray (type(np.ma.sort(np.ma.array([3, 1]))) is MaskedArray), which has _data and _mask'),
    ('numpy', 'ma/tests/test_core.py', 3711, 'sortedx._mask'): ('false', 'numpy.ma.sort returns a MaskedArray (type(np.ma.sort(np.ma.array([3, 1]))) is MaskedArray), which has _data and _mask'),
    ('numpy', 'ma/tests/test_core.py', 3735, 'sortedx._mask'): ('false', 'numpy.ma.sort returns a MaskedArray (type(np.ma.sort(np.ma.array([3, 1]))) is MaskedArray), which has _data and _mask'),
    ('scipy', 'integrate/_ivp/tests/test_ivp.py', 884, 'sol.sol'): ('false', "assert_no_warnings(f, ...) returns what f returns: solve_ivp's OdeResult, which has sol with dense_output=True"),
    ('scipy', 'integrate/_ivp/tests/test_ivp.py', 885, 'sol.sol'): ('false', "assert_no_warnings(f, ...) returns what f returns: solve_ivp's OdeResult, which has sol with dense_output=True"),
    ('scipy', 'integrate/_ivp/tests/test_ivp.py', 890, 'sol.sol'): ('false', "assert_no_warnings(f, ...) returns what f returns: solve_ivp's OdeResult, which has sol with dense_output=True"),
    ('scipy', 'integrate/_ivp/tests/test_ivp.py', 891, 'sol.sol'): ('false', "assert_no_warnings(f, ...) returns what f returns: solve_ivp's OdeResult, which has sol with dense_output=True"),
    ('scipy', 'ndimage/tests/test_morphology.py', 770, 'out.dtype'): ('false', 'ndimage.binary_erosion/binary_dilation return an ndarray (type(ndimage.binary_dilation(np.ones([]))) is ndarray), which has dtype'),
    ('scipy', 'ndimage/tests/test_morphology.py', 778, 'out.dtype'): ('false', 'ndimage.binary_erosion/binary_dilation return an ndarray (type(ndimage.binary_dilation(np.ones([]))) is ndarray), which has dtype'),
    ('scipy', 'ndimage/tests/test_morphology.py', 1541, 'out.dtype'): ('false', 'ndimage.binary_erosion/binary_dilation return an ndarray (type(ndimage.binary_dilation(np.ones([]))) is ndarray), which has dtype'),
    ('scipy', 'ndimage/tests/test_morphology.py', 1557, 'out.dtype'): ('false', 'ndimage.binary_erosion/binary_dilation return an ndarray (type(ndimage.binary_dilation(np.ones([]))) is ndarray), which has dtype'),
    ('scipy', 'signal/tests/test_signaltools.py', 837, 'out.dtype'): ('false', 'fftconvolve returns an ndarray, which has dtype'),
    ('scipy', 'signal/tests/test_ltisys.py', 1101, 'system.num'): ('false', 'lti(num, den).__new__ returns a TransferFunctionContinuous, which has num and den'),
    ('scipy', 'signal/tests/test_ltisys.py', 1101, 'system.den'): ('false', 'lti(num, den).__new__ returns a TransferFunctionContinuous, which has num and den'),
    ('scipy', 'signal/tests/test_ltisys.py', 1112, 'system.num'): ('false', 'lti(num, den).__new__ returns a TransferFunctionContinuous, which has num and den'),
    ('scipy', 'signal/tests/test_ltisys.py', 1112, 'system.den'): ('false', 'lti(num, den).__new__ returns a TransferFunctionContinuous, which has num and den'),
    ('scipy', 'signal/tests/test_ltisys.py', 1189, 'system.num'): ('false', 'lti(num, den).__new__ returns a TransferFunctionContinuous, which has num and den'),
    ('scipy', 'signal/tests/test_ltisys.py', 1189, 'system.den'): ('false', 'lti(num, den).__new__ returns a TransferFunctionContinuous, which has num and den'),
    ('scipy', 'signal/tests/test_ltisys.py', 760, 's1.to_discrete'): ('false', 'StateSpace(...).__new__ returns a StateSpaceContinuous, which has to_discrete'),
    ('scipy', 'signal/tests/test_ltisys.py', 761, 's2.to_discrete'): ('false', 'StateSpace(...).__new__ returns a StateSpaceContinuous, which has to_discrete'),
    ('scipy', 'signal/tests/test_ltisys.py', 762, 's2.to_discrete'): ('false', 'StateSpace(...).__new__ returns a StateSpaceContinuous, which has to_discrete'),
    ('scipy', 'signal/tests/test_signaltools.py', 3174, 'system.num'): ('false', 'signal.dlti(num, den).__new__ returns a TransferFunctionDiscrete, which has num and den'),
    ('scipy', 'signal/tests/test_signaltools.py', 3174, 'system.den'): ('false', 'signal.dlti(num, den).__new__ returns a TransferFunctionDiscrete, which has num and den'),
    ('scipy', 'sparse/linalg/tests/test_interface.py', 48, 'A.args'): ('false', 'LinearOperator(**kw).__new__ returns a _CustomLinearOperator, which sets args'),
    ('stdlib', 'test_configparser.py', 1698, 'parser.getdecimal'): ('false', "ConfigParser(converters={'decimal': ...}) makes getdecimal; the test passes"),
    ('stdlib', 'test_configparser.py', 1699, 'parser.getdecimal'): ('false', "ConfigParser(converters={'decimal': ...}) makes getdecimal; the test passes"),
    ('stdlib', 'test_email/test_inversion.py', 74, 'msg2.get_content'): ('false', 'message_from_bytes(..., policy=policy.default) returns an EmailMessage, which has get_content'),
    ('stdlib', 'test_email/test_message.py', 979, 'msg.iter_attachments'): ('false', 'message_from_string(..., policy=policy.default) returns an EmailMessage, which has iter_attachments'),
    ('stdlib', 'test_tomllib/burntsushi.py', 81, 'obj.items'): ('false', 'obj is annotated typing.Any: any value, not an instance of a class named Any'),
    ('stdlib', 'test_weakref.py', 1958, 'd._remove'): ('false', 'WeakValueDictionary.__init__ sets self._remove'),
}


HAND.update({
    ("stdlib", "test_importlib/source/test_file_loader.py", 274, "unittest.mock"): (
        "right", "after the file's imports, unittest has no attribute mock in a fresh interpreter (the test is skipped here)"),
    ("stdlib", "test_importlib/source/test_file_loader.py", 329, "unittest.mock"): (
        "right", "after the file's imports, unittest has no attribute mock in a fresh interpreter (the test is skipped here)"),
    ("stdlib", "test_htmlparser.py", 75, "self.fail"): ("right", "HTMLParser has no fail: the method exists to fail if it is ever called"),
    ("stdlib", "test_htmlparser.py", 78, "self.fail"): ("right", "HTMLParser has no fail: the method exists to fail if it is ever called"),
    ("stdlib", "test_email/test__header_value_parser.py", 17, "x.token_type"): ("false", "EWWhiteSpaceTerminal sets token_type on its instances (Terminal.__init__)"),
    ("stdlib", "test_email/test_message.py", 957, "m.get_body"): ("false", "_str_msg parses with policy.default: an EmailMessage, which has get_body"),
    ("stdlib", "test_urllib.py", 99, "(self).fakesock"): ("false", "the HTTPConnection subclass defined there sets fakesock"),
    ("stdlib", "test_zipfile.py", 196, "zipopen.read1"): ("false", "ZipFile.open returns a ZipExtFile, which has read1"),
    ("stdlib", "test_zipfile.py", 215, "zipopen.read1"): ("false", "ZipFile.open returns a ZipExtFile, which has read1"),
    ("stdlib", "test_zoneinfo/test_zoneinfo.py", 85, "stack.pop_all().close"): ("false", "ExitStack.pop_all returns an ExitStack, which has close"),
    ("stdlib", "test_zoneinfo/test_zoneinfo.py", 1504, "stack.pop_all().close"): ("false", "ExitStack.pop_all returns an ExitStack, which has close"),
})

#: a platform's field, used only where the platform has it (as msvcrt's above)
_ST_FLAGS = "st_flags is the BSD/macOS stat field: the helper runs only from tests skipped unless posix.chflags exists, and asserts hasattr(st, 'st_flags') first"
HAND.update({
    ("stdlib", "test_posix.py", 943, "st.st_flags"): ("false", _ST_FLAGS),
    ("stdlib", "test_posix.py", 954, "st.st_flags"): ("false", _ST_FLAGS),
    ("stdlib", "test_posix.py", 954, "new_st.st_flags"): ("false", _ST_FLAGS),
    ("stdlib", "test_posix.py", 960, "st.st_flags"): ("false", _ST_FLAGS),
})

#: verdicts given by reading the code for whole groups of findings running code cannot
#: settle, each checked on samples: (pattern over the message, verdict, why); a pattern
#: whose why names ``{member}`` is kept only where numpy.ndarray has that member (looked up)
HAND_RULES: list[tuple[str, str, str]] = [
    (
        r"\(\S+ is a (?:[\w.]*TestCase\w*|func_tests\.FunctionalTestCaseMixin)\)",
        "false",
        "the value is the first parameter of a function in the body of a TestCase subclass (self, or test_sys_settrace's "
        "`output`, a list): an instance of the subclass, with the class attributes, helpers and mixins its base lacks",
    ),
    (
        r"is what .*\(\) returns\)$",
        "ndarray",
        "the call returns an ndarray here (an array argument or a size), and numpy.ndarray has {member}: the checker "
        "typed the value from the first type its docstring's Returns section names",
    ),
]


def hand_rule(kind: str, message: str, member: str) -> tuple[str, str] | None:
    """The first of `HAND_RULES` that settles a finding, as (verdict, why)."""
    for pattern, verdict, why in HAND_RULES:
        if kind != "receiver" or not re.search(pattern, message):
            continue
        if verdict == "ndarray":
            import numpy

            if not hasattr(numpy.ndarray, member):
                continue
            return "false", why.format(member=member)
        return verdict, why
    return None


def _env() -> dict[str, str]:
    src = str(ROOT / "src")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])),
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "OMP_NUM_THREADS": "1",
    }


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _ratio(part: int, whole: int) -> str:
    return f"{part / whole:.3f}" if whole else "na"


# -- the tools --------------------------------------------------------------------------
def ours(paths: list[str], cwd: str) -> list[dict]:
    """`adaptrack-lsp check --format json` over `paths`: its records (paths absolute)."""
    script = BIN / "adaptrack-lsp"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "adaptrack_lsp"]
    done = subprocess.run(
        [*command, "check", "--format", "json", *paths], capture_output=True, text=True, cwd=cwd, env=_env(), timeout=RUN_TIMEOUT_S * 4,
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"adaptrack-lsp check exited {done.returncode}:\n{done.stderr[-3000:]}")
    items = json.loads(done.stdout or "[]")
    for item in items:
        item["path"] = os.path.abspath(os.path.join(cwd, item["path"]))
    return items


def ruff_npy201(paths: list[str], cwd: str) -> list[dict] | None:
    """ruff's NPY201 (stable in the installed ruff: no ``--preview``) over `paths`; None
    where ruff is not installed."""
    ruff = BIN / "ruff" if (BIN / "ruff").exists() else shutil.which("ruff")
    if ruff is None:
        return None
    done = subprocess.run(
        [str(ruff), "check", "--isolated", "--no-cache", "--select", "NPY201", "--output-format", "json", *paths],
        capture_output=True, text=True, cwd=cwd, timeout=RUN_TIMEOUT_S,
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"ruff exited {done.returncode}:\n{done.stderr[-3000:]}")
    return [
        {"path": os.path.abspath(item["filename"]), "line": item["location"]["row"], "column": item["location"]["column"],
         "kind": "NPY201", "message": item["message"]}
        for item in json.loads(done.stdout or "[]")
    ]


# -- (a) NumPy 1 code on NumPy 2 --------------------------------------------------------
@dataclass
class Failure:
    """One failing statement: where, and why (from execution)."""

    path: str
    line: int
    end_line: int
    kind: str  # imports, module attributes, receivers, keywords
    message: str
    code: str
    matched_ours: bool = False
    matched_ruff: bool = False


@dataclass
class FileRun:
    """What running one file showed."""

    path: str
    failures: list[Failure] = field(default_factory=list)
    #: lines with a DeprecationWarning / lines that ran / lines that failed otherwise
    warned: set[int] = field(default_factory=set)
    executed: set[int] | None = None
    other_errors: dict[int, str] = field(default_factory=dict)


def gitchameleon_runs(data: Path, folder: Path) -> tuple[list[FileRun], list[str]]:
    """The GitChameleon NumPy records pinned below 2.0, run here (NumPy 2): each
    record's program (starting code and solution) with its visible test after it, as the
    benchmark runs it, statement by statement.  Kept: the records whose program fails
    for a missing API, and those that pass (their findings can only be false); notes
    on the rest."""
    from packaging.version import Version

    from adaptrack_lsp.evaluation import gitchameleon as gc

    records = [r for r in gc.load_records(data, ["numpy"]) if Version(r.version) < Version("2")]
    runs, notes = [], []
    (folder / "run").mkdir(parents=True, exist_ok=True)
    for record in records:
        program = record.answer if record.answer.endswith("\n") else record.answer + "\n"
        last_line = program.count("\n")
        path = folder / f"gitchameleon_{record.example_id}.py"
        path.write_text(program, encoding="utf-8")
        run_file = folder / "run" / path.name
        run_file.write_text(program + record.visible_test, encoding="utf-8")
        ran = statement_run(run_file)
        run = FileRun(str(path), executed={n for n in ran.executed or () if n <= last_line})
        run.failures = [
            Failure(str(path), f.line, f.end_line, f.kind, f.message, f.code) for f in ran.failures if f.line <= last_line
        ]
        run.warned = {n for n in ran.warned if n <= last_line}
        run.other_errors = {n: e for n, e in ran.other_errors.items() if n <= last_line}
        test_errors = [e for n, e in ran.other_errors.items() if n > last_line]
        if not run.failures and (run.other_errors or test_errors):
            first = next(iter(run.other_errors.values()), None) or test_errors[0]
            notes.append(f"gitchameleon {record.example_id} (numpy {record.version}): fails for another reason, not counted: {first[:120]}")
            continue
        runs.append(run)
    return runs, notes


def statement_run(path: Path) -> FileRun:
    """Run a file statement by statement (benchmarks/_statement_runner.py) here."""
    with tempfile.TemporaryDirectory(prefix="adaptrack-check-run-") as scratch:
        result_file = Path(scratch) / "result.json"
        done = subprocess.run(
            [sys.executable, "-I", "-B", str(RUNNER), str(path), str(result_file)],
            capture_output=True, text=True, cwd=scratch, timeout=RUN_TIMEOUT_S, env={**_env(), "MPLBACKEND": "Agg"},
        )
        if done.returncode != 0 or not result_file.exists():
            raise SystemExit(f"{path}: the statement runner failed ({done.returncode}):\n{done.stderr[-3000:]}")
        result = json.loads(result_file.read_text(encoding="utf-8"))
    run = FileRun(str(path), executed=set(result["executed"]))
    seen: set[int] = set()
    for item in result["failures"]:
        if item["api"]:
            if item["line"] in seen:
                continue  # the same line failing again (a loop, a second call)
            seen.add(item["line"])
            run.failures.append(Failure(str(path), item["line"], item["end_line"], item["api"], f"{item['type']}: {item['message']}", item["code"]))
        else:
            run.other_errors.setdefault(item["line"], f"{item['type']}: {item['message']}")
    run.warned = {w["line"] for w in result["warnings"] if "Deprecation" in w["category"]}
    return run


def _matches(finding: dict, failure: Failure) -> bool:
    return finding["path"] == failure.path and failure.line <= finding["line"] <= failure.end_line


def _why_false(finding: dict, runs: dict[str, FileRun]) -> str:
    run = runs.get(finding["path"])
    line = finding["line"]
    if run is None:
        return "file not run"
    if line in run.other_errors:
        return f"the line failed for another reason ({run.other_errors[line][:80]})"
    if line in run.warned:
        return "the line runs (with a DeprecationWarning: the name is deprecated, not removed)"
    if run.executed is not None and line not in run.executed:
        return "the line never ran"
    return "the line runs without error"


def _line_runs(finding: dict, runs: dict[str, FileRun]) -> bool:
    """Whether the finding's line ran without a failure of its own (then the names it
    uses exist)."""
    run = runs.get(finding["path"])
    line = finding["line"]
    if run is None or line in run.other_errors:
        return False
    return run.executed is None or line in run.executed


def section_a(args) -> dict[str, str]:
    scratch = Path(tempfile.mkdtemp(prefix="adaptrack-check-a-"))
    try:
        runs: list[FileRun] = []
        notes: list[str] = []
        data = SMOKE_GITCHAMELEON if args.smoke else (Path(args.data) if args.data else None)
        gitchameleon_counted = 0
        if data is None:
            print("a: GitChameleon records not measured (give --data DIR: the GitChameleon dataset folder, fetched by you)")
        else:
            started = time.perf_counter()
            found, notes = gitchameleon_runs(data, scratch / "gitchameleon")
            runs += found
            gitchameleon_counted = sum(bool(r.failures) for r in found)
            print(f"a: GitChameleon {data}: {len(found)} NumPy records below 2.0 run on NumPy 2 ({gitchameleon_counted} fail for a missing API, "
                  f"{len(found) - gitchameleon_counted} pass, {len(notes)} fail otherwise); {time.perf_counter() - started:.0f} s")
        scripts = sorted((DATA / "numpy1").glob("*.py"))
        if args.smoke:
            scripts = scripts[:1]
        for script in scripts:
            runs.append(statement_run(script))
        for note in notes:
            print("  " + note)
        paths = [run.path for run in runs]
        by_path = {run.path: run for run in runs}
        failures = [failure for run in runs for failure in run.failures]
        mine = ours(paths, str(scratch))
        theirs = ruff_npy201(paths, str(scratch))
        ruff_missing = theirs is None
        if ruff_missing:
            print("a: ruff is not installed here: NPY201 not measured")
            theirs = []
        notes_mine = [f for f in mine if f["kind"] == "deprecated"]
        mine = [f for f in mine if f["kind"] != "deprecated"]
        unmatched_mine = [f for f in mine if not any(_matches(f, failure) for failure in failures)]
        unmatched_theirs = [f for f in theirs if not any(_matches(f, failure) for failure in failures)]
        # a finding on a line that runs is false; on a line that never ran, or failed only
        # because an earlier line did (NameError), execution cannot tell
        false_mine = [f for f in unmatched_mine if _line_runs(f, by_path)]
        false_theirs = [f for f in unmatched_theirs if _line_runs(f, by_path)]
        for failure in failures:
            failure.matched_ours = any(_matches(f, failure) for f in mine)
            failure.matched_ruff = any(_matches(f, failure) for f in theirs)

        def short(path: str) -> str:
            return os.path.relpath(path, ROOT) if path.startswith(str(ROOT)) else os.path.relpath(path, scratch)

        print(f"a: {len(failures)} failing lines in {len(runs)} files (executed under numpy {_numpy_version()}); by kind:")
        kinds = ("imports", "module attributes", "receivers", "keywords")
        for kind in kinds:
            group = [f for f in failures if f.kind == kind]
            print(f"  {kind:18} {len(group):3}  ours {sum(f.matched_ours for f in group):3}  NPY201 {sum(f.matched_ruff for f in group):3}")
        for failure in failures:
            if not (failure.matched_ours and failure.matched_ruff):
                who = ", ".join(name for name, hit in (("ours", failure.matched_ours), ("NPY201", failure.matched_ruff)) if not hit)
                print(f"  MISSED by {who}: {short(failure.path)}:{failure.line} [{failure.kind}] {failure.code[:70]!r}: {failure.message[:90]}")
        for tool, found in (("ours", unmatched_mine), ("NPY201", unmatched_theirs)):
            for finding in found:
                label = "FALSE" if _line_runs(finding, by_path) else "UNDETERMINED"
                print(f"  {label} ({tool}) {short(finding['path'])}:{finding['line']}:{finding['column']}: {finding['message'][:90]} -- {_why_false(finding, by_path)}")
        for finding in notes_mine:
            print(f"  deprecation note (ours, not counted) {short(finding['path'])}:{finding['line']}: {finding['message'][:90]}")
        return {
            "numpy_files": str(len(runs)),
            "numpy_failures": str(len(failures)),
            "gitchameleon_counted": str(gitchameleon_counted),
            "recall": _ratio(sum(f.matched_ours for f in failures), len(failures)),
            "false_findings": str(len(false_mine)),
            "ruff_recall": "na" if ruff_missing else _ratio(sum(f.matched_ruff for f in failures), len(failures)),
            "ruff_false_findings": str(len(false_theirs)),
            "undetermined": str(len(unmatched_mine) - len(false_mine)),
            "ruff_undetermined": str(len(unmatched_theirs) - len(false_theirs)),
            "deprecation_notes": str(len(notes_mine)),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _numpy_version() -> str:
    import numpy

    return numpy.__version__


# -- (b) TensorFlow 1 code on TensorFlow 2 ----------------------------------------------
_RENAMED = re.compile(r"^(\d+):(\d+): \w+: Renamed '([\w.]+)' to '([\w.]+)'")
_RENAMED_KEYWORD = re.compile(r"^(\d+):(\d+): \w+: Renamed keyword argument for ([\w.]+) from (\w+) to (\w+)")
_CHANGED_CALL = re.compile(r"^(\d+):(\d+): \w+: Changed ([\w.]+) call to")
_CHANGED_ARG = re.compile(r"^(\d+):(\d+): \w+: Changing (\w+) arg of ([\w.]+) to")
_CHANGED_METHOD = re.compile(r"^(\d+):(\d+): \w+: Changing (\w+)\.(\w+)\(\) to")


@dataclass
class Change:
    """One change tf_upgrade_v2 reports."""

    path: str
    line: int
    what: str  # name: an API path; keyword: a keyword of a callee; method: a method of tf.data.Dataset
    old: str  # the old dotted name (or the callee, for a keyword)
    keyword: str = ""
    text: str = ""
    renamed: bool = True
    absent: bool | None = None
    covered: bool = False


def upgrade_report(folder: Path, scratch: Path) -> list[Change]:
    """The changes ``tf_upgrade_v2 --intree`` reports for the files of `folder` (one run:
    TensorFlow is imported once)."""
    report = scratch / "report.txt"
    done = subprocess.run(
        [str(BIN / "tf_upgrade_v2"), "--intree", folder.name, "--outtree", str(scratch / "upgraded"), "--reportfile", str(report)],
        capture_output=True, text=True, cwd=folder.parent, env=_env(), timeout=RUN_TIMEOUT_S,
    )
    if not report.exists():
        raise SystemExit(f"tf_upgrade_v2 --intree {folder}: no report ({done.returncode}):\n{done.stderr[-2000:]}")
    text = report.read_text(encoding="utf-8")
    if "Failed to parse" in text:
        raise SystemExit(f"tf_upgrade_v2 could not parse a file of {folder}:\n{text[-2000:]}")
    changes, seen, path = [], set(), ""
    for line in text.split("Detailed log follows:", 1)[-1].splitlines():
        processing = re.match(r"Processing file '(.+)'", line)
        if processing:
            path = str((folder.parent / processing[1]).resolve())
            continue
        for pattern, build in (
            (_RENAMED, lambda m, path=path: Change(path, int(m[1]), "name", m[3])),
            (_RENAMED_KEYWORD, lambda m, path=path: Change(path, int(m[1]), "keyword", m[3], keyword=m[4])),
            (_CHANGED_CALL, lambda m, path=path: Change(path, int(m[1]), "name", m[3], renamed=False)),
            (_CHANGED_ARG, lambda m, path=path: Change(path, int(m[1]), "keyword", m[4], keyword=m[3], renamed=False)),
            (_CHANGED_METHOD, lambda m, path=path: Change(path, int(m[1]), "method", "tf.data.Dataset." + m[4], renamed=False)),
        ):
            match = pattern.match(line)
            if match:
                change = build(match)
                change.text = line.strip()
                key = (change.path, change.line, change.what, change.old, change.keyword)
                if key not in seen:
                    seen.add(key)
                    changes.append(change)
                break
    return changes


_ABSENCE = r"""
import inspect, json, sys, warnings
warnings.simplefilter("ignore")
import tensorflow as tf
def resolve(dotted):
    obj = tf
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj
answers = {}
for what, old, keyword in json.loads(sys.argv[1]):
    try:
        obj = resolve(old)
    except AttributeError:
        answers[what + " " + old + " " + keyword] = [True, "AttributeError"]
        continue
    if what != "keyword":
        answers[what + " " + old + " " + keyword] = [False, "present"]
        continue
    try:
        parameters = inspect.signature(obj).parameters
    except (TypeError, ValueError) as error:
        answers[what + " " + old + " " + keyword] = [None, "no signature: %s" % error]
        continue
    takes = keyword in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    answers[what + " " + old + " " + keyword] = [not takes, "signature: (%s)" % ", ".join(parameters)]
print(json.dumps(answers))
"""


def absent_in_tensorflow(changes: list[Change]) -> None:
    """Whether each change's old name is absent from the installed TensorFlow, found by
    running `getattr` and `inspect.signature` in a separate interpreter."""
    asked = sorted({(c.what, c.old, c.keyword) for c in changes})
    done = subprocess.run([sys.executable, "-c", _ABSENCE, json.dumps(asked)], capture_output=True, text=True, env=_env(), timeout=RUN_TIMEOUT_S)
    if done.returncode != 0:
        raise SystemExit(f"looking names up in tensorflow failed:\n{done.stderr[-3000:]}")
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    for change in changes:
        change.absent = answers[f"{change.what} {change.old} {change.keyword}"][0]


def _covers(finding: dict, change: Change) -> bool:
    if finding["path"] != change.path or finding["line"] != change.line or finding["kind"] == "deprecated":
        return False
    name = finding["name"]
    if change.what == "keyword":
        return finding["kind"] == "keyword" and name.endswith(f"({change.keyword}=)")
    last = name.rsplit(".", 1)[-1]
    return last in change.old.split(".")[1:]


def _parsing_copy(source: Path, folder: Path) -> Path:
    """`source` as it is, or cut to its longest beginning that parses (an example that
    ends in an unfinished line, as a completion example does)."""
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    for end in range(len(lines), 0, -1):
        try:
            ast.parse("".join(lines[:end]))
        except SyntaxError:
            continue
        target = folder / source.name
        target.write_text("".join(lines[:end]), encoding="utf-8")
        if end < len(lines):
            print(f"b: {source.relative_to(ROOT)}: checked up to line {end} of {len(lines)} (the rest does not parse)")
        return target
    raise SystemExit(f"{source}: no beginning of it parses")


def section_b(args) -> dict[str, str]:
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None or not (BIN / "tf_upgrade_v2").exists():
        print("b: not measured (tensorflow and its tf_upgrade_v2 are not installed here)")
        return {"tf_renames": "na", "tf_covered": "na"}
    scratch = Path(tempfile.mkdtemp(prefix="adaptrack-check-b-"))
    try:
        files = scratch / "files"
        files.mkdir()
        sources = [ROOT / "examples" / "tf_compat_v1.py"] + ([] if args.smoke else sorted((DATA / "tf1").glob("*.py")))
        paths = [_parsing_copy(source, files).resolve() for source in sources]
        started = time.perf_counter()
        changes = upgrade_report(files, scratch)
        upgraded = time.perf_counter()
        mine = ours([str(p) for p in paths], str(scratch))
        checked = time.perf_counter()
        # our findings that no change names are looked up too
        extra = [f for f in mine if f["kind"] != "deprecated" and not any(_covers(f, c) for c in changes)]
        extra_changes = [
            Change(f["path"], f["line"], "name", f["name"], text=f["message"], renamed=False)
            for f in extra if re.fullmatch(r"tf(\.\w+)+", f["name"])
        ]
        absent_in_tensorflow(changes + extra_changes)
        print(f"b: tf_upgrade_v2 {upgraded - started:.0f} s, adaptrack-lsp check {checked - upgraded:.0f} s, "
              f"looking the names up in tensorflow {time.perf_counter() - checked:.0f} s")
        for change in changes:
            change.covered = any(_covers(f, change) for f in mine)
        renames = [c for c in changes if c.renamed and c.absent]
        others = [c for c in changes if not c.renamed and c.absent]
        present = [c for c in changes if c.absent is False]
        unknown = [c for c in changes if c.absent is None]
        print(f"b: tf_upgrade_v2 over {len(paths)} TF1 files: {len(changes)} changes; old name absent from tensorflow "
              f"{_tf_version()}: {len(renames)} renames, {len(others)} other changes; present: {len(present)}; unknown: {len(unknown)}")
        for change in renames + others:
            if not change.covered:
                print(f"  MISSED {Path(change.path).name}:{change.line}: {change.text.split(': ', 2)[-1]}")
        for change in unknown:
            print(f"  not scored (no signature) {Path(change.path).name}:{change.line}: {change.text}")
        for change in present:
            print(f"  not scored (the old name exists in tensorflow {_tf_version()}) {Path(change.path).name}:{change.line}: {change.text}")
        for change in extra_changes:
            verdict = {True: "absent (getattr raises AttributeError)", False: "PRESENT", None: "unknown"}[change.absent]
            print(f"  ours, no tf_upgrade_v2 change: {Path(change.path).name}:{change.line}: {change.text[:90]} -- {verdict}")
        for finding in extra:
            if not re.fullmatch(r"tf(\.\w+)+", finding["name"]):
                print(f"  ours, no tf_upgrade_v2 change (not looked up): {Path(finding['path']).name}:{finding['line']}: {finding['message'][:90]}")
        return {
            "tf_renames": str(len(renames)),
            "tf_covered": str(sum(c.covered for c in renames)),
            "tf_coverage": _ratio(sum(c.covered for c in renames), len(renames)),
            "tf_other": str(len(others)),
            "tf_other_covered": str(sum(c.covered for c in others)),
            "tf_extra_findings": str(len(extra)),
            "tf_extra_present": str(sum(c.absent is False for c in extra_changes)),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _tf_version() -> str:
    from importlib import metadata

    for name in ("tensorflow", "tensorflow-cpu"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


# -- (c) findings over code that runs ---------------------------------------------------
def suites(smoke: bool) -> list[tuple[str, Path, list[str]]]:
    """(suite, its root, its files): the standard library's tests, NumPy's and SciPy's."""
    import numpy

    from adaptrack_lsp.checking.files import python_files

    try:
        import scipy
    except ImportError:
        scipy = None
    found = []
    stdlib = Path(sysconfig.get_paths()["stdlib"]) / "test"
    for name, root, folders in (
        ("stdlib", stdlib, [stdlib]),
        ("numpy", Path(numpy.__file__).parent, None),
        ("scipy", Path(scipy.__file__).parent, None) if scipy is not None else ("scipy", None, None),
    ):
        if root is None:
            print(f"c: {name}: not installed here, not checked")
            continue
        if folders is None:
            folders = sorted({p for p in root.rglob("tests") if p.is_dir() and "tests" not in p.parent.relative_to(root).parts})
        files = list(python_files([str(f) for f in folders]))
        if smoke:
            files = [f for f in files if os.path.getsize(f) < 12_000 and f.endswith(".py")][:3]
        found.append((name, root, files))
    return found


def _folder_modules(folder: str, cache: dict[str, frozenset[str]]) -> frozenset[str]:
    names = cache.get(folder)
    if names is None:
        found = set()
        try:
            for entry in os.scandir(folder):
                stem = entry.name.rsplit(".", 1)[0] if entry.name.endswith((".py", ".pyi")) else entry.name
                if stem.isidentifier() and (entry.name.endswith((".py", ".pyi")) or entry.is_dir()):
                    found.add(stem)
        except OSError:
            pass
        names = cache[folder] = frozenset(found)
    return names


def make_checker(workspace: str):
    """A `Checker` on the index `adaptrack-lsp check` gets (no options: the installed
    packages), and the environment that holds it (close it at the end)."""
    from adaptrack_lsp.checking.checker import Checker
    from adaptrack_lsp.config import parse_settings
    from adaptrack_lsp.constrainers.environment import ConstraintEnvironment

    settings, problems = parse_settings({})
    if problems:
        raise SystemExit("; ".join(problems))
    environment = ConstraintEnvironment(workspace)
    index, info = environment.api_index(settings)
    if index is None or info.problem:
        raise SystemExit(f"no API index: {info.problem}")
    return Checker(index), environment


def check_files(checker, files: list[str], label: str, every_s: float = 10.0) -> tuple[list[tuple[str, object]], int, int, float]:
    """Check each file: ([(path, finding)], files read, lines, seconds)."""
    from adaptrack_lsp.checking.files import read_source

    found, lines, read, started, last = [], 0, 0, time.perf_counter(), time.perf_counter()
    folders: dict[str, frozenset[str]] = {}
    for number, path in enumerate(files, 1):
        text, _ = read_source(path)
        if text is None:
            continue
        read += 1
        lines += text.count("\n") + 1
        result = checker.check(text, local_modules=_folder_modules(os.path.dirname(path), folders))
        found += [(path, finding) for finding in result.findings]
        now = time.perf_counter()
        if now - last >= every_s:
            last = now
            _say(f"[{label}] {number}/{len(files)} files, {lines} lines, {now - started:.0f} s, {lines / (now - started):.0f} lines/s, {len(found)} findings")
    return found, read, lines, time.perf_counter() - started


_CONFIRM = r"""
import importlib, inspect, json, sys, warnings
warnings.simplefilter("ignore")
request = json.loads(sys.argv[1])
kind, path, member = request["kind"], request["path"], request["member"]
if request["folder"]:
    sys.path.insert(0, request["folder"])

def importable(name):
    try:
        importlib.import_module(name)
        return True
    except BaseException:
        return False

def resolve(parts):
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[: i + 1]))
    return obj

def value(parts):
    last = max(i for i, p in enumerate(parts) if p == "()")
    sys.path.insert(0, request["worker"])
    import introspect_worker
    obj = introspect_worker.resolve_value_type(tuple(parts[: last + 1]))
    for name in parts[last + 1:]:
        obj = getattr(obj, name)
    return obj

def verdict():
    dotted = ".".join(path)
    full = ".".join([*path, member])
    if kind == "import":
        if importable(full):
            return "present", "import %s works" % full
        if not path:
            return "absent", "import %s fails" % full
        try:
            parent = resolve(path)
        except BaseException as error:
            return "absent", "%s cannot be imported (%s)" % (dotted, type(error).__name__)
        if hasattr(parent, member):
            return "present", "%s has %s" % (dotted, member)
        return "absent", "%s has no %s and import %s fails" % (dotted, member, full)
    if kind == "attribute":
        obj = resolve(path)
        if hasattr(obj, member):
            return "present", "getattr(%s, %r) works" % (dotted, member)
        if request["imports"] is None:
            return ("submodule", "%s is a submodule" % full) if importable(full) else ("absent", "getattr(%s, %r) raises AttributeError" % (dotted, member))
        # a submodule is an attribute of its package once something imports it: run the
        # file's own import statements, then look the name up again
        exec(request["imports"], {"__name__": "_adaptrack_imports"})
        if hasattr(obj, member):
            return "present", "%s is a submodule, loaded by the file's own imports" % full
        if importable(full):
            # code that runs before the use may still load it (codecs.lookup("ascii")
            # loads encodings.ascii): only reading the code can tell
            return "unknown", "%s is a submodule that neither the file's imports nor its package load" % full
        return "absent", "getattr(%s, %r) raises AttributeError" % (dotted, member)
    if kind == "receiver":
        cls = value(path)
        name = "%s.%s" % (getattr(cls, "__module__", "?"), getattr(cls, "__qualname__", cls))
        if hasattr(cls, member):
            return "present", "%s has %s" % (name, member)
        if getattr(cls, "__dictoffset__", 0):
            return "unknown", "%s lacks %s, but its instances keep a __dict__" % (name, member)
        return "absent", "%s has no %s and its instances no __dict__" % (name, member)
    if kind == "keyword":
        callee = list(path[:-1])
        obj = value(callee) if "()" in callee else resolve(callee)
        parameters = inspect.signature(obj).parameters
        if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            return "present", "the callee takes **kwargs"
        found = parameters.get(member)
        if found is not None and found.kind is not found.POSITIONAL_ONLY:
            return "present", "the callee takes %s" % member
        return "absent", "signature (%s)" % ", ".join(parameters)
    return "unknown", "kind %s" % kind

try:
    result = verdict()
except BaseException as error:
    result = ("unknown", ("%s: %s" % (type(error).__name__, error))[:200])
print(json.dumps(result))
"""


def import_statements(path: str) -> str:
    """The file's absolute import statements (at any depth), each in a ``try`` of its own."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return ""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and not node.level and node.module != "__future__"):
            found.append(f"try:\n    {ast.unparse(node)}\nexcept BaseException:\n    pass\n")
    return "".join(found)


def confirm(kind: str, path: tuple, member: str, folder: str, file: str = "") -> tuple[str, str]:
    """What running code says of a finding: ("absent" | "present" | "unknown", why)."""
    from adaptrack_lsp.apis import introspect_worker

    request = {
        "kind": kind, "path": list(path), "member": member, "folder": folder, "worker": str(Path(introspect_worker.__file__).parent),
        "imports": import_statements(file) if file else None,
    }
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", _CONFIRM, json.dumps(request)], capture_output=True, text=True,
            cwd=folder or None, timeout=CONFIRM_TIMEOUT_S, env={**_env(), "MPLBACKEND": "Agg"}, stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return "unknown", f"the lookup took over {CONFIRM_TIMEOUT_S} s"
    lines = done.stdout.strip().splitlines()
    try:
        answer, why = json.loads(lines[-1])
    except (IndexError, ValueError):
        return "unknown", f"the lookup printed no answer (exit {done.returncode}): {done.stderr.strip()[-150:]}"
    return answer, why


def section_c(args) -> dict[str, str]:
    workspace = tempfile.mkdtemp(prefix="adaptrack-check-c-")
    checker, environment = make_checker(workspace)
    findings: list[tuple[str, str, Path, object]] = []
    files_read = lines = 0
    seconds = 0.0
    try:
        for suite, root, files in suites(args.smoke):
            found, read, counted, spent = check_files(checker, files, f"c {suite}")
            files_read, lines, seconds = files_read + read, lines + counted, seconds + spent
            findings += [(suite, path, root, finding) for path, finding in found]
            print(f"c: {suite}: {read} files, {counted} lines in {spent:.0f} s ({counted / spent if spent else 0:.0f} lines/s), {len(found)} findings", flush=True)
    finally:
        environment.close()
        shutil.rmtree(workspace, ignore_errors=True)
    verdicts: dict[tuple, tuple[str, str]] = {}
    confirmed = false = unsettled = notes = 0
    rows = []
    for suite, path, root, finding in findings:
        if finding.deprecated or finding.kind == "deprecated":
            notes += 1
            continue
        folder = os.path.dirname(path) if finding.kind == "import" else ""
        key = (finding.kind, finding.path, finding.member, folder)
        if key not in verdicts:
            verdicts[key] = confirm(finding.kind, finding.path, finding.member, folder)
        answer, why = verdicts[key]
        if answer == "submodule":
            # whether the file's own imports load it (then the attribute exists)
            key = (*key, path)
            if key not in verdicts:
                verdicts[key] = confirm(finding.kind, finding.path, finding.member, os.path.dirname(path), path)
            answer, why = verdicts[key]
        where = os.path.relpath(path, root)
        hand = HAND.get((suite, where, finding.line, finding.name)) or hand_rule(finding.kind, finding.message, finding.member)
        if answer == "unknown" and hand is not None:
            answer, why = ("absent" if hand[0] == "right" else "present"), f"by hand: {hand[1]}"
        if answer == "absent":
            confirmed += 1
            label = "right"
        elif answer == "present":
            false += 1
            label = "FALSE"
        else:
            unsettled += 1
            label = "UNSETTLED"
        rows.append(f"  {label} [{finding.kind}] {suite}/{where}:{finding.line}:{finding.column}: {finding.message[:110]} -- {why}")
    for row in sorted(rows, key=lambda row: (not row.startswith("  FALSE"), not row.startswith("  UNSETTLED"), row)):
        print(row)
    groups: dict[str, int] = {}
    for row in rows:
        if row.startswith("  FALSE"):
            kind = row.split("]", 1)[0].split("[", 1)[1]
            group = f"[{kind}] {row.rsplit(' -- ', 1)[1]}"
            groups[group] = groups.get(group, 0) + 1
    if groups:
        print(f"c: false findings by cause ({false} in all):")
        for group, count in sorted(groups.items(), key=lambda item: -item[1]):
            print(f"  {count:5}  {group[:150]}")
    return {
        "corpus_files": str(files_read),
        "corpus_lines": str(lines),
        "corpus_findings": str(len(findings) - notes),
        "corpus_confirmed": str(confirmed),
        "corpus_false": str(false),
        "corpus_unsettled": str(unsettled),
        "corpus_seconds": f"{seconds:.0f}",
    }


# -- (d) speed --------------------------------------------------------------------------
def edit_file(files: list[str]) -> str | None:
    """A real file of about `EDIT_FILE_LINES` lines that binds ``np`` (for the edit)."""
    best = None
    for path in files:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        count = text.count("\n")
        if "import numpy as np" in text and abs(count - EDIT_FILE_LINES) <= 60 and (best is None or abs(count - EDIT_FILE_LINES) < best[0]):
            try:
                ast.parse(text)
            except SyntaxError:
                continue
            best = (abs(count - EDIT_FILE_LINES), path)
    return best[1] if best else None


def edited_versions(text: str, count: int = 6) -> list[str]:
    """Successive versions of `text`, each with one more single-line statement changed
    (``x = f()`` becomes ``x = f() or np.zeros(2).sum(axis=0)``), each one parsing."""
    tree = ast.parse(text)
    lines = text.split("\n")
    candidates = [
        node.lineno for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.Return, ast.Expr)) and node.lineno == node.end_lineno
        and getattr(node, "value", None) is not None and "yield" not in lines[node.lineno - 1] and "#" not in lines[node.lineno - 1]
    ]
    candidates = sorted(set(candidates))
    versions = []
    step = max(1, len(candidates) // (count + 1))
    for line in candidates[step::step]:
        changed = list(lines if not versions else versions[-1].split("\n"))
        changed[line - 1] = changed[line - 1].rstrip() + " or np.zeros(2).sum(axis=0)"
        candidate = "\n".join(changed)
        try:
            ast.parse(candidate)
        except SyntaxError:
            continue
        versions.append(candidate)
        if len(versions) == count:
            break
    return versions


def speed_child(request_file: str) -> int:
    """One measured run (a separate process, so that the cache folders in its
    environment and its peak memory are its own): prints one JSON line."""
    request = json.loads(Path(request_file).read_text(encoding="utf-8"))
    started = time.perf_counter()
    workspace = tempfile.mkdtemp(prefix="adaptrack-check-d-")
    checker, environment = make_checker(workspace)
    result: dict = {"setup_seconds": time.perf_counter() - started, "worker_peak_rss_mb": 0.0}
    try:
        _, read, lines, seconds = check_files(checker, request["files"], "d " + request["label"])
        result.update(files=read, lines=lines, check_seconds=seconds)
        edit = request.get("edit")
        if edit:
            text = Path(edit).read_text(encoding="utf-8")
            versions = edited_versions(text)
            # first pass: a name an edit adds may be asked of the index for the first time
            # (computed once, then cached); the second pass is typing on a warm index
            first, times = [], []
            for timings in (first, times):
                checker.check(text)
                for version in versions:
                    before = time.perf_counter()
                    checker.check(version)
                    timings.append((time.perf_counter() - before) * 1000)
            result.update(edit_file=edit, edit_lines=text.count("\n") + 1, edit_ms=times, edit_first_ms=first)
        # the processes this one started (the introspection worker, jedi's subprocess):
        # their own peaks, read before they end
        result["worker_peak_rss_mb"] = max([_peak_rss_mb(pid) for pid in _children()] or [0.0])
    finally:
        environment.close()
        shutil.rmtree(workspace, ignore_errors=True)
    result["total_seconds"] = time.perf_counter() - started
    result["peak_rss_mb"] = _peak_rss_mb("self")
    print(json.dumps(result))
    return 0


def _peak_rss_mb(pid) -> float:
    """A process's peak resident memory (``VmHWM``: its own, where ``ru_maxrss`` would
    carry the peak of the process that started it across ``exec``)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _children() -> list[int]:
    found = []
    for task in Path("/proc/self/task").glob("*"):
        try:
            found += [int(pid) for pid in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _speed_run(label: str, files: list[str], cache: Path, edit: str | None) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump({"label": label, "files": files, "edit": edit}, handle)
    try:
        env = {**_env(), "ADAPTRACK_CACHE": str(cache / "adaptrack"), "XDG_CACHE_HOME": str(cache / "xdg")}
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--speed-child", handle.name],
            stdout=subprocess.PIPE, text=True, env=env, timeout=3600,
        )
    finally:
        os.unlink(handle.name)
    if done.returncode != 0:
        raise SystemExit(f"the {label} speed run exited {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def section_d(args) -> dict[str, str]:
    import numpy

    from adaptrack_lsp.checking.files import python_files

    root = Path(numpy.__file__).parent
    folders = sorted({p for p in root.rglob("tests") if p.is_dir() and "tests" not in p.parent.relative_to(root).parts})
    files = list(python_files([str(f) for f in folders]))
    edit = edit_file(files)
    if args.smoke:
        files = [f for f in files if f.endswith(".py") and os.path.getsize(f) < 12_000][:4]
    cache = Path(tempfile.mkdtemp(prefix="adaptrack-check-cache-"))
    load_before = os.getloadavg()[0]
    try:
        cold = _speed_run("cold", files, cache, None)
        cached = _speed_run("cached", files, cache, edit)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    times = cached.get("edit_ms") or []
    print(f"d: NumPy's tests, {cold['files']} files, {cold['lines']} lines ({os.cpu_count()} cores; load average "
          f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after: other work on the machine shares the cores):")
    for name, run in (("cold (empty caches)", cold), ("cached index", cached)):
        print(f"  {name:20} {run['check_seconds']:7.1f} s checking ({run['lines'] / run['check_seconds']:.0f} lines/s), "
              f"index start {run['setup_seconds']:.1f} s, whole process {run['total_seconds']:.1f} s; peak RSS {run['peak_rss_mb']:.0f} MB, worker {run['worker_peak_rss_mb']:.0f} MB")
    if times:
        print(f"  edit: {os.path.relpath(cached['edit_file'], root.parent)} ({cached['edit_lines']} lines): one-line edits checked again in "
              + ", ".join(f"{t:.0f}" for t in times) + " ms (the first time each edit's names were asked: "
              + ", ".join(f"{t:.0f}" for t in cached["edit_first_ms"]) + " ms)")
    return {
        "cold_lines_per_s": f"{cold['lines'] / cold['check_seconds']:.0f}",
        "cached_lines_per_s": f"{cached['lines'] / cached['check_seconds']:.0f}",
        "edit_ms": f"{statistics.median(times):.0f}" if times else "na",
        "edit_max_ms": f"{max(times):.0f}" if times else "na",
        "peak_rss_mb": f"{max(cold['peak_rss_mb'], cached['peak_rss_mb']):.0f}",
        "worker_peak_rss_mb": f"{max(cold['worker_peak_rss_mb'], cached['worker_peak_rss_mb']):.0f}",
    }


SECTIONS = {"a": section_a, "b": section_b, "c": section_c, "d": section_d}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="every section at tiny sizes")
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated sections (a, b, c, d)")
    parser.add_argument("--data", default=None, help="a: the GitChameleon dataset folder (dataset.jsonl, hidden_tests/), fetched by you")
    parser.add_argument("--speed-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.speed_child:
        return speed_child(args.speed_child)
    chosen = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SECTIONS]
    if unknown or not chosen:
        parser.error(f"--sections: unknown or none ({', '.join(unknown)}); choose from {', '.join(SECTIONS)}")
    figures: dict[str, str] = {}
    for name in chosen:
        started = time.perf_counter()
        figures.update(SECTIONS[name](args))
        print(f"section {name}: {time.perf_counter() - started:.0f} s")
    print(" ".join(f"{name}={value}" for name, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
