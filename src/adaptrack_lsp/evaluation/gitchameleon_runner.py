"""Runs one GitChameleon test inside a pinned environment: one stand-alone script.

This file is run by the *environment's* interpreter (``python -I -B runner.py ...``,
copied into the run's temporary folder), so it imports only the standard library (and
pytest, which the environment has).  It sets its own resource limits first (the
``apply_limits`` of ``apis/introspect_worker.py``, loaded from the path given), then
runs the test and writes what happened to a JSON file:

- ``--mode pytest``: ``pytest`` on the folder (the benchmark's hidden tests,
  ``test_sample.py`` next to ``sample_N.py``); passed = pytest's exit status 0;
- ``--mode script``: the file runs as ``__main__`` (the visible test appended to the
  code, as the benchmark runs it); passed = no exception;
- ``--mode imports``: ``--target`` names distributions (comma-separated); every
  top-level module each one installs is imported; passed = all import.

The result: ``{"passed", "exit", "exceptions": [{"type", "bases", "message",
"in_solution", "when"}], "tests": {"passed": n, "failed": n}}``.  ``in_solution``: the
traceback passes through the solution file (so the exception comes from the code under
test, not from the test's own set-up; ``line`` is the solution's line and ``position``
its ``[line, column, end line, end column]``), ``bases``: the
exception's classes by name (``ModuleNotFoundError`` lists ``ImportError``),
``on_module`` (AttributeError): the missing attribute was looked up on a module.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import traceback

MESSAGE_LIMIT = 500


def describe(error: BaseException, solution: str, when: str) -> dict:
    """The exception as data: its type and classes, message, whether its traceback
    passes through the solution file (and that line), where it was raised, and for an
    AttributeError whether the object was a module."""
    import types

    frames = traceback.extract_tb(error.__traceback__)
    chain = error.__cause__ or error.__context__
    while chain is not None and not any(os.path.basename(f.filename) == solution for f in frames):
        frames = traceback.extract_tb(chain.__traceback__) + frames
        chain = chain.__cause__ or chain.__context__
    mine = [frame for frame in frames if solution and os.path.basename(frame.filename) == solution]
    try:
        message = str(error)
    except Exception:  # noqa: BLE001 - a broken __str__ must not lose the record
        message = "<unprintable>"
    found = {
        "type": type(error).__name__,
        "bases": [cls.__name__ for cls in type(error).__mro__],
        "message": message[:MESSAGE_LIMIT],
        "in_solution": bool(mine),
        "line": (mine[-1].line or "") if mine else "",
        # where in the solution file (1-based line, 0-based UTF-8 columns of the failing
        # expression where Python knows them)
        "position": [mine[-1].lineno, getattr(mine[-1], "colno", None), getattr(mine[-1], "end_lineno", None), getattr(mine[-1], "end_colno", None)] if mine else None,
        "raised_in": f"{os.path.basename(frames[-1].filename)}:{frames[-1].name}" if frames else "",
        "when": when,
    }
    if isinstance(error, AttributeError):
        obj = getattr(error, "obj", None)
        found["on_module"] = isinstance(obj, types.ModuleType) or message.startswith("module ") or (
            bool(frames) and frames[-1].name == "__getattr__" and os.path.basename(frames[-1].filename) == "__init__.py"
        )
    return found


class Probe:
    """A pytest plugin that keeps the exception of every failed collection and test."""

    def __init__(self, solution: str):
        self.solution = solution
        self.exceptions: list[dict] = []
        self.tests = {"passed": 0, "failed": 0}

    def pytest_exception_interact(self, node, call, report):  # noqa: ARG002 - pytest hook signature
        excinfo = getattr(call, "excinfo", None)
        if excinfo is not None and excinfo.value is not None:
            error = excinfo.value
            # pytest wraps an import-time error of a test module (the solution imported by
            # the test) in its CollectError, raised from the original
            while type(error).__name__ == "CollectError" and error.__cause__ is not None:
                error = error.__cause__
            self.exceptions.append(describe(error, self.solution, getattr(call, "when", "collect")))

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.failed:
            if report.failed:
                self.tests["failed"] += 1
            elif report.when == "call" and report.passed:
                self.tests["passed"] += 1


def run_pytest(folder: str, solution: str) -> dict:
    import pytest

    probe = Probe(solution)
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--disable-warnings", "-o", "addopts=", folder], plugins=[probe])
    code = int(code)
    return {"passed": code == 0, "exit": code, "exceptions": probe.exceptions, "tests": probe.tests}


def run_script(path: str, solution: str) -> dict:
    import runpy

    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as stop:
        ok = stop.code in (None, 0)
        return {"passed": ok, "exit": 0 if ok else 1, "exceptions": [] if ok else [describe(stop, solution, "call")], "tests": {}}
    except BaseException as error:  # noqa: BLE001 - everything the code raises is the result
        return {"passed": False, "exit": 1, "exceptions": [describe(error, solution, "call")], "tests": {}}
    return {"passed": True, "exit": 0, "exceptions": [], "tests": {}}


SKIPPED_TOP_LEVEL = frozenset({"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "scripts"})


def top_level_modules(distribution: str) -> list[str]:
    """The importable top-level names a distribution installs (its ``top_level.txt``,
    else the first part of its files); private names and test folders left out."""
    from importlib import metadata

    dist = metadata.distribution(distribution)
    text = dist.read_text("top_level.txt")
    names: set[str] = set(text.split()) if text else set()
    if not names:
        for file in dist.files or []:
            parts = file.parts
            if len(parts) == 1 and parts[0].endswith(".py"):
                names.add(parts[0][:-3])
            elif len(parts) > 1 and not parts[0].endswith((".dist-info", ".data", ".egg-info")):
                names.add(parts[0])
    return sorted(n for n in names if n.isidentifier() and not n.startswith("_") and n not in SKIPPED_TOP_LEVEL)


def run_imports(distributions: list[str]) -> dict:
    import importlib
    import importlib.util

    modules: list[str] = []
    for distribution in distributions:
        try:
            names = top_level_modules(distribution)
        except Exception as error:  # noqa: BLE001 - a missing distribution is the result
            return {"passed": False, "exit": 1, "exceptions": [describe(error, "", "import")], "modules": modules, "failed": distribution}
        for name in names:
            if importlib.util.find_spec(name) is None:
                continue  # named in top_level.txt but not installed (torch's caffe2)
            modules.append(name)
            try:
                importlib.import_module(name)
            except BaseException as error:  # noqa: BLE001 - everything an import raises is the result
                found = describe(error, "", "import")
                found["module"] = name
                return {"passed": False, "exit": 1, "exceptions": [found], "modules": modules, "failed": name}
    return {"passed": True, "exit": 0, "exceptions": [], "modules": modules}


def load_limits(worker: str):
    spec = importlib.util.spec_from_file_location("_adaptrack_introspect_worker", worker)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.apply_limits


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="run one GitChameleon test")
    parser.add_argument("--mode", choices=("pytest", "script", "imports"), required=True)
    parser.add_argument("--target", required=True, help="pytest: the folder; script: the file to run")
    parser.add_argument("--solution", default="", help="file name of the code under test")
    parser.add_argument("--result", required=True)
    parser.add_argument("--limits", default="")
    parser.add_argument("--worker", default="", help="apis/introspect_worker.py (its apply_limits)")
    args = parser.parse_args(argv)
    if args.limits and args.worker:
        load_limits(args.worker)(args.limits)
    if args.mode == "imports":
        result = run_imports([name for name in args.target.split(",") if name])
    elif args.mode == "pytest":
        sys.path.insert(0, os.path.abspath(args.target))
        result = run_pytest(args.target, args.solution)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(args.target)))
        result = run_script(args.target, args.solution)
    with open(args.result, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
