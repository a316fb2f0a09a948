"""`eval gitchameleon` on the project's own GitChameleon-shaped records (tests/data/gitchameleon:
numpy 1.26.4 and 2.2.6, a pin without a wheel for this Python, a reference that fails its
test): environments built for real (cached), ground truth by execution, the figures, the
generated-solution plumbing with the built-in model, and the contained test runner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from adaptrack_lsp.evaluation import gitchameleon as gc

DATA = Path(__file__).resolve().parents[1] / "data" / "gitchameleon"
ROOT = Path(__file__).resolve().parents[2]


def test_records_load_with_their_hidden_tests_and_requirements():
    records = gc.load_records(DATA)
    assert [r.example_id for r in records] == [str(i) for i in range(9)]
    first = records[0]
    assert first.pin == "numpy==1.26.4" and first.name == "numpy.prod"
    assert "from sample_0 import total_product" in first.hidden_test
    assert first.answer == first.starting_code + first.solution
    # the harness's pytest joins the pin; numpy and scipy join records of the Pythons the harness knows
    assert gc.requirements_for(first) == ("numpy==1.26.4", "pytest==7.2.0")
    old = gc.Record("9", "networkx", "2.5", "3.10", (), "", "", "", None, "")
    assert gc.requirements_for(old) == ("networkx==2.5", "pytest==7.2.0", "numpy==1.23.5", "scipy==1.10.1")
    named = gc.Record("9", "scikit-learn", "1.1", "3.10", ("numpy==1.23.5",), "", "", "", None, "")
    assert gc.requirements_for(named) == ("scikit-learn==1.1", "numpy==1.23.5", "pytest==7.2.0", "scipy==1.10.1")
    assert gc.parse_dependencies("numpy==1.16.0 pip=21.0 - scipy==1.1.0") == ("numpy==1.16.0", "scipy==1.1.0")
    assert len(gc.load_records(DATA, limit=2)) == 2
    assert gc.load_records(DATA, libraries=["torch"]) == []
    with pytest.raises(ValueError, match="no dataset.jsonl"):
        gc.load_records(DATA / "hidden_tests")


def test_the_imports_a_solution_writes_go_to_the_top_of_the_checked_document():
    start = "from __future__ import annotations\nimport numpy as np\ndef f(values):\n"
    solution = "    from numpy import product\n    import scipy.special as sp\n    return product(values) + sp.gamma(1)\n"
    assert gc.solution_imports(start, solution) == ["from numpy import product", "import scipy.special as sp"]
    prefix = gc.check_prefix(start, solution)
    assert prefix.startswith("from __future__ import annotations\nfrom numpy import product\nimport scipy.special as sp\n")
    assert prefix.endswith(start[len("from __future__ import annotations\n") :])
    # an import already in the starting code is not repeated; text Python cannot parse is read by line
    assert gc.check_prefix("import numpy as np\n", "import numpy as np\nx = np.zeros(3)\n") == "import numpy as np\n"
    assert gc.solution_imports("def f(:\n", "    from a.b import c\n    return c(") == ["from a.b import c"]


def _executor(tmp_path, **options):
    return gc.Executor(tmp_path / "runs.jsonl", **options)


def _here():
    """This interpreter as an environment (it has pytest)."""
    return gc.EnvironmentState(("pytest",), gc.INSTALLED, python=sys.executable, folder=str(Path(sys.prefix)))


def _record(solution: str, hidden: str, start: str = "import json\n\ndef f(x):\n") -> gc.Record:
    return gc.Record("0", "json", "0", "3.11", (), start, solution, "assert f(1) == 1\n", hidden, "json.f")


HIDDEN = "from sample_0 import f\n\n\ndef test_f():\n    assert f(1) == 1\n"


def test_the_runner_names_the_exception_and_whether_the_solution_raised_it(tmp_path):
    executor = _executor(tmp_path, timeout_s=60)
    env = _here()
    passed = executor.test(env, _record("    return x\n", HIDDEN), "import json\n\ndef f(x):\n    return x\n")
    assert passed["passed"] and passed["status"] == "passed" and passed["tests"]["passed"] == 1
    # a removed module attribute at import time: pytest's collection error is unwrapped
    code = "import json\nload = json.no_such_function\n\ndef f(x):\n    return x\n"
    failed = executor.test(env, _record("", HIDDEN), code)
    error = failed["exceptions"][0]
    assert not failed["passed"] and error["type"] == "AttributeError" and error["in_solution"] and error["on_module"]
    assert gc.version_error(failed)["category"] == "module attributes"
    # an import inside the function, a method of an object, a keyword
    for body, category in [
        ("    from json import no_such_name\n    return x\n", "imports"),
        ("    return (x).no_such_method()\n", "receivers/methods"),
        ("    return json.dumps(x, no_such_keyword=1) and x\n", "kwargs"),
    ]:
        outcome = executor.test(env, _record(body, HIDDEN), "import json\n\ndef f(x):\n" + body)
        assert gc.version_error(outcome)["category"] == category, (body, outcome)
    # an AttributeError the test itself raises is not the solution's
    test_side = "from sample_0 import f\n\n\ndef test_f():\n    assert f(1).real.no_such_attribute\n"
    outcome = executor.test(env, _record("    return x\n", test_side), "import json\n\ndef f(x):\n    return x\n")
    assert outcome["exceptions"][0]["type"] == "AttributeError" and gc.version_error(outcome) is None
    # the visible test, run after the code as the benchmark runs it
    visible = _executor(tmp_path / "visible", tests="visible").test(env, _record("", HIDDEN), "def f(x):\n    return x + 1\n")
    assert visible["test"] == "visible" and visible["exceptions"][0]["type"] == "AssertionError"


def test_runs_are_contained_and_kept(tmp_path):
    env = _here()
    executor = _executor(tmp_path, timeout_s=3)
    loop = executor.test(env, _record("", HIDDEN), "def f(x):\n    while True:\n        pass\n")
    assert loop["status"] == "timeout" and not loop["passed"]
    # the address-space limit turns a huge allocation into a MemoryError, not a dead machine
    small = _executor(tmp_path / "small", timeout_s=60, memory_bytes=1024**3)
    greedy = small.test(env, _record("", HIDDEN), "def f(x):\n    block = bytearray(4 * 1024**3)\n    return x\n")
    assert not greedy["passed"] and greedy["exceptions"][0]["type"] == "MemoryError"
    # no variable of ours reaches the code; HOME is the run's own folder
    probe = "import os\nassert 'PYTHONPATH' not in os.environ and 'adaptrack-gitchameleon-' in os.environ['HOME']\n\ndef f(x):\n    return x\n"
    patient = _executor(tmp_path / "patient", timeout_s=120)
    assert patient.test(env, _record("", HIDDEN), probe)["passed"]
    # kept: a second executor over the same file runs nothing again
    again = _executor(tmp_path / "patient", timeout_s=120)
    assert again.test(env, _record("", HIDDEN), probe)["passed"] and again.executed == 0


def _env_python(evaluation, record_id: str) -> str:
    return evaluation.states[record_id].python


def _explain_cli(python: str, items: list[dict]) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "adaptrack_lsp", "explain", "--stdin-jsonl", "--constraints", "api,kwargs", "--python", python],
        input="".join(json.dumps(item) + "\n" for item in items), capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.slow
def test_the_figures_by_execution_on_numpy_1_26_and_2_2(tmp_path):
    records = gc.load_records(DATA)
    evaluation = gc.evaluate(records, tmp_path, progress=False)
    summary = evaluation.summary
    assert summary["counts"] | {} == {
        "records": 9, "installable": 8, "importable": 8, "valid": 7,
        "pairs": 11, "pairs_breaking": 4, "pairs_passing": 7, "pairs_failing_otherwise": 0,
    }
    # the pin without a wheel is counted with its reason
    (entry,) = summary["not_installable"]["no wheel for this Python"]
    assert entry["records"] == ["7"] and "numpy==1.19.5" in entry["reason"] and "Python 3." in entry["reason"]
    assert [f["id"] for f in summary["reference_fails"]] == ["8"] and "AssertionError" in summary["reference_fails"][0]["failure"]

    # ground truth, computed outside the evaluation: what each environment's numpy has
    old, new = _env_python(evaluation, "0"), _env_python(evaluation, "1")
    check = (
        "import inspect, numpy as np; print(hasattr(np, 'product'), hasattr(np.zeros(2), 'ptp'), "
        "'stable' in inspect.signature(np.sort).parameters, np.__version__)"
    )
    facts = {python: subprocess.run([python, "-c", check], capture_output=True, text=True, timeout=120).stdout.split() for python in (old, new)}
    assert facts[old] == ["True", "True", "False", "1.26.4"] and facts[new] == ["False", "False", "True", "2.2.6"]
    outcome = {(p["source"], p["target"]): p for p in evaluation.pairs}
    expected_breaking = {("0", "1"): "module attributes", ("6", "1"): "imports", ("2", "3"): "receivers/methods", ("4", "5"): "kwargs"}
    assert {key: p["error"]["category"] for key, p in outcome.items() if p["outcome"] == "breaks"} == expected_breaking
    assert {key for key, p in outcome.items() if p["outcome"] == "passes"} == {
        ("1", "0"), ("7", "0"), ("7", "1"), ("1", "6"), ("7", "6"), ("3", "2"), ("5", "4"),
    }

    # every valid reference is accepted, no passing cross-version solution is rejected
    assert summary["recall"] == 1.0 and summary["false_rejection"] == 0.0
    breaking = [p for p in evaluation.pairs if p["outcome"] == "breaks"]
    assert summary["catch"] == sum(p["rejected"] for p in breaking) / 4
    # np.product under numpy 2.2 and np.sort(stable=) under 1.26 are rejected today
    assert outcome[("0", "1")]["rejected"] and outcome[("4", "5")]["rejected"]
    assert {(m["source"], m["target"]) for m in summary["misses"]["catch"]} == {k for k, p in outcome.items() if p["outcome"] == "breaks" and not p["rejected"]}

    # the verdicts are the ones `adaptrack-lsp explain` gives a user for the same texts
    by_id = {r.example_id: r for r in records}
    for python, keys in ((new, [("0", "1"), ("6", "1"), ("2", "3"), ("7", "1")]), (old, [("4", "5"), ("1", "0")])):
        items = [{"prefix": gc.check_prefix(by_id[a].starting_code, by_id[a].solution), "text": by_id[a].solution} for a, b in keys]
        verdicts = _explain_cli(python, items)
        assert [not v["accepted"] for v in verdicts] == [outcome[key]["rejected"] for key in keys]

    # a rerun executes nothing again (the environments and the runs are kept)
    rerun = gc.evaluate(records, tmp_path, progress=False)
    assert rerun.summary["executed_runs"] == 0 and rerun.summary["counts"] == summary["counts"]
    assert [json.loads(line)["id"] for line in (tmp_path / "records.jsonl").read_text().splitlines()] == [str(i) for i in range(9)]


@pytest.mark.slow
def test_the_cli_writes_the_table_and_generated_solutions_run_against_the_tests(tmp_path, capsys, builtin_model):
    from adaptrack_lsp.cli import main

    out = tmp_path / "run"
    decoders = "unconstrained,constrained,adaptrack,exact"
    code = main(
        ["eval", "gitchameleon", "--data", str(DATA), "--out", str(out), "--limit", "2", "--model", "builtin",
         "--samples", "2", "--max-new-tokens", "24", "--decoders", decoders, "--no-progress"]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "### GitChameleon 2.0" in printed and printed.strip().splitlines()[-1].startswith("recall=")
    for name in ("summary.json", "table.md", "records.jsonl", "pairs.jsonl", "environments.json", "runs.jsonl", "generations.jsonl"):
        assert (out / name).is_file(), name
    rows = [json.loads(line) for line in (out / "generations.jsonl").read_text().splitlines()]
    assert sorted((r["id"], r["decoder"]) for r in rows) == sorted((i, d) for i in ("0", "1") for d in decoders.split(","))
    assert all(len(r["samples"]) == 2 for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    generation = summary["generation"]
    assert generation["records"] == 2 and list(generation["decoders"]) == decoders.split(",")
    for decoder, figures in generation["decoders"].items():
        mine = [r for r in rows if r["decoder"] == decoder]
        # pass@1 is the greedy completions' pass rate; pass@2 over two samples is "either passed"
        assert figures["pass_at_k"]["pass@1"] == sum(r["greedy"]["passed"] for r in mine) / 2
        assert figures["pass_at_k"]["pass@2"] == sum(any(s["passed"] for s in r["samples"]) for r in mine) / 2
    # each completion was run: its test outcome is in the execution cache
    texts = [d["text"] for r in rows for d in [r["greedy"], *r["samples"]] if d["text"] is not None]
    assert texts and len((out / "runs.jsonl").read_text().splitlines()) >= 2 + len(set(texts)) // 2
    assert "pass@2" in (out / "table.md").read_text()


def test_bad_input_is_refused_with_a_message(tmp_path, capsys):
    from adaptrack_lsp.cli import main

    assert main(["eval", "gitchameleon", "--out", str(tmp_path)]) == 2
    assert "needs --data" in capsys.readouterr().err
    assert main(["eval", "gitchameleon", "--data", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no dataset.jsonl" in capsys.readouterr().err
    assert main(["eval", "gitchameleon", "--data", str(DATA), "--out", str(tmp_path / "o"), "--constraints", "api,nope"]) == 2
    assert "unknown part" in capsys.readouterr().err
    assert main(["eval", "gitchameleon", "--data", str(DATA), "--out", str(tmp_path / "o"), "--samples", "3"]) == 2
    assert "need --model" in capsys.readouterr().err


def test_the_benchmark_names_its_figures():
    source = (ROOT / "benchmarks" / "versions.py").read_text()
    for name in ("recall", "catch", "false_rejection", "records", "installable", "importable", "valid"):
        assert f'"{name}"' in source
    assert '"receivers": receivers' in source and '"targets": targets' in source


def test_a_version_error_in_the_starting_code_is_not_the_solution_s(tmp_path):
    executor = _executor(tmp_path, timeout_s=120)
    start = "import json\nbroken = json.no_such_function\n\ndef f(x):\n"
    outcome = executor.test(_here(), _record("    return x\n", HIDDEN, start), start + "    return x\n")
    assert gc.version_error(outcome)["category"] == "module attributes"  # raised in the file
    assert gc.version_error(outcome, gc.code_start(start)) is None  # but by the starting code
    # a solution that continues the starting code's line: the failing expression decides
    start = "import json\n\ndef f(x):\n    return json."
    for solution, blamed in (("no_such_function(x)\n", True), ("dumps(x).no_such_method()\n", True)):
        outcome = executor.test(_here(), _record(solution, HIDDEN, start), start + solution)
        assert (gc.version_error(outcome, gc.code_start(start)) is not None) is blamed
    start = "import json\n\ndef f(x):\n    return json.no_such_function"
    outcome = executor.test(_here(), _record("(x)\n", HIDDEN, start), start + "(x)\n")
    assert gc.version_error(outcome) is not None and gc.version_error(outcome, gc.code_start(start)) is None
