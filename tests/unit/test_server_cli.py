"""The command line on the server backend and on real models: `sample --model --prompt-file
--allowed` follows P(s | c) with P(eos | s) included (checked against every tokenization
of every allowed line, enumerated from the engine's full distributions, on llama-server
and in process), `complete --backend server`, and what an unreachable server prints."""

from __future__ import annotations

import json
import math

import pytest
from llama_server_support import free_port, llama_server  # noqa: F401

from adaptrack_lsp.cli import main
from adaptrack_lsp.completion.lm.server import load_from_settings
from adaptrack_lsp.config import Settings
from adaptrack_lsp.evaluation.tasks import chi_square

PROMPT = "import numpy as np\n\nx = "
LINES = ["x", "y", "np", "None"]


def exact_line_distribution(lm, prompt_ids) -> dict[str, float]:
    """P(line | one of LINES) summed over every tokenization of each line, each ended by
    any end-of-sequence id, from full distributions."""
    vocab = lm.vocab
    ordinary = [i for i in range(vocab.num_defined) if not vocab.is_special(i) and vocab.text(i)]
    lm.set_prompt(prompt_ids, max_new_tokens=8)
    weights = {}
    for line in LINES:
        total = 0.0
        stack = [((), 0, 0.0)]
        while stack:
            path, position, logprob = stack.pop()
            full = lm.next_logprobs(list(path))
            if position == len(line):
                total += sum(math.exp(logprob + full[e]) for e in vocab.eos_ids)
                continue
            for token in ordinary:
                piece = vocab.text(token)
                if line.startswith(piece, position):
                    stack.append((path + (token,), position + len(piece), logprob + float(full[token])))
        weights[line] = total
    norm = math.fsum(weights.values())
    return {line: w / norm for line, w in weights.items()}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sample")
    (folder / "prompt.py").write_text(PROMPT)
    (folder / "allowed.txt").write_text("\n".join(LINES) + "\n\n")
    return folder


def run_json(capsys, *arguments) -> dict:
    assert main(["sample", *arguments, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_sample_allowed_lines_on_a_server_and_in_process_follow_p_of_the_lines(llama_server, files, capsys):  # noqa: F811
    lm = load_from_settings(Settings(model="tiny", backend="server", endpoint=llama_server.url))
    reference = exact_line_distribution(lm, lm.encode(PROMPT))
    common = ["--prompt-file", str(files / "prompt.py"), "--allowed", str(files / "allowed.txt"), "--decoder", "exact", "--n", "600", "--seed", "3"]
    served = run_json(capsys, "--model", "tiny", "--backend", "server", "--endpoint", llama_server.url, *common)
    assert served["backend"] == "server" and served["status"] == "ok" and served["server_calls"] > 0
    assert sum(served["counts"].values()) == 600 and set(served["counts"]) <= set(LINES)
    assert served["lm_calls"] == served["counters"]["lm_calls"]
    assert chi_square({(k,): v for k, v in served["counts"].items()}, {(k,): p for k, p in reference.items()}).p_value > 1e-4
    local = run_json(capsys, "--model", "tiny", *common)
    assert local["backend"] == "transformers" and local["server_calls"] == 0
    assert chi_square({(k,): v for k, v in local["counts"].items()}, {(k,): p for k, p in reference.items()}).p_value > 1e-4


GRAMMAR = 'start: NAME "(" DIGIT ")"\nNAME: "np.zeros" | "np.ones" | "len"\nDIGIT: /[0-9]/\n'


@pytest.mark.slow
def test_sample_with_a_grammar_on_a_real_model_gives_only_sentences_of_the_grammar(llama_server, files, capsys):  # noqa: F811
    import re

    (files / "call.lark").write_text(GRAMMAR)
    common = ["--prompt-file", str(files / "prompt.py"), "--grammar", str(files / "call.lark"), "--decoder", "exact", "--n", "40", "--seed", "1"]
    sentence = re.compile(r"(np\.zeros|np\.ones|len)\([0-9]\)")
    for backend in ([], ["--backend", "server", "--endpoint", llama_server.url]):
        result = run_json(capsys, "--model", "tiny", *backend, *common)
        assert result["status"] == "ok" and sum(result["counts"].values()) == 40, result
        assert all(sentence.fullmatch(text) for text in result["counts"]), result["counts"]
    bad = files / "bad.lark"
    bad.write_text('start: NAME "("\n')
    assert main(["sample", "--model", "tiny", "--prompt-file", str(files / "prompt.py"), "--grammar", str(bad)]) == 2
    assert "NAME" in capsys.readouterr().err


def test_sample_refuses_bad_combinations_with_a_message(files, capsys):
    assert main(["sample", "--model", "tiny", "--allowed", str(files / "allowed.txt")]) == 2
    assert "--prompt-file" in capsys.readouterr().err
    assert main(["sample", "--task", str(files / "allowed.txt"), "--allowed", str(files / "allowed.txt")]) == 2
    assert "--allowed goes with --model" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sample", "--model", "tiny", "--task", "x.json"])  # one source only
    capsys.readouterr()


def test_an_unreachable_server_stops_sample_and_complete_with_the_fix(files, capsys, tmp_path):
    endpoint = f"http://127.0.0.1:{free_port()}"
    code = main(["sample", "--model", "tiny", "--backend", "server", "--endpoint", endpoint,
                 "--prompt-file", str(files / "prompt.py"), "--allowed", str(files / "allowed.txt")])  # fmt: skip
    assert code == 3 and "cannot reach the inference server" in capsys.readouterr().err
    source = tmp_path / "example.py"
    source.write_text(PROMPT)
    code = main(["complete", str(source), "--model", "tiny", "--backend", "server", "--endpoint", endpoint])
    err = capsys.readouterr().err
    assert code == 3 and "cannot reach the inference server" in err and endpoint in err


def test_complete_on_a_server_prints_the_answer_and_its_server_calls(llama_server, tmp_path, capsys):  # noqa: F811
    source = tmp_path / "example.py"
    source.write_text("def add(a, b):\n    return a")
    code = main(["complete", str(source), "--model", "tiny", "--backend", "server", "--endpoint", llama_server.url,
                 "--decoder", "unconstrained", "--max-new-tokens", "6", "--json"])  # fmt: skip
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["candidates"] and result["counters"]["server_calls"] == 1


def test_serve_takes_the_engine_flags():
    from adaptrack_lsp.cli import build_parser
    from adaptrack_lsp.commands.serve import backend_settings

    args = build_parser().parse_args(["serve", "--backend", "server", "--endpoint", "http://127.0.0.1:8080", "--tokenizer", "tiny"])
    assert backend_settings(args) == {"backend": "server", "endpoint": "http://127.0.0.1:8080", "tokenizer": "tiny"}
