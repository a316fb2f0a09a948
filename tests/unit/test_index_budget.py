"""Index time is not decode time: members still being computed never eat `timeoutMs`."""

from __future__ import annotations

import threading
import time

import numpy as np
from test_service import tabular_model

from adaptrack_lsp.completion.lm.tabular import TabularLM
from adaptrack_lsp.completion.pipeline import INDEXING
from adaptrack_lsp.completion.request import CompletionRequest
from adaptrack_lsp.completion.service import CompletionService
from adaptrack_lsp.config import Settings
from adaptrack_lsp.constrainers.api import StaticIndex
from adaptrack_lsp.vocab import Vocabulary

TEXT = "import numpy as np\nx = np."


class SlowIndex(StaticIndex):
    """Numpy members that take `delay_s` to compute (started by the first ask)."""

    def __init__(self, delay_s: float, slow_paths=(("numpy",),)):
        super().__init__(["numpy.linalg.norm", "numpy.linspace"], source="numpy test")
        self.delay_s = delay_s
        self.slow_paths = set(slow_paths)
        self.done = threading.Event()
        self.started_at = None
        self.prefetched = []

    def _start(self):
        if self.started_at is None:
            self.started_at = time.monotonic()
            timer = threading.Timer(self.delay_s, self.done.set)
            timer.daemon = True
            timer.start()

    def ready(self, path):
        return tuple(path) not in self.slow_paths or self.done.is_set()

    def prefetch(self, path):
        self.prefetched.append(tuple(path))
        self._start()

    def wait_ready(self, paths, timeout_s):
        self._start()
        return self.done.wait(timeout_s)

    def members(self, path):
        # like JediIndex.members: a caller that asks directly waits at most 0.3 s
        if not self.ready(path):
            self._start()
            if not self.done.wait(0.3):
                return None
        return super().members(path)


def make_service(index, timeout_ms=300) -> CompletionService:
    service = CompletionService(
        Settings(model="tabular", timeout_ms=timeout_ms, max_new_tokens=5),
        model_loader=lambda s, progress: tabular_model(),
        index_factory=lambda s, root: index,
    )
    service.load()
    return service


def needed_paths(text, offset):
    return list(CompletionRequest.build(text, offset).needed_paths)


def test_needed_paths_are_the_imports_and_the_chain_at_the_cursor():
    text = "import tensorflow as tf\nimport os\nx = tf.compat.v1."
    assert needed_paths(text, len(text)) == [
        ("tensorflow",), ("os",), ("tensorflow", "compat"), ("tensorflow", "compat", "v1")
    ]
    assert needed_paths("import torch\nr = torch.matrix_", 30) == [("torch",)]
    assert needed_paths("x = 1", 5) == []


def test_ghost_text_waits_only_for_the_chain_at_the_cursor():
    text = "import tensorflow as tf\nimport numpy as np\nx = np.linalg."
    inline = CompletionRequest.build(text, len(text))
    assert inline.paths_before_decoding == (("numpy",), ("numpy", "linalg"))
    assert CompletionRequest.build(text, len(text), mode="list").paths_before_decoding == inline.needed_paths
    assert ("tensorflow",) in inline.needed_paths
    assert CompletionRequest.build("import numpy as np\nx = ", 24).paths_before_decoding == ()


def test_waiting_for_the_index_does_not_use_the_decode_budget():
    index = SlowIndex(delay_s=1.0)
    service = make_service(index, timeout_ms=300)
    messages = []
    try:
        result = service.complete(TEXT, len(TEXT), wait_for_index=True, index_progress=messages.append)
    finally:
        service.close()
    # constrained (the model's favourite "zeros" is not a numpy member), not cut short
    assert [c.text for c in result.candidates] == ["linalg"] and result.status == "ok"
    assert result.counters["index_wait_seconds"] >= 0.5
    assert result.counters["wall_seconds"] < 0.3
    assert messages == ["computing the API members of numpy"]


def test_server_mode_answers_at_once_while_indexing_then_completes():
    index = SlowIndex(delay_s=1.0)
    service = make_service(index, timeout_ms=60_000)
    try:
        started = time.monotonic()
        first = service.complete(TEXT, len(TEXT))
        assert time.monotonic() - started < 0.5
        assert first.status == INDEXING and not first.candidates
        assert "numpy" in first.message and ("numpy",) in index.prefetched
        assert index.done.wait(30)
        second = service.complete(TEXT, len(TEXT))
        assert [c.text for c in second.candidates] == ["linalg"]
    finally:
        service.close()


def chain_model():
    """A model that writes ``linalg.`` and then prefers ``zeros`` (not in linalg) to ``norm``."""
    tokens = ["<eos>", "lin", "alg", ".", "norm", "zeros", "\n", "np", "import", "numpy", "as", " ", "x", "="]
    vocab = Vocabulary.from_strings(tokens, eos="<eos>")
    ids = {t: i for i, t in enumerate(tokens)}
    following = {None: "lin", "lin": "alg", "alg": ".", "norm": "\n", "zeros": "\n"}

    def conditional(path):
        probs = np.full(len(tokens), 1e-3)
        last = tokens[path[-1]] if path else None
        if last == ".":
            probs[ids["zeros"]], probs[ids["norm"]] = 0.6, 0.3
        else:
            probs[ids[following.get(last, "\n")]] = 0.9
        return probs / probs.sum()

    return TabularLM(vocab, conditional=conditional)


def test_a_path_first_needed_during_decoding_stops_a_list_decode_and_is_waited_for():
    index = SlowIndex(delay_s=1.0, slow_paths=(("numpy", "linalg"),))
    service = CompletionService(
        Settings(model="tabular", timeout_ms=60_000, max_new_tokens=6),
        model_loader=lambda s, progress: chain_model(),
        index_factory=lambda s, root: index,
    )
    service.load()
    try:
        result = service.complete(TEXT, len(TEXT), mode="list")
        assert result.status == INDEXING and ("numpy", "linalg") in index.prefetched
        assert "numpy.linalg" in result.message and result.indexing == "indexing numpy"
        messages = []
        waited = service.complete(TEXT, len(TEXT), wait_for_index=True, index_progress=messages.append)
        assert [c.text for c in waited.candidates] == ["linalg.norm"]
        assert messages == ["computing the API members of numpy.linalg"]
    finally:
        service.close()


def test_ghost_text_answers_now_without_the_members_still_being_computed():
    """Inline: a path first needed during decoding counts as having no members for this
    answer (never an unchecked member), is listed as pending with what is being indexed,
    and the answer once it is computed goes through it."""
    index = SlowIndex(delay_s=1.0, slow_paths=(("numpy", "linalg"),))
    service = CompletionService(
        Settings(model="tabular", timeout_ms=60_000, max_new_tokens=6),
        model_loader=lambda s, progress: chain_model(),
        index_factory=lambda s, root: index,
    )
    service.load()
    try:
        now = service.complete(TEXT, len(TEXT))
        assert now.status == "ok" and [c.text for c in now.candidates] == ["linalg"]  # not "linalg.zeros"
        assert now.pending == (("numpy", "linalg"),) and now.indexing == "indexing numpy"
        assert ("numpy", "linalg") in index.prefetched
        called = threading.Event()
        service.when_indexed(now, lambda answered: called.set())
        assert called.wait(30)
        later = service.complete(TEXT, len(TEXT))
        assert [c.text for c in later.candidates] == ["linalg.norm"] and not later.pending
    finally:
        service.close()


def test_the_indexing_message_counts_the_lookups_of_a_package():
    from adaptrack_lsp.completion.pipeline import indexing_message

    class Counting(StaticIndex):
        def progress(self, root):
            return (2, 5) if root == "numpy" else None

    index = Counting(["numpy.linalg"])
    assert indexing_message(index, [("numpy", "linalg"), ("numpy", "fft"), ("scipy",)]) == "indexing numpy (2/5), indexing scipy"


def test_warm_up_starts_the_imports_lookups_without_waiting():
    index = SlowIndex(delay_s=5.0)
    service = make_service(index)
    try:
        started = time.monotonic()
        future = service.warm_up(TEXT, document="file:///a.py")
        assert future.result(timeout=10) == 1
        assert time.monotonic() - started < 2 and index.prefetched == [("numpy",)]
        assert service.warm_up("x = 1") is not None
    finally:
        service.close()


def test_interpreter_that_hangs_leaves_the_document_unconstrained_saying_why(tmp_path, monkeypatch):
    hanging = tmp_path / "python"
    hanging.write_text("#!/bin/sh\nsleep 60\n")
    hanging.chmod(0o755)
    monkeypatch.setattr("adaptrack_lsp.apis.jedi_index.PROBE_TIMEOUT_S", 0.5)
    monkeypatch.setenv("ADAPTRACK_CACHE", str(tmp_path / "cache"))
    service = CompletionService(
        Settings(model="tabular", timeout_ms=60_000, max_new_tokens=5, python_path=str(hanging)),
        model_loader=lambda s, progress: tabular_model(),
    )
    service.load()
    try:
        first = service.complete(TEXT, len(TEXT))  # the server's way: the probe runs meanwhile
        assert first.status == INDEXING
        result = service.complete(TEXT, len(TEXT), wait_for_index=True)  # the CLI's way
        assert result.constraint.source == "none"
        assert "did not say its version within 0.5 s" in result.constraint.problem
        assert result.candidates and result.status == "ok"
        again = service.complete(TEXT, len(TEXT))
        assert again.status != INDEXING and "did not say its version" in again.constraint.problem
    finally:
        service.close()


def test_submit_answers_indexing_without_waiting_for_a_busy_model_thread():
    index = SlowIndex(delay_s=30.0)
    service = make_service(index, timeout_ms=60_000)
    release = threading.Event()
    try:
        service.host.submit(release.wait, 30)  # another request holds the model thread
        started = time.monotonic()
        future = service.submit(service.request(TEXT, len(TEXT), document="file:///b.py", mode="list"))
        result = future.result(timeout=5)
        assert time.monotonic() - started < 2
        assert result.status == INDEXING and not result.candidates
    finally:
        release.set()
        service.close()
