"""The process's outbound HTTP clients: one per endpoint, kept across calls, never shared with a forked child."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from brain_kernel import http_client
from brain_kernel.search.embedders import OpenAIEmbedder


class _KeepAliveEmbeddings:
    """An HTTP/1.1 embeddings endpoint that keeps connections open and records each request's client port."""

    def __init__(self) -> None:
        self.ports: list[int] = []
        ports = self.ports

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: a client that reuses its connection comes from the same port
            disable_nagle_algorithm = True  # as real servers: else each kept-alive answer waits out a delayed ACK

            def do_POST(self) -> None:
                inputs = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
                ports.append(self.client_address[1])
                data = json.dumps({"data": [{"index": i, "embedding": [1.0, 0.0]} for i in range(len(inputs))]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def endpoint() -> Iterator[_KeepAliveEmbeddings]:
    stub = _KeepAliveEmbeddings()
    thread = threading.Thread(target=stub.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    http_client.close()  # start from no client: another test may have left one with connections elsewhere
    try:
        yield stub
    finally:
        http_client.close()  # the kept connections end, so the server's handler threads do
        stub.server.shutdown()
        stub.server.server_close()


def test_each_endpoint_has_one_client_until_it_is_closed() -> None:
    llm = http_client.shared("llm")
    assert http_client.shared("llm") is llm
    assert http_client.shared("embeddings") is not llm
    http_client.close()
    assert llm.is_closed
    assert http_client.shared("llm") is not llm


def test_consecutive_embedding_calls_reuse_one_connection(endpoint: _KeepAliveEmbeddings) -> None:
    embedder = OpenAIEmbedder(endpoint.url, None, "m", dim=2)
    for _ in range(3):
        assert embedder.embed(["a", "b"]) == [[1.0, 0.0], [1.0, 0.0]]
    assert len(endpoint.ports) == 3 and len(set(endpoint.ports)) == 1, endpoint.ports


def test_a_forked_child_makes_its_own_connection_and_leaves_the_parents_alone(endpoint: _KeepAliveEmbeddings) -> None:
    embedder = OpenAIEmbedder(endpoint.url, None, "m", dim=2)
    embedder.embed(["parent"])
    parents_client = http_client.shared("embeddings")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether it got a client of its own, and call once; never return into pytest
        status = 1
        try:
            os.close(read)
            own = http_client.shared("embeddings") is not parents_client
            embedder.embed(["child"])
            os.write(write, b"own" if own else b"inherited")
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    assert os.waitpid(pid, 0)[1] == 0
    assert answer == b"own"
    embedder.embed(["parent again"])
    first, child, again = endpoint.ports
    assert child != first and again == first  # the child's call did not use, or close, the parent's connection
    assert http_client.shared("embeddings") is parents_client
