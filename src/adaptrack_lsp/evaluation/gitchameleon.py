"""GitChameleon 2.0 (`adaptrack-lsp eval gitchameleon --data DIR`): the API constraint
measured against execution in each record's pinned environment.

The benchmark (repository ``mrcabbage972/GitChameleonBenchmark``, never shipped with the
project) has one record per problem, pinned to ``library==version`` plus
``additional_dependencies``, with a starting code, a reference solution (the text
after the starting code), a visible test (``test``) and a hidden pytest file
(``hidden_tests/test_sample_N.py``).  ``--data`` is the benchmark's ``dataset/`` folder
(or the repository root holding it).

Environments (`prepare_environments`): one per distinct requirement set, built by
`apis.environments.environment_for` (wheels only, this interpreter's Python; cached).
The set is the record's pins plus what the benchmark's own harness adds to an
environment whose record does not name the package: pytest (the hidden tests are pytest
files), numpy and scipy, at the harness's pins for Python 3.10 (`HARNESS_EXTRAS`).  What cannot be built is counted with the builder's reason
(no wheel for this Python, ...); what builds but does not import (every top-level
module of each pinned distribution is imported) is counted apart.

Execution (`Executor`): the code runs with the environment's interpreter in a fresh
temporary folder, ``python -I -B``, the sandbox of runtime introspection
(`apis.introspection.sandbox_environment`: no inherited variables, HOME and caches in
the folder), resource limits (`apis.introspection.limits_argument`: address space, CPU
seconds, file size, no core files), its own process group, killed at the time limit.
Results are kept in ``OUT/runs.jsonl`` keyed by environment, code and test, so a rerun
executes only what is new.  Ground truth is the hidden test (the benchmark's own score;
``--tests visible`` uses the visible one, run after the code as the benchmark runs it).

Figures (`evaluate`):

- valid: records whose environment imports and whose reference solution passes its
  test there;
- recall: valid reference solutions the constraint accepts in their own environment;
- catch: for ordered pairs (A, B) of records with the same library and
  ``name_of_class_or_func`` (not empty) at different versions, B valid: A's program (its
  starting code and solution) runs against B's test in B's environment.  Where it
  fails with an AttributeError, ImportError or unexpected-keyword TypeError raised by
  the solution's own code (not by the starting code before it), the constraint in B
  must reject the solution (catch rate); where it passes, it must accept it (false
  rejection rate).  Other failures are counted, not scored.

The constraint is checked with `checking.explainer.Explainer` (parts ``api,kwargs`` by
default) with ``pythonPath`` set to the environment's interpreter: the text is the
solution, the document before it is the starting code with the solution's own import
statements placed at its top (`check_prefix`), so the aliases the solution binds are
known to the checker and the import lines stay part of the checked text.

With a model (`generate`): per valid record and decoder, a greedy completion and
``samples`` sampled ones (temperature 1) after a prompt that names the pinned version
(`prompt_document`), each run against the test: pass@1 (greedy) and pass@k (unbiased
estimator over the samples).
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

RUNNER = Path(__file__).with_name("gitchameleon_runner.py")
#: what the benchmark's harness (create_venvs.py) adds to every environment whose record
#: does not name the package: its pins for Python 3.10, the newest Python it runs, with
#: numpy 1.23 as 1.23.5 (the first 1.23 release with wheels for Python 3.11); records of
#: the Pythons the harness knows (3.7, 3.9, 3.10) get numpy and scipy, every record pytest
HARNESS_PYTEST = "pytest==7.2.0"
HARNESS_EXTRAS = ("numpy==1.23.5", "scipy==1.10.1")
HARNESS_PYTHONS = ("3.7", "3.9", "3.10")
#: the benchmark's time limit per test run (constants.TIMEOUT_SEC)
RUN_TIMEOUT_S = 240.0
RUN_MEMORY_BYTES = 8 * 1024**3
RUN_FILE_SIZE_BYTES = 64 * 1024**2
#: constraint parts checked (checking.explainer.PARTS)
DEFAULT_PARTS = ("api", "kwargs")
DEFAULT_DECODERS = ("unconstrained", "constrained", "adaptrack", "exact")
RUNS_FILE = "runs.jsonl"

NOT_INSTALLABLE = "not_installable"
NOT_IMPORTABLE = "not_importable"
INSTALLED = "installed"

_KEYWORD_ERROR = re.compile(r"unexpected keyword argument|is an invalid keyword argument|got an unexpected keyword")


# -- records ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Record:
    """One benchmark problem."""

    example_id: str
    library: str
    version: str
    python_version: str
    dependencies: tuple[str, ...]
    starting_code: str
    solution: str
    visible_test: str
    hidden_test: str | None
    name: str
    type_of_change: str = ""
    problem: str = ""

    @property
    def answer(self) -> str:
        """The whole reference program (the benchmark's ground_truth_solutions answer)."""
        return self.starting_code + self.solution

    @property
    def pin(self) -> str:
        return f"{self.library}=={self.version}"


def dataset_folder(data: str | Path) -> Path:
    """The folder holding dataset.jsonl: DIR itself or DIR/dataset."""
    root = Path(data)
    for folder in (root, root / "dataset"):
        if (folder / "dataset.jsonl").is_file():
            return folder
    raise ValueError(f"{data}: no dataset.jsonl there or in {root / 'dataset'} (give the GitChameleon dataset folder)")


def parse_dependencies(text: str | None) -> tuple[str, ...]:
    """``additional_dependencies`` as requirements (the harness's ``pip=...`` and ``-``
    entries are not packages)."""
    found = []
    for item in (text or "").split():
        if item == "-" or item.startswith("pip="):
            continue
        found.append(item)
    return tuple(found)


def load_records(data: str | Path, libraries: Iterable[str] | None = None, limit: int | None = None) -> list[Record]:
    """The records of a GitChameleon dataset folder (optionally of some libraries only,
    and the first `limit` of those)."""
    folder = dataset_folder(data)
    wanted = {name.strip().lower() for name in libraries} if libraries else None
    records = []
    for number, line in enumerate((folder / "dataset.jsonl").read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            example_id = str(raw["example_id"])
            record = Record(
                example_id=example_id,
                library=str(raw["library"]),
                version=str(raw["version"]),
                python_version=str(raw.get("python_version", "")),
                dependencies=parse_dependencies(raw.get("additional_dependencies")),
                starting_code=str(raw.get("starting_code", "")),
                solution=str(raw["solution"]),
                visible_test=str(raw.get("test", "")),
                hidden_test=_read_optional(folder / "hidden_tests" / f"test_sample_{example_id}.py"),
                name=str(raw.get("name_of_class_or_func", "")),
                type_of_change=str(raw.get("type_of_change", "")),
                problem=str(raw.get("problem", "")),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{folder / 'dataset.jsonl'}:{number}: not a GitChameleon record ({error})") from None
        if wanted is not None and record.library.lower() not in wanted:
            continue
        records.append(record)
    if limit is not None:
        records = records[:limit]
    return records


def _read_optional(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def requirements_for(record: Record) -> tuple[str, ...]:
    """The requirement set of a record's environment (see the module docstring)."""
    from adaptrack_lsp.apis.environments import requirement_name

    pinned = [record.pin, *record.dependencies]
    names = {requirement_name(r) for r in pinned}
    added = [] if "pytest" in names else [HARNESS_PYTEST]
    if record.python_version in HARNESS_PYTHONS:
        added += [r for r in HARNESS_EXTRAS if requirement_name(r) not in names]
    unique: dict[str, str] = {}
    for requirement in pinned + added:
        unique.setdefault(requirement_name(requirement), requirement)
    return tuple(unique.values())


def pinned_distributions(record: Record) -> list[str]:
    """The distributions the record itself pins (imported by the import check)."""
    from adaptrack_lsp.apis.environments import requirement_name

    return list(dict.fromkeys(requirement_name(r) for r in (record.pin, *record.dependencies)))


# -- environments ---------------------------------------------------------------------------
@dataclass
class EnvironmentState:
    """What became of one requirement set."""

    requirements: tuple[str, ...]
    status: str = NOT_INSTALLABLE
    #: why it is not usable ("" when it is)
    reason: str = ""
    #: short class of `reason` (no wheel for this Python, offline, import error, ...)
    kind: str = ""
    python: str = ""
    folder: str = ""
    installed: dict[str, str] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        return self.status == INSTALLED

    @property
    def key(self) -> str:
        return Path(self.folder).name if self.folder else " ".join(self.requirements)


def build_error_kind(reason: str) -> str:
    if "no wheel" in reason or "with a wheel" in reason:
        return "no wheel for this Python"
    if "cannot be reached" in reason:
        return "package index out of reach"
    if "did not finish" in reason:
        return "build time limit"
    if "ResolutionImpossible" in reason or "conflict" in reason.lower():
        return "conflicting pins"
    return "pip failed"


def prepare_environments(
    records: Sequence[Record],
    executor: Executor,
    progress: Callable[[str], None] | None = None,
    build_timeout_s: float | None = None,
) -> dict[tuple[str, ...], EnvironmentState]:
    """Build (or find) each record's environment and check that its pins import."""
    from adaptrack_lsp.apis.environments import EnvironmentBuildError, environment_for

    wanted: dict[tuple[str, ...], list[Record]] = defaultdict(list)
    for record in records:
        wanted[requirements_for(record)].append(record)
    states: dict[tuple[str, ...], EnvironmentState] = {}
    for number, (requirements, users) in enumerate(wanted.items(), 1):
        say = (lambda line, n=number: progress(f"[environment {n}/{len(wanted)}] {line}")) if progress else None
        state = EnvironmentState(requirements)
        states[requirements] = state
        try:
            options = {} if build_timeout_s is None else {"timeout_s": build_timeout_s}
            built = environment_for(requirements, progress=say, **options)
        except EnvironmentBuildError as error:
            state.reason, state.kind = error.reason, build_error_kind(error.reason)
            if say:
                say(f"not installable: {error.reason}")
            continue
        state.python, state.folder, state.installed = str(built.python), str(built.folder), dict(built.installed)
        outcome = executor.imports(state, pinned_distributions(users[0]))
        if outcome["passed"]:
            state.status = INSTALLED
        else:
            state.status = NOT_IMPORTABLE
            state.kind = "does not import on Python {}.{}".format(*sys.version_info[:2])
            state.reason = describe_failure(outcome)
            if say:
                say(f"installed but does not import: {state.reason}")
    return states


# -- execution ------------------------------------------------------------------------------
def describe_failure(outcome: dict[str, Any]) -> str:
    """One line for a failed run: the first exception (type: message), or the status."""
    if outcome.get("status") in ("timeout", "crashed"):
        return f"{outcome['status']}: {outcome.get('detail', '')}".strip().rstrip(":")
    exceptions = outcome.get("exceptions") or []
    if exceptions:
        first = exceptions[0]
        where = f"{first['module']}: " if first.get("module") else ""
        message = first.get("message", "").strip().splitlines()
        return f"{where}{first['type']}: {message[0][:200] if message else ''}".rstrip(": ")
    return f"exit status {outcome.get('exit')}"


def code_start(starting_code: str) -> tuple[int, int]:
    """Where the text after `starting_code` begins: (1-based line, UTF-8 column)."""
    last = starting_code.rsplit("\n", 1)[-1]
    return starting_code.count("\n") + 1, len(last.encode("utf-8"))


def _before(position: Sequence[int | None] | None, start: tuple[int, int] | None) -> bool:
    """Whether a failing expression at `position` ([line, col, end line, end col]) lies
    wholly before `start` (in the starting code, not in the solution)."""
    if position is None or start is None:
        return False
    end_line = position[2] if position[2] is not None else position[0]
    if end_line != start[0]:
        return end_line < start[0]
    return position[3] is not None and position[3] <= start[1]


def version_error(outcome: dict[str, Any], start: tuple[int, int] | None = None) -> dict[str, str] | None:
    """The version error a failed run shows, or None: an ImportError, AttributeError or
    unexpected-keyword TypeError whose traceback passes through the solution's code (with
    `start`, the `code_start` of the solution in the file: raised by an expression that
    reaches into the solution, not by the starting code before it).
    Returns ``{"type", "message", "category", "line"}`` (category: imports, kwargs, module
    attributes, receivers/methods)."""
    if outcome.get("passed"):
        return None
    for exception in outcome.get("exceptions") or []:
        if not exception.get("in_solution") or _before(exception.get("position"), start):
            continue
        bases = exception.get("bases") or [exception.get("type")]
        message = exception.get("message", "")
        if "ImportError" in bases:
            category = "imports"
        elif "AttributeError" in bases:
            category = "module attributes" if exception.get("on_module") else "receivers/methods"
        elif "TypeError" in bases and _KEYWORD_ERROR.search(message):
            category = "kwargs"
        else:
            continue
        return {"type": exception.get("type", ""), "message": message[:300], "category": category, "line": exception.get("line", "")}
    return None


class Executor:
    """Runs code against tests in environments, contained, with results kept on disk."""

    def __init__(
        self,
        cache_file: str | Path | None,
        *,
        timeout_s: float = RUN_TIMEOUT_S,
        memory_bytes: int = RUN_MEMORY_BYTES,
        tests: str = "hidden",
    ):
        if tests not in ("hidden", "visible"):
            raise ValueError(f"tests must be 'hidden' or 'visible', not {tests!r}")
        self.timeout_s = float(timeout_s)
        self.memory_bytes = int(memory_bytes)
        self.tests = tests
        self.cache_file = Path(cache_file) if cache_file is not None else None
        self._runner_digest = hashlib.sha256(RUNNER.read_bytes()).hexdigest()[:12]
        self._cache: dict[str, dict[str, Any]] = {}
        self.executed = 0
        if self.cache_file is not None and self.cache_file.exists():
            for line in self.cache_file.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                    self._cache[entry["key"]] = entry["outcome"]
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line of an interrupted run

    def _key(self, *parts: Any) -> str:
        text = json.dumps([self._runner_digest, self.timeout_s, self.memory_bytes, *parts], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def _remember(self, key: str, outcome: dict[str, Any]) -> dict[str, Any]:
        self._cache[key] = outcome
        if self.cache_file is not None:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            with open(self.cache_file, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"key": key, "outcome": outcome}) + "\n")
        return outcome

    def imports(self, environment: EnvironmentState, distributions: Sequence[str]) -> dict[str, Any]:
        """Whether every top-level module of `distributions` imports in the environment."""
        key = self._key("imports", environment.key, list(distributions))
        if key in self._cache:
            return self._cache[key]
        return self._remember(key, self._execute(environment.python, "imports", ",".join(distributions), {}, ""))

    def test(self, environment: EnvironmentState, record: Record, code: str) -> dict[str, Any]:
        """Run `code` (a whole program: starting code and solution) against `record`'s test
        in `environment`; the outcome has ``passed``, ``status`` and ``exceptions``."""
        solution = f"sample_{record.example_id}.py"
        hidden = self.tests == "hidden" and record.hidden_test is not None
        test = record.hidden_test if hidden else record.visible_test
        key = self._key("test", environment.key, hidden, record.example_id, code, test)
        if key in self._cache:
            return self._cache[key]
        if hidden:
            files = {solution: code, "test_sample.py": test}
            outcome = self._execute(environment.python, "pytest", ".", files, solution)
        else:
            files = {solution: code + "\n" + test}
            outcome = self._execute(environment.python, "script", solution, files, solution)
        outcome["test"] = "hidden" if hidden else "visible"
        return self._remember(key, outcome)

    def _execute(self, python: str, mode: str, target: str, files: dict[str, str], solution: str) -> dict[str, Any]:
        from adaptrack_lsp.apis import introspect_worker
        from adaptrack_lsp.apis.introspection import limits_argument, sandbox_environment

        self.executed += 1
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="adaptrack-gitchameleon-") as scratch:
            work = Path(scratch) / "run"
            home = Path(scratch) / "home"
            work.mkdir()
            home.mkdir()
            for name, text in files.items():
                (work / name).write_text(text, encoding="utf-8")
            runner = Path(scratch) / "gitchameleon_runner.py"
            shutil.copyfile(RUNNER, runner)
            result_file = Path(scratch) / "result.json"
            limits = limits_argument(self.memory_bytes, int(self.timeout_s) + 5, RUN_FILE_SIZE_BYTES)
            command = [
                python, "-I", "-B", str(runner), "--mode", mode,
                "--target", target if mode == "imports" else str(work / target),
                "--solution", solution, "--result", str(result_file),
                "--limits", limits, "--worker", introspect_worker.__file__,
            ]
            env = sandbox_environment(str(home))
            env.update({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg"})
            try:
                process = subprocess.Popen(
                    command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                )
            except OSError as error:
                return {"passed": False, "status": "crashed", "detail": f"could not start {python}: {error}", "exceptions": []}
            try:
                output, _ = process.communicate(timeout=self.timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                _kill_group(process)
                output, _ = process.communicate()
                timed_out = True
            seconds = round(time.monotonic() - started, 2)
            tail = output.decode("utf-8", errors="replace")[-2000:] if output else ""
            if timed_out:
                return {"passed": False, "status": "timeout", "detail": f"over {self.timeout_s:.0f} s", "exceptions": [], "seconds": seconds, "output": tail}
            try:
                outcome = json.loads(result_file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                detail = f"exit status {process.returncode}" + (" (killed by a resource limit?)" if process.returncode and process.returncode < 0 else "")
                return {"passed": False, "status": "crashed", "detail": detail, "exceptions": [], "seconds": seconds, "output": tail}
        outcome["status"] = "passed" if outcome.get("passed") else "failed"
        outcome["seconds"] = seconds
        outcome["output"] = "" if outcome.get("passed") else tail
        return outcome


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, 9)
    except OSError:
        process.kill()


# -- the constraint -------------------------------------------------------------------------
def solution_imports(starting_code: str, solution: str) -> list[str]:
    """The import statements the solution writes (after the starting code), each on one
    line at module level (``ast.unparse``); a text Python cannot parse is read line by line."""
    program = starting_code + solution
    try:
        tree = ast.parse(program)
    except SyntaxError:
        pattern = re.compile(r"^[ \t]*((?:from[ \t]+[\w.]+[ \t]+import[ \t]+[^#\n(]+)|(?:import[ \t]+[\w., \t]+?))[ \t]*(?:#.*)?$", re.M)
        return [match.group(1).strip() for match in pattern.finditer(solution)]
    lines = program.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            line = lines[node.lineno - 1]
            column = len(line.encode("utf-8")[: node.col_offset].decode("utf-8", errors="ignore"))
            if starts[node.lineno - 1] + column >= len(starting_code):
                found.append((node.lineno, node.col_offset, ast.unparse(node)))
    return [text for _, _, text in sorted(found)]


def check_prefix(starting_code: str, solution: str) -> str:
    """The document before the checked text: the starting code, with the import
    statements the solution writes put at its top (after any ``from __future__``
    imports), so that the names they bind are known to the checker."""
    imports = [line for line in solution_imports(starting_code, solution) if line.strip() not in starting_code.splitlines()]
    if not imports:
        return starting_code
    lines = starting_code.splitlines(keepends=True)
    head = 0
    while head < len(lines) and lines[head].startswith("from __future__"):
        head += 1
    return "".join(lines[:head]) + "\n".join(imports) + "\n" + "".join(lines[head:])


class ConstraintChecker:
    """`Explainer` verdicts per environment (one Explainer per interpreter, kept open)."""

    def __init__(self, parts: Sequence[str] = DEFAULT_PARTS, progress: Callable[[str], None] | None = None):
        self.parts = list(parts)
        self.progress = progress
        self._explainers: dict[str, Any] = {}
        self.problems: dict[str, str] = {}

    def _explainer(self, python: str):
        explainer = self._explainers.get(python)
        if explainer is None:
            self.close()  # one environment at a time: each holds an introspection worker
            from adaptrack_lsp.checking.explainer import Explainer
            from adaptrack_lsp.config import parse_settings

            settings, problems = parse_settings({"pythonPath": python})
            if problems:
                raise ValueError("; ".join(problems))
            explainer = self._explainers[python] = Explainer(settings, self.parts, progress=self.progress)
            if explainer.problem:
                self.problems[python] = explainer.problem
        return explainer

    def verdict(self, environment: EnvironmentState, starting_code: str, solution: str) -> dict[str, Any]:
        """`{"accepted", "complete", "offset", "reason", "line"}` for `solution` after
        `starting_code` in `environment` (``line``: the rejected line of the solution);
        ``accepted`` None and ``error`` when the checker raised."""
        prefix = check_prefix(starting_code, solution)
        try:
            verdict = dict(self._explainer(environment.python).explain(prefix, solution))
        except Exception as error:  # noqa: BLE001 - a checker failure is a finding, not the end of the run
            log.exception("the constraint failed on a text in %s", environment.python)
            return {"accepted": None, "complete": None, "offset": None, "reason": f"the checker raised {type(error).__name__}: {error}"[:300], "error": True}
        if verdict.get("offset") is not None:
            # the rejected line, with the part of it the starting code holds
            program, offset = starting_code + solution, len(starting_code) + verdict["offset"]
            start = program.rfind("\n", 0, offset) + 1
            end = program.find("\n", offset)
            verdict["line"] = program[start : len(program) if end < 0 else end].strip()
        return verdict

    def close(self) -> None:
        for explainer in self._explainers.values():
            explainer.close()
        self._explainers.clear()


def rejection_category(verdict: dict[str, Any]) -> str:
    """Where a rejection falls: imports, kwargs, receivers/methods or module attributes."""
    line = verdict.get("line", "")
    reason = verdict.get("reason", "") or ""
    if verdict.get("error"):
        return "checker error"
    if re.match(r"(from|import)\s", line):
        return "imports"
    if "keyword" in reason or "parameter" in reason:
        return "kwargs"
    if "()" in reason:
        return "receivers/methods"
    return "module attributes"


# -- the evaluation ---------------------------------------------------------------------------
@dataclass
class Evaluation:
    """Everything one run measured."""

    records: list[dict[str, Any]]
    pairs: list[dict[str, Any]]
    environments: list[dict[str, Any]]
    summary: dict[str, Any]
    #: record id -> its environment
    states: dict[str, EnvironmentState] = field(default_factory=dict)
    executor: Executor | None = None


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def evaluate(
    records: Sequence[Record],
    out: str | Path,
    *,
    parts: Sequence[str] = DEFAULT_PARTS,
    tests: str = "hidden",
    timeout_s: float = RUN_TIMEOUT_S,
    memory_bytes: int = RUN_MEMORY_BYTES,
    build_timeout_s: float | None = None,
    progress: bool = True,
    say: Callable[[str], None] | None = None,
) -> Evaluation:
    """Environments, ground truth by execution, recall, catch and false rejection; writes
    records.jsonl, pairs.jsonl, environments.json and runs.jsonl (the execution cache) to `out`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    executor = Executor(out / RUNS_FILE, timeout_s=timeout_s, memory_bytes=memory_bytes, tests=tests)
    states = prepare_environments(records, executor, progress=say, build_timeout_s=build_timeout_s)
    env_of = {record.example_id: states[requirements_for(record)] for record in records}
    by_id = {record.example_id: record for record in records}

    # ground truth: each reference solution in its own environment
    rows: dict[str, dict[str, Any]] = {}
    runnable = [r for r in records if env_of[r.example_id].usable]
    for record in _bar(runnable, "reference solutions", progress):
        outcome = executor.test(env_of[record.example_id], record, record.answer)
        rows[record.example_id] = {"passed": bool(outcome["passed"]), "outcome": _short(outcome)}

    # catch: A's solution (its whole program) against B's test in B's environment, for
    # records of the same library and named API (records that name none are not paired)
    valid = [r for r in runnable if rows[r.example_id]["passed"]]
    groups: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for record in records:
        if record.name.strip():
            groups[(record.library.lower(), record.name.strip())].append(record)
    jobs = [
        (a, b)
        for group in groups.values()
        for b in group
        if b.example_id in rows and rows[b.example_id]["passed"]
        for a in group
        if a.version != b.version
    ]
    pairs = []
    for a, b in _bar(jobs, "cross-version pairs", progress):
        outcome = executor.test(env_of[b.example_id], b, a.answer)
        error = version_error(outcome, code_start(a.starting_code))
        in_start = None if outcome["passed"] or error else version_error(outcome)
        pairs.append({
            "source": a.example_id, "target": b.example_id, "library": b.library, "name": b.name,
            "source_version": a.version, "target_version": b.version,
            "outcome": "passes" if outcome["passed"] else ("breaks" if error else "fails otherwise"),
            "error": error,
            "failure": None if outcome["passed"] or error else describe_failure(outcome) + (" (in the starting code)" if in_start else ""),
        })

    # the constraint's verdicts, one environment at a time: the valid references in their
    # own environment (recall) and the scored pairs in the target's
    checks: list[tuple[EnvironmentState, str, str, dict]] = [
        (env_of[r.example_id], r.starting_code, r.solution, rows[r.example_id]) for r in valid
    ]
    checks += [
        (env_of[pair["target"]], by_id[pair["source"]].starting_code, by_id[pair["source"]].solution, pair)
        for pair in pairs
        if pair["outcome"] != "fails otherwise"
    ]
    checks.sort(key=lambda check: check[0].key)
    checker = ConstraintChecker(parts, progress=None)
    try:
        for environment, starting_code, solution, sink in _bar(checks, "constraint verdicts", progress):
            verdict = checker.verdict(environment, starting_code, solution)
            sink["verdict"] = verdict
            if "outcome" in sink:
                sink["rejected"] = verdict["accepted"] is False
        checker_problems = dict(checker.problems)
    finally:
        checker.close()

    record_rows = []
    for record in records:
        state = env_of[record.example_id]
        row = {
            "id": record.example_id, "library": record.library, "version": record.version, "name": record.name,
            "requirements": list(state.requirements), "environment": state.status,
            "environment_reason": state.reason, "environment_kind": state.kind,
        }
        if record.example_id in rows:
            found = rows[record.example_id]
            row["reference"] = found["outcome"]
            row["valid"] = found["passed"]
            if "verdict" in found:
                row["verdict"] = found["verdict"]
                row["accepted"] = found["verdict"]["accepted"]
        else:
            row["valid"] = False
        record_rows.append(row)
    environment_rows = [
        {
            "requirements": list(state.requirements), "status": state.status, "kind": state.kind, "reason": state.reason,
            "folder": state.folder, "installed": {k: v for k, v in state.installed.items() if k in {n.lower() for n in _names(state.requirements)}},
            "records": [r.example_id for r in records if env_of[r.example_id] is state],
        }
        for state in states.values()
    ]
    summary = summarize(record_rows, pairs, environment_rows, by_id)
    summary.update({"tests": tests, "parts": list(parts), "python": "{}.{}".format(*sys.version_info[:2]), "executed_runs": executor.executed})
    if checker_problems:
        summary["constraint_problems"] = checker_problems
    _write_jsonl(out / "records.jsonl", record_rows)
    _write_jsonl(out / "pairs.jsonl", pairs)
    (out / "environments.json").write_text(json.dumps(environment_rows, indent=2) + "\n", encoding="utf-8")
    return Evaluation(record_rows, pairs, environment_rows, summary, env_of, executor)


def _names(requirements: Iterable[str]) -> list[str]:
    from adaptrack_lsp.apis.environments import requirement_name

    return [requirement_name(r) for r in requirements]


def _short(outcome: dict[str, Any]) -> dict[str, Any]:
    keep = {k: outcome.get(k) for k in ("passed", "status", "test", "seconds", "tests")}
    keep["exceptions"] = (outcome.get("exceptions") or [])[:3]
    if not outcome.get("passed"):
        keep["failure"] = describe_failure(outcome)
    return keep


def summarize(records: list[dict], pairs: list[dict], environments: list[dict], by_id: dict[str, Record]) -> dict[str, Any]:
    """Counts, the three figures and the misses by category."""
    total = len(records)
    installable = sum(1 for r in records if r["environment"] != NOT_INSTALLABLE)
    importable = sum(1 for r in records if r["environment"] == INSTALLED)
    valid = [r for r in records if r.get("valid")]
    accepted = [r for r in valid if r.get("accepted") is True]
    breaking = [p for p in pairs if p["outcome"] == "breaks"]
    passing = [p for p in pairs if p["outcome"] == "passes"]
    caught = [p for p in breaking if p.get("rejected")]
    wrongly = [p for p in passing if p.get("rejected")]

    not_installable: dict[str, list[dict]] = defaultdict(list)
    for env in environments:
        if env["status"] == NOT_INSTALLABLE:
            not_installable[env["kind"]].append({"requirements": env["requirements"], "reason": env["reason"], "records": env["records"]})
    not_importable = [
        {"requirements": env["requirements"], "reason": env["reason"], "records": env["records"]}
        for env in environments
        if env["status"] == NOT_IMPORTABLE
    ]
    failing = [
        {"id": r["id"], "library": r["library"], "version": r["version"], "failure": r["reference"].get("failure", "")}
        for r in records
        if r["environment"] == INSTALLED and not r.get("valid")
    ]
    recall_misses = [
        {
            "id": r["id"], "library": r["library"], "version": r["version"], "category": rejection_category(r["verdict"]),
            "line": r["verdict"].get("line", ""), "reason": r["verdict"].get("reason", ""),
        }
        for r in valid
        if not r.get("accepted")
    ]
    catch_misses = [
        {
            "source": p["source"], "target": p["target"], "library": p["library"], "versions": f"{p['source_version']} -> {p['target_version']}",
            "category": p["error"]["category"], "error": f"{p['error']['type']}: {p['error']['message'][:160]}",
            "verdict": (p["verdict"].get("reason") or "accepted"),
        }
        for p in breaking
        if not p.get("rejected")
    ]
    false_rejections = [
        {
            "source": p["source"], "target": p["target"], "library": p["library"], "versions": f"{p['source_version']} -> {p['target_version']}",
            "category": rejection_category(p["verdict"]), "line": p["verdict"].get("line", ""), "reason": p["verdict"].get("reason", ""),
        }
        for p in wrongly
    ]
    return {
        "dataset": "gitchameleon",
        "counts": {
            "records": total,
            "installable": installable,
            "importable": importable,
            "valid": len(valid),
            "pairs": len(pairs),
            "pairs_breaking": len(breaking),
            "pairs_passing": len(passing),
            "pairs_failing_otherwise": sum(1 for p in pairs if p["outcome"] == "fails otherwise"),
        },
        "recall": _ratio(len(accepted), len(valid)),
        "catch": _ratio(len(caught), len(breaking)),
        "false_rejection": _ratio(len(wrongly), len(passing)),
        "breaking_by_category": dict(Counter(p["error"]["category"] for p in breaking)),
        "caught_by_category": dict(Counter(p["error"]["category"] for p in caught)),
        "libraries": {
            library: {
                "records": sum(1 for r in records if r["library"] == library),
                "installable": sum(1 for r in records if r["library"] == library and r["environment"] != NOT_INSTALLABLE),
                "importable": sum(1 for r in records if r["library"] == library and r["environment"] == INSTALLED),
                "valid": sum(1 for r in valid if r["library"] == library),
            }
            for library in sorted({r["library"] for r in records})
        },
        "not_installable": {kind: entries for kind, entries in sorted(not_installable.items())},
        "not_importable": not_importable,
        "reference_fails": failing,
        "misses": {"recall": recall_misses, "catch": catch_misses, "false_rejection": false_rejections},
    }


def _write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def _bar(items: Sequence, desc: str, progress: bool):
    if not progress or not items:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit="run", dynamic_ncols=True, file=sys.stderr)


def figures_line(summary: dict[str, Any]) -> str:
    """``recall=... catch=... false_rejection=... records=... ...`` (``na`` where undefined)."""

    def show(value):
        return "na" if value is None else f"{value:.3f}"

    counts = summary["counts"]
    return " ".join(
        [f"recall={show(summary['recall'])}", f"catch={show(summary['catch'])}", f"false_rejection={show(summary['false_rejection'])}"]
        + [f"{name}={counts[name]}" for name in ("records", "installable", "importable", "valid", "pairs_breaking", "pairs_passing")]
    )


# -- generated solutions (--model) ---------------------------------------------------------------
def body_indent(starting_code: str) -> str:
    """The indentation a solution starts with after `starting_code`: one level below a
    last line that opens a block (``def f(x):``), none otherwise (the cursor stays where
    the starting code ends)."""
    if not starting_code.endswith("\n"):
        return ""
    lines = [line for line in starting_code.splitlines() if line.strip()]
    if not lines or not lines[-1].rstrip().endswith(":"):
        return ""
    last = lines[-1]
    return last[: len(last) - len(last.lstrip())].expandtabs(4) + "    "


def prompt_document(record: Record) -> str:
    """The document a model completes: the pinned version, the Python version and the
    problem as comments (the benchmark's prompt items: required library==version,
    Python version, problem, starting code), then the starting code; the cursor is at
    its end, indented for the body."""
    import textwrap

    header = [
        f"# Required library: {record.pin}",
        "# Python version: {}.{}".format(*sys.version_info[:2]),
        "# Problem:",
        *("#   " + line for line in textwrap.wrap(" ".join(record.problem.split()), 88) or [""]),
        f"# Complete the code below using the API of {record.library} {record.version}.",
    ]
    return "\n".join(header) + "\n" + record.starting_code + body_indent(record.starting_code)


@dataclass
class GenerationSettings:
    model: str
    decoders: Sequence[str] = DEFAULT_DECODERS
    samples: int = 5
    seed: int = 0
    max_new_tokens: int = 128
    timeout_s: float = 60.0
    #: extra settings (camelCase, as the editors send them), e.g. {"device": "cpu"}
    extra: dict[str, Any] = field(default_factory=dict)


def generate(
    records: Sequence[Record],
    environments: dict[str, EnvironmentState],
    executor: Executor,
    settings: GenerationSettings,
    out: str | Path,
    *,
    progress: bool = True,
    service=None,
) -> list[dict[str, Any]]:
    """Per (record, decoder): the greedy completion and `samples` sampled ones, each
    run against the record's test in its environment.  Appends to
    ``OUT/generations.jsonl`` (a rerun skips finished pairs) and returns this run's rows.
    `environments`: record id -> its (usable) environment."""
    from adaptrack_lsp.completion.service import CompletionService
    from adaptrack_lsp.config import parse_settings
    from adaptrack_lsp.evaluation.runner import read_results, sample_seed

    path = Path(out) / "generations.jsonl"
    done = {(r["id"], r["decoder"]): r for r in read_results(path)}
    jobs = [(record, decoder) for record in records for decoder in settings.decoders]
    todo = [job for job in jobs if (job[0].example_id, job[1]) not in done]

    def settings_for(record: Record, decoder: str, temperature: float):
        raw = {
            "model": settings.model, "pythonPath": environments[record.example_id].python, "decoder": decoder,
            "temperature": temperature, "numSamples": 1, "multiline": True,
            "maxNewTokens": settings.max_new_tokens, "timeoutMs": int(settings.timeout_s * 1000), **settings.extra,
        }
        parsed, problems = parse_settings(raw)
        if problems:
            raise ValueError("; ".join(problems))
        return parsed

    owned = service is None
    if todo and service is None:
        first = todo[0]
        service = CompletionService(settings_for(first[0], first[1], 0.0))
        service.load()
    try:
        with open(path, "a", encoding="utf-8") as handle:
            for record, decoder in _bar(todo, "generated solutions", progress):
                environment = environments[record.example_id]

                def one(temperature: float, seed: int, record=record, decoder=decoder, environment=environment) -> dict[str, Any]:
                    service.update_settings(settings_for(record, decoder, temperature))
                    return _generated(service, executor, environment, record, seed)

                row = {
                    "id": record.example_id, "decoder": decoder,
                    "greedy": one(0.0, settings.seed),
                    "samples": [one(1.0, sample_seed(settings.seed, record.example_id, decoder, i)) for i in range(settings.samples)],
                }
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                handle.flush()
                done[(record.example_id, decoder)] = row
    finally:
        if owned and service is not None:
            service.close()
    return [done[(record.example_id, decoder)] for record, decoder in jobs]


def _generated(service, executor: Executor, environment: EnvironmentState, record: Record, seed: int) -> dict[str, Any]:
    """One completion of the record's prompt under the service's settings, run against the test."""
    document = prompt_document(record)
    result = service.complete(document, len(document), mode="inline", seed=seed, wait_for_index=True)
    candidate = result.candidates[0] if result.candidates else None
    if candidate is None:
        return {"text": None, "passed": False, "valid": False, "status": result.status}
    outcome = executor.test(environment, record, record.starting_code + body_indent(record.starting_code) + candidate.text)
    return {
        "text": candidate.text, "passed": bool(outcome["passed"]), "valid": bool(candidate.valid),
        "status": result.status, "failure": None if outcome["passed"] else describe_failure(outcome),
    }


def summarize_generation(rows: Sequence[dict[str, Any]], decoders: Sequence[str], samples: int) -> dict[str, Any]:
    """Per decoder: pass@1 (greedy) and pass@k (k <= samples, unbiased estimator),
    the share of outputs the constraint called valid, and decodes without output."""
    from adaptrack_lsp.evaluation.metrics import DEFAULT_KS, em_table

    ks = sorted({1, *(k for k in DEFAULT_KS if k <= samples), *([samples] if samples > 1 else [])})
    summary: dict[str, Any] = {}
    for decoder in decoders:
        mine = [r for r in rows if r["decoder"] == decoder]
        table = em_table([r["greedy"]["passed"] for r in mine], [[s["passed"] for s in r["samples"]] for r in mine], ks)
        outputs = [d for r in mine for d in [r["greedy"], *r["samples"]]]
        summary[decoder] = {
            "records": len(mine),
            "pass_at_k": {key.replace("EM@", "pass@"): value for key, value in table.items()},
            "valid_share": _ratio(sum(1 for d in outputs if d["valid"]), len(outputs)),
            "no_output": sum(1 for d in outputs if d["text"] is None),
        }
    return summary
