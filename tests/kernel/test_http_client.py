"""The process's outbound HTTP clients: one per endpoint, kept across calls, never shared with a forked child."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from brain_kernel import http_client
from brain_kernel.search.embedders import OpenAIEmbedder
from tests.support.openai_stub import OpenAIStub


class _KeepAliveEmbeddings(OpenAIStub):
    """An embeddings endpoint that keeps connections open; ``ports`` are its requests' client ports in order."""

    def __init__(self) -> None:
        super().__init__(keep_alive=True)

    @property
    def ports(self) -> list[int]:
        return [r["port"] for r in self.requests]

    def respond(self, body: dict[str, Any]) -> tuple[int, Any]:
        return 200, {"data": [{"index": i, "embedding": [1.0, 0.0]} for i in range(len(body["input"]))]}


@pytest.fixture
def endpoint() -> Iterator[_KeepAliveEmbeddings]:
    http_client.close()  # start from no client: another test may have left one with connections elsewhere
    with _KeepAliveEmbeddings() as stub:
        try:
            yield stub
        finally:
            http_client.close()  # the kept connections end, so the server's handler threads do


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


class _Sequence(httpx.BaseTransport):
    """Answers the statuses in order (an exception instance is raised), recording each request."""

    def __init__(self, *answers: int | Exception) -> None:
        self.answers, self.seen = list(answers), 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        answer = self.answers[self.seen]
        self.seen += 1
        if isinstance(answer, Exception):
            raise answer
        return httpx.Response(answer, headers={"Retry-After": "3"} if answer == 429 else {})


def _retrying(inner: _Sequence) -> tuple[httpx.Client, list[float]]:
    waits: list[float] = []
    return httpx.Client(transport=http_client.RetryingTransport(inner, sleep=waits.append)), waits


def test_timeouts_429_and_5xx_are_retried_a_bounded_number_of_times_with_jittered_waits() -> None:
    inner = _Sequence(httpx.ReadTimeout("slow"), 429, 200)
    client, waits = _retrying(inner)
    assert client.post("http://llm.invalid/v1/chat/completions").status_code == 200 and inner.seen == 3
    assert 0 <= waits[0] <= http_client.BACKOFF_BASE_S and waits[1] == 3.0  # full jitter, then the answer's Retry-After

    inner = _Sequence(503, 502, 500, 200)
    client, waits = _retrying(inner)
    assert client.post("http://llm.invalid/v1").status_code == 500 and inner.seen == 1 + http_client.RETRIES  # bounded
    assert all(0 <= w <= http_client.BACKOFF_BASE_S * 2**i for i, w in enumerate(waits)) and len(waits) == 2

    inner = _Sequence(httpx.ConnectTimeout("no"), httpx.ConnectTimeout("no"), httpx.ConnectTimeout("no"))
    client, waits = _retrying(inner)
    with pytest.raises(httpx.ConnectTimeout):
        client.post("http://llm.invalid/v1")
    assert inner.seen == 3


def test_a_client_error_is_answered_at_once() -> None:
    for status in (400, 401, 404, 422):
        inner = _Sequence(status, 200)
        client, waits = _retrying(inner)
        assert client.post("http://llm.invalid/v1").status_code == status and inner.seen == 1 and waits == []
