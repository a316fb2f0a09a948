"""Finished requests' prefix trees are freed at once over a long session (not left to a
rare full collection), and the memory release runs after the answer."""

from __future__ import annotations

import gc

from test_service import make_service

from adaptrack_lsp.completion.memory import FreeMemoryReleaser
from adaptrack_lsp.completion.tree import Node


def live_nodes() -> int:
    return sum(1 for obj in gc.get_objects() if type(obj) is Node)


def test_release_runs_at_most_once_per_interval():
    now = [0.0]
    releaser = FreeMemoryReleaser(interval_s=10, clock=lambda: now[0])
    for t in (0, 1, 5, 9.9):
        now[0] = t
        releaser.after_request()
    assert releaser.collections == 0
    now[0] = 10.5
    releaser.after_request()
    now[0] = 11
    releaser.after_request()
    assert releaser.collections == 1


def test_finished_trees_are_freed_without_a_collection():
    """A request's prefix tree is freed when its answer is out, by reference counting:
    with the collector off and the service's release never due, no node is left after
    requests (the tree breaks its cycles when the decode ends, `PrefixTree.close`)."""
    service = make_service()
    releaser = service._memory = FreeMemoryReleaser(interval_s=10**9)
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        text = "import numpy as np\nx = np."
        before = live_nodes()
        for _ in range(3):
            service.submit(service.request(text, len(text), document="a", mode="list")).result(timeout=60)
        service.host.submit(lambda: None).result(timeout=60)
        assert releaser.collections == 0
        assert live_nodes() == before, (before, live_nodes())
    finally:
        if enabled:
            gc.enable()
        service.close()


def test_the_release_runs_once_the_answer_is_out():
    """The collection runs on the model thread after the request's job, so its time is
    never added to the answer (it ran inside the job before)."""
    import time

    events: list[str] = []

    class SlowRelease:
        def after_request(self) -> None:
            events.append("release started")
            time.sleep(0.5)
            events.append("release done")

    service = make_service()
    service._memory = SlowRelease()
    try:
        text = "import numpy as np\nx = np."
        service.submit(service.request(text, len(text), document="a", mode="list")).result(timeout=60)
        events.append("answered")
        service.host.submit(lambda: None).result(timeout=60)
        assert events.index("answered") < events.index("release done"), events
    finally:
        service.close()
