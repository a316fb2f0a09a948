"""`CompletionHealth`: status and one message per distinct problem."""

from __future__ import annotations

from adaptrack_lsp.lsp_server.health import CompletionHealth


def make():
    statuses, messages = [], []
    health = CompletionHealth(lambda s, m: statuses.append((s, m)), lambda m, k: messages.append(m), lambda: "tiny ready")
    return health, statuses, messages


def test_failures_turn_error_once_and_recover():
    health, statuses, messages = make()
    health.request_done("ok", "", "")
    assert statuses == [] and messages == []
    for _ in range(3):
        health.request_failed("ModelError: the model produced NaN or +inf logits")
    assert statuses[-1][0] == "error" and len(messages) == 1 and "NaN" in messages[0]
    health.request_done("ok", "", "")
    assert statuses[-1] == ("ready", "tiny ready")


def test_decoder_failures_and_dropped_constraints():
    health, statuses, messages = make()
    health.request_done("failed", "decoding raised", "")
    assert statuses[-1][0] == "error" and "decoding raised" in messages[-1]
    for _ in range(2):
        health.request_done("ok", "", "python interpreter /bin/false exited with status 1")
    assert statuses[-1][0] == "degraded" and "/bin/false" in statuses[-1][1]
    assert sum("/bin/false" in m for m in messages) == 1
    health.request_done("no_valid_completion", "", "")
    assert statuses[-1][0] == "ready"


def test_a_request_note_rides_on_the_ready_status_while_it_holds():
    statuses, messages, logged = [], [], []
    health = CompletionHealth(lambda s, m: statuses.append((s, m)), lambda m, k: messages.append(m), lambda: "tiny ready", logged.append)
    note = "syntax check off: syntax error before the cursor (line 3): ')' closes no open bracket"
    health.request_done("ok", "", "", note=note)
    assert statuses[-1] == ("ready", f"tiny ready ({note})")
    sent = len(statuses)
    health.request_done("ok", "", "", note=note)  # the same note: nothing new to send
    assert len(statuses) == sent
    health.request_done("ok", "", "")
    assert statuses[-1] == ("ready", "tiny ready") and messages == []
    assert logged == [f"adaptrack: {note}"]  # logged once, when it appeared
