"""`adaptrack-lsp sample`: JSON and table output, options, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from adaptrack_lsp.cli import main
from adaptrack_lsp.commands.sample import parse_options

TASKS_DIR = Path(__file__).resolve().parents[1] / "data" / "tasks"
BINARY = str(TASKS_DIR / "binary.json")
FIGURE1 = str(TASKS_DIR / "figure1.json")


def run_json(capsys, *arguments):
    code = main(["sample", *arguments, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_json_output_counts_counters_failures(capsys):
    output = run_json(capsys, "--task", BINARY, "--decoder", "adaptrack", "--n", "3400", "--seed", "5")
    assert set(output) >= {"counts", "counters", "failures"}
    assert sum(output["counts"].values()) == 3400
    assert output["failures"] == 0 and output["status"] == "ok"
    assert all(len(key.split(" ")) == 6 and key.endswith(" $") for key in output["counts"])
    assert len(output["counts"]) == 17
    # 1/17 of 3400 = 200, sd 13.7
    assert abs(output["counts"]["0 0 0 0 0 $"] - 200) < 60
    counters = output["counters"]
    assert counters["lm_calls"] == 37 and counters["tokens_fed"] == 36
    assert {"constraint_checks", "backtracks", "wall_seconds"} <= set(counters)


def test_json_output_is_reproducible_and_seed_dependent(capsys):
    arguments = ["--task", FIGURE1, "--decoder", "cars", "--n", "300"]
    first = run_json(capsys, *arguments, "--seed", "1")
    again = run_json(capsys, *arguments, "--seed", "1")
    other = run_json(capsys, *arguments, "--seed", "2")
    assert first["counts"] == again["counts"]
    assert first["counts"] != other["counts"]


def test_constrained_on_figure1_prefers_matrix_power(capsys):
    output = run_json(capsys, "--task", FIGURE1, "--decoder", "constrained", "--n", "2000", "--seed", "3")
    assert max(output["counts"], key=output["counts"].get) == "matrix _ power $"


def test_options_and_greedy_temperature(capsys):
    output = run_json(
        capsys, "--task", FIGURE1, "--decoder", "adaptrack", "--n", "3", "--temperature", "0",
        "--option", "max_backtrack_distance=4", "--option", "share_estimates=true",
    )
    assert output["counts"] == {"l inalg . matrix _ rank $": 3}
    output = run_json(capsys, "--task", FIGURE1, "--decoder", "map", "--n", "2")
    assert output["counts"] == {"l inalg . matrix _ rank $": 1, "l inalg . det $": 1}  # the two most probable


def test_parse_options():
    assert parse_options(["a=1", "b=true", "c=0.5", "d=text", "e=null", "f=a=b"]) == {
        "a": 1, "b": True, "c": 0.5, "d": "text", "e": None, "f": "a=b",
    }
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_options(["novalue"])


def test_table_output_compares_with_exact(capsys):
    code = main(["sample", "--task", FIGURE1, "--decoder", "adaptrack", "--n", "500", "--seed", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "P(s|c)" in out and "GCD" in out
    assert "l inalg . matrix _ rank $" in out and "77.18%" in out and "57.70%" in out
    assert "chi-square against P(s|c)" in out


def test_table_marks_invalid_samples(capsys):
    code = main(["sample", "--task", BINARY, "--decoder", "unconstrained", "--n", "50", "--seed", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "(invalid)" in out


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--decoder", "nope"], "unknown decoder 'nope'"),
        (["--n", "0"], "--n must be at least 1"),
        (["--option", "oops"], "expected KEY=VALUE"),
        (["--decoder", "map", "--option", "node_budget=0"], "decoder map, option 'node_budget': 0 must be at least 1"),
        (["--option", "max_backtrack_distance=abc"], "option 'max_backtrack_distance': expected an integer, got 'abc' or null"),
        (["--option", "max_backtrack_distance=1.5"], "option 'max_backtrack_distance': expected an integer, got 1.5"),
        (["--option", "share_estimates=1"], "option 'share_estimates': expected true or false, got 1"),
        (["--decoder", "constrained", "--option", "top_p_validity=0.5"], "decoder constrained, option 'top_p_validity': unknown option"),
        (["--decoder", "exact", "--option", "max_attempts=0"], "option 'max_attempts': 0 must be at least 1"),
    ],
)
def test_bad_arguments(capsys, arguments, message):
    code = main(["sample", "--task", BINARY, *arguments])
    captured = capsys.readouterr()
    assert code == 2
    assert message in captured.err


def test_malformed_task_file_names_the_field(tmp_path, capsys):
    data = json.loads(Path(BINARY).read_text(encoding="utf-8"))
    data["next"][3]["probs"] = {"$": 0.9}
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    code = main(["sample", "--task", str(path)])
    assert code == 2
    assert "next[3].probs: sums to 0.9, not 1" in capsys.readouterr().err
    code = main(["sample", "--task", str(tmp_path / "missing.json")])
    assert code == 2
    assert "cannot read the task file" in capsys.readouterr().err


def test_no_valid_completion_is_reported(tmp_path, capsys):
    data = json.loads(Path(BINARY).read_text(encoding="utf-8"))
    data["valid"] = []
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    output = run_json(capsys, "--task", str(path), "--decoder", "adaptrack", "--n", "10")
    assert output["status"] == "no_valid_completion"
    assert output["counts"] == {} and output["failures"] == 10


def test_zero_probability_valid_sequences_get_an_accurate_message(tmp_path, capsys):
    """Valid sequences exist, but the model gives each probability 0."""
    data = json.loads(Path(BINARY).read_text(encoding="utf-8"))
    data["valid"] = [["0", "0", "0", "0", "0", "0", "$"]]  # six bits: the model stops after five
    path = tmp_path / "zero.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    output = run_json(capsys, "--task", str(path), "--decoder", "exact", "--n", "3", "--max-new-tokens", "7")
    assert output["status"] == "no_valid_completion"
    assert "probability 0" in output["message"] and "violates" not in output["message"]


def test_output_into_a_closed_pipe_is_not_a_traceback():
    """`sample --json | head -c 10`: the reader leaves early; no BrokenPipeError trace."""
    command = [sys.executable, "-m", "adaptrack_lsp", "sample", "--task", BINARY, "--n", "20000", "--decoder", "exact"]
    producer = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    producer.stdout.read(10)
    producer.stdout.close()  # the pipe's reader is gone
    _, err = producer.communicate(timeout=120)
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()
    assert producer.returncode == 0


def test_console_script_runs(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "adaptrack_lsp", "sample", "--task", BINARY, "--decoder", "rsft", "--n", "100", "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert sum(json.loads(completed.stdout)["counts"].values()) == 100
