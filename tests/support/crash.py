"""A marker burst killed mid-flight and retried: what the crash test and ``bench_crash`` share."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from brain_core.vault import layout
from brain_core.vault.records import lesson_records
from brain_kernel.settings import Settings
from tests.support.servers import log_tail, start_server


class Server:
    """``brain serve`` in a new session (its own process group), healthy once constructed."""

    def __init__(self, settings: Settings, workers: int, log: Path) -> None:
        self.log = log
        self.proc, self.base = start_server(settings, workers, log, new_session=True)

    def kill(self) -> None:
        """SIGKILL the whole process group and reap the leader."""
        if self.proc.returncode is None:  # not reaped yet: the group id is still ours
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(15)

    def stderr_tail(self) -> str:
        """The end of the server's log, for a failure message."""
        return log_tail(self.log)


def _client(threads: int) -> httpx.Client:
    """One client shared by the pool's threads, a connection per thread: building a client per request
    (``httpx.post``) costs more CPU than the server's write and would leave nothing in flight at the kill."""
    return httpx.Client(limits=httpx.Limits(max_connections=threads, max_keepalive_connections=threads))


def lesson_contents(vault: Path) -> Counter[str]:
    """How often each lesson content occurs across every lesson log of the vault."""
    seen: Counter[str] = Counter()
    for path in sorted((vault / layout.LESSONS_DIR).glob("lessons-*.md")):
        seen.update(rec.content for rec in lesson_records(path.read_text(), path.relative_to(vault).as_posix()))
    return seen


def burst_and_kill(server: Server, bodies: list[dict], keys: list[str], threads: int, kill_after: int) -> tuple[dict[int, dict], dict[int, str], bool]:
    """Fire every body; SIGKILL the server once ``kill_after`` are acknowledged.

    Returns (acknowledged, unanswered, whether ``kill_after`` was reached before the burst ended).
    """
    acked: dict[int, dict] = {}
    unanswered: dict[int, str] = {}
    lock = threading.Lock()
    enough = threading.Event()

    def one(i: int) -> None:
        try:
            r = http.post(f"{server.base}/marker", json=bodies[i], headers={"X-Idempotency-Key": keys[i]}, timeout=60)
        except httpx.HTTPError as exc:
            with lock:
                unanswered[i] = type(exc).__name__
            return
        with lock:
            if r.status_code == 201:
                acked[i] = r.json()
                if len(acked) >= kill_after:
                    enough.set()
            else:
                unanswered[i] = f"HTTP {r.status_code}: {r.text[:200]}"

    with _client(threads) as http, ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(one, i) for i in range(len(bodies))]
        reached = enough.wait(120)
        server.kill()
        for future in futures:
            future.result()
    return acked, unanswered, reached


def retry_all(server: Server, bodies: list[dict], keys: list[str], threads: int) -> list[httpx.Response]:
    """Send every body again with its key, as a client retries; the answers in order."""
    with _client(threads) as http, ThreadPoolExecutor(threads) as pool:
        return list(
            pool.map(lambda i: http.post(f"{server.base}/marker", json=bodies[i], headers={"X-Idempotency-Key": keys[i]}, timeout=60), range(len(bodies)))
        )
