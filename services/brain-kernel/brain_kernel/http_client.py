"""The process's long-lived HTTP clients for the kernel's outbound calls: one for the LLM, one for embeddings.

Every call to an endpoint goes through the same ``httpx.Client``, so its
connections are kept alive between calls and its verifying TLS context is
loaded once (a client made per call cost about 20 ms of CPU for that context
alone, more than a local embedding call). A process owns its clients: a fork
starts with none (``os.register_at_fork``), so a ``brain serve`` worker never
writes to a connection of its parent's pool. The clients are closed at exit
(``close``: ``atexit``, and a forked worker's exit, which skips ``atexit``).
Each call passes its own timeout and headers.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import httpx

Endpoint = Literal["llm", "embeddings"]

_clients: dict[Endpoint, httpx.Client] = {}
_lock = threading.Lock()


def shared(endpoint: Endpoint) -> httpx.Client:
    """This process's client for ``endpoint``, made on first use."""
    client = _clients.get(endpoint)
    if client is None:
        with _lock:  # one client even when the first calls arrive together
            client = _clients.get(endpoint)
            if client is None:
                client = _clients[endpoint] = httpx.Client()
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
