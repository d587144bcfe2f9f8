"""A real local OpenAI-compatible endpoint for tests: an HTTP server on 127.0.0.1 that records requests.

Subclasses say what to answer (``respond``); the keeper's chat completions
and the embedder's ``/embeddings`` calls both go through real HTTP to it.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.servers import StubHTTPServer


class OpenAIStub:
    """Records ``{path, auth, body, port}`` of every request and answers ``respond(body)`` -> (status, JSON payload) to a POST,
    ``respond_get(path)`` to a GET.

    ``keep_alive``: HTTP/1.1 with connections kept open, so a client that
    reuses its connection comes from the same port (``port`` of each request).
    """

    def __init__(self, *, keep_alive: bool = False) -> None:
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            if keep_alive:
                protocol_version = "HTTP/1.1"
                disable_nagle_algorithm = True  # as real servers: else each kept-alive answer waits out a delayed ACK

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                self._record(body)  # before answering: a stub may answer by how many requests came before
                self._send(*stub.respond(body))

            def do_GET(self) -> None:
                self._record(None)
                self._send(*stub.respond_get(self.path))

            def _record(self, body: Any) -> None:
                stub.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body, "port": self.client_address[1]})

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = StubHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def respond(self, body: dict[str, Any]) -> tuple[int, Any]:
        """The status and JSON payload for one request body."""
        raise NotImplementedError

    def respond_get(self, path: str) -> tuple[int, Any]:
        """The status and JSON payload for a GET (``/v1/models``); none by default."""
        return 404, {"error": {"message": f"no route {path}"}}

    def __enter__(self) -> OpenAIStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
