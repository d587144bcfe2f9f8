"""Crash safety of POST /marker: kill -9 during a keyed burst, restart, retry every key: zero duplicates.

The harness is the crash bench's (bench/bench_crash.py), one cycle of it. A
dedicated ``brain serve --workers 1`` runs in a process group of its own
on the test's fresh vault and database. A burst of lessons, each with its own
``X-Idempotency-Key``, is fired from a thread pool; once a third of them have
been acknowledged the whole group gets SIGKILL, with requests still in
flight. The server is restarted on the same vault and database and every key
of the burst is sent again with the same body (a client retries what it has
no answer for; retrying the acknowledged ones too shows they replay). Every
lesson must then be in the vault exactly once and in the index exactly once.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from brain_kernel.db.models import Entry, IdempotencyKey
from brain_kernel.settings import Settings
from tests.support.crash import Server, burst_and_kill, lesson_contents, retry_all

pytestmark = pytest.mark.slow

BURST = 150
THREADS = 16
KILL_AFTER = 50  # acknowledged writes before the SIGKILL
ATTEMPTS = 3  # cycles tried until a kill lands while a write is inside the server


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[[Settings], Server]]:
    """Start ``brain serve --workers 1`` on settings, in a new session; every one started is killed at teardown."""
    started: list[Server] = []

    def start(settings: Settings) -> Server:
        server = Server(settings, 1, tmp_path / f"serve-{len(started)}.log")
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.kill()


def test_kill_9_during_a_keyed_burst_then_retry_every_key_writes_no_duplicate(settings: Settings, db: Session, spawn: Callable[[Settings], Server]) -> None:
    # 1. The burst, killed once KILL_AFTER writes are acknowledged. A kill that happens to land
    # between two writes (the requests in flight still queued, none inside the server) proves
    # nothing about crash safety, so such a cycle is run again with fresh keys, at most ATTEMPTS times.
    for _attempt in range(ATTEMPTS):
        run = uuid.uuid4().hex[:8]
        contents = [f"crash lesson {run} {n:03d}: the write survives a kill -9 exactly once" for n in range(BURST)]
        bodies = [{"type": "lesson", "content": c, "attrs": {"project": "org1/api", "session_id": f"crash-{n}"}} for n, c in enumerate(contents)]
        keys = [f"crash-{run}-{n:03d}" for n in range(BURST)]
        server = spawn(settings)
        acked, unanswered, reached = burst_and_kill(server, bodies, keys, THREADS, KILL_AFTER)
        assert reached, f"only {len(acked)} writes acknowledged before the burst ended: {server.stderr_tail()}"
        assert len(acked) + len(unanswered) == BURST
        assert unanswered, "the kill landed after the whole burst: nothing was in flight"
        assert all(not body.get("idempotent_replay") for body in acked.values())

        # What the kill left: reservations still pending, lessons in the vault that nobody was told about.
        db.expire_all()
        states = dict(db.execute(select(IdempotencyKey.key, IdempotencyKey.state).where(IdempotencyKey.key.in_(keys))).all())
        assert all(states.get(keys[i]) == "done" for i in acked)
        pending = sum(1 for i in unanswered if states.get(keys[i]) == "pending")
        committed_unacked = sum(1 for i in unanswered if states.get(keys[i]) == "done")
        after_kill = lesson_contents(settings.vault)
        in_vault_unacked = sum(1 for i in unanswered if after_kill[contents[i]])
        in_vault_pending = sum(1 for i in unanswered if after_kill[contents[i]] and states.get(keys[i]) == "pending")
        duplicates_after_kill = sum(n - 1 for n in after_kill.values() if n > 1)
        db.rollback()
        if pending + committed_unacked > 0:
            break
        server = spawn(settings)  # finish this cycle's keys so later checks count only the next cycle's
        retry_all(server, bodies, keys, THREADS)
        server.kill()
    assert pending + committed_unacked > 0, f"no write was inside the server when it was killed, in {ATTEMPTS} cycles"

    # 2. Restart on the same vault and database; retry every key with the same body.
    server = spawn(settings)
    retried = retry_all(server, bodies, keys, THREADS)
    server.kill()
    refused = [(keys[i], r.status_code, r.text[:200]) for i, r in enumerate(retried) if r.status_code != 201]
    replays = {i for i, r in enumerate(retried) if r.status_code == 201 and r.json().get("idempotent_replay")}

    # 3. Duplicates: every content exactly once in the vault's lesson logs and in the index.
    in_vault = lesson_contents(settings.vault)
    duplicates = {c: n for c, n in in_vault.items() if n > 1}
    missing = [c for c in contents if in_vault[c] == 0]
    db.expire_all()
    indexed = Counter(db.scalars(select(Entry.content).where(Entry.kind == "lesson", Entry.content.in_(contents))))
    index_duplicates = {c: n for c, n in indexed.items() if n > 1}
    index_missing = [c for c in contents if indexed[c] == 0]
    not_done = db.scalar(select(func.count()).select_from(IdempotencyKey).where(IdempotencyKey.key.in_(keys), IdempotencyKey.state != "done"))

    print(
        f"\ncrash burst: {BURST} keys, {len(acked)} acknowledged before kill -9, {len(unanswered)} unacknowledged"
        f" ({dict(Counter(unanswered.values()))});"
        f" left by the kill: {pending} pending reservations, {in_vault_unacked} unacknowledged lessons already in the vault,"
        f" {committed_unacked} committed but unanswered, {duplicates_after_kill} duplicates;"
        f"\nretried {BURST} keys: {len(replays)} replays ({len(acked)} of the acknowledged), {BURST - len(replays)} completed now"
        f" ({in_vault_pending} of them found in the vault, not written again), {len(refused)} refused;"
        f" vault: {sum(in_vault[c] for c in contents)} lessons, {sum(n - 1 for n in duplicates.values())} duplicates, {len(missing)} missing;"
        f" index: {sum(indexed.values())} rows, {sum(n - 1 for n in index_duplicates.values())} duplicates, {len(index_missing)} missing"
    )
    assert not refused, refused[:5]
    assert set(acked) <= replays, sorted(keys[i] for i in set(acked) - replays)[:5]
    for i, original in acked.items():
        assert {k: v for k, v in retried[i].json().items() if k != "idempotent_replay"} == original
    assert not any(r.json().get("body_mismatch") for r in retried)
    assert not duplicates, f"duplicated in the vault: {sorted(duplicates.items())[:5]}"
    assert not missing, f"missing from the vault: {missing[:5]}"
    assert not index_duplicates, f"duplicated in the index: {sorted(index_duplicates.items())[:5]}"
    assert not index_missing, f"missing from the index: {index_missing[:5]}"
    assert sum(in_vault[c] for c in contents) == BURST  # nothing else was written either
    assert not_done == 0
