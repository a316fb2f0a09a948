"""One request, built once: what it derives from the document, and that nothing after it
derives the same again (imports parsed once, the index asked once, the stop rule
looking only at new text, the validating package from the monitor's chains)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_service import make_service

from adaptrack_lsp.apis.static_index import StaticIndex
from adaptrack_lsp.completion.context import PromptPlan
from adaptrack_lsp.completion.request import CANCELLED, INDEX_PENDING, SUPERSEDED, CompletionRequest, RequestControl
from adaptrack_lsp.config import Settings
from adaptrack_lsp.constrainers.api import ApiMonitor, ConstraintContext


def test_the_request_holds_the_typed_word_the_imports_and_a_stable_seed():
    text = "import numpy as np\rx = np.lin"
    request = CompletionRequest.build(text, len(text), mode="list", document="file:///a.py", version=3)
    assert request.typed_word == "lin"  # the line starts after "\r" (an LSP line break)
    assert request.line_prefix == "x = np.lin"
    assert request.import_roots == {"np": ("numpy",)}
    assert request.version == 3 and request.decoder == Settings().list_decoder
    assert request.seed == CompletionRequest.build(text, len(text), mode="list").seed
    assert request.seed != CompletionRequest.build(text, len(text), mode="inline").seed
    broken = CompletionRequest.build("x = '\ud800'", 99)
    assert broken.text == "x = '\ufffd'" and broken.offset == len(broken.text)
    with pytest.raises(ValueError, match="mode"):
        CompletionRequest.build("x", 1, mode="popup")


def test_one_request_reads_the_imports_once_and_asks_for_the_index_once(monkeypatch):
    """Before: the imports were parsed three times per request (the cursor's needed
    paths, the monitor, the validity detail) and the index was looked up twice.  Now the
    document's analysis reads them once and every part asks it."""
    from functools import cached_property

    from adaptrack_lsp.apis.document import DocumentAnalysis

    service = make_service(num_samples=4)
    parsed = []
    real_bindings = DocumentAnalysis.bindings.func

    def counting(analysis):
        parsed.append(analysis.text)
        return real_bindings(analysis)

    counted = cached_property(counting)
    counted.__set_name__(DocumentAnalysis, "bindings")
    monkeypatch.setattr(DocumentAnalysis, "bindings", counted)
    lookups = []
    real_api_index = service.constraints.api_index
    monkeypatch.setattr(service.constraints, "api_index", lambda s: lookups.append(s) or real_api_index(s))
    try:
        text = "import numpy as np\nx = np.zeros()\nx = np."  # a text no earlier test analysed
        result = service.complete(text, len(text), mode="list")
        assert result.candidates and result.request.import_roots == {"np": ("numpy",)}
        assert parsed == [text] and len(lookups) == 1
    finally:
        service.close()


def test_list_candidates_carry_the_chain_and_the_package_the_monitor_resolved():
    class VersionedIndex(StaticIndex):
        def packages(self):
            return {"numpy": "9.9"}

    service = make_service(num_samples=20)
    service.constraints._index_factory = lambda s, root: VersionedIndex(["numpy.linalg.norm", "numpy.linspace"])
    try:
        text = "import numpy as np\nx = np."
        result = service.complete(text, len(text), mode="list", seed=1)
        assert result.candidates
        for candidate in result.candidates:
            assert candidate.chains and candidate.chains[0][:2] in {("numpy", "linalg"), ("numpy", "linspace")}
            assert candidate.detail == "numpy 9.9"
    finally:
        service.close()


def test_the_monitor_names_the_chains_it_resolved():
    monitor = ApiMonitor(StaticIndex(["numpy.linalg.norm", "numpy.zeros", "os.path.join"]))
    document = "import numpy as np\nimport os\nx = "
    context = ConstraintContext(document=document, prefix=document)
    assert monitor.resolved_chains(context, "np.linalg.norm(x)") == [("numpy", "linalg", "norm")]
    assert monitor.resolved_chains(context, "np.zeros(3) + os.path.join('a')") == [("numpy", "zeros"), ("os", "path", "join")]
    assert monitor.resolved_chains(context, "foo.bar + 'np.zeros'") == []
    healed = ConstraintContext(document=document + "np.li", prefix=document + "np.li")
    assert monitor.resolved_chains(healed, "nalg.norm") == [("numpy", "linalg", "norm")]


def test_one_control_says_why_a_request_stops():
    flags = {"cancelled": False, "superseded": False, "pending": False}
    control = RequestControl(lambda: flags["cancelled"], lambda: flags["superseded"])
    control.index_pending = lambda: flags["pending"]
    assert not control.should_stop() and control.stop_reason() is None
    flags["pending"] = True
    assert control.stop_reason() == INDEX_PENDING and control.cancelled_by_client() is None
    flags["cancelled"] = True
    assert control.stop_reason() == CANCELLED == control.cancelled_by_client()
    flags["superseded"] = True
    assert control.stop_reason() == SUPERSEDED


LINES = st.lists(st.sampled_from(["x = 1", "    y", "", "  z", "def f():", "        w", "a.b", "    ", "pass"]), max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    lines=LINES,
    line_prefix=st.sampled_from(["", "    ", "x = ", "    return "]),
    heal=st.sampled_from(["", "np.li"]),
    multiline=st.booleans(),
    next_line=st.sampled_from(["", "    y", "pass"]),
    tail=st.sampled_from(["", "\n", "\n\n"]),
)
def test_the_stop_rule_only_looks_at_what_a_token_added(lines, line_prefix, heal, multiline, next_line, tail):
    """Checking from the parent's length gives the answer of a full rescan, at every
    split where the parent did not stop (the tree asks only then)."""
    plan = PromptPlan(
        prompt_ids=[], heal_text=heal, constraint_prefix="", line_prefix=line_prefix, line_suffix="",
        multiline=multiline, next_line=next_line,
    )
    generated = heal + "\n".join(lines) + tail
    for checked in range(len(generated) + 1):
        if plan.stop(generated[:checked]):
            break
        for end in range(checked, len(generated) + 1):
            assert plan.stop_index(generated[:end], checked) == plan.stop_index(generated[:end]), (generated[:end], checked)


def test_the_modules_beside_a_document_are_listed_again_when_its_folder_changes(tmp_path):
    """Every keystroke asks which modules sit beside the document: the folder is listed
    again only when it changed, and a listing made right after a change is not kept (a
    coarse file-system clock may give the next change the same time)."""
    import os

    from adaptrack_lsp.completion.request import SETTLE_S, modules_beside

    (tmp_path / "helper.py").write_text("x = 1\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "notes.txt").write_text("")
    document = (tmp_path / "main.py").as_uri()

    def settle():  # the folder last changed well before the listing
        past = os.stat(tmp_path).st_mtime - 10 * SETTLE_S
        os.utime(tmp_path, (past, past))

    settle()
    first = modules_beside(document)
    assert first == {"helper", "pkg"}
    assert modules_beside(document) is first  # kept: nothing changed
    (tmp_path / "other.py").write_text("")
    changed = os.stat(tmp_path).st_mtime_ns
    assert modules_beside(document) == {"helper", "pkg", "other"}  # listed right after a change
    # a change the folder's time does not show (the same time as before): seen, since the
    # listing was made less than SETTLE_S after that time
    (tmp_path / "late.py").write_text("")
    os.utime(tmp_path, ns=(changed, changed))
    assert "late" in modules_beside(document)
    assert modules_beside(tmp_path.joinpath("missing", "x.py").as_uri()) == frozenset()
