"""POST /marker under concurrency: ``brain serve --workers 4`` in a subprocess, many posts at once.

The server is the run's shared 4-worker one (``served``), emptied after each
test. These are the upstream writer's failure modes: lessons lost by read-modify-write
of the day's log, two decisions with one ADR number, idempotency kept per
process. Each test fires its requests together from a thread pool, each on
its own connection so the kernel spreads them over the worker processes.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from brain_core.markers import parse_request
from brain_core.vault.records import decision_record, lesson_records
from brain_kernel.db.models import Entry
from brain_kernel.marker_service import post_marker, reserve
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from tests.support.harness import HTTP, Served

pytestmark = pytest.mark.slow


def fire(base: str, bodies: list[dict], headers: list[dict] | None = None, threads: int = 50) -> list[httpx.Response]:
    """POST every body to /marker at once (one fresh connection per request)."""
    headers = headers or [{} for _ in bodies]

    def one(i: int) -> httpx.Response:
        return HTTP.post(f"{base}/marker", json=bodies[i], headers=headers[i], timeout=60)

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(len(bodies))))


def count(db: Session, kind: str) -> int:
    db.expire_all()
    return db.scalar(select(func.count()).select_from(Entry).where(Entry.kind == kind)) or 0


def test_200_concurrent_lessons_all_land_exactly_once(served: Served) -> None:
    base, settings, db = served.base, served.settings, served.db
    contents = [f"lesson {n:03d}: " + "detail " * (n % 20) for n in range(200)]
    bodies = [{"type": "lesson", "content": c, "attrs": {"project": "org1/api", "session_id": f"s{n}"}} for n, c in enumerate(contents)]
    responses = fire(base, bodies)
    assert [r.status_code for r in responses] == [201] * 200, [r.text for r in responses if r.status_code != 201][:3]
    paths = {r.json()["vault_path"] for r in responses}  # one day's log (two if the test straddles midnight UTC)
    parsed = [rec for p in sorted(paths) for rec in lesson_records((settings.vault / p).read_text(), p)]
    assert Counter(rec.content for rec in parsed) == Counter(contents)
    assert all(rec.project == "api" and rec.repo == "org1/api" for rec in parsed)
    assert count(db, "lesson") == 200
    db.expire_all()
    assert set(db.scalars(select(Entry.id).where(Entry.kind == "lesson"))) == {rec.id for rec in parsed}


def test_50_concurrent_decisions_get_50_distinct_adr_numbers(served: Served) -> None:
    base, settings, db = served.base, served.settings, served.db
    bodies = [{"type": "decision", "content": f"Decision body {n}", "attrs": {"title": f"Choice {n}", "project": "api"}} for n in range(50)]
    responses = fire(base, bodies)
    assert [r.status_code for r in responses] == [201] * 50, [r.text for r in responses if r.status_code != 201][:3]
    paths = [r.json()["vault_path"] for r in responses]
    numbers = [int(re.match(r"left/decisions/ADR-(\d{4})-", p).group(1)) for p in paths]
    assert sorted(numbers) == list(range(1, 51))
    files = sorted(p.name for p in (settings.vault / "left/decisions").glob("ADR-*.md"))
    assert len(files) == 50
    for path in paths:
        record = decision_record((settings.vault / path).read_text(), path)
        assert record.meta["adr"] == int(path.split("-")[1]) and record.project == "api"
    assert count(db, "decision") == 50


def test_20_replays_of_one_key_across_workers_write_once(served: Served) -> None:
    base, settings, db = served.base, served.settings, served.db
    key = uuid.uuid5(uuid.NAMESPACE_URL, "brain-kernel/replay-storm").hex
    body = {"type": "lesson", "content": "Written once, however often it is sent.", "attrs": {"project": "api", "session_id": "s1", "source": "claude-code"}}
    responses = fire(base, [body] * 20, [{"X-Idempotency-Key": key}] * 20, threads=20)
    assert [r.status_code for r in responses] == [201] * 20, [r.text for r in responses if r.status_code != 201][:3]
    originals = [r.json() for r in responses if not r.json().get("idempotent_replay")]
    assert len(originals) == 1
    for r in responses:
        assert {k: v for k, v in r.json().items() if k != "idempotent_replay"} == originals[0]
    path = originals[0]["vault_path"]
    assert len(lesson_records((settings.vault / path).read_text(), path)) == 1
    assert count(db, "lesson") == 1
    other = HTTP.post(f"{base}/marker", json={**body, "content": "another body"}, headers={"X-Idempotency-Key": key}, timeout=30)
    assert other.status_code == 201 and other.json()["body_mismatch"] is True  # replayed, never refused


def test_two_bodies_racing_on_one_key_replay_against_the_body_written(settings: Settings, db: Session) -> None:
    """The order a race of two bodies on one key can take: A reserves, B (not fresh) takes the row's lock first and
    writes its own body. A replay must then call A's body a mismatch and B's not (the key row names what was written)."""
    vault = Vault(settings.vault)
    vault.scaffold()
    first = parse_request("lesson", "v1: the body that reserved", {}, max_chars=settings.marker_max_chars)
    second = parse_request("lesson", "v3: the body that wrote", {}, max_chars=settings.marker_max_chars)
    assert reserve(db, settings, first, idempotency_key="race-key") is True
    db.commit()
    written = post_marker(db, vault, settings, second, idempotency_key="race-key", fresh=False)
    db.commit()
    assert "v3" in vault.read_text(written.body["vault_path"]) and "v1" not in vault.read_text(written.body["vault_path"])
    again_first = post_marker(db, vault, settings, first, idempotency_key="race-key", fresh=False)
    again_second = post_marker(db, vault, settings, second, idempotency_key="race-key", fresh=False)
    assert again_first.body["idempotent_replay"] is True and again_first.body.get("body_mismatch") is True
    assert again_second.body["idempotent_replay"] is True and "body_mismatch" not in again_second.body


def test_a_milestone_retried_once_its_session_is_known_is_not_written_twice(settings: Settings, db: Session) -> None:
    """The attempt (its session unknown) wrote the day's note and died before its commit; the session registered; the
    retry, attributed now, would go to the project's BLOCKS.md: it finds the attempt's entry in the note instead."""
    from brain_core.identity import ProjectIdentity
    from brain_kernel.identity.sessions import record_session

    vault = Vault(settings.vault)
    vault.scaffold()
    req = parse_request("milestone", "Shipped the gamma importer.", {"session_id": "s-crash-1"}, max_chars=settings.marker_max_chars)
    assert reserve(db, settings, req, idempotency_key="crash-key") is True
    db.commit()
    first = post_marker(db, vault, settings, req, idempotency_key="crash-key", fresh=True)
    db.rollback()  # killed before its commit: the note holds the entry, the index and the key know nothing of it
    record_session(db, "s-crash-1", ProjectIdentity("gamma", "acme/gamma", None, None, None, "attrs"))
    db.commit()
    again = post_marker(db, vault, settings, req, idempotency_key="crash-key", fresh=False)
    db.commit()
    assert again.body["vault_path"] == first.body["vault_path"]
    copies = [p for p in vault.iter_files("") if "Shipped the gamma importer." in p.read_text()]
    assert len(copies) == 1 and vault.read_text(vault.rel(copies[0])).count("## ") == 1  # one entry, in one file


def test_a_marker_written_beside_its_sessions_registration_is_attributed(settings: Settings, db: Session) -> None:
    """The registration relabels the session's markers it sees; the marker attributes by a registration it sees. Run
    side by side, each saw neither, and the marker stayed unattributed until a tick: now the later one waits."""
    import threading

    from sqlalchemy import text as sql

    from brain_core.identity import ProjectIdentity
    from brain_kernel.db.engine import make_engine
    from brain_kernel.identity.sessions import record_session

    vault = Vault(settings.vault)
    engine = make_engine(settings.database_url or "", pooled=False)
    req = parse_request("lesson", "Warm the cache before the load test.", {"session_id": "s-race-1"}, max_chars=settings.marker_max_chars)
    assert reserve(db, settings, req, idempotency_key="race-session") is True
    db.commit()
    registering = Session(engine)
    outcome: list[object] = []
    try:
        record_session(registering, "s-race-1", ProjectIdentity("gamma", "acme/gamma", None, None, None, "attrs"))  # not committed yet
        with Session(engine) as writer:
            thread = threading.Thread(
                target=lambda: (outcome.append(post_marker(writer, vault, settings, req, idempotency_key="race-session", fresh=True)), writer.commit())
            )
            thread.start()
            waiting = 0
            while thread.is_alive() and not waiting:  # the marker waits for the registration's lock, not the clock
                waiting = db.execute(
                    sql(
                        "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE d.datname = current_database() AND locktype = 'advisory' AND NOT granted"
                    )
                ).scalar_one()
                db.rollback()
            registering.commit()
            thread.join(30)
    finally:
        registering.close()
        engine.dispose()
    assert waiting == 1 and outcome and outcome[0].body["project"] == "gamma"  # type: ignore[attr-defined]
