"""One model load per settings change, with a client that sends
`workspace/didChangeConfiguration` right after `initialized` (as Neovim does)."""

from __future__ import annotations

import asyncio
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_support import SERVER_COMMAND, RawClient, encode, make_client, server_env

ASYNC = pytest.mark.asyncio(loop_scope="function")

SETTINGS = {"model": "tiny", "maxNewTokens": 4, "numSamples": 2, "timeoutMs": 60000, "apiSnapshot": None}


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=SERVER_COMMAND, server_env=server_env(), client_factory=make_client),
)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def start_then_configure(client: LanguageClient, **changes) -> None:
    capabilities = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True))
    await client.initialize_session(types.InitializeParams(capabilities=capabilities, initialization_options=SETTINGS))
    # initialize_session has sent `initialized`; the configuration follows at once
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"adaptrack": {**SETTINGS, **changes}})
    )


async def settle(client: LanguageClient, timeout: float = 240.0) -> None:
    """Wait for "ready", then a little longer for a second load that should not come."""
    deadline = time.monotonic() + timeout
    while "ready" not in [state for state, _ in client.statuses]:
        assert "error" not in [state for state, _ in client.statuses], client.statuses
        assert time.monotonic() < deadline, client.statuses
        await asyncio.sleep(0.1)
    await asyncio.sleep(2.0)


def load_progress(client: LanguageClient) -> list:
    return [
        reports for reports in client.progress_reports.values()
        if reports and getattr(reports[0], "title", "") == "adaptrack: loading model"
    ]


@ASYNC
async def test_configuration_without_model_changes_starts_no_second_load(client: LanguageClient):
    await start_then_configure(client, temperature=0.5, maxNewTokens=5)
    await settle(client)
    assert len(load_progress(client)) == 1
    assert [state for state, _ in client.statuses].count("loading") == 1
    assert [state for state, _ in client.statuses].count("ready") == 1


@ASYNC
async def test_configuration_changing_the_model_loads_once_more_and_reports_ready_once(client: LanguageClient):
    await start_then_configure(client, dtype="float32")
    await settle(client)
    assert len(load_progress(client)) <= 2
    assert [state for state, _ in client.statuses].count("ready") == 1
    assert client.statuses[-1][0] == "ready"


def test_initialized_and_configuration_in_one_read_start_one_load():
    """`initialized` and a configuration with the same model fields arriving in one read
    (the race a client sending both at once creates every time): one load, one "ready"."""
    raw = RawClient(env=server_env())
    try:
        raw.request(
            "initialize",
            {"processId": None, "rootUri": None, "capabilities": {"window": {"workDoneProgress": True}},
             "initializationOptions": SETTINGS},
        )
        changed = {"adaptrack": {**SETTINGS, "temperature": 0.5, "maxNewTokens": 5}}
        raw.write(
            encode({"jsonrpc": "2.0", "method": "initialized", "params": {}})
            + encode({"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration", "params": {"settings": changed}})
        )
        assert raw.wait_status()["state"] == "ready"
        time.sleep(2.0)  # a second load would have begun by now
        statuses = [m["params"]["state"] for m in list(raw.notification_log) if m.get("method") == "adaptrack/status"]
        begins = [
            m for m in list(raw.notification_log)
            if m.get("method") == "$/progress" and m["params"]["value"].get("kind") == "begin"
            and m["params"]["value"].get("title") == "adaptrack: loading model"
        ]
        assert len(begins) == 1, begins
        assert statuses.count("loading") == 1 and statuses.count("ready") == 1, statuses
    finally:
        raw.close()
