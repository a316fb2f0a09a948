"""DSL exactness evaluation (paper §6.4) on the binary task and a task file."""

import json

import pytest

from adaptrack_lsp.evaluation.dsl import (
    evaluate_task,
    load_tasks,
    run_dsl_evaluation,
    summarize_dsl,
)
from adaptrack_lsp.evaluation.tasks import binary_task, random_task

SAMPLES = 1000
ZEROS = "0 0 0 0 0 $"


def test_binary_task_adaptrack_matches_exact_and_constrained_is_distorted():
    task = binary_task()
    adaptrack = evaluate_task(task, "adaptrack", SAMPLES, seed=7)
    constrained = evaluate_task(task, "constrained", SAMPLES, seed=7)
    # P(00000 | c) = 1/17; 4 binomial standard deviations (~0.03) of tolerance
    assert adaptrack["counts"].get(ZEROS, 0) / SAMPLES == pytest.approx(1 / 17, abs=0.03)
    # greedy constrained decoding gives it about 1/2: the same check rejects it
    assert constrained["counts"][ZEROS] / SAMPLES == pytest.approx(0.5, abs=0.06)
    assert adaptrack["kl"] < 0.05
    assert constrained["kl"] > 0.3
    assert len(adaptrack["kl_curve"]) == SAMPLES - SAMPLES // 4 + 1
    assert adaptrack["invalid_samples"] == constrained["invalid_samples"] == 0


def test_run_writes_and_resumes(tmp_path):
    tasks = [binary_task(3), random_task(seed=3)]
    info = {"dataset": "dsl", "samples": 40}
    records = run_dsl_evaluation(tasks, ["constrained", "adaptrack"], 40, 0, tmp_path, info, progress=False)
    assert len(records) == 4
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    again = run_dsl_evaluation(tasks, ["constrained", "adaptrack"], 40, 0, tmp_path, info, progress=False)
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == len(lines)  # nothing redone
    assert [r["kl"] for r in again] == [r["kl"] for r in records]
    summary = summarize_dsl(records, ["constrained", "adaptrack"], [t.name for t in tasks])
    assert set(summary["adaptrack"]["kl"]) == {t.name for t in tasks}
    with pytest.raises(ValueError, match="different run"):
        run_dsl_evaluation(tasks, ["adaptrack"], 40, 0, tmp_path, {"dataset": "dsl", "samples": 99}, progress=False)


def test_load_tasks_from_files(tmp_path):
    (tmp_path / "b.json").write_text(json.dumps(binary_task(2).to_dict()))
    (tmp_path / "a.json").write_text(json.dumps(random_task(seed=1).to_dict()))
    assert [t.name for t in load_tasks(tmp_path)] == ["a", "b"]
    assert load_tasks(None)[0].name == "binary5"
    assert [t.name for t in load_tasks(tmp_path / "b.json")] == ["b"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no \\*.json"):
        load_tasks(tmp_path / "empty")
