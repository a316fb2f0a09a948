"""Over the protocol: the server says which environment validates completions and why,
and workspace trust given by the client (`trustedWorkspace`) changes it."""

from __future__ import annotations

import sys

from lsp_support import RawClient


def test_the_log_names_the_environment_and_the_trust_decision(tmp_path):
    workspace = tmp_path / "repo"
    marker = tmp_path / "interpreter-ran"
    bin_dir = workspace / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(f"#!/bin/sh\necho ran >> {marker}\nexec {sys.executable} \"$@\"\n")
    (bin_dir / "python").chmod(0o755)
    client = RawClient()
    try:
        client.initialize({"model": "tiny"}, root=str(workspace))

        def environment_log(message: dict) -> bool:
            return message.get("method") == "window/logMessage" and "API constraint from" in message["params"]["message"]

        text = client.wait_notification(environment_log)["params"]["message"]
        assert "server interpreter" in text or "VIRTUAL_ENV" in text
        assert "not trusted" in text and ".venv" in text
        client.open((workspace / "a.py").as_uri(), "import json\njson.\n")
        client.notify("workspace/didChangeConfiguration", {"settings": {"adaptrack": {"trustedWorkspace": True}}})
        text = client.wait_notification(environment_log)["params"]["message"]
        assert str(bin_dir / "python") in text and "trusted workspace" in text
    finally:
        client.close()
    assert not marker.exists()  # untrusted: never run; trusted: refused by jedi's safety check
