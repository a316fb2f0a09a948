"""The server with version targets (setting versionTargets): preparing them is shown in
the status line and the log, completion lists say which versions validated an item,
and a target that cannot be built (offline) is named with the fix in the status line and
the log; its package is unchecked under that target, the others are checked."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from lsp_support import RawClient, completion_params, server_env

URI = "file:///workspace/targets.py"
DOCUMENT = "import numpy as np\nx = np."
SETTINGS = {"model": "tiny", "maxNewTokens": 4, "numSamples": 3, "timeoutMs": 60000, "syntaxConstraint": False}


def statuses(client: RawClient) -> list[tuple[str, str]]:
    return [(m["params"]["state"], m["params"]["message"]) for m in list(client.notification_log) if m.get("method") == "adaptrack/status"]


def logged(client: RawClient) -> list[str]:
    return [m["params"]["message"] for m in list(client.notification_log) if m.get("method") == "window/logMessage"]


@pytest.mark.slow
def test_targets_are_prepared_with_progress_and_name_the_versions_of_list_items():
    client = RawClient(env=server_env())
    try:
        client.initialize({**SETTINGS, "pythonPath": sys.executable, "versionTargets": ["numpy>=1.24,<3"]})
        assert client.wait_status()["state"] == "ready"
        client.open(URI, DOCUMENT)
        response = client.request_settled("textDocument/completion", completion_params(URI, 1, 7), timeout=900)
        items = response["result"]["items"]
        assert items, response
        details = {item.get("detail") for item in items if item.get("kind") != 5}
        # numpy 1.24.x and 2.x (the range's lowest and highest release) and the installed one
        assert any(detail and detail.startswith("numpy 1.24.") and ", 2." in detail for detail in details), details
        assert any("version targets ready: numpy 1.24." in line for line in logged(client)), logged(client)
        assert any(state == "indexing" and "version target" in message for state, message in statuses(client)), statuses(client)
        assert not any(state == "degraded" for state, _ in statuses(client)), statuses(client)
    finally:
        client.close()


@pytest.mark.slow
def test_a_target_that_cannot_be_built_is_named_in_the_status_line(tmp_path):
    from adaptrack_lsp.completion.lm.tiny import tiny_model_path

    cache = Path(tempfile.mkdtemp(prefix="adaptrack-cache-", dir=tmp_path))
    tiny = tiny_model_path()
    (cache / tiny.name).symlink_to(tiny, target_is_directory=True)  # the model, without its rebuild
    env = {**server_env(), "ADAPTRACK_CACHE": str(cache), "PIP_INDEX_URL": "http://127.0.0.1:9/", "PIP_CONFIG_FILE": os.devnull}
    for name in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL"):
        env.pop(name, None)
    client = RawClient(env=env)
    try:
        client.initialize({**SETTINGS, "versionTargets": ["numpy==1.26.4"]})
        assert client.wait_status()["state"] == "ready"
        client.open(URI, DOCUMENT)
        deadline = time.monotonic() + 300
        named = []
        while time.monotonic() < deadline and not named:  # ready again, naming the target that was not built
            named = [m for state, m in statuses(client) if state == "ready" and "numpy==1.26.4" in m]
            time.sleep(0.2)
        assert named, statuses(client)
        assert "cannot be reached" in named[-1] and "connect to the network once" in named[-1], named[-1]
        assert any("numpy is unchecked under that target" in line for line in logged(client)), logged(client)
        assert not any(state == "degraded" for state, _ in statuses(client)), statuses(client)  # numpy is still checked as installed
    finally:
        client.close()
        shutil.rmtree(cache, ignore_errors=True)
