"""`adaptrack-lsp eval` end to end: every output file, resuming, the simulated LM's Table 1 shape."""

import json

import pytest

from adaptrack_lsp.cli import main

API_OUTPUTS = ["results.jsonl", "summary.json", "table.md", "em_at_k.png", "run.json"]

# a small TF-like API the tests write themselves: three TFv1 items
NAMES = [
    "tensorflow.compat",
    "tensorflow.compat.v1",
    "tensorflow.compat.v1.losses",
    "tensorflow.compat.v1.losses.mean_pairwise_squared_error",
    "tensorflow.compat.v1.losses.log_loss",
    "tensorflow.compat.v1.get_variable",
    "tensorflow.compat.v1.nn",
    "tensorflow.compat.v1.nn.rnn_cell",
    "tensorflow.compat.v1.nn.rnn_cell.static_rnn_helper",
    "tensorflow.compat.v1.nn.relu",
    "tensorflow.losses",
    "tensorflow.losses.log_loss",
    "tensorflow.losses.mean_squared_error",
    "tensorflow.nn",
    "tensorflow.nn.relu",
    "tensorflow.zeros",
]


@pytest.fixture()
def snapshot(tmp_path):
    path = tmp_path / "tf-snapshot.json"
    path.write_text(json.dumps({"package": "tensorflow", "version": "0.test", "root": "tensorflow", "names": NAMES}))
    return path


def lines(path):
    return path.read_text().splitlines()


@pytest.mark.slow
def test_tfv1_with_the_tiny_model_and_the_committed_snapshot(tmp_path, capsys):
    """The CI check: eval tfv1 --limit 10 over three decoders writes every output file."""
    out = tmp_path / "run"
    code = main(
        ["eval", "tfv1", "--model", "tiny", "--setting", "v2", "--limit", "10", "--samples", "3",
         "--decoders", "unconstrained,constrained,adaptrack", "--out", str(out), "--no-progress"]
    )
    assert code == 0
    for name in API_OUTPUTS:
        assert (out / name).is_file(), name
    assert "TensorFlow-v1-only APIs" in capsys.readouterr().out
    records = [json.loads(line) for line in lines(out / "results.jsonl")]
    assert len(records) == 10 * 3
    assert all(len(r["samples"]) == 3 and "greedy" in r for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tfv1_api_count"] >= 10 and summary["items"] == 10
    for decoder in ("unconstrained", "constrained", "adaptrack"):
        entry = summary["decoders"][decoder]
        assert set(entry) >= {"em_at_k", "lm_calls", "constraint_recall", "latency_ms"}
        assert entry["lm_calls"]["avg"] >= 1
    # the committed snapshot accepts every TFv1 oracle in the v2 setting
    assert summary["decoders"]["adaptrack"]["constraint_recall"] == 1.0
    assert (out / "em_at_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simulated_both_settings_resume_and_table_shape(tmp_path, snapshot, capsys):
    out = tmp_path / "sim"
    argv = ["eval", "tfv1", "--model", "simulated", "--api-snapshot", str(snapshot), "--samples", "10",
            "--out", str(out), "--no-progress", "--seed", "3"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "TFv1: 3 TensorFlow-v1-only APIs" in printed
    for setting in ("v1", "v2"):
        for name in API_OUTPUTS:
            assert (out / setting / name).is_file(), (setting, name)
    for name in ("summary.json", "table.md", "em_at_k.png"):
        assert (out / name).is_file()
    table = (out / "table.md").read_text()
    assert "TensorFlow v1 setting EM@1" in table and "TensorFlow v2 setting EM@10" in table
    assert "SIMULATION" in table
    summary = json.loads((out / "summary.json").read_text())
    assert summary["simulated"] is True
    v2 = summary["settings"]["v2"]["decoders"]
    # Table 1 shape: in the v2 setting greedy unconstrained decoding writes the v1 spelling,
    # AdapTrack finds the compat.v1 spelling the constraint leaves
    assert v2["unconstrained"]["em_at_k"]["EM@1"] == 0.0
    assert v2["adaptrack"]["em_at_k"]["EM@1"] == 1.0
    assert v2["adaptrack"]["em_at_k"]["EM@3"] > v2["constrained"]["em_at_k"]["EM@3"]
    v1 = summary["settings"]["v1"]["decoders"]
    assert v1["unconstrained"]["em_at_k"]["EM@1"] == 1.0

    # resume: a second run with more decoders adds only the new pairs
    before = {s: len(lines(out / s / "results.jsonl")) for s in ("v1", "v2")}
    assert main(argv + ["--decoders", "unconstrained,constrained,adaptrack,asap"]) == 0
    after = {s: len(lines(out / s / "results.jsonl")) for s in ("v1", "v2")}
    assert after == {s: before[s] + 3 for s in before}
    assert "ASAp" in (out / "table.md").read_text()

    # a different configuration in the same folder is refused
    assert main(argv[:-2] + ["--seed", "4"]) == 2
    assert "different run" in capsys.readouterr().err


def test_tfv1real_from_a_folder(tmp_path, snapshot):
    source = tmp_path / "repo"
    source.mkdir()
    (source / "a.py").write_text("import tensorflow as tf\n\nw = tf.compat.v1.get_variable('w', [3])\n")
    (source / "b.py").write_text("import tensorflow as tf\n\nx = tf.zeros(3)\n")
    out = tmp_path / "real"
    code = main(["eval", "tfv1real", "--model", "simulated", "--api-snapshot", str(snapshot), "--data", str(source),
                 "--samples", "5", "--out", str(out), "--no-progress"])
    assert code == 0
    (item,) = [json.loads(line) for line in lines(out / "dataset.jsonl")]
    assert item["oracle"] == ".compat.v1.get_variable" and item["prefix"].endswith("w = tf")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["decoders"]["adaptrack"]["em_at_k"]["EM@1"] == 1.0
    assert "Exact match on TFv1Real" in (out / "table.md").read_text()


def test_dsl_outputs(tmp_path):
    out = tmp_path / "dsl"
    assert main(["eval", "dsl", "--samples", "200", "--out", str(out), "--no-progress"]) == 0
    for name in ("results.jsonl", "summary.json", "table.md", "kl_curve.png"):
        assert (out / name).is_file()
    summary = json.loads((out / "summary.json").read_text())["decoders"]
    assert summary["adaptrack"]["kl"]["binary5"] < summary["constrained"]["kl"]["binary5"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["eval", "tfv1", "--decoders", "adaptrack"], "needs --model"),
        (["eval", "tfv1", "--model", "simulated", "--decoders", "nope"], "unknown decoder"),
        (["eval", "tfv1real", "--model", "simulated"], "needs --data"),
        (["eval", "dsl", "--model", "tiny"], "leave out --model"),
        (["eval", "tfv1", "--model", "simulated", "--option", "adaptrack=1"], "DECODER.KEY=VALUE"),
    ],
)
def test_bad_arguments(tmp_path, snapshot, capsys, argv, message):
    extra = ["--out", str(tmp_path / "x")]
    if argv[1] != "dsl":
        extra += ["--api-snapshot", str(snapshot)]
    assert main(argv + extra) == 2
    assert message in capsys.readouterr().err
