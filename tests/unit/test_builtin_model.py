"""The built-in model: Kneser–Ney tables checked against a direct implementation, the
LanguageModel contract (full, normalised distributions; exact token bytes; no FIM), the
document model and bracket prior, and the cache's bad inputs (damaged files, an
unwritable cache root, missing or non-permissive corpus packages).

A small recipe (300 kB of the standard library, a 600-token BPE, 4-grams) builds in a few
seconds; the full model is exercised by the LSP, client and demo tests.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from builtin_support import SMALL, small_model_in_own_cache

from adaptrack_lsp.completion.lm import builtin
from adaptrack_lsp.completion.lm.ngram import build_tables


# -- Kneser–Ney against a direct implementation -------------------------------------------
def reference_kneser_ney(tokens: list[int], counted: list[bool], order: int, vocab_size: int, prune_from: int, discounts):
    """Interpolated modified Kneser–Ney written out with dictionaries (the definition)."""
    raw = [Counter() for _ in range(order + 1)]  # raw[k][(context, w)]
    for i, flag in enumerate(counted):
        if flag:
            for k in range(1, order + 1):
                raw[k][(tuple(tokens[i - k + 1 : i]), tokens[i])] += 1
    counts = [Counter() for _ in range(order + 1)]
    counts[order] = raw[order]
    for k in range(1, order):  # continuation counts: distinct tokens before (context, w)
        for (context, word) in raw[k + 1]:
            counts[k][(context[1:], word)] += 1

    def discount(c, d):
        return max(c - (0 if c == 0 else d[min(c, 3) - 1]), 0.0)

    def distribution(context):
        probs = np.full(vocab_size, 1.0 / vocab_size)
        for k in range(1, order + 1):
            ctx = tuple(context[len(context) - k + 1 :]) if k > 1 else ()
            entries = {w: c for (cx, w), c in counts[k].items() if cx == ctx}
            if not entries:
                break
            total = sum(entries.values())
            kept = {w: c for w, c in entries.items() if k < prune_from or raw[k][(ctx, w)] >= 2}
            mass = {w: discount(c, discounts[k]) / total for w, c in kept.items()}
            backoff = 1.0 - sum(mass.values())
            if not kept:
                continue
            probs = probs * backoff
            for w, m in mass.items():
                probs[w] += m
        return probs

    return distribution


@pytest.mark.parametrize("prune_from", [99, 3])
def test_kneser_ney_tables_equal_the_definition(prune_from):
    rng = np.random.default_rng(7)
    vocab_size, order = 6, 3
    transition = rng.dirichlet(np.full(vocab_size - 1, 0.3), size=vocab_size - 1)
    tokens, counted = [0] * (order - 1), [False] * (order - 1)
    for document in range(30):  # documents start after order - 1 padding tokens (id 0)
        if document:
            tokens += [0] * (order - 1)
            counted += [True] + [False] * (order - 2)
        word = int(rng.integers(1, vocab_size))
        for _ in range(int(rng.integers(5, 25))):
            tokens.append(word)
            counted.append(True)
            word = 1 + int(rng.choice(vocab_size - 1, p=transition[word - 1]))
    tables = build_tables(np.asarray(tokens, dtype=np.uint16), np.asarray(counted), order, vocab_size, prune_from=prune_from)
    reference = reference_kneser_ney(tokens, counted, order, vocab_size, prune_from, tables.discounts)
    contexts = {tuple(tokens[i - order + 1 : i]) for i in range(order - 1, len(tokens))}
    contexts |= {(5, 5), (0, 3), (4, 1)}  # some never seen
    for context in sorted(contexts):
        got = tables.distribution(list(context))
        assert got.sum() == pytest.approx(1.0, abs=1e-6)  # float32 tables and (got > 0).all()
        np.testing.assert_allclose(got, reference(list(context)), rtol=1e-5, atol=1e-7)
    # the check fails where it must: a wrong discount gives other numbers
    wrong = reference_kneser_ney(tokens, counted, order, vocab_size, prune_from, {k: [0.1, 0.2, 0.3] for k in tables.discounts})
    assert max(np.abs(tables.distribution(list(c)) - wrong(list(c))).max() for c in contexts) > 1e-3


# -- the model ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    yield from small_model_in_own_cache(tmp_path_factory)




def test_distributions_are_full_and_normalised(small_model):
    lm, _cache = small_model
    text = "import os\n\n\ndef read(path):\n    with open(path) as handle:\n        return handle.read()\n"
    ids = lm.encode(text)
    assert lm.vocab.decode(ids) == text  # exact token bytes
    assert lm.vocab.size == lm.tables.vocab_size == 600
    assert lm.eos_id in lm.vocab.eos_ids
    lm.set_prompt(ids[:10])
    for path in ([], ids[10:12], [lm.eos_id]):
        logprobs = lm.next_logprobs(path)
        assert logprobs.dtype == np.float32 and logprobs.shape == (lm.vocab.size,)
        assert np.isfinite(logprobs).all()
        assert np.exp(logprobs.astype(np.float64)).sum() == pytest.approx(1.0, abs=1e-5)
    lm.set_prompt([])  # a document start
    assert np.isfinite(lm.next_logprobs([])).all()
    with pytest.raises(ValueError):
        lm.next_logprobs([lm.vocab.size])


def test_prompts_have_no_fill_in_the_middle(small_model):
    from adaptrack_lsp.completion.context import PromptBuilder

    lm, _cache = small_model
    builder = PromptBuilder.for_model(lm)
    assert builder.fim is None and builder.bos_ids == ()
    plan = builder.build("import os\nx = os.pa\nprint(x)\n", 19)
    assert plan.fim is None and plan.heal_text == ".pa"
    assert lm.vocab.decode(plan.prompt_ids) == "import os\nx = os"


def test_the_document_model_copies_names_from_the_prompt(small_model):
    lm, _cache = small_model
    text = "frobnicate_widget_count = 3\nprint(frobnicate_widget_count)\ntotal = frobnicate"
    ids = lm.encode(text)
    lm.set_prompt(ids)
    expected = lm.encode(text + "_widget_count")[len(ids)]
    logprobs = lm.next_logprobs([])
    assert int(np.argmax(logprobs)) == expected
    corpus, document, match = lm.distribution_parts([])
    assert document is not None and match >= 1 and corpus[expected] < np.exp(logprobs[expected])
    # only the prompt feeds it: a path copying itself is no evidence
    lm.set_prompt(lm.encode("x = 1\n"))
    path = lm.encode(" qq.qq.qq")
    assert lm.distribution_parts(path)[1] is None


def test_context_member_names_of_modules_and_classes():
    sections = [
        ("pkg/utils.py", "utils as u, Report as R", "X = 1\ndef load_settings(path):\n    ...\nclass Report:\n    kind = 'text'\n    def __init__(self):\n        self.a = 1\n    def add_line(self, line):\n        ...\n"),
        ("pkg/__init__.py", "", "async def serve():\n    ...\nif DEBUG:\n    y = 2\nfrom ._basic import (fft, ifft as inverse)\n"),
    ]
    assert builtin.context_member_names(sections) == {
        "utils": ["X", "load_settings", "Report"],
        "Report": ["kind", "add_line"],
        "pkg": ["serve", "fft", "inverse"],
        "u": ["X", "load_settings", "Report"],
        "R": ["kind", "add_line"],
    }


def test_the_document_model_proposes_members_of_the_context_snippets(small_model):
    """After ``utils.`` the names ``pkg/utils.py`` defines (a snippet in the prompt's
    context block) are proposed; without the block they are not."""
    lm, _cache = small_model
    snippet = "# Path: pkg/utils.py\ndef zorbify_inputs(path):\n    ...\n\n"
    current = "# Path: pkg/main.py\nfrom . import utils\n\nvalue = utils"
    dot = lm.encode(".")
    name = lm.encode("zorbify_inputs")
    lm.set_prompt(lm.encode(snippet + current))
    with_context = lm.next_logprobs(dot)
    assert int(np.argmax(with_context)) == name[0]
    assert int(np.argmax(lm.next_logprobs(dot + name[:1]))) == name[1]  # the name goes on
    lm.set_prompt(lm.encode(current))  # no context block: one header, no snippet
    without = lm.next_logprobs(dot)
    assert int(np.argmax(without)) != name[0] and with_context[name[0]] > without[name[0]] + np.log(100)
    lm.set_prompt(lm.encode(snippet + current.replace("utils", "other")))  # another owner
    assert lm.next_logprobs(dot)[name[0]] < with_context[name[0]] - np.log(100)


def test_the_bracket_prior_discourages_unbalanced_lines(small_model):
    lm, _cache = small_model
    paren, square = lm.encode(")")[0], lm.encode("]")[0]
    lm.set_prompt(lm.encode("x = 1\ny = x"))
    nothing_open = lm.next_logprobs([])
    lm.set_prompt(lm.encode("x = 1\ny = f(x"))
    paren_open = lm.next_logprobs([])
    assert paren_open[paren] > nothing_open[paren] + np.log(100)  # 1000x less likely with nothing open
    assert paren_open[square] < paren_open[paren] - np.log(100)  # the wrong kind of bracket


def test_scan_code_reads_brackets_strings_and_comments():
    state, flags = builtin.scan_code('x = f("(", [1, # (\n', marks=[0, 7, 10])
    assert state == builtin.CodeState(brackets="([") and flags == [True, False, True]
    assert builtin.scan_code("s = '(' + g(")[0] == builtin.CodeState(brackets="(")
    assert builtin.scan_code("x = 'abc")[0].quote == "'"
    assert builtin.scan_code("x = (\n    1,\ndef f(")[0].depth == 1  # a def line starts afresh


# -- the cache: damage, unwritable roots, corpus packages -----------------------------------
def test_a_damaged_cached_model_is_rebuilt_with_a_message(small_model, monkeypatch, caplog):
    lm, cache = small_model
    monkeypatch.setenv("ADAPTRACK_CACHE", str(cache))
    folder = builtin.builtin_model_path(SMALL)
    assert (folder / builtin.MARKER).is_file()
    table = folder / "order3.next_prob.npy"
    table.write_bytes(table.read_bytes()[:-40])  # a truncated file
    with caplog.at_level(logging.WARNING):
        again = builtin.load_builtin_model(recipe=SMALL, show_bar=False)
    assert [r for r in caplog.records if "damaged" in r.getMessage() and "rebuilding" in r.getMessage()]
    assert again.vocab.size == lm.vocab.size
    builtin.load_folder(folder)  # whole again
    (folder / "tokenizer.json").write_text("{not json")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        builtin.load_builtin_model(recipe=SMALL, show_bar=False)
    assert any("damaged" in r.getMessage() for r in caplog.records)


def test_an_unwritable_cache_root_builds_in_memory_with_one_message(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ADAPTRACK_CACHE", str(blocker / "cache"))
    with caplog.at_level(logging.WARNING):
        lm = builtin.load_builtin_model(recipe=SMALL, show_bar=False)
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(messages) == 1 and "not writable" in messages[0] and "in memory" in messages[0]
    lm.set_prompt(lm.encode("import os\n"))
    assert np.isfinite(lm.next_logprobs([])).all()


def test_missing_and_non_permissive_corpus_packages_are_skipped_and_named(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("ADAPTRACK_CACHE", str(tmp_path))
    recipe = {**SMALL, "packages": [["no_such_package_xyz", "no-such-package-xyz"], ["tqdm", "tqdm"], ["stdlib", ""]]}
    with caplog.at_level(logging.WARNING):
        lm = builtin.load_builtin_model(recipe=recipe, show_bar=False)
    skipped = lm.manifest["corpus"]["skipped"]
    assert skipped["no_such_package_xyz"] == "not installed"
    assert "not on the permissive list" in skipped["tqdm"]  # MPL-2.0 AND MIT
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "no_such_package_xyz" in logged and "tqdm" in logged
    [stdlib] = lm.manifest["corpus"]["packages"]
    assert stdlib["license"] == "PSF-2.0" and stdlib["files"] > 0
    manifest = json.loads((builtin.builtin_model_path(recipe) / "manifest.json").read_text())
    assert manifest["corpus"]["skipped"] == skipped


def test_no_corpus_at_all_is_a_clear_error(tmp_path, monkeypatch):
    from adaptrack_lsp.completion.lm.base import ModelError

    monkeypatch.setenv("ADAPTRACK_CACHE", str(tmp_path))
    with pytest.raises(ModelError, match="no corpus.*no_such_package_xyz"):
        builtin.load_builtin_model(recipe={**SMALL, "packages": [["no_such_package_xyz", "x"]]}, show_bar=False)


def test_loading_builtin_imports_neither_torch_nor_transformers(small_model):
    _lm, cache = small_model
    code = (
        "import sys\n"
        "from adaptrack_lsp.completion.lm import builtin, loading\n"
        f"builtin.BUILTIN_RECIPE = {SMALL!r}\n"
        "lm = loading.load_model('builtin')\n"
        "assert lm.name == 'builtin', lm.name\n"
        "heavy = [m for m in ('torch', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    env = {**__import__("os").environ, "ADAPTRACK_CACHE": str(cache)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)


def test_builtin_is_a_model_name_everywhere():
    from adaptrack_lsp.config import DEFAULT_MODEL, Settings, is_hub_id, model_argument

    assert DEFAULT_MODEL == "builtin" == Settings().model
    assert not is_hub_id("builtin") and not is_hub_id("tiny") and is_hub_id("org/builtin")
    assert model_argument("builtin") == "builtin"
    assert Path(model_argument("./builtin")).is_absolute()
