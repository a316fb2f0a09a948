"""The extras of the install: pyproject.toml and `extras.EXTRAS` name the same packages,
the core's dependencies hold no extra's package, the messages name the install command,
one version number, and the server backend's tokenizer without transformers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from adaptrack_lsp import __version__, extras

ROOT = Path(__file__).resolve().parents[2]
GUARD = ROOT / "tests" / "lsp" / "import_guard.py"


def _name(requirement: str) -> str:
    return requirement.split(";")[0].split("[")[0].split("=")[0].split("<")[0].split(">")[0].split("!")[0].strip().lower()


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_pyproject_extras_are_the_ones_the_code_names():
    optional = pyproject()["project"]["optional-dependencies"]
    for name, extra in extras.EXTRAS.items():
        assert sorted(_name(r) for r in optional[name]) == sorted(extra.packages), name
    dev = " ".join(optional["dev"])
    assert "adaptrack-lsp[transformers,eval,grammar]" in dev


def test_the_core_installs_no_package_of_an_extra_it_does_without():
    core = {_name(r) for r in pyproject()["project"]["dependencies"]}
    heavy = {"torch", "transformers", "llama-cpp-python", "llguidance", "matplotlib", "scipy", "gguf"}
    assert not core & heavy, core & heavy
    # what the builtin model and the API / keyword / syntax constraints import
    assert {"numpy", "tokenizers", "jedi", "lark", "tree-sitter", "tree-sitter-python", "pygls", "httpx"} <= core


def test_the_message_names_the_interpreter_and_the_extra(monkeypatch):
    monkeypatch.setattr(extras, "present", lambda module: module != "torch")
    with pytest.raises(extras.MissingExtra) as raised:
        extras.require("transformers", "model 'org/m'")
    message = str(raised.value)
    assert message == f"model 'org/m' needs the transformers extra (torch not installed): {sys.executable} -m pip install 'adaptrack-lsp[transformers]'"
    assert extras.missing_packages("transformers") == ["torch"]
    extras.require("transformers", "x", only=("transformers",))  # present: no error


def test_one_version_number():
    assert pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "adaptrack_lsp.__version__"}
    extension = json.loads((ROOT / "vscode-client" / "package.json").read_text(encoding="utf-8"))
    assert extension["version"] == __version__
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {__version__}" in changelog


def test_the_server_backend_reads_a_tokenizer_without_transformers():
    """`load_tokenizer` with transformers absent (tokenizers alone) gives the vocabulary and
    the ids that transformers' AutoTokenizer gives for the same folder."""
    pytest.importorskip("transformers")
    from adaptrack_lsp.completion.lm.server import load_tokenizer
    from adaptrack_lsp.completion.lm.tiny import tiny_model_path
    from adaptrack_lsp.completion.tokenizer_bytes import ROUND_TRIP_TEXTS, encode_ids

    folder = str(tiny_model_path())
    texts = [*ROUND_TRIP_TEXTS, "def f(x):\n    return np.linalg.norm(x)\n"]
    tokenizer, vocab = load_tokenizer(folder)
    assert type(tokenizer).__module__.startswith("transformers")
    expected = {"eos": sorted(vocab.eos_ids), "size": vocab.size, "bytes": [b.hex() for b in vocab.token_bytes],
                "ids": [encode_ids(tokenizer, text) for text in texts]}
    code = (
        f"import json, runpy\nrunpy.run_path({str(GUARD)!r}, run_name='guard')\n"
        "from adaptrack_lsp.completion.lm.server import load_tokenizer\n"
        "from adaptrack_lsp.completion.tokenizer_bytes import encode_ids\n"
        f"tokenizer, vocab = load_tokenizer({folder!r})\n"
        "assert type(tokenizer).__module__.startswith('tokenizers'), type(tokenizer)\n"
        "print(json.dumps({'eos': sorted(vocab.eos_ids), 'size': vocab.size, 'bytes': [b.hex() for b in vocab.token_bytes],\n"
        f"                  'ids': [encode_ids(tokenizer, t) for t in {texts!r}]}}))\n"
    )
    env = {"ADAPTRACK_TEST_WATCH": "torch,transformers", "ADAPTRACK_TEST_ABSENT": "1"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, **env})
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == expected
