"""Runs one Python file statement by statement and writes where it failed: the ground
truth of benchmarks/check.py, computed by executing code, never by the checker.

``python _statement_runner.py FILE RESULT.json`` (with the interpreter whose packages
are the versions under test).  Every statement of FILE, at every depth (module, class
and function bodies, loops, ``with``, ``if``), is wrapped in ``try: ... except
Exception`` before the file runs as ``__main__``, so one failing line is recorded and
execution goes on with the next statement: every line of a file is run, not only the
lines before its first error.  The body of a ``try`` the file writes itself is left as
it is (the file's own handling stays in force).

RESULT holds ``failures`` (per failed statement: the innermost line of FILE in the
traceback with its span, the exception's type, classes and message, and ``api``: the
kind of missing API it shows, or "" for errors that show none), ``warnings`` (the
deprecation warnings attributed to lines of FILE) and ``executed`` (the lines that
ran).  The kinds: ``imports`` (ImportError), ``module attributes`` (AttributeError on
a module), ``receivers`` (AttributeError on another object, not None), ``keywords``
(a TypeError for an unexpected or invalid keyword argument).  A NameError or an
AttributeError on None (what follows a failed line) shows no missing API.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import json
import os
import re
import sys
import traceback
import types
import warnings

_KEYWORD_ERROR = re.compile(r"unexpected keyword argument|is an invalid keyword argument|got an unexpected keyword")
_NOT_WRAPPED = (ast.Global, ast.Nonlocal, ast.Pass)


def _wrap(statements: list) -> list:
    wrapped = []
    for statement in statements:
        _descend(statement)
        if isinstance(statement, _NOT_WRAPPED) or (isinstance(statement, ast.ImportFrom) and statement.module == "__future__"):
            wrapped.append(statement)
            continue
        record = ast.Expr(ast.Call(ast.Name("_adaptrack_record", ast.Load()), [ast.Name("_adaptrack_error", ast.Load())], []))
        handler = ast.ExceptHandler(ast.Name("Exception", ast.Load()), "_adaptrack_error", [record])
        guard = ast.Try(body=[statement], handlers=[handler], orelse=[], finalbody=[])
        for node in (guard, handler, record, record.value, record.value.func, handler.type, *record.value.args):
            ast.copy_location(node, statement)
            node.end_lineno, node.end_col_offset = statement.lineno, statement.col_offset
        wrapped.append(guard)
    return wrapped


def _descend(statement) -> None:
    """Wrap the statements inside a compound statement (not the body of its own try)."""
    own_try = isinstance(statement, (ast.Try, getattr(ast, "TryStar", ast.Try)))
    for name in ("body", "orelse", "finalbody"):
        if name == "body" and own_try:
            continue
        value = getattr(statement, name, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            setattr(statement, name, _wrap(value))
    for handler in getattr(statement, "handlers", ()) or ():
        handler.body = _wrap(handler.body)
    for case in getattr(statement, "cases", ()) or ():
        case.body = _wrap(case.body)


def api_kind(error: BaseException) -> str:
    if isinstance(error, ImportError):
        return "imports"
    if isinstance(error, AttributeError):
        obj = getattr(error, "obj", None)
        if obj is None:
            # a module's __getattr__ raising (NumPy's "`np.float_` was removed ..."),
            # else an attribute of None (what follows a failed line)
            frames = traceback.extract_tb(error.__traceback__)
            last = frames[-1] if frames else None
            from_module = last is not None and last.name == "__getattr__" and os.path.basename(last.filename) == "__init__.py"
            return "module attributes" if from_module else ""
        return "module attributes" if isinstance(obj, types.ModuleType) else "receivers"
    if isinstance(error, TypeError) and _KEYWORD_ERROR.search(str(error)):
        return "keywords"
    return ""


def main(argv: list[str]) -> int:
    path, result_path = os.path.abspath(argv[0]), argv[1]
    source = open(path, encoding="utf-8").read()
    tree = ast.parse(source, path)
    tree.body = _wrap(tree.body)
    code = compile(tree, path, "exec")
    failures: list[dict] = []
    found_warnings: list[dict] = []
    executed: set[int] = set()

    def record(error: BaseException) -> None:
        frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == path]
        if not frames:
            return
        frame = frames[-1]
        failures.append({
            "line": frame.lineno,
            "end_line": frame.end_lineno or frame.lineno,
            "column": frame.colno,
            "end_column": frame.end_colno,
            "type": type(error).__name__,
            "bases": [cls.__name__ for cls in type(error).__mro__],
            "message": str(error)[:300],
            "api": api_kind(error),
            "code": (frame.line or "").strip(),
        })

    def show_warning(message, category, filename, lineno, file=None, line=None):  # noqa: ARG001 - warnings' hook signature
        if filename == path:
            found_warnings.append({"line": lineno, "category": category.__name__, "message": str(message)[:300]})

    def trace_lines(frame, event, arg):  # noqa: ARG001 - settrace's signature
        if frame.f_code.co_filename != path:
            return None

        def local(frame, event, arg):  # noqa: ARG001
            if event == "line":
                executed.add(frame.f_lineno)
            return local

        executed.add(frame.f_lineno)
        return local

    sys.path.insert(0, os.path.dirname(path))
    namespace = {"__name__": "__main__", "__file__": path, "__builtins__": builtins, "_adaptrack_record": record}
    warnings.showwarning = show_warning
    warnings.simplefilter("always")
    output = io.StringIO()
    sys.settrace(trace_lines)
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            exec(code, namespace)  # noqa: S102 - running the file is the point
    finally:
        sys.settrace(None)
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump({"failures": failures, "warnings": found_warnings, "executed": sorted(executed), "output": output.getvalue()[-4000:]}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
