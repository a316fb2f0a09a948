"""The first ghost text of a fresh server, over stdio: `serve --model tiny`, a workspace
that is not trusted (jedi only, no imports), a file ``import numpy as np\\n\\nx = np.``,
with an empty API index cache and again with the cache the first server left.

While nothing can be answered the status says why (the model loading, numpy's members
being computed); once the model is ready and numpy's own members are known, the next
request answers with ghost text at once, even though the members of the names a search
passes through are still being computed (the answer leaves them out, and the status
says "indexing numpy (n/m)" until they are done; then it says "ready" unasked).  The
times are measured by `benchmarks/cold_start.py`; here the order of events is checked.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from lsp_support import RawClient, inline_params, numpy_public_names, server_env

pytestmark = pytest.mark.slow

DOCUMENT = "import numpy as np\n\nx = np."
INDEXING = re.compile(r"indexing numpy \((\d+)/(\d+)\)")


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    """An empty API index cache, with the built tiny model and syntax table linked in."""
    from adaptrack_lsp.completion.lm.tiny import tiny_model_path
    from adaptrack_lsp.constrainers.python_syntax import load_table  # noqa: F401  (builds the table once)

    root = tmp_path_factory.mktemp("cache")
    tiny = tiny_model_path()
    (root / tiny.name).symlink_to(tiny, target_is_directory=True)
    load_table()
    for table in tiny.parent.glob("syntax-table-*"):
        (root / table.name).symlink_to(table, target_is_directory=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def first_ghost_text(cache: Path, workspace: Path, limit_s: float = 240.0):
    """Ask for ghost text every 0.3 s until an answer has items; returns (answer items,
    every answer as (status when it came, empty?), the client).  The client is left open."""
    client = RawClient(env={**server_env(), "ADAPTRACK_CACHE": str(cache)})
    client.initialize({"model": "tiny"}, root=str(workspace))
    file = workspace / "first.py"
    file.write_text(DOCUMENT, encoding="utf-8")
    uri = file.as_uri()
    client.open(uri, DOCUMENT)
    answers = []
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        response = client.request("textDocument/inlineCompletion", inline_params(uri, 2, 7), timeout=120)
        items = (response.get("result") or {}).get("items", [])
        answers.append((statuses(client)[-1] if statuses(client) else None, not items))
        if items:
            return items, answers, client
        time.sleep(0.3)
    client.close()
    raise AssertionError(f"no ghost text within {limit_s} s: {statuses(client)}")


def statuses(client: RawClient) -> list[tuple[str, str]]:
    return [(m["params"]["state"], m["params"]["message"]) for m in list(client.notification_log) if m.get("method") == "adaptrack/status"]


def wait_ready(client: RawClient, limit_s: float = 240.0) -> None:
    deadline = time.monotonic() + limit_s
    while statuses(client)[-1][0] != "ready":
        assert time.monotonic() < deadline, statuses(client)[-5:]
        time.sleep(0.2)


def assert_valid(items) -> None:
    names = numpy_public_names()
    for item in items:
        first = re.match(r"\w*", item["insertText"]).group(0)
        assert first in names, item["insertText"]


def test_cold_then_warm_first_ghost_text(cache_root, tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    # cold: nothing of numpy is cached
    items, answers, client = first_ghost_text(cache_root, workspace)
    try:
        assert_valid(items)
        # never a silent empty answer: each one came while the status said why
        for status, empty in answers[:-1]:
            assert empty and status is not None and status[0] in ("loading", "indexing"), answers
            assert status[0] != "indexing" or INDEXING.match(status[1]), status
        # answered without the deeper members: the status says what is being indexed,
        # then "ready" without being asked, and the next answer has ghost text too
        state, message = statuses(client)[-1]
        found = INDEXING.match(message) if state == "indexing" else None
        if found:
            assert int(found.group(1)) <= int(found.group(2))
            wait_ready(client)
            again = client.request("textDocument/inlineCompletion", inline_params((workspace / "first.py").as_uri(), 2, 7))
            assert again["result"]["items"]
            assert_valid(again["result"]["items"])
        else:
            assert state == "ready", statuses(client)
    finally:
        client.close()
    assert list(cache_root.glob("api-index/*/numpy-*.json")), "numpy's members were not kept on disk"

    # warm: the first request after the model is ready has ghost text, nothing to index
    items, answers, client = first_ghost_text(cache_root, workspace)
    try:
        assert_valid(items)
        for status, empty in answers[:-1]:
            assert empty and status is not None and status[0] == "loading", answers
        assert not any("completions follow" in message for _, message in statuses(client))  # numpy came from disk
    finally:
        client.close()
