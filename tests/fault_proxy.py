"""An HTTP proxy in front of an inference server that injects one fault at a time (a test
process, started by `llama_server_support.FaultProxy`).

`POST /__fault {"mode": ..., "seconds": ...}` switches the fault; `GET /__fault` answers
200 (the start-up probe).  Modes, applied to `/v1/completions` and llama-server's own
`/completion` unless said otherwise:

- ``none``: forward as is;
- ``http500``: HTTP 500 with an error object;
- ``malformed``: HTTP 200 whose body is not JSON;
- ``truncated``: the upstream reply cut in half;
- ``slow``: wait `seconds` before forwarding;
- ``no_logprobs``: the upstream reply with every choice's ``logprobs`` set to null;
- ``ignore_bias``: the request forwarded without its ``logit_bias``;
- ``no_bytes``: the upstream OpenAI reply without the ``bytes`` of its entries (a server
  that gives ids only, so a position it left out cannot be placed);
- ``biased_lists``: every id the request's ``logit_bias`` names removed from the top lists
  of the reply (a server that reports log-probabilities after applying logit_bias);
- ``huge``: HTTP 200 with a body of `bytes` bytes (JSON padded with spaces);
- ``not_openai``: every path (``/v1/models`` too) answered 404 with an HTML page, as a
  web server that is not an inference server would;
- ``redirect``: every path answered 307 to another port.

`--tls CERT KEY` serves HTTPS with that certificate.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATE = {"mode": "none", "seconds": 5.0, "bytes": 65 * 2**20}
#: straight to the upstream: no proxy from the environment
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream = ""

    def log_message(self, format, *args):  # noqa: A002 - quiet
        return

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(self, method: str, body: bytes | None) -> tuple[int, bytes]:
        request = urllib.request.Request(self.upstream + self.path, data=body, method=method)
        for name in ("Content-Type", "Authorization", "Accept"):
            if self.headers.get(name):
                request.add_header(name, self.headers[name])
        try:
            with DIRECT.open(request, timeout=120) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def do_GET(self):  # noqa: N802
        if self.path == "/__fault":
            self._send(200, json.dumps(STATE).encode())
            return
        if STATE["mode"] == "not_openai":
            self._send(404, b"<html><body>Not Found</body></html>", "text/html")
            return
        if STATE["mode"] == "redirect":
            self._redirect()
            return
        self._send(*self._forward("GET", None))

    def _redirect(self) -> None:
        self.send_response(307)
        self.send_header("Location", "http://127.0.0.1:9" + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):  # noqa: N802
        body = self._body()
        if self.path == "/__fault":
            STATE.update(json.loads(body))
            self._send(200, b"{}")
            return
        mode = STATE["mode"]
        if mode == "not_openai":
            self._send(404, b"<html><body>Not Found</body></html>", "text/html")
            return
        if mode == "redirect":
            self._redirect()
            return
        if not self.path.startswith(("/v1/completions", "/completion")) or mode == "none":
            self._send(*self._forward("POST", body))
            return
        if mode == "http500":
            self._send(500, json.dumps({"error": {"message": "injected internal error", "code": 500}}).encode())
        elif mode == "malformed":
            self._send(200, b'{"choices": [ this is not json')
        elif mode == "truncated":
            status, reply = self._forward("POST", body)
            self._send(status, reply[: len(reply) // 2])
        elif mode == "slow":
            time.sleep(float(STATE["seconds"]))
            self._send(*self._forward("POST", body))
        elif mode == "no_logprobs":
            status, reply = self._forward("POST", body)
            data = json.loads(reply)
            for choice in data.get("choices", []):
                choice["logprobs"] = None
            data.pop("completion_probabilities", None)  # llama-server's own endpoint
            self._send(status, json.dumps(data).encode())
        elif mode in ("no_bytes", "biased_lists"):
            request = json.loads(body)
            asked = dict(request)
            if mode == "biased_lists":  # ask for more, so that the list stays as long without the biased ids
                for key in ("logprobs", "n_probs"):
                    if isinstance(request.get(key), int):
                        request[key] += len(request.get("logit_bias") or [])
            status, reply = self._forward("POST", json.dumps(request).encode())
            self._send(status, json.dumps(_rewrite(json.loads(reply), asked, mode)).encode())
        elif mode == "ignore_bias":
            request = json.loads(body)
            request.pop("logit_bias", None)
            self._send(*self._forward("POST", json.dumps(request).encode()))
        elif mode == "huge":
            size = int(STATE["bytes"])
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = b" " * 2**20
            sent = 0
            try:
                self.wfile.write(b'{"choices": [], "pad": "')
                sent = len(b'{"choices": [], "pad": "')
                while sent < size:
                    piece = chunk[: min(len(chunk), size - sent)]
                    self.wfile.write(piece)
                    sent += len(piece)
            except (BrokenPipeError, ConnectionResetError):
                return  # the client stopped reading at its cap
        else:
            self._send(400, json.dumps({"error": f"unknown fault {mode!r}"}).encode())


def _rewrite(data: dict, request: dict, mode: str) -> dict:
    """The reply with its entries' bytes removed (``no_bytes``) or the biased ids left out
    of its top lists (``biased_lists``), in either endpoint's format."""
    bias = request.get("logit_bias") or {}
    biased = {int(key) for key in bias} if isinstance(bias, dict) else {int(pair[0]) for pair in bias}
    entries = list(data.get("completion_probabilities") or [])
    for choice in data.get("choices", []):
        entries += list((choice.get("logprobs") or {}).get("content") or [])
    for entry in entries:
        if mode == "no_bytes":
            entry.pop("bytes", None)
            for top in entry.get("top_logprobs") or []:
                top.pop("bytes", None)
        else:
            kept = [top for top in entry.get("top_logprobs") or [] if top.get("id") not in biased]
            entry["top_logprobs"] = kept[: request.get("logprobs") or request.get("n_probs") or len(kept)]
    return data


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), default=None)
    args = parser.parse_args()
    Handler.upstream = args.upstream.rstrip("/")
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.tls:
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*args.tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
