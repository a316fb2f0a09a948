"""Quick fixes (`checking.fixes`, docs/check.md "Quick fixes"): the mechanics on an exact
tabular model over an API snapshot (`fix_support.py`), where the expected replacement is
computed from the model's table and the snapshot's names; then `check --suggest` with
the built-in model, the same suggestions in every output format."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fix_support import (
    KEYWORDS,
    MEMBERS,
    MEMBERS_FIM_TIMES,
    NAMES,
    SIGNATURES,
    TOKENS,
    distribution,
    fix_model,
    snapshot_index,
)

from adaptrack_lsp.checking.checker import Checker, Finding
from adaptrack_lsp.checking.fixes import FixShape, Proposal, Suggester, fix_target

DOCUMENT = "import mylib as ml\nv = 2\nx = ml.product(v) * 2\n"


def suggester_for(model=None, intent_weight: float = 0.0, **settings):
    from adaptrack_lsp.config import parse_settings
    from adaptrack_lsp.constrainers.environment import ConstraintEnvironment

    parsed, problems = parse_settings({"model": "tabular", **settings})
    assert not problems
    index = snapshot_index()
    environment = ConstraintEnvironment(index_factory=lambda s, root: index)
    lm = model if model is not None else fix_model()
    suggester = Suggester(parsed, environment, model_loader=lambda s, progress: lm, intent_weight=intent_weight)
    return suggester, lm


def only_finding(suggester, text: str) -> Finding:
    (finding,) = suggester.checker.check(text).findings
    return finding


def member_probabilities(weights: dict[str, float]) -> dict[str, float]:
    """P(member | ``ml.``) of the table, for the members mylib has (the reference)."""
    probs = distribution(weights)
    members = {name.split(".", 1)[1] for name in NAMES}
    return {token: float(probs[i]) for i, token in enumerate(TOKENS) if token in members}


def apply(text: str, suggestion: dict) -> str:
    lines = text.split("\n")

    def offset(point) -> int:
        return sum(len(line) + 1 for line in lines[: point["line"] - 1]) + point["column"] - 1

    return text[: offset(suggestion["start"])] + suggestion["text"] + text[offset(suggestion["end"]) :]


def test_the_fix_is_the_best_continuation_the_constraint_allows():
    suggester, _ = suggester_for()
    finding = only_finding(suggester, DOCUMENT)
    assert (finding.kind, finding.name) == ("attribute", "ml.product")
    suggestions = suggester.suggest(DOCUMENT, finding)
    # the model's favourite member, product, is gone: the best valid one comes first,
    # and every one offered is a member, the more probable first
    probability = member_probabilities(MEMBERS)
    best = max(probability, key=probability.get)
    assert best == "zeros"
    texts = [s["text"] for s in suggestions]
    assert texts[0] == f"ml.{best}(v)"
    offered = [text.split("(")[0].removeprefix("ml.") for text in texts]
    assert all(name in probability for name in offered)
    assert [probability[name] for name in offered] == sorted((probability[name] for name in offered), reverse=True)
    assert 1 <= len(suggestions) <= 3


def test_the_range_is_the_expression_to_the_end_of_its_call():
    suggester, _ = suggester_for()
    (suggestion, *_) = suggester.suggest(DOCUMENT, only_finding(suggester, DOCUMENT))
    line = DOCUMENT.split("\n")[2]
    column = line.index("ml.product(v)") + 1
    assert suggestion["start"] == {"line": 3, "column": column}
    assert suggestion["end"] == {"line": 3, "column": column + len("ml.product(v)")}
    assert apply(DOCUMENT, suggestion) == "import mylib as ml\nv = 2\nx = ml.zeros(v) * 2\n"


def test_the_copy_of_the_flagged_name_pulls_to_what_still_spells_it():
    # P'(u) = (1 - w) P(u) + w C(u); after "ml." C proposes the tokens that spell a
    # prefix of "product": prod (4 characters) and product (7), weighted 16 : 49
    weight = 0.5
    probability = member_probabilities(MEMBERS)
    copy = {"prod": 16 / 65, "product": 49 / 65}
    mixed = {name: (1 - weight) * p + weight * copy.get(name, 0.0) for name, p in probability.items()}
    best = max(mixed, key=mixed.get)
    assert best == "prod" and best != max(probability, key=probability.get)
    suggester, _ = suggester_for(intent_weight=weight)
    suggestions = suggester.suggest(DOCUMENT, only_finding(suggester, DOCUMENT))
    assert suggestions[0]["text"] == "ml.prod(v)"


def test_a_candidate_the_check_would_flag_is_never_offered():
    text = "import mylib as ml\nv = 2\nx = ml.product(v, axis=1)\n"
    suggester, _ = suggester_for()
    finding = only_finding(suggester, text)
    target = fix_target(text, finding)
    proposals = [p.text for p in suggester.decode(text, target)]
    # the model's best valid callee keeps the call's keyword, which zeros does not take
    assert proposals[0] == "ml.zeros(v, axis=1)"
    assert "axis" not in SIGNATURES["mylib.zeros()"]
    flagged = Checker(snapshot_index()).check(text.replace("ml.product", "ml.zeros")).findings
    assert [(f.kind, f.name) for f in flagged] == [("keyword", "ml.zeros(axis=)")]
    suggestions = suggester.suggest(text, finding)
    assert [s["text"] for s in suggestions] == ["ml.prod(v, axis=1)"]
    for suggestion in suggestions:
        assert not Checker(snapshot_index()).check(apply(text, suggestion)).findings


def test_a_replacement_that_does_not_parse_or_adds_a_finding_is_dropped():
    suggester, _ = suggester_for()
    finding = only_finding(suggester, DOCUMENT)
    target = fix_target(DOCUMENT, finding)
    proposals = [
        Proposal("ml.prod(v", 0.0),  # does not parse
        Proposal("ml.prod(v) + ml.gone(v)", -1.0),  # a finding inside the edit
        Proposal("ml.product(v)", -1.5),  # the original
        Proposal("ml.prod(v)", -2.0),
    ]
    assert suggester.accept(DOCUMENT, target, proposals) == ["ml.prod(v)"]


def test_the_suffix_is_the_models_when_it_has_fill_in_the_middle_tokens():
    model = fix_model(fim=True)
    suggester, lm = suggester_for(model=model)
    times = suggester.suggest(DOCUMENT, only_finding(suggester, DOCUMENT))
    encode = lm.encode
    prompt = [TOKENS.index("<PRE>"), *encode("import mylib as ml\nv = 2\nx = "), TOKENS.index("<SUF>"), *encode("(v) * 2")]
    assert suggester.last["prompt_ids"] == [*prompt, TOKENS.index("<MID>")]
    assert suggester.last["fim"] == "test"
    # the model prefers prod when it sees "* 2" after the call, zeros otherwise
    assert max(MEMBERS_FIM_TIMES, key=lambda m: MEMBERS_FIM_TIMES[m] if f"mylib.{m}" in NAMES else -1) == "prod"
    assert times[0]["text"] == "ml.prod(v)"
    plain = "import mylib as ml\nv = 2\nx = ml.product(v)\n"
    assert suggester.suggest(plain, only_finding(suggester, plain))[0]["text"] == "ml.zeros(v)"
    # a model without those tokens sees the document up to the expression only
    suggester, lm = suggester_for()
    suggester.suggest(DOCUMENT, only_finding(suggester, DOCUMENT))
    assert suggester.last["prompt_ids"] == lm.encode("import mylib as ml\nv = 2\nx = ")
    assert suggester.last["fim"] is None


def test_a_keyword_is_renamed_to_one_the_call_takes_and_keeps_its_value():
    text = "import mylib as ml\nv = 2\ny = ml.hist(v, normed=True)\n"
    suggester, _ = suggester_for()
    finding = only_finding(suggester, text)
    assert (finding.kind, finding.name) == ("keyword", "ml.hist(normed=)")
    suggestions = suggester.suggest(text, finding)
    taken = [name for name in SIGNATURES["mylib.hist()"] if name != "a"]  # a is given by position
    ranked = sorted((name for name in KEYWORDS if name in taken), key=KEYWORDS.get, reverse=True)
    assert [s["text"] for s in suggestions] == [f"{name}=True" for name in ranked]
    line = text.split("\n")[2]
    assert suggestions[0]["start"] == {"line": 3, "column": line.index("normed") + 1}
    assert suggestions[0]["end"] == {"line": 3, "column": line.index("normed=True") + len("normed=True") + 1}


def test_a_method_that_becomes_a_function_takes_its_object_and_an_imported_name_keeps_its_binding():
    text = "import numpy as np\na = np.zeros(3)\nb = a.ptp(axis=0)\nc = a.ptp()\nfrom numpy import trapz\n"

    def finding(kind: str, flagged: str, nth: int = 0) -> Finding:
        start = -1
        for _ in range(nth + 1):
            start = text.index(flagged, start + 1)
        return Finding(kind, flagged, "", start, start + len(flagged), 0, 0, 0, 0)

    method = fix_target(text, finding("receiver", "ptp"))
    assert (method.original, method.shape, method.receiver, method.copy) == ("a.ptp(axis=0)", "call", "a", ".ptp(")
    assert Suggester.replacement(text, method, "np.ptp") == "np.ptp(a, axis=0)"
    assert Suggester.replacement(text, method, "a.max") == "a.max(axis=0)"
    bare = fix_target(text, finding("receiver", "ptp", 1))
    assert Suggester.replacement(text, bare, "np.ptp") == "np.ptp(a)"
    imported = fix_target(text, finding("import", "trapz"))
    assert (imported.original, imported.rebind) == ("trapz", "trapz")
    assert Suggester.replacement(text, imported, "trapezoid") == "trapezoid as trapz"


def test_the_shape_of_a_chain():
    call = FixShape("call", {"np", "a"})
    state = call.start()
    assert call.check(state, "np.prod(") is not None and call.is_free(call.check(state, "np.prod("))
    assert call.check(state, "npts(") is None  # not a chain on a bound name
    assert call.check(state, "np.prod ") is None  # a call: "(" follows the chain
    assert call.is_complete(call.check(state, "np.prod")) and not call.is_complete(call.check(state, "np."))
    name = FixShape("name", {"np"})
    assert name.check(name.start(), "np.nan)") is not None and name.check(name.start(), "np.nan(") is None


@pytest.mark.slow
def test_check_suggest_prints_the_same_suggestions_in_every_format(tmp_path, builtin_model):
    (tmp_path / "old.py").write_text("import numpy as np\nweights = np.ones(3)\nvolume = np.product(weights)\nok = np.alltrue(weights > 0)\n")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}

    def check(form: str) -> str:
        ran = subprocess.run(
            [sys.executable, "-m", "adaptrack_lsp", "check", "--suggest", "--format", form, "old.py"],
            cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env,
        )  # fmt: skip
        assert ran.returncode == 1, ran.stderr
        return ran.stdout

    records = json.loads(check("json"))
    assert [r["name"] for r in records] == ["np.product", "np.alltrue"]
    suggested = [[s["text"] for s in r["suggestions"]] for r in records]
    assert all(texts for texts in suggested), suggested  # the built-in model finds a rewrite for both
    source = (tmp_path / "old.py").read_text()
    for record in records:
        for suggestion in record["suggestions"]:
            fixed = apply(source, suggestion)
            ran = subprocess.run([sys.executable, "-c", fixed], capture_output=True, text=True, timeout=120)
            # the edit covers the call: the file still parses, and the flagged name is gone
            assert record["name"].split(".")[1] + "(" not in fixed.split("\n")[suggestion["start"]["line"] - 1]
            assert "SyntaxError" not in ran.stderr
    text = check("text")
    fixes_in_text = [line.removeprefix("    fix: ") for line in text.splitlines() if line.startswith("    fix: ")]
    assert fixes_in_text == [t for texts in suggested for t in texts]
    github = check("github")
    assert [part for line in github.splitlines() for part in line.split("%0Afix: ")[1:]] == [t for texts in suggested for t in texts]
    sarif = json.loads(check("sarif"))
    results = sarif["runs"][0]["results"]
    assert [[fix["artifactChanges"][0]["replacements"][0]["insertedContent"]["text"] for fix in r["fixes"]] for r in results] == suggested
    regions = [[fix["artifactChanges"][0]["replacements"][0]["deletedRegion"] for fix in r["fixes"]] for r in results]
    for record, region_list in zip(records, regions):
        for suggestion, region in zip(record["suggestions"], region_list):
            assert region == {
                "startLine": suggestion["start"]["line"],
                "startColumn": suggestion["start"]["column"],
                "endLine": suggestion["end"]["line"],
                "endColumn": suggestion["end"]["column"],
            }


def test_a_cancelled_decode_offers_nothing():
    suggester, _ = suggester_for()
    finding = only_finding(suggester, DOCUMENT)
    assert suggester.suggest(DOCUMENT, finding, cancelled=lambda: True) == []
    assert suggester.suggest(DOCUMENT, finding)  # the same finding, not cancelled


def test_a_call_over_several_lines_keeps_its_arguments_and_a_chain_over_lines_gets_no_fix():
    suggester, _ = suggester_for()
    spread = "import mylib as ml\nv = 2\nx = ml.product(\n    v,\n)\n"
    (suggestion, *_) = suggester.suggest(spread, only_finding(suggester, spread))
    assert suggestion == {"text": "ml.zeros(\n    v,\n)", "start": {"line": 3, "column": 5}, "end": {"line": 5, "column": 2}}
    assert apply(spread, suggestion) == spread.replace("ml.product", "ml.zeros")
    broken = "import mylib as ml\nv = 2\nx = (ml\n     .product(v))\n"
    assert fix_target(broken, only_finding(suggester, broken)) is None


def test_a_model_that_does_not_load_leaves_the_findings_without_suggestions():
    from adaptrack_lsp.config import parse_settings
    from adaptrack_lsp.constrainers.environment import ConstraintEnvironment

    def broken(settings, progress):
        raise OSError("no such model folder")

    said = []
    settings, _ = parse_settings({"model": "tabular"})
    index = snapshot_index()
    suggester = Suggester(settings, ConstraintEnvironment(index_factory=lambda s, root: index), said.append, model_loader=broken)
    finding = only_finding(suggester, DOCUMENT)
    assert suggester.suggest(DOCUMENT, finding) == [] and suggester.suggest(DOCUMENT, finding) == []
    assert "no such model folder" in suggester.problem
    assert said[-1].startswith("no suggestions: ") and len(said) == 2  # loading, then the problem, once
