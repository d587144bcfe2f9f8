"""The tick queue: POST /tick and GET /tick/{job_id} on Postgres, claims that never overlap, and brain tick-drain."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from brain_api.app import create_app
from brain_core.times import parse_time
from brain_kernel.db.engine import normalise_url
from brain_kernel.settings import Settings
from brain_kernel.ticks import tick_queue
from brain_kernel.vault_store import Vault
from tests.support.harness import brain, make_settings
from tests.support.planting import arc_session, write_arc

JOB_ID = re.compile(r"^[0-9a-f]{12}$")


@pytest.fixture(autouse=True)
def _empty_queue(database_url: str) -> Iterator[None]:
    """tick_requests is not among the tables the shared database is emptied of, so this module empties it."""
    engine = create_engine(normalise_url(database_url), isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(text("DELETE FROM tick_requests"))
        yield
        with engine.connect() as conn:
            conn.execute(text("DELETE FROM tick_requests"))
    finally:
        engine.dispose()


def _post(client: TestClient, **params: object) -> dict:
    response = client.post("/tick", params=params)
    assert response.status_code == 202, response.text
    return response.json()


def _arc(vault: Vault, sid: str, key: str, repo: str, prompt: str, *, hours_ago: float) -> None:
    write_arc(vault, [arc_session(sid, key, repo, prompt, hours_ago)])


@pytest.fixture
def arcs(settings: Settings) -> Vault:
    vault = Vault(settings.vault)
    _arc(vault, "a1", "api", "org1/api", "Rewrite the request router", hours_ago=2)
    _arc(vault, "w1", "web", "acme/web", "Fix the flaky login test", hours_ago=5)
    _arc(vault, "old", "legacy", "acme/legacy", "Migrate the old cron jobs", hours_ago=24 * 10)
    return vault


def _drain(settings: Settings) -> tuple[int, dict, str]:
    result = brain(settings, "tick-drain")
    return result.exit_code, json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


# -- the HTTP routes -----------------------------------------------------------


def test_a_posted_tick_is_pending_under_a_fresh_id(client: TestClient) -> None:
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    posted = _post(client, no_ai="true", source="mcp-agent")
    assert JOB_ID.match(posted["job_id"]), posted
    assert posted == {
        "job_id": posted["job_id"],
        "requested_at": posted["requested_at"],
        "request_path": f"tick_requests/{posted['job_id']}",
        "dry_run": False,
        "no_ai": True,
        "status": "pending",
    }
    assert parse_time(posted["requested_at"]) >= before
    got = client.get(f"/tick/{posted['job_id']}").json()
    assert got == {
        "job_id": posted["job_id"],
        "requested_at": posted["requested_at"],
        "dry_run": False,
        "no_ai": True,
        "source": "mcp-agent",
        "status": "pending",
        "started_at": None,
        "finished_at": None,
        "result": None,
        "error": None,
        "path": f"tick_requests/{posted['job_id']}",
    }
    default = client.get(f"/tick/{_post(client)['job_id']}").json()
    assert (default["source"], default["dry_run"], default["no_ai"]) == ("brain-api", False, False)


def test_every_post_queues_a_request_of_its_own(client: TestClient, db: Session) -> None:
    ids = {_post(client, dry_run="true")["job_id"] for _ in range(5)}
    assert len(ids) == 5
    assert tick_queue.counts(db) == {"pending": 5}


def test_job_ids_match_exactly_and_unknown_ones_say_so(client: TestClient) -> None:
    job_id = _post(client)["job_id"]
    # An id of hex digits only has no upper case (about 1 in 280 ids: (10/16)^12): that variant is the id itself.
    for other in [o for o in ("0" * 12, job_id[:6], job_id[1:], job_id + "0", job_id.upper()) if o != job_id]:
        response = client.get(f"/tick/{other}")
        assert response.status_code == 200
        assert response.json() == {"job_id": other, "status": "unknown"}
    assert client.get(f"/tick/{job_id}").json()["status"] == "pending"
    assert client.get("/tick/" + "a" * 64).json()["status"] == "unknown"
    assert client.get("/tick/" + "a" * 65).status_code == 422


@pytest.mark.parametrize("source", ["", "two words", "a/b", "x" * 65, "ünï", "semi;colon", "brain\n"])
def test_an_invalid_source_is_422_and_queues_nothing(client: TestClient, db: Session, source: str) -> None:
    response = client.post("/tick", params={"source": source})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["query", "source"]
    assert tick_queue.counts(db) == {}


def test_every_source_character_allowed_is_accepted(client: TestClient) -> None:
    source = "Brain-cron_2.x" + "y" * 50
    job = client.get(f"/tick/{_post(client, source=source)['job_id']}").json()
    assert job["source"] == source and len(source) == 64


def test_an_unreachable_database_answers_503_not_500(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "postgresql://brain@127.0.0.1:1/brain")
    Vault(settings.vault).scaffold()
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        for response in (client.post("/tick"), client.get("/tick/0123456789ab")):
            assert response.status_code == 503, response.text
            assert response.json()["detail"].startswith("database unavailable: ")  # the app's one mapping of a database outage


def test_the_tick_routes_need_a_token_when_tokens_are_set(tmp_path: Path, database_url: str) -> None:
    settings = make_settings(tmp_path, database_url, tokens=["s3cret"])
    Vault(settings.vault).scaffold()
    with TestClient(create_app(settings)) as client:
        assert client.post("/tick").status_code == 401
        assert client.get("/tick/0123456789ab").status_code == 401
        job = client.post("/tick", headers={"Authorization": "Bearer s3cret"}).json()
        assert client.get(f"/tick/{job['job_id']}", headers={"Authorization": "Bearer s3cret"}).json()["status"] == "pending"


# -- the repository ------------------------------------------------------------


def test_two_drains_never_claim_the_same_request(database_url: str) -> None:
    # A claim that waited for the other drain's locks would fail fast here instead of hanging.
    engine = create_engine(normalise_url(database_url), poolclass=NullPool, connect_args={"options": "-c lock_timeout=2s"})
    first, second = Session(engine), Session(engine)
    try:
        queued = [tick_queue.enqueue(first, dry_run=False, no_ai=i % 2 == 0, source="test") for i in range(3)]
        first.commit()
        claimed = tick_queue.claim_pending(first)  # not committed yet: the rows stay locked
        assert sorted(j.job_id for j in claimed) == sorted(j.job_id for j in queued)
        assert all(j.status == "running" and j.started_at is not None for j in claimed)
        late = tick_queue.enqueue(second, dry_run=True, no_ai=True, source="test")
        second.commit()
        assert [j.job_id for j in tick_queue.claim_pending(second)] == [late.job_id]  # the locked rows are skipped, not waited for
        second.commit()
        first.commit()
        assert tick_queue.claim_pending(second) == []  # claimed rows stay claimed once committed
        assert tick_queue.finish(second, [late.job_id], status="failed", error="boom") == 1
        assert tick_queue.finish(second, [late.job_id], status="completed", result={}) == 0  # finished once
        second.commit()
        assert tick_queue.get(second, late.job_id).status == "failed"
        assert tick_queue.counts(second) == {"running": 3, "failed": 1}
        with pytest.raises(ValueError):
            tick_queue.finish(second, [queued[0].job_id], status="pending")
    finally:
        first.close()
        second.close()
        engine.dispose()


def test_a_pending_request_cannot_be_finished_without_a_claim(db: Session) -> None:
    job = tick_queue.enqueue(db, dry_run=False, no_ai=False)
    assert tick_queue.finish(db, [job.job_id], status="completed", result={"x": 1}) == 0
    assert tick_queue.get(db, job.job_id).status == "pending"
    assert tick_queue.get(db, job.job_id[:-1]) is None
    db.rollback()


# -- the drain -----------------------------------------------------------------


def test_the_drain_runs_one_tick_per_bucket_and_completes_every_request(client: TestClient, settings: Settings, arcs: Vault) -> None:
    full = [_post(client)["job_id"] for _ in range(3)]
    no_ai = [_post(client, no_ai="true", source="mcp-agent")["job_id"] for _ in range(2)]
    dry_no_ai = [_post(client, dry_run="true", no_ai="true")["job_id"]]
    code, summary, stderr = _drain(settings)
    assert code == 0, stderr
    assert (summary["total"], summary["ticks"], summary["ok"], summary["failed"]) == (6, 3, 3, 0)
    assert [(b["flags"], sorted(b["jobs"]), b["status"]) for b in summary["buckets"]] == [
        ("full", sorted(full), "completed"),
        ("--no-ai", sorted(no_ai), "completed"),
        ("--dry-run --no-ai", dry_no_ai, "completed"),
    ]
    assert "drain-summary: total=6 ticks=3 ok=3 failed=0 stuck=0" in stderr.splitlines()

    jobs = {job_id: client.get(f"/tick/{job_id}").json() for job_id in full + no_ai + dry_no_ai}
    for job in jobs.values():
        assert job["status"] == "completed" and job["error"] is None, job
        assert parse_time(job["requested_at"]) <= parse_time(job["started_at"]) <= parse_time(job["finished_at"])
        assert job["result"]["arcs_scanned"] == 3 and job["result"]["stats"]["arcs_scanned"] == 3  # upstream's stats keys
    assert len({json.dumps(jobs[j]["result"], sort_keys=True) for j in full}) == 1  # one tick shared by the bucket
    first_full = jobs[full[0]]["result"]
    assert first_full["dry_run"] is False and first_full["arcs_updated"] == 3 and first_full["index"]["refreshed"] is True
    assert "brain-feed/hot-arcs.md" in first_full["files_written"]
    assert first_full["active_projects"] == ["acme/web", "org1/api"] and sum(first_full["feed_answers"].values()) == 2
    assert jobs[no_ai[0]]["result"]["arcs_updated"] == 0  # the full tick ran first and wrote the heat
    dry = jobs[dry_no_ai[0]]["result"]
    assert dry["dry_run"] is True and dry["files_written"] == [] and dry["feed_answers"] == {}

    code, again, stderr = _drain(settings)
    assert code == 0 and again == {"total": 0, "ticks": 0, "ok": 0, "failed": 0, "buckets": []}
    assert "drain-summary: total=0 ticks=0 ok=0 failed=0 stuck=0" in stderr.splitlines()
    assert {job_id: client.get(f"/tick/{job_id}").json() for job_id in jobs} == jobs  # nothing rerun or rewritten


def test_a_failing_tick_fails_only_its_bucket(client: TestClient, settings: Settings, arcs: Vault) -> None:
    full = _post(client)["job_id"]
    dry = _post(client, dry_run="true")["job_id"]
    # A real failure: a folder where the tick writes hot-arcs.md, so every writing tick fails at
    # that file, while a dry run, which writes nothing, is unaffected.
    (Path(settings.vault) / "brain-feed" / "hot-arcs.md").mkdir()
    code, summary, stderr = _drain(settings)
    assert code == 1, stderr
    assert (summary["total"], summary["ticks"], summary["ok"], summary["failed"]) == (2, 2, 1, 1)
    assert [(b["flags"], b["status"]) for b in summary["buckets"]] == [("full", "failed"), ("--dry-run", "completed")]
    assert "drain-summary: total=2 ticks=2 ok=1 failed=1 stuck=0" in stderr.splitlines()
    failed = client.get(f"/tick/{full}").json()
    assert failed["status"] == "failed" and failed["result"] is None and failed["finished_at"] is not None
    assert failed["error"].startswith("IsADirectoryError: ") and "hot-arcs.md" in failed["error"]
    assert summary["buckets"][0]["error"] == failed["error"]
    completed = client.get(f"/tick/{dry}").json()
    assert completed["status"] == "completed" and completed["result"]["dry_run"] is True and completed["result"]["arcs_scanned"] == 3


def test_the_drain_with_nothing_queued_runs_no_tick(settings: Settings, arcs: Vault) -> None:
    before = {p: arcs.read_text(arcs.rel(p)) for p in arcs.iter_files("clusters")}
    code, summary, stderr = _drain(settings)
    assert code == 0 and (summary["total"], summary["ticks"]) == (0, 0), stderr
    assert {p: arcs.read_text(arcs.rel(p)) for p in arcs.iter_files("clusters")} == before  # no tick touched the arcs


def test_a_request_left_running_by_a_dead_drain_is_claimed_again(tx: Session) -> None:
    """A drain killed outright leaves its claims ``running``; after an hour the next drain takes them over."""
    stale = tick_queue.enqueue(tx, dry_run=False, no_ai=True, source="test")
    fresh = tick_queue.enqueue(tx, dry_run=False, no_ai=True, source="test")
    assert {j.job_id for j in tick_queue.claim_pending(tx)} == {stale.job_id, fresh.job_id}
    tx.execute(text("UPDATE tick_requests SET started_at = now() - interval '2 hours' WHERE job_id = :id"), {"id": stale.job_id})
    again = tick_queue.claim_pending(tx)
    assert [j.job_id for j in again] == [stale.job_id]  # the recent claim is left to its drain
    assert tick_queue.get(tx, stale.job_id).status == "running"
