"""The server never dies: fuzzed JSON-RPC, request storms with cancels, huge and odd
inputs, and models that cannot be loaded.

Two server processes: one with the tiny model loaded (storms, huge inputs) and one whose
model cannot be loaded (bad model paths, then the fuzzing: no model work is needed to
answer the probe requests).  `initialize`, `shutdown` and `exit` are not fuzzed: they
legitimately end or reset the session.
"""

from __future__ import annotations

import json
import time

import psutil
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from lsp_support import RawClient, completion_params, frame, inline_params, server_env, write_numpy_snapshot

SETTINGS = {"model": "tiny", "maxNewTokens": 6, "numSamples": 2, "timeoutMs": 60000}
URI = "file:///workspace/reliability.py"


def offline_env() -> dict[str, str]:
    return {**server_env(), "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    snapshot = write_numpy_snapshot(tmp_path_factory.mktemp("snapshot") / "numpy.json")
    client = RawClient(env=offline_env())
    try:
        client.initialize({**SETTINGS, "apiSnapshot": str(snapshot)})
        status = client.wait_status()
        assert status["state"] == "ready", status
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def unloadable(tmp_path_factory):
    corrupt = tmp_path_factory.mktemp("corrupt-model")
    (corrupt / "config.json").write_text("{ this is not json", encoding="utf-8")
    client = RawClient(env=offline_env())
    try:
        client.initialize({"model": str(corrupt), "timeoutMs": 2000})
        client.corrupt_path = str(corrupt)
        yield client
    finally:
        client.close()


def shown_messages(client: RawClient, expect=None, timeout: float = 20.0) -> list[str]:
    """The `window/showMessage` texts so far (waiting until one satisfies `expect`)."""
    deadline = time.monotonic() + timeout
    while True:
        messages = [m["params"]["message"] for m in list(client.notification_log) if m.get("method") == "window/showMessage"]
        if expect is None or any(expect(m) for m in messages) or time.monotonic() > deadline:
            return messages
        time.sleep(0.05)


def assert_alive_and_answering(client: RawClient) -> None:
    response = client.request("textDocument/completion", completion_params("file:///nowhere/unknown.py", 0, 0), timeout=30)
    assert response["result"] == {"isIncomplete": True, "items": []}, response


# -- models that cannot be loaded -------------------------------------------------------------
def test_corrupt_then_missing_model_path_keeps_the_server_up_with_a_clear_message(unloadable):
    status = unloadable.wait_status()
    assert status["state"] == "error"
    assert unloadable.corrupt_path in status["message"] and "builtin" in status["message"]
    expected = lambda m: unloadable.corrupt_path in m and "builtin" in m  # noqa: E731
    assert any(map(expected, shown_messages(unloadable, expected))), shown_messages(unloadable)

    missing = "/nonexistent/models/not-here"
    unloadable.notify("workspace/didChangeConfiguration", {"settings": {"adaptrack": {"model": missing}}})
    status = unloadable.wait_status(states=("error",))
    assert missing in status["message"] and "builtin" in status["message"]
    assert any(missing in m for m in shown_messages(unloadable, lambda m: missing in m))
    assert_alive_and_answering(unloadable)
    inline = unloadable.request("textDocument/inlineCompletion", inline_params(URI, 0, 0))
    assert inline["result"] == {"items": []}


# -- fuzzing ------------------------------------------------------------------------------------
METHODS = [
    "textDocument/inlineCompletion",
    "textDocument/completion",
    "textDocument/didOpen",
    "textDocument/didChange",
    "textDocument/didClose",
    "workspace/didChangeConfiguration",
    "$/cancelRequest",
    "$/setTrace",
    "initialized",
    "textDocument/hover",
    "window/workDoneProgress/cancel",
    "adaptrack/unknown",
]

json_scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
positions = st.fixed_dictionaries({"line": json_values | st.integers(-5, 10**9), "character": json_values | st.integers(-5, 10**9)})
shaped_params = st.fixed_dictionaries(
    {},
    optional={
        "textDocument": st.fixed_dictionaries(
            {}, optional={"uri": st.sampled_from([URI, "file:///x.py", "untitled:1", ""]) | json_values, "text": json_values, "version": json_values, "languageId": json_values}
        )
        | json_values,
        "position": positions | json_values,
        "context": json_values,
        "contentChanges": st.lists(st.fixed_dictionaries({}, optional={"text": json_values, "range": json_values}), max_size=3) | json_values,
        "settings": json_values | st.fixed_dictionaries({"adaptrack": st.dictionaries(st.sampled_from(["numSamples", "temperature", "decoder", "maxNewTokens", "apiSnapshot"]), json_values, max_size=3)}),
        "id": json_values,
    },
)


@st.composite
def rpc_messages(draw) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind == 0:  # not JSON at all, or not UTF-8
        return draw(st.binary(min_size=1, max_size=64) | st.text(min_size=1, max_size=64).map(str.encode))
    if kind == 1:  # JSON that is not a JSON-RPC object
        return json.dumps(draw(json_values)).encode()
    message = {}
    if draw(st.booleans()) or kind > 3:
        message["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", ""]) | json_values)
    if draw(st.booleans()):
        message["id"] = draw(st.integers(-5, 10**6) | st.text(max_size=6) | json_values)
    if kind != 2:
        message["method"] = draw(st.sampled_from(METHODS) | st.text(max_size=20))
    if draw(st.integers(0, 4)):
        message["params"] = draw(shaped_params | json_values)
    if kind == 3:  # a response or error the server never asked for
        message.pop("method", None)
        message[draw(st.sampled_from(["result", "error"]))] = draw(json_values)
    body = json.dumps(message).encode()
    if kind == 4 and len(body) > 2:  # truncated JSON (the length header still matches)
        body = body[: draw(st.integers(1, len(body) - 1))]
    return body


FUZZED = {"messages": 0}


def test_fuzzed_messages_leave_the_server_alive_and_answering(unloadable):
    @settings(
        max_examples=55,
        deadline=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],  # a failing batch is reported as is, not shrunk
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(rpc_messages(), min_size=40, max_size=40))
    def run(batch):
        unloadable.write(b"".join(frame(body) for body in batch))
        FUZZED["messages"] += len(batch)
        # framing garbage without a length header is skipped up to the next message
        unloadable.write(b"garbage header line\r\n")
        assert_alive_and_answering(unloadable)

    run()
    assert FUZZED["messages"] >= 2000
    assert unloadable.process.poll() is None


# -- storms and huge inputs on a loaded model ----------------------------------------------------------
def test_rapid_requests_with_cancels_keep_threads_and_memory_flat(loaded):
    loaded.open(URI, "import numpy as np\nx = np.")
    first = loaded.request("textDocument/inlineCompletion", inline_params(URI, 1, 7), timeout=120)
    assert first["result"]["items"]
    process = psutil.Process(loaded.process.pid)
    # warm every code path once (cancel, supersede) before taking the baseline
    for _ in range(2):
        ids = [loaded.request_async("textDocument/inlineCompletion", inline_params(URI, 1, 7)) for _ in range(5)]
        loaded.notify("$/cancelRequest", {"id": ids[0]})
        for request_id in ids:
            loaded.wait(request_id, timeout=120)
    threads_before = process.num_threads()
    rss_before = process.memory_info().rss

    ids = []
    for index in range(200):
        params = inline_params(URI, 1, 7) if index % 3 else completion_params(URI, 1, 7)
        method = "textDocument/inlineCompletion" if index % 3 else "textDocument/completion"
        ids.append(loaded.request_async(method, params))
        if index % 2 == 0:
            loaded.notify("$/cancelRequest", {"id": ids[-1]})
    last = loaded.wait(ids[-1], timeout=120)
    assert "result" in last and last["result"]["items"], last
    outcomes = {"result": 0, "cancelled": 0}
    for request_id in ids[:-1]:
        response = loaded.wait(request_id, timeout=120)
        if "error" in response:
            assert response["error"]["code"] == -32800, response  # RequestCancelled
            outcomes["cancelled"] += 1
        else:
            outcomes["result"] += 1
    assert outcomes["cancelled"] > 0
    time.sleep(0.5)
    threads_after = process.num_threads()
    rss_growth = process.memory_info().rss - rss_before
    # no slack: stdin is read by one dedicated thread (pygls' reader submitted every line
    # to a thread pool, which grew under load); decoding has one worker thread
    assert threads_after <= threads_before, (threads_before, threads_after)
    assert rss_growth < 50 * 2**20, rss_growth


def test_huge_and_odd_documents_give_results_or_errors_never_a_crash(loaded):
    # a 5 MB document, completed at its end
    big_uri = "file:///workspace/big.py"
    big = "import numpy as np\n" + "".join(f"value_{i} = np.zeros({i % 7})\n" for i in range(200_000))
    big = big[: 5 * 2**20] + "\nx = np."
    loaded.open(big_uri, big)
    last_line = big.count("\n")
    response = loaded.request("textDocument/inlineCompletion", inline_params(big_uri, last_line, 7), timeout=120)
    assert "result" in response

    # a 100k-character line
    long_uri = "file:///workspace/long.py"
    loaded.open(long_uri, "import numpy as np\ny = '" + "ab " * 33_334 + "'\nz = np.")
    response = loaded.request("textDocument/inlineCompletion", inline_params(long_uri, 1, 50_000), timeout=120)
    assert "result" in response
    response = loaded.request("textDocument/completion", completion_params(long_uri, 2, 7), timeout=120)
    assert "result" in response

    # out-of-range positions: empty results; negative numbers are invalid params
    for line, character in [(10**6, 0), (0, 10**6), (2**31 - 1, 2**31 - 1)]:
        response = loaded.request("textDocument/inlineCompletion", inline_params(long_uri, line, character), timeout=60)
        assert "result" in response, response
    response = loaded.request("textDocument/inlineCompletion", inline_params(long_uri, -1, 0), timeout=60)
    assert response.get("error", {}).get("code") in (-32602, -32603), response

    # unknown URIs
    response = loaded.request("textDocument/inlineCompletion", inline_params("file:///never/opened.py", 0, 0))
    assert response["result"] == {"items": []}
    response = loaded.request("textDocument/completion", completion_params("untitled:nothing", 0, 0))
    assert response["result"] == {"isIncomplete": True, "items": []}

    # non-UTF-8 bytes in a message body, and lone surrogates in document text
    bad_uri = "file:///workspace/bad-bytes.py"
    body = json.dumps(
        {"jsonrpc": "2.0", "method": "textDocument/didOpen",
         "params": {"textDocument": {"uri": bad_uri, "languageId": "python", "version": 1, "text": "x = 1\n"}}}
    ).encode().replace(b"x = 1", b"x = \xff\xfe\x80")
    loaded.write(frame(body))
    response = loaded.request("textDocument/inlineCompletion", inline_params(bad_uri, 0, 4))
    assert response["result"] == {"items": []}  # the document never opened
    surrogate_uri = "file:///workspace/surrogates.py"
    loaded.open(surrogate_uri, "s = '\udcff\ud800'\nimport numpy as np\nx = np.")
    response = loaded.request("textDocument/inlineCompletion", inline_params(surrogate_uri, 2, 7), timeout=120)
    assert "result" in response

    # and the server still completes normally
    response = loaded.request("textDocument/inlineCompletion", inline_params(URI, 1, 7), timeout=120)
    assert response["result"]["items"]
    assert loaded.process.poll() is None
