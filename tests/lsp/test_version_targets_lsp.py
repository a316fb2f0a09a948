"""The server with version targets (setting versionTargets): preparing them is shown in
the status line and the log, completion lists say which versions validated an item,
and a target that cannot be built (offline) turns the status `degraded` naming the
package, the version and the fix, never a silent fallback to the installed version."""

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
def test_a_target_that_cannot_be_built_makes_the_status_degraded_naming_it(tmp_path):
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
        degraded = client.wait_status(("degraded",), timeout=300)["message"]
        assert "numpy==1.26.4" in degraded and "cannot be reached" in degraded and "connect to the network once" in degraded, degraded
        response = client.request("textDocument/completion", completion_params(URI, 1, 7), timeout=120)
        items = response["result"]["items"]
        if items:  # answered unconstrained, and said so on every item
            assert "numpy==1.26.4" in items[0]["data"]["constraint"]["problem"], items[0]["data"]
        time.sleep(0.3)
        assert statuses(client)[-1][0] == "degraded", statuses(client)
    finally:
        client.close()
        shutil.rmtree(cache, ignore_errors=True)
