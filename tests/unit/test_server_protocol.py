"""The server's protocol in process: what it keeps per message stays bounded."""

from __future__ import annotations

import asyncio
import json

from adaptrack_lsp.lsp_server.server import create_server


class Sink:
    def __init__(self):
        self.messages = []

    def write(self, data: bytes) -> None:
        self.messages.append(data)

    def close(self) -> None:
        pass


def deliver(server, message: dict) -> None:
    parsed = json.loads(json.dumps(message), object_hook=server.protocol.structure_message)
    server.protocol.handle_message(parsed)


def test_notifications_leave_no_futures_behind():
    server = create_server(service_factory=lambda settings, **kwargs: None)
    server.protocol.set_writer(Sink())

    async def run() -> int:
        deliver(server, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}})
        uri = "file:///w/a.py"
        deliver(server, {"jsonrpc": "2.0", "method": "textDocument/didOpen",
                         "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n"}}})
        for version in range(2, 302):
            deliver(server, {"jsonrpc": "2.0", "method": "textDocument/didChange",
                             "params": {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": f"x = {version}\n"}]}})
        await asyncio.sleep(0.05)
        return len(server.protocol._request_futures)

    remaining = asyncio.run(run())
    assert remaining <= 1, remaining  # pygls alone keeps one per notification (300 here)
