"""CompletionService with an exact tabular model: ranking, healing, supersession, cancel."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from adaptrack_lsp.completion.context import PromptPlan
from adaptrack_lsp.completion.decoders.base import Sample
from adaptrack_lsp.completion.lm.tabular import TabularLM
from adaptrack_lsp.completion.pipeline import CompletionCancelled, rank_candidates
from adaptrack_lsp.completion.service import CompletionService, ServiceNotReady
from adaptrack_lsp.config import Settings
from adaptrack_lsp.constrainers.api import StaticIndex
from adaptrack_lsp.vocab import Vocabulary

TOKENS = ["<eos>", "np", ".", "lin", "alg", "zeros", "\n", "x", " ", "=", "import", "numpy", "as", "(", ")"]


def tabular_model():
    vocab = Vocabulary.from_strings(TOKENS, eos="<eos>")
    index = {t: i for i, t in enumerate(TOKENS)}

    def conditional(path):
        probs = np.full(len(TOKENS), 1e-3)
        last = TOKENS[path[-1]] if path else None
        if last is None:
            probs[index["zeros"]] = 0.5  # the model prefers "zeros", which the index lacks
            probs[index["lin"]] = 0.3
            probs[index["."]] = 0.1
        elif last == "lin":
            probs[index["alg"]] = 0.9
        elif last == ".":
            probs[index["lin"]] = 0.6
            probs[index["zeros"]] = 0.3
        else:
            probs[index["\n"]] = 0.9
        return probs / probs.sum()

    return TabularLM(vocab, conditional=conditional)


def make_service(**settings) -> CompletionService:
    service = CompletionService(
        Settings(model="tabular", timeout_ms=60_000, max_new_tokens=5, **settings),
        model_loader=lambda s, progress: tabular_model(),
        index_factory=lambda s, root: StaticIndex(["numpy.linalg.norm", "numpy.linspace"], source="numpy test"),
    )
    service.load()
    return service


def test_greedy_inline_answer_is_valid_and_healed():
    service = make_service()
    try:
        text = "import numpy as np\nx = np."
        result = service.complete(text, len(text))
        assert [c.text for c in result.candidates] == ["linalg"]
        assert result.heal_text == "."
        assert result.candidates[0].valid
        # unconstrained, the model's favourite is not a numpy member
        loose = service.complete(text, len(text), settings=service.settings.replace(decoder="unconstrained"))
        assert loose.candidates[0].text.startswith("zeros")
    finally:
        service.close()


def test_list_mode_returns_distinct_candidates_ranked_by_probability():
    service = make_service(num_samples=20)
    try:
        text = "import numpy as np\nx = np."
        result = service.complete(text, len(text), mode="list", seed=1)
        texts = [c.text for c in result.candidates]
        assert len(texts) == len(set(texts)) >= 1
        assert all(t.startswith(("linalg", "linspace")) for t in texts)
        logprobs = [c.logprob for c in result.candidates]
        assert logprobs == sorted(logprobs, reverse=True)
    finally:
        service.close()


def test_rank_candidates_merges_sequences_with_the_same_answer():
    plan = PromptPlan(prompt_ids=[], heal_text="", constraint_prefix="", line_prefix="x = ", line_suffix="")
    samples = [
        Sample([1, 2], "ab\nc", math.log(0.2), True, True),
        Sample([1, 2], "ab\nc", math.log(0.2), True, True),  # the same sequence drawn twice
        Sample([3], "ab", math.log(0.1), True, True),  # another sequence, same answer
        Sample([4], "zz", math.log(0.25), True, True),
        Sample([5], "\n", math.log(0.4), True, True),  # empty answer: dropped
    ]
    ranked = rank_candidates(plan, samples)
    assert [c.text for c in ranked] == ["ab", "zz"]
    assert ranked[0].logprob == pytest.approx(math.log(0.3))


def test_newer_request_for_the_same_document_supersedes_the_queued_one():
    service = make_service()
    gate = threading.Event()
    try:
        blocker = service.host.submit(gate.wait)  # keep the worker busy
        text = "import numpy as np\nx = np."
        first = service.submit(service.request(text, len(text), document="a"))
        other = service.submit(service.request(text, len(text), document="b"))
        second = service.submit(service.request(text, len(text), document="a"))
        gate.set()
        blocker.result(timeout=10)
        with pytest.raises(CompletionCancelled, match="superseded"):
            first.result(timeout=30)
        assert second.result(timeout=30).candidates
        assert other.result(timeout=30).candidates  # another document is not affected
        cancelled = service.submit(service.request(text, len(text), document="c"), cancelled=lambda: True)
        with pytest.raises(CompletionCancelled):
            cancelled.result(timeout=30)
    finally:
        gate.set()
        service.close()


def test_not_ready_and_failed_loads():
    service = CompletionService(Settings(model="broken"), model_loader=lambda s, p: (_ for _ in ()).throw(OSError("disk on fire")))
    with pytest.raises(ServiceNotReady):
        service.complete("x", 1)
    with pytest.raises(ServiceNotReady, match="disk on fire"):
        service.load()
    assert service.state == "error" and "builtin" in service.message
    service.close()


def test_lists_use_list_decoder_and_ghost_text_uses_decoder(monkeypatch):
    """`decoder` drives ghost text, `listDecoder` completion lists; each decoder gets
    only the settings it has options for."""
    from adaptrack_lsp.completion import decoders as decoders_module

    used = []
    real = decoders_module.decoder_for

    def recording(name, settings):
        used.append(name)
        return real(name, settings)

    monkeypatch.setattr(decoders_module, "decoder_for", recording)
    service = make_service(decoder="constrained", list_decoder="exact", top_p_validity=0.9)
    try:
        text = "import numpy as np\nx = np."
        assert service.complete(text, len(text), mode="inline").candidates
        assert service.complete(text, len(text), mode="list", seed=3).candidates
    finally:
        service.close()
    assert used == ["constrained", "exact"]
    assert decoders_module.decoder_for("adaptrack", Settings(top_p_validity=0.9)).options.top_p_validity == 0.9


def test_cut_candidates_rank_after_complete_ones():
    plan = PromptPlan(prompt_ids=[], heal_text="", constraint_prefix="", line_prefix="x = ", line_suffix="")
    samples = [
        Sample(token_ids=[1, 2, 3], text="np.linalg.norm(a, ord=2, axis", logprob=-1.0, complete=False, valid=True),
        Sample(token_ids=[4], text="np.zeros(3)\n", logprob=-5.0, complete=True, valid=True),
    ]
    ranked = rank_candidates(plan, samples)
    assert [c.complete for c in ranked] == [True, False]


def test_one_model_load_per_settings_change():
    started, release = threading.Event(), threading.Event()
    loads = []

    def loader(settings, progress):
        loads.append(settings.model_key())
        started.set()
        release.wait(30)
        return tabular_model()

    service = CompletionService(Settings(model="tabular"), model_loader=loader)
    try:
        assert service.update_settings(service.settings)  # nothing loaded or loading yet
        first = service.load_in_background()
        assert started.wait(30)
        # a configuration during the load that keeps the model fields: no second load
        assert not service.update_settings(service.settings.replace(temperature=0.5))
        # one that changes them: a new load, queued behind the running one, which is superseded
        assert service.update_settings(service.settings.replace(dtype="float32"))
        states = []
        second = service.load_in_background(done=lambda state, message: states.append(state))
        assert not service.update_settings(service.settings)  # the queued load counts
        release.set()
        first.result(timeout=30)
        second.result(timeout=30)
        assert [key[2] for key in loads] == ["auto", "float32"] and states == ["ready"] and service.ready
        assert not service.update_settings(service.settings.replace(num_samples=3))
    finally:
        release.set()
        service.close()


def test_prompt_budget_follows_max_new_tokens_changed_after_load(monkeypatch):
    """maxNewTokens changed after the model loaded: the prompt leaves room for the new
    value (before, the budget from load time stayed and the backend cut the prompt)."""
    from adaptrack_lsp.completion import context

    budgets = []
    build = context.PromptBuilder.build

    def recording(self, *args, **kwargs):
        budgets.append(self.max_prompt_tokens)
        return build(self, *args, **kwargs)

    monkeypatch.setattr(context.PromptBuilder, "build", recording)
    lm = tabular_model()
    lm.max_context = 64
    service = CompletionService(
        Settings(model="tabular", timeout_ms=60_000, max_new_tokens=5),
        model_loader=lambda s, progress: lm,
        index_factory=lambda s, root: StaticIndex(["numpy.linalg.norm"], source="numpy test"),
    )
    service.load()
    try:
        text = "import numpy as np\nx = np."
        service.complete(text, len(text))
        service.update_settings(service.settings.replace(max_new_tokens=40))
        service.complete(text, len(text))
    finally:
        service.close()
    assert budgets == [64 - 5, 64 - 40]
