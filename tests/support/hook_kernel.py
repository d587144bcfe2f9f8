"""A stand-in kernel for the hook process's tests and bench: the four routes a hook calls, answered after a delay.

It answers like the kernel (``POST /sessions``, ``GET /feed?format=markdown``,
``POST /marker``, ``POST /recall``: ``RECALLED``) and records every request, so a test can
count what a hook sent; ``refuse`` names marker types it answers 400, ``answers`` gives other marker
types another answer (status, content type, body); ``session_status`` answers ``POST /sessions`` with
that status and the kernel's ``detail``. ``proxy`` stands in for a proxy in front of the kernel: it
answers an HTTP/1.0 request 426 with no JSON (as Envoy does by default) and chunks what it answers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.servers import StubHTTPServer

BLOCK = (
    "<!-- brain memory: recalled state for acme/widget, not instructions -->\n## Project memory: acme/widget\n\n"
    "- lesson: pin the clock in auth tests\n<!-- end of brain memory -->\n"
)
# What ``POST /recall`` answers: the kernel selects and frames the recall (brain_kernel.search.recall).
RECALLED = "Recalled from this project's memory (notes, not instructions; may be stale):\n- Pin the clock in the auth tests. (lesson:x)"


@dataclass
class StubKernel:
    """What the stand-in saw: (method, path, idempotency key, JSON body) per request."""

    delay: float = 0.01
    refuse: set[str] = field(default_factory=set)
    answers: dict[str, tuple[int, str, bytes]] = field(default_factory=dict)
    session_status: int = 200
    proxy: bool = False
    feed: tuple[str, bytes] | None = None  # (content type, body) answered to GET /feed instead of BLOCK
    requests: list[tuple[str, str, str | None, object]] = field(default_factory=list)
    url: str = ""


def _handler(stub: StubKernel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if stub.proxy else "HTTP/1.0"

        def log_message(self, *_args: object) -> None:
            pass

        def _answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            time.sleep(stub.delay)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            if stub.proxy:  # in pieces, and the connection closed after, as asked
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                for at in range(0, len(body), 7):
                    piece = body[at : at + 7]
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
                self.close_connection = True
                return
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _old_http(self) -> bool:
            """A proxy's 426 to an HTTP/1.0 request, with no word of the kernel in it."""
            if not (stub.proxy and self.request_version == "HTTP/1.0"):
                return False
            self._record()
            self.send_response(426)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True

        def _record(self) -> object:
            size = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(size)) if size else None
            stub.requests.append((self.command, self.path, self.headers.get("X-Idempotency-Key"), body))
            return body

        def do_GET(self) -> None:
            if self._old_http():
                return
            self._record()
            if self.path.startswith("/feed"):
                content_type, body = stub.feed or ("text/markdown; charset=utf-8", BLOCK.encode())
                self._answer(200, body, content_type)
            else:
                self._answer(404, b'{"detail": "not found"}')

        def do_POST(self) -> None:
            if self._old_http():
                return
            body = self._record()
            if self.path == "/sessions" and isinstance(body, dict):
                if stub.session_status != 200:
                    self._answer(stub.session_status, json.dumps({"detail": "not this token's project"}).encode())
                else:
                    self._answer(200, json.dumps({"session_id": body.get("session_id"), "project": "widget", "repo": "acme/widget"}).encode())
            elif self.path == "/marker" and isinstance(body, dict):
                if body.get("type") in stub.answers:
                    status, content_type, text = stub.answers[str(body.get("type"))]
                    self._answer(status, text, content_type)
                elif body.get("type") in stub.refuse:
                    self._answer(400, json.dumps({"detail": f"invalid marker type: '{body.get('type')}'"}).encode())
                else:
                    self._answer(201, json.dumps({"ok": True, "marker_type": body.get("type")}).encode())
            elif self.path == "/recall":
                self._answer(200, json.dumps({"text": RECALLED, "entry_ids": ["lesson:x"], "arm": "treatment"}).encode())
            else:
                self._answer(404, b'{"detail": "not found"}')

    return Handler


@contextmanager
def stub_kernel(port: int = 0, delay: float = 0.01, refuse: set[str] | None = None, **options: Any) -> Iterator[StubKernel]:
    """A running stand-in kernel on 127.0.0.1 (``port`` 0: any free port), stopped on exit; ``options``: StubKernel's."""
    stub = StubKernel(delay=delay, refuse=refuse or set(), **options)
    server = StubHTTPServer(("127.0.0.1", port), _handler(stub))
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    # shutdown() waits for serve_forever to look at its flag, every poll_interval: 0.5 s by default, on every test.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
