"""The process's long-lived HTTP clients for the kernel's outbound calls: one for the LLM, one for embeddings.

Every call to an endpoint goes through the same ``httpx.Client``, so its
connections are kept alive between calls and its verifying TLS context is
loaded once (a client made per call cost about 20 ms of CPU for that context
alone, more than a local embedding call). A process owns its clients: a fork
starts with none (``os.register_at_fork``), so a ``brain serve`` worker never
writes to a connection of its parent's pool. The clients are closed at exit
(``close``: ``atexit``, and a forked worker's exit, which skips ``atexit``).
Each call passes its own timeout and headers.

A transient failure is retried by the client's transport (``RetryingTransport``):
a timeout, a 429 or a 5xx answer is tried again at most ``RETRIES`` times,
after a wait with full jitter (uniform up to ``BACKOFF_BASE_S`` doubled per
attempt, capped) or the answer's ``Retry-After`` when it names seconds
(capped too), each retry logged. A 4xx other than 429 is the caller's error
and is answered at once. A transport a test passes is used as it is.
"""

from __future__ import annotations

import atexit
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

import httpx

Endpoint = Literal["llm", "embeddings"]

RETRIES = 2
BACKOFF_BASE_S = 0.25
BACKOFF_CAP_S = 8.0
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})

log = logging.getLogger(__name__)


class RetryingTransport(httpx.BaseTransport):
    """``inner`` with bounded, jittered retries of timeouts, 429 and 5xx (the module docstring)."""

    def __init__(self, inner: httpx.BaseTransport, *, retries: int = RETRIES, sleep: Callable[[float], None] = time.sleep) -> None:
        self.inner = inner
        self.retries = retries
        self.sleep = sleep

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self.inner.handle_request(request)
            except httpx.TimeoutException as exc:
                if last:
                    raise
                reason, wait = type(exc).__name__, self._backoff(attempt, None)
            else:
                if response.status_code not in RETRIED_STATUSES or last:
                    return response
                reason, wait = f"status {response.status_code}", self._backoff(attempt, response.headers.get("retry-after"))
                response.close()
            log.warning("%s %s: %s; retry %d of %d in %.2f s", request.method, request.url.copy_with(query=None), reason, attempt + 1, self.retries, wait)
            self.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    @staticmethod
    def _backoff(attempt: int, retry_after: str | None) -> float:
        if retry_after is not None and retry_after.strip().isdigit():
            return min(float(retry_after), BACKOFF_CAP_S)
        return random.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt))  # full jitter

    def close(self) -> None:
        self.inner.close()


_clients: dict[Endpoint, httpx.Client] = {}
_lock = threading.Lock()


def shared(endpoint: Endpoint) -> httpx.Client:
    """This process's client for ``endpoint``, made on first use."""
    client = _clients.get(endpoint)
    if client is None:
        with _lock:  # one client even when the first calls arrive together
            client = _clients.get(endpoint)
            if client is None:
                client = _clients[endpoint] = httpx.Client(transport=RetryingTransport(httpx.HTTPTransport()))
    return client


@contextmanager
def using(endpoint: Endpoint, transport: httpx.BaseTransport | None = None) -> Iterator[httpx.Client]:
    """The shared client for ``endpoint``; with a ``transport`` (a test's), a client of its own, closed afterwards."""
    if transport is None:
        yield shared(endpoint)
    else:
        with httpx.Client(transport=transport) as client:
            yield client


def close() -> None:
    """Close this process's clients (the next call makes new ones)."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()


def _forget_inherited() -> None:
    """In a forked child: drop the parent's clients without closing them (their sockets are the parent's)."""
    global _lock
    _clients.clear()
    _lock = threading.Lock()  # a parent thread may have held it at the fork


atexit.register(close)
os.register_at_fork(after_in_child=_forget_inherited)
