"""`adaptrack-lsp explain`: verdicts, offsets and reasons; the parts `--constraints`
picks; `--stdin-jsonl`; clear errors for bad input."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from adaptrack_lsp.checking import explainer
from adaptrack_lsp.cli import build_parser
from adaptrack_lsp.config import Settings


def run(argv, capsys, stdin: str | None = None, monkeypatch=None):
    args = build_parser().parse_args(["explain", *argv])
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = args._module.run(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def document(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "doc.py"
    path.write_text("import os\n\nprint()\n")
    return path


def test_a_rejected_text_gives_the_offset_the_reason_and_a_caret(document, capsys):
    code, out, _ = run([f"{document}:4:1", "--text", "x = foo(a))", "--constraints", "syntax"], capsys)
    assert code == 0
    assert out.splitlines() == [
        "rejected (syntax) at offset 10 (')'): Python syntax: ')' closes no open bracket",
        "  x = foo(a))",
        "            ^",
    ]


def test_json_verdicts_and_where_a_text_may_end(document, capsys):
    code, out, _ = run([str(document), "--text", "y = [1,", "--constraints", "syntax", "--json"], capsys)
    verdict = json.loads(out)
    assert code == 0 and set(verdict) == {"accepted", "complete", "offset", "reason"}
    assert verdict["accepted"] and not verdict["complete"] and verdict["offset"] is None
    assert "cannot end here" in verdict["reason"]
    # inside "print()" at line 3, column 7: an insertion that the rest of the line closes
    _, out, _ = run([f"{document}:3:7", "--text", "os.sep", "--constraints", "syntax", "--json"], capsys)
    assert json.loads(out) == {"accepted": True, "complete": True, "offset": None, "reason": ""}
    _, out, _ = run([f"{document}:3:7", "--text", "os.sep)", "--constraints", "syntax", "--json"], capsys)
    assert json.loads(out)["accepted"] and not json.loads(out)["complete"]  # "print(os.sep))" would not parse


def test_the_api_part_names_the_library_version(tmp_path, monkeypatch, capsys):
    from adaptrack_lsp.apis.index import bundled_snapshot

    monkeypatch.chdir(tmp_path)
    source = tmp_path / "tf.py"
    source.write_text("import tensorflow as tf\n")
    argv = [str(source), "--snapshot", bundled_snapshot("tensorflow"), "--json"]
    _, out, _ = run([*argv, "--text", "x = tf.placeholder(", "--constraints", "api,syntax"], capsys)
    verdict = json.loads(out)
    assert verdict["accepted"] is False and verdict["offset"] == len("x = tf.pl") - 1
    assert verdict["reason"].startswith("tf.placeholder does not exist in tensorflow 2.21")
    _, out, _ = run([*argv, "--text", "x = tf.compat.v1.placeholder(tf.float32)", "--constraints", "api,syntax"], capsys)
    assert json.loads(out) == {"accepted": True, "complete": True, "offset": None, "reason": ""}
    _, out, _ = run([*argv, "--text", "x = tf.zeros(3))", "--constraints", "api"], capsys)
    assert json.loads(out)["accepted"] is True  # without the syntax part the extra bracket passes


def test_stdin_jsonl_checks_many_texts_in_one_process(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    lines = [
        {"prefix": "def f(x):\n", "text": "    return x\n"},
        {"prefix": "x = (", "text": "1]"},
        {"prefix": "x = )\n", "text": "y"},
        {"prefix": "class A:\n    def f(self):\n        ", "text": "pass"},
    ]
    stdin = "\n".join(json.dumps(line) for line in lines) + "\nnot json\n" + json.dumps({"prefix": 1}) + "\n"
    code, out, _ = run(["--stdin-jsonl", "--constraints", "syntax"], capsys, stdin, monkeypatch)
    answers = [json.loads(line) for line in out.splitlines()]
    assert answers[0] == {"accepted": True, "complete": True, "offset": None, "reason": ""}
    assert answers[1] == {"accepted": False, "complete": False, "offset": 1, "reason": "Python syntax: ']' does not close '('"}
    assert answers[2]["accepted"] and answers[2]["reason"].startswith("syntax check off: syntax error before the cursor (line 1)")
    assert answers[3]["accepted"] and answers[3]["complete"]
    assert [set(a) for a in answers[4:]] == [{"error"}, {"error"}] and "input line 5" in answers[4]["error"]
    assert code == 1  # bad input lines are answered and make the exit status 1


def test_bad_arguments_are_clear_errors(document, capsys):
    code, _, err = run([str(document), "--text", "x", "--constraints", "syntax,kwargz"], capsys)
    assert code == 2 and "unknown constraint 'kwargz' (known: clean, api, syntax" in err
    code, _, err = run([str(document)], capsys)
    assert code == 2 and "--text TEXT is needed" in err
    code, _, err = run([str(document), "--stdin-jsonl"], capsys)
    assert code == 2 and "one of them" in err
    code, _, err = run([f"{document}:9:1", "--text", "x", "--constraints", "syntax"], capsys)
    assert code == 2 and "line 9 is outside the file" in err


def test_the_kwargs_part_names_the_keyword_and_the_installed_parameters(tmp_path, monkeypatch, capsys):
    pytest.importorskip("numpy")
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "h.py"
    source.write_text("import numpy as np\n")
    _, out, _ = run([str(source), "--text", "np.histogram(a, normed=True)", "--constraints", "api,kwargs", "--json"], capsys)
    verdict = json.loads(out)
    assert verdict["accepted"] is False and verdict["offset"] == len("np.histogram(a, normed")  # at its "=": "normed=" is a keyword
    assert verdict["reason"].startswith("np.histogram takes no keyword normed in numpy ")
    assert "(parameters: a, bins, range, density, weights)" in verdict["reason"]
    _, out, _ = run([str(source), "--text", "np.histogram(a, density=True)", "--constraints", "api,kwargs", "--json"], capsys)
    assert json.loads(out)["accepted"] is True
    _, out, _ = run([str(source), "--text", "np.histogram(a, normed=True)", "--constraints", "api", "--json"], capsys)
    assert json.loads(out)["accepted"] is True  # without the kwargs part the removed keyword passes


def test_default_parts_follow_the_settings():
    settings = Settings()
    expected = ["clean", "api"] + (["kwargs"] if settings.keyword_arguments else []) + (["syntax"] if settings.syntax_constraint else [])
    assert explainer.parse_parts(None, settings) == expected
    assert explainer.parse_parts(None, settings.replace(keyword_arguments=False, syntax_constraint=False)) == ["clean", "api"]
    assert explainer.parse_parts(None, Settings(syntax_constraint=True))[-1] == "syntax"
    assert explainer.parse_parts("syntax, api,syntax", Settings()) == ["syntax", "api"]


def test_the_installed_command_answers_jsonl(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    lines = "".join(json.dumps({"prefix": p, "text": t}) + "\n" for p, t in [("", "x = 1\n"), ("if x:\n", "y")])
    done = subprocess.run(
        [sys.executable, "-m", "adaptrack_lsp", "explain", "--stdin-jsonl", "--constraints", "syntax"],
        input=lines,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first["complete"] and second == {
        "accepted": False,
        "complete": False,
        "offset": 0,
        "reason": second["reason"],
    }
    assert "expected an indented block" in second["reason"]
