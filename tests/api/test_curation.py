"""Curation over the real app (ADR 0048): supersede, retract and expire entries; the audit log; scoped tokens.

Markers go in through ``POST /marker``, curation through ``/entries``; the
vault is a real folder and the index a real Postgres. "From the vault alone"
means the index's entries are deleted and ``brain reindex`` rebuilds them.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.orm import Session

from brain_api.app import create_app
from brain_core.vault import frontmatter
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from tests.support.harness import ManualClock, brain, make_settings
from tests.support.planting import arc_session, write_arc
from tests.support.upstream_client import BrainHttp, asgi_sender, fetch_feed

DAY = 86_400


def _post(client: TestClient, type_: str, content: str, headers: dict[str, str] | None = None, **attrs: Any) -> dict[str, Any]:
    r = client.post("/marker", json={"type": type_, "content": content, "attrs": attrs}, headers=headers or {})
    assert r.status_code == 201, r.text
    return r.json()


def _feed(client: TestClient, project: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    r = client.get("/feed", params={"project": project}, headers=headers or {})
    assert r.status_code == 200, r.text
    return r.json()


def _section(feed: dict[str, Any], section: str) -> dict[str, Any] | None:
    return next((e for e in feed["entries"] if e["id"] == section), None)


def _block(client: TestClient, project: str) -> str:
    r = client.get("/feed", params={"project": project, "format": "markdown"})
    assert r.status_code == 200, r.text
    return r.text


def _entry(client: TestClient, entry_id: str, headers: dict[str, str] | None = None) -> Any:
    return client.get(f"/entries/{quote(entry_id, safe='/:')}", headers=headers or {})


def _retract(client: TestClient, entry_id: str, reason: str, headers: dict[str, str] | None = None) -> Any:
    return client.post(f"/entries/{quote(entry_id, safe='/:')}/retract", json={"reason": reason}, headers=headers or {})


def _audit(settings: Settings) -> list[dict[str, Any]]:
    folder = Path(settings.vault) / "audit"
    lines = [line for path in sorted(folder.glob("curation-*.jsonl")) for line in path.read_text(encoding="utf-8").splitlines()]
    return [json.loads(line) for line in lines]


def _reindex_from_the_vault(settings: Settings, db: Session) -> None:
    db.execute(text("DELETE FROM entries"))
    db.commit()
    result = brain(settings, "reindex")
    assert result.exit_code == 0, result.stderr


def test_a_superseded_lesson_leaves_the_feed_and_its_successor_takes_its_place(client, settings: Settings, db: Session) -> None:
    old = _post(client, "lesson", "Retry the deploy three times before paging.", repo="acme/api", title="Deploy retries")
    assert old["entry_id"].startswith("lesson:left/reference/lessons-") and old["ok"] is True  # every earlier field is still there
    assert {"marker_type", "action", "vault_path", "written_bytes", "idempotency_key", "body_hash", "project"} <= set(old)
    lessons = _section(_feed(client, "acme/api"), "lessons")
    assert lessons is not None and lessons["metadata"]["entry_ids"] == [old["entry_id"]]

    new = _post(client, "lesson", "Never retry a deploy: roll back and page.", repo="acme/api", title="Deploy rollback", supersedes=old["entry_id"])
    assert new["supersedes"] == [old["entry_id"]]
    for _ in range(2):  # the same answer before and after the index is rebuilt from the vault alone
        feed = _feed(client, "acme/api")
        lessons = _section(feed, "lessons")
        assert lessons is not None and lessons["metadata"]["entry_ids"] == [new["entry_id"]]
        assert "roll back" in lessons["content"] and "three times" not in lessons["content"]
        block = _block(client, "acme/api")
        assert "roll back" in block and "three times" not in block
        shown = _entry(client, old["entry_id"]).json()
        assert shown["entry"]["state"] == "superseded" and shown["entry"]["superseded_by"] == [new["entry_id"]]
        assert [e["action"] for e in shown["history"]] == ["written", "superseded"]
        assert _entry(client, new["entry_id"]).json()["entry"]["supersedes"] == [old["entry_id"]]
        _reindex_from_the_vault(settings, db)

    records = _audit(settings)
    assert [(r["action"], r["entry_id"], r["superseded_by"]) for r in records] == [("superseded", old["entry_id"], new["entry_id"])]
    # A replay of the same marker supersedes nothing again.
    again = _post(client, "lesson", "Never retry a deploy: roll back and page.", repo="acme/api", title="Deploy rollback", supersedes=old["entry_id"])
    assert again["idempotent_replay"] is True and len(_audit(settings)) == 1


def test_a_retracted_decision_leaves_the_feed_and_stays_retracted_after_a_reindex(client, settings: Settings, db: Session) -> None:
    decision = _post(client, "decision", "Use Postgres for the queue.", repo="acme/api", title="Queue in Postgres")
    adr = frontmatter.parse((Path(settings.vault) / decision["vault_path"]).read_text())
    name = adr.meta["id"]
    assert _section(_feed(client, "acme/api"), "decisions") is not None

    r = _retract(client, name, "Benchmarks showed lock contention; see the queue ADR.")  # a decision answers to ADR-NNNN
    assert r.status_code == 200, r.text
    assert r.json()["entry"]["entry_id"] == decision["entry_id"] and r.json()["entry"]["state"] == "retracted"
    meta = frontmatter.parse((Path(settings.vault) / decision["vault_path"]).read_text()).meta
    assert meta["status"] == "retracted" and meta["retracted_reason"].startswith("Benchmarks") and meta["retracted_by"] == "operator"
    for _ in range(2):
        assert _section(_feed(client, "acme/api"), "decisions") is None
        assert "Queue in Postgres" not in _block(client, "acme/api")
        shown = _entry(client, decision["entry_id"]).json()
        assert shown["entry"]["adr"] == name and shown["entry"]["retracted"]["reason"].startswith("Benchmarks")
        assert shown["history"][-1]["action"] == "retracted" and shown["history"][-1]["by"] == "operator"
        _reindex_from_the_vault(settings, db)

    # A second retraction changes nothing and records nothing.
    assert _retract(client, decision["entry_id"], "again").status_code == 200
    assert [r["action"] for r in _audit(settings)] == ["retracted"]


def test_a_vault_that_cannot_take_the_retraction_is_a_503_and_the_retry_records_it_once(client, settings: Settings) -> None:
    lesson = _post(client, "lesson", "Pin the runner image.", repo="acme/api")
    audit = Path(settings.vault) / "audit"
    audit.mkdir(exist_ok=True)
    audit.rmdir()
    audit.write_text("a file where the audit folder should be\n")
    r = _retract(client, lesson["entry_id"], "The pin blocked security fixes.")
    assert r.status_code == 503 and r.json()["detail"].startswith("vault write failed: "), r.text
    assert _entry(client, lesson["entry_id"]).json()["entry"]["state"] == "live"  # the index rolled back with the request
    audit.unlink()
    again = _retract(client, lesson["entry_id"], "The pin blocked security fixes.")
    assert again.status_code == 200 and again.json()["entry"]["state"] == "retracted"
    assert [(a["action"], a["entry_id"]) for a in _audit(settings)] == [("retracted", lesson["entry_id"])]


def test_a_retraction_appends_to_the_log_and_never_rewrites_it(client, settings: Settings, db: Session) -> None:
    first = _post(client, "lesson", "Pin the base image digest.", repo="acme/api")
    second = _post(client, "lesson", "Cache the wheel folder.", repo="acme/api")
    path = Path(settings.vault) / first["vault_path"]
    before = path.read_bytes()
    r = _retract(client, first["entry_id"], "The digest pin broke security updates.")
    assert r.status_code == 200, r.text
    after = path.read_bytes()
    assert after.startswith(before) and len(after) > len(before)
    lessons = _section(_feed(client, "acme/api"), "lessons")
    assert lessons is not None and lessons["metadata"]["entry_ids"] == [second["entry_id"]]
    _reindex_from_the_vault(settings, db)
    assert _entry(client, first["entry_id"]).json()["entry"]["state"] == "retracted"
    listed = client.get("/entries", params={"project": "acme/api", "state": "retracted"}).json()
    assert [e["entry_id"] for e in listed["entries"]] == [first["entry_id"]]
    assert [e["entry_id"] for e in client.get("/entries", params={"project": "acme/api", "state": "live"}).json()["entries"]] == [second["entry_id"]]
    records = _audit(settings)
    assert len(records) == 1 and records[0]["reason"].startswith("The digest pin") and records[0]["project"] == "acme/api"


def test_an_expired_entry_leaves_the_feed(client, settings: Settings, clock: ManualClock) -> None:
    short = _post(client, "lesson", "The staging cluster is read-only this week.", repo="acme/api", ttl_days=2)
    dated = _post(client, "lesson", "Freeze merges until the release.", repo="acme/api", valid_until="2000-01-01")
    lasting = _post(client, "lesson", "Run the migrations before the deploy.", repo="acme/api")
    lessons = _section(_feed(client, "acme/api"), "lessons")
    assert lessons is not None and set(lessons["metadata"]["entry_ids"]) == {short["entry_id"], lasting["entry_id"]}
    clock.advance(3 * DAY)  # the stored answer expires with its first entry: no need to ask for a fresh one
    lessons = _section(_feed(client, "acme/api"), "lessons")
    assert lessons is not None and lessons["metadata"]["entry_ids"] == [lasting["entry_id"]]
    assert "read-only" not in _block(client, "acme/api")
    shown = _entry(client, short["entry_id"]).json()
    assert shown["entry"]["state"] == "expired" and shown["history"][-1]["action"] == "expired"
    assert _entry(client, dated["entry_id"]).json()["entry"]["state"] == "expired"
    assert _audit(settings) == []  # nothing was done: the clock decided


def test_unknown_ids_and_bad_requests(client) -> None:
    missing = _entry(client, "lesson:left/reference/lessons-2026-01-01.md#0000")
    assert missing.status_code == 404 and missing.json() == {"detail": "entry not found"}
    assert _retract(client, "ADR-9999", "why").status_code == 404
    lesson = _post(client, "lesson", "Something to retract.", repo="acme/api")
    assert _retract(client, lesson["entry_id"], "").status_code == 422
    assert _retract(client, lesson["entry_id"], "x" * 1001).status_code == 422
    assert client.post(f"/entries/{quote(lesson['entry_id'], safe='/:')}/retract", json={}).status_code == 422
    assert client.get("/entries", params={"state": "gone"}).status_code == 422


def test_an_arc_is_not_curated_here_and_the_refusal_reads_as_english(client, settings: Settings, db: Session) -> None:
    write_arc(Vault(settings.vault), [arc_session("s-arc", "api", "acme/api", "Build the importer", hours_ago=2)])
    _reindex_from_the_vault(settings, db)
    [arc] = client.get("/entries", params={"kind": "arc"}).json()["entries"]
    refused = _retract(client, arc["entry_id"], "why")
    assert (refused.status_code, refused.json()) == (422, {"detail": "an arc is not curated here: edit its file"})


# -- scoped tokens -------------------------------------------------------------------------------------------

ALL, API, WEB = "tok-all-0123456789", "tok-api-0123456789", "tok-web-0123456789"


@pytest.fixture
def scoped(tmp_path: Path, database_url: str) -> Iterator[tuple[TestClient, Settings]]:
    settings = make_settings(tmp_path, database_url, tokens=[ALL, f"{API}=org1/api", f"{WEB}=org2/web"])
    Vault(settings.vault).scaffold()
    with TestClient(create_app(settings)) as client:
        yield client, settings


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_scoped_token_cannot_curate_another_projects_entry_nor_tell_it_exists(scoped: tuple[TestClient, Settings]) -> None:
    client, settings = scoped
    theirs = _post(client, "lesson", "Web lesson the api token must not touch.", headers=_as(ALL), repo="org2/web")
    mine = _post(client, "lesson", "Api lesson.", headers=_as(ALL), repo="org1/api")
    missing = "lesson:left/reference/lessons-2026-01-01.md#0000"
    for ref in (theirs["entry_id"], missing):
        got, retracted = _entry(client, ref, _as(API)), _retract(client, ref, "not yours", _as(API))
        assert (got.status_code, got.json()) == (404, {"detail": "entry not found"})
        assert (retracted.status_code, retracted.json()) == (404, {"detail": "entry not found"})
    assert client.get("/entries", params={"project": "org2/web"}, headers=_as(API)).status_code == 403  # as the feed answers
    listed = client.get("/entries", headers=_as(API)).json()  # its one project's
    assert [e["entry_id"] for e in listed["entries"]] == [mine["entry_id"]]

    # A marker cannot supersede another project's entry either: written, and the other entry stays live.
    new = _post(client, "lesson", "Api lesson naming web's.", headers=_as(API), supersedes=[theirs["entry_id"]])
    assert "supersedes" not in new
    assert _entry(client, theirs["entry_id"], _as(ALL)).json()["entry"]["state"] == "live"

    done = _retract(client, mine["entry_id"], "wrong", _as(API))
    assert done.status_code == 200 and done.json()["entry"]["retracted"]["by"].startswith("t")
    records = _audit(settings)
    assert len(records) == 1 and records[0]["by"] == done.json()["entry"]["retracted"]["by"] and API not in json.dumps(records)


def test_the_global_feed_reads_as_before_for_an_upstream_client(client, settings: Settings) -> None:
    """An upstream client's reading of the global feed: the same buckets and fields; a superseded lesson leaves the
    keeper's lessons file at the next tick and its successor takes its place; only metadata gained keys."""
    old = _post(client, "lesson", "Tag releases from the main branch only.", repo="acme/api")
    assert brain(settings, "tick", "--no-ai").exit_code == 0
    http = BrainHttp("http://kernel", asgi_sender(client))
    before = {e.id: e for e in fetch_feed(http)}
    assert "main branch only" in before["lessons"].content
    _post(client, "lesson", "Tag releases from the release branch.", repo="acme/api", supersedes=[old["entry_id"]])
    assert brain(settings, "tick", "--no-ai").exit_code == 0
    after = {e.id: e for e in fetch_feed(http)}
    assert set(after) == set(before)
    assert "release branch" in after["lessons"].content and "main branch only" not in after["lessons"].content
    body = client.get("/feed").json()
    assert set(body) >= {"hot_arcs", "inject_blocks", "entries", "generated_at", "hash", "entry_count", "vault_root"}
    for bucket in ("hot_arcs", "inject_blocks", "entries"):
        assert all(set(e) == {"id", "title", "content", "priority", "ttl", "severity", "metadata"} for e in body[bucket])


@pytest.mark.slow
def test_concurrent_retractions_of_one_entry_record_it_once(served) -> None:
    """Eight retractions at once over a 4-worker server: the entry's lock lets one write, the others find it done."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.support.harness import HTTP

    base, settings = served.base, served.settings
    lesson = HTTP.post(f"{base}/marker", json={"type": "lesson", "content": "Retract me once.", "attrs": {"repo": "acme/api"}}, timeout=60).json()
    url = f"{base}/entries/{quote(lesson['entry_id'], safe='/:')}/retract"
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda n: HTTP.post(url, json={"reason": f"reason {n}"}, timeout=60), range(8)))
    assert [r.status_code for r in answers] == [200] * 8
    assert len({r.json()["entry"]["retracted"]["reason"] for r in answers}) == 1
    log = (Path(settings.vault) / lesson["vault_path"]).read_text()
    assert log.count('"kind": "curation"') == 1 and len(_audit(settings)) == 1


@pytest.mark.slow
def test_markers_superseding_entries_of_one_shared_log_at_once_are_all_written_and_audited(served) -> None:
    """Six markers at once over a 4-worker server, superseding one lesson and two others of the same day's log: each
    writes its lesson beside the others' uncommitted ones, so a curation that re-wrote the whole log deadlocked."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.support.harness import HTTP

    base, settings = served.base, served.settings

    def post(content: str, **attrs: str) -> object:
        return HTTP.post(f"{base}/marker", json={"type": "lesson", "content": content, "attrs": {"repo": "acme/api", **attrs}}, timeout=60)

    olds = [post(f"Old rule {n}: retry the deploy {n} times.").json()["entry_id"] for n in range(3)]
    targets = [olds[0], olds[0], olds[0], olds[1], olds[2], olds[1]]
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda n: post(f"New rule {n}: roll back instead.", supersedes=targets[n]), range(6)))
    assert [r.status_code for r in answers] == [201] * 6, [r.text for r in answers]
    audited = [(line["entry_id"], line["superseded_by"]) for line in _audit(settings) if line["action"] == "superseded"]
    assert sorted(audited) == sorted(zip(targets, (r.json()["entry_id"] for r in answers), strict=True))
    for old in olds:
        entry = HTTP.get(f"{base}/entries/{quote(old, safe='/:')}", timeout=60).json()["entry"]
        assert entry["state"] == "superseded" and len(entry["superseded_by"]) == targets.count(old), entry


@pytest.mark.own_database  # the vector column takes the offline model's width
def test_search_leaves_out_a_superseded_or_retracted_entry_and_marks_an_expired_one(client, settings: Settings, db: Session) -> None:
    from brain_kernel.search.embed_run import run_embed
    from brain_kernel.search.embedders import embedder_for

    old = _post(client, "lesson", "Retry the deploy three times before paging the on-call.", repo="acme/api")
    new = _post(client, "lesson", "Never retry a deploy: roll back and page the on-call.", repo="acme/api", supersedes=old["entry_id"])
    wrong = _post(client, "lesson", "Deploys on Friday need the on-call's approval.", repo="acme/api")
    dated = _post(client, "lesson", "Deploys are frozen until the release ships.", repo="acme/api", valid_until="2000-01-01")
    assert _retract(client, wrong["entry_id"], "not our rule").status_code == 200
    run_embed(db, embedder_for(settings))
    db.commit()
    for mode in ("hybrid", "vector", "words"):
        found = client.post("/search", json={"query": "deploy on-call", "project": "acme/api", "mode": mode, "limit": 10}).json()["results"]
        ids = [r["metadata"].get("entry_id") for r in found]
        assert new["entry_id"] in ids and old["entry_id"] not in ids and wrong["entry_id"] not in ids, (mode, ids)
        [expired] = [r for r in found if r["metadata"]["entry_id"] == dated["entry_id"]]
        assert expired["metadata"]["expired"] is True
        assert not any(r["metadata"].get("expired") for r in found if r["metadata"]["entry_id"] != dated["entry_id"])


# -- retracting a successor (ADR 0060) -------------------------------------------------------------------------


def _states(client: TestClient, *ids: str) -> list[str]:
    return [_entry(client, i).json()["entry"]["state"] for i in ids]


def test_retracting_a_successor_reinstates_what_it_superseded(client, settings: Settings, db: Session) -> None:
    old = _post(client, "lesson", "Retry the deploy three times before paging.", repo="acme/api", title="Deploy retries")
    new = _post(client, "lesson", "Never retry a deploy: roll back and page.", repo="acme/api", title="Deploy rollback", supersedes=old["entry_id"])
    assert _states(client, old["entry_id"], new["entry_id"]) == ["superseded", "live"]
    log = Path(settings.vault) / old["vault_path"]

    r = _retract(client, new["entry_id"], "Rollbacks lose the migration; retrying was right.")
    assert r.status_code == 200, r.text
    written = log.read_bytes()
    for _ in range(2):  # the same states before and after the index is rebuilt from the vault alone
        assert _states(client, old["entry_id"], new["entry_id"]) == ["live", "retracted"]
        lessons = _section(_feed(client, "acme/api"), "lessons")
        assert lessons is not None and lessons["metadata"]["entry_ids"] == [old["entry_id"]]
        shown = _entry(client, old["entry_id"]).json()
        assert shown["entry"]["superseded_by"] == [] and shown["entry"]["status"] is None
        assert [e["action"] for e in shown["history"]] == ["written", "superseded", "reinstated"]
        assert shown["history"][1]["superseded_by"] == [new["entry_id"]]
        assert shown["history"][2]["retracted_successor"] == new["entry_id"] and shown["history"][2]["by"] == "operator"
        _reindex_from_the_vault(settings, db)

    expected = [("superseded", old["entry_id"]), ("retracted", new["entry_id"]), ("reinstated", old["entry_id"])]
    assert [(a["action"], a["entry_id"]) for a in _audit(settings)] == expected
    assert _audit(settings)[2]["retracted_successor"] == new["entry_id"]
    # A retry revives nothing twice and writes nothing.
    assert _retract(client, new["entry_id"], "Rollbacks lose the migration; retrying was right.").status_code == 200
    assert log.read_bytes() == written and len(_audit(settings)) == 3
    assert written.count(b'"action": "reinstated"') == 1 and written.count(b'"action": "retracted"') == 1


def test_a_decision_keeps_its_status_while_superseded_and_another_successor_keeps_it_superseded(client, settings: Settings, db: Session) -> None:
    old = _post(client, "decision", "Use Postgres for the queue.", repo="acme/api", title="Queue in Postgres", status="accepted")
    path = Path(settings.vault) / old["vault_path"]
    adr = frontmatter.parse(path.read_text()).meta["id"]
    first = _post(client, "decision", "Use Redis streams for the queue.", repo="acme/api", title="Queue in Redis", supersedes=adr)
    second = _post(client, "lesson", "The queue moved off Postgres.", repo="acme/api", supersedes=[old["entry_id"]])
    meta = frontmatter.parse(path.read_text()).meta
    assert meta["status"] == "superseded" and meta["status_before_superseded"] == "accepted"
    first_adr = frontmatter.parse((Path(settings.vault) / first["vault_path"]).read_text()).meta["id"]
    assert meta["superseded_by"] == [first_adr, second["entry_id"]]

    assert _retract(client, first["entry_id"], "Redis was not approved.").status_code == 200
    for _ in range(2):  # still superseded by the lesson: only the retracted successor leaves the list
        shown = _entry(client, old["entry_id"]).json()["entry"]
        assert shown["state"] == "superseded" and shown["superseded_by"] == [second["entry_id"]]
        _reindex_from_the_vault(settings, db)
    assert frontmatter.parse(path.read_text()).meta["status_before_superseded"] == "accepted"

    assert _retract(client, second["entry_id"], "Nothing moved after all.").status_code == 200
    for _ in range(2):
        shown = _entry(client, old["entry_id"]).json()
        assert shown["entry"]["state"] == "live" and shown["entry"]["status"] == "accepted"
        assert shown["history"][-1]["action"] == "reinstated" and shown["history"][-1]["retracted_successor"] == second["entry_id"]
        assert _section(_feed(client, "acme/api"), "decisions") is not None
        _reindex_from_the_vault(settings, db)
    meta = frontmatter.parse(path.read_text()).meta
    assert meta["status"] == "accepted" and "status_before_superseded" not in meta and "superseded_by" not in meta
    assert meta["reinstated_after"] == second["entry_id"] and meta["reinstated_by"] == "operator"
    actions = [(a["action"], a["entry_id"], a.get("retracted_successor")) for a in _audit(settings)][2:]
    assert actions == [
        ("retracted", first["entry_id"], None),
        ("successor_retracted", old["entry_id"], first_adr),
        ("retracted", second["entry_id"], None),
        ("reinstated", old["entry_id"], second["entry_id"]),
    ]


def test_a_retraction_that_failed_after_its_vault_writes_is_retried_without_writing_twice(client, settings: Settings) -> None:
    old = _post(client, "lesson", "Pin the runner image.", repo="acme/api")
    new = _post(client, "lesson", "Float the runner image.", repo="acme/api", supersedes=old["entry_id"])
    audit = Path(settings.vault) / "audit"
    moved = audit.with_name("audit-kept")
    audit.rename(moved)
    audit.write_text("a file where the audit folder should be\n")
    r = _retract(client, new["entry_id"], "Floating broke the build.")
    assert r.status_code == 503, r.text
    assert _states(client, old["entry_id"], new["entry_id"]) == ["superseded", "live"]  # the index rolled back
    audit.unlink()
    moved.rename(audit)
    again = _retract(client, new["entry_id"], "Floating broke the build.")
    assert again.status_code == 200 and _states(client, old["entry_id"], new["entry_id"]) == ["live", "retracted"]
    log = (Path(settings.vault) / old["vault_path"]).read_text()
    assert log.count('"action": "retracted"') == 1 and log.count('"action": "reinstated"') == 1
    assert [a["action"] for a in _audit(settings)] == ["superseded", "retracted", "reinstated"]


# -- expire early (ADR 0060) -----------------------------------------------------------------------------------


def _expire(client: TestClient, entry_id: str, reason: str, headers: dict[str, str] | None = None, **body: Any) -> Any:
    return client.post(f"/entries/{quote(entry_id, safe='/:')}/expire", json={"reason": reason, **body}, headers=headers or {})


def test_an_entry_expired_early_leaves_the_feed_stays_expired_after_a_reindex_and_a_retry_changes_nothing(
    client, settings: Settings, db: Session, clock: ManualClock
) -> None:
    lesson = _post(client, "lesson", "The staging cluster is read-only this week.", repo="acme/api", ttl_days=30)
    signal = _post(client, "signal", "Disk full on build-3.", repo="acme/api", severity="warning")
    kept = _post(client, "lesson", "Run the migrations before the deploy.", repo="acme/api")
    log, signal_file = Path(settings.vault) / lesson["vault_path"], Path(settings.vault) / signal["vault_path"]
    for entry in (lesson, signal):
        before = clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        r = _expire(client, entry["entry_id"], "The freeze ended early.")
        after = clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        assert r.status_code == 200, r.text
        # the request's moment, to the second: the clock read before it or after it (a second may turn between them)
        assert r.json()["entry"]["state"] == "expired" and r.json()["entry"]["valid_until"] in {before, after}
    written = log.read_bytes(), signal_file.read_bytes()
    assert frontmatter.parse(signal_file.read_text()).meta["expired_reason"] == "The freeze ended early."
    for _ in range(2):
        lessons = _section(_feed(client, "acme/api"), "lessons")
        assert lessons is not None and lessons["metadata"]["entry_ids"] == [kept["entry_id"]]
        assert _section(_feed(client, "acme/api"), "signals") is None
        for entry in (lesson, signal):
            shown = _entry(client, entry["entry_id"]).json()
            assert shown["entry"]["state"] == "expired"
            last = shown["history"][-1]
            assert (last["action"], last["by"], last["reason"]) == ("expired", "operator", "The freeze ended early.")
        _reindex_from_the_vault(settings, db)

    clock.advance(60)
    for entry in (lesson, signal):  # a retry, a minute later: already expired, nothing written
        again = _expire(client, entry["entry_id"], "The freeze ended early.")
        assert again.status_code == 200 and again.json()["entry"]["state"] == "expired"
    assert (log.read_bytes(), signal_file.read_bytes()) == written
    records = _audit(settings)
    assert [(a["action"], a["entry_id"]) for a in records] == [("expired", lesson["entry_id"]), ("expired", signal["entry_id"])]
    assert records[0]["valid_until_before"] > records[0]["valid_until"] and "valid_until_before" not in records[1]


def test_an_early_expiry_never_extends_an_entry(client, settings: Settings, clock: ManualClock) -> None:
    lesson = _post(client, "lesson", "Merges are frozen.", repo="acme/api", ttl_days=2)
    until = _entry(client, lesson["entry_id"]).json()["entry"]["valid_until"]
    later = _expire(client, lesson["entry_id"], "later", at="2099-01-01")
    assert later.status_code == 422 and "never extends" in later.json()["detail"][0]["msg"]
    assert _expire(client, lesson["entry_id"], "same", at=until).status_code == 200  # already due then: nothing to write
    bad = _expire(client, lesson["entry_id"], "bad", at="next week")
    assert bad.status_code == 422 and "ISO 8601" in bad.json()["detail"][0]["msg"]
    assert _expire(client, lesson["entry_id"], "").status_code == 422 and _expire(client, lesson["entry_id"], "x" * 1001).status_code == 422
    assert _audit(settings) == []

    tomorrow = (clock() + dt.timedelta(days=1)).strftime("%Y-%m-%d")
    r = _expire(client, lesson["entry_id"], "The release moved up.", at=tomorrow)  # through that day
    assert r.status_code == 200 and r.json()["entry"]["state"] == "live"
    assert r.json()["entry"]["valid_until"] == (clock() + dt.timedelta(days=2)).strftime("%Y-%m-%dT00:00:00Z")
    assert r.json()["history"][-1]["action"] == "expires" and r.json()["history"][-1]["reason"] == "The release moved up."
    clock.advance(2 * DAY)
    assert _entry(client, lesson["entry_id"]).json()["entry"]["state"] == "expired"
    assert [a["action"] for a in _audit(settings)] == ["expired"]
    assert _expire(client, "lesson:left/reference/lessons-2026-01-01.md#0000", "gone").status_code == 404


def test_the_last_date_is_never_and_a_moment_before_the_write_is_refused(client, settings: Settings) -> None:
    # 9999-12-31 ("never", in many tools) has no next midnight: through that day, never a 500
    forever = _post(client, "lesson", "Keep the pin.", repo="acme/api", valid_until="9999-12-31")
    assert _entry(client, forever["entry_id"]).json()["entry"]["valid_until"] == "9999-12-31T23:59:59Z"
    lesson = _post(client, "lesson", "The runners are slow.", repo="acme/api")
    far = _expire(client, lesson["entry_id"], "someday", at="9999-12-31")
    assert far.status_code == 200 and far.json()["entry"]["valid_until"] == "9999-12-31T23:59:59Z", far.text
    written = _entry(client, lesson["entry_id"]).json()["entry"]["occurred_at"]
    for at in ("2020-01-01", "0001-01-01"):  # expired years before it existed: refused, nothing written
        early = _expire(client, lesson["entry_id"], "old", at=at)
        assert early.status_code == 422 and f"before the entry was written ({written})" in early.json()["detail"][0]["msg"], early.text
    assert [a["action"] for a in _audit(settings)] == ["expired"]  # the one accepted


def test_a_scoped_token_cannot_expire_another_projects_entry(scoped: tuple[TestClient, Settings]) -> None:
    client, settings = scoped
    theirs = _post(client, "lesson", "Web lesson.", headers=_as(ALL), repo="org2/web")
    mine = _post(client, "lesson", "Api lesson.", headers=_as(ALL), repo="org1/api")
    refused = _expire(client, theirs["entry_id"], "not yours", _as(API))
    assert (refused.status_code, refused.json()) == (404, {"detail": "entry not found"})
    assert _entry(client, theirs["entry_id"], _as(ALL)).json()["entry"]["state"] == "live"
    done = _expire(client, mine["entry_id"], "done", _as(API))
    assert done.status_code == 200 and done.json()["entry"]["state"] == "expired"
    assert [(a["action"], a["entry_id"]) for a in _audit(settings)] == [("expired", mine["entry_id"])]


def test_an_expiry_that_failed_after_its_vault_write_is_retried_without_writing_twice(client, settings: Settings, clock: ManualClock) -> None:
    lesson = _post(client, "lesson", "Pin the runner image.", repo="acme/api")
    audit = Path(settings.vault) / "audit"
    audit.mkdir(exist_ok=True)
    moved = audit.with_name("audit-kept")
    audit.rename(moved)
    audit.write_text("a file where the audit folder should be\n")
    r = _expire(client, lesson["entry_id"], "The pin is gone.", at="2099-01-01")
    assert r.status_code == 503, r.text
    assert _entry(client, lesson["entry_id"]).json()["entry"]["valid_until"] is None  # the index rolled back
    audit.unlink()
    moved.rename(audit)
    clock.advance(60)
    again = _expire(client, lesson["entry_id"], "Retried.", at="2098-01-01")
    assert again.status_code == 200 and again.json()["entry"]["valid_until"] == "2099-01-02T00:00:00Z"  # the first attempt's record stands
    assert (Path(settings.vault) / lesson["vault_path"]).read_text().count('"action": "expired"') == 1
    assert [(a["action"], a["reason"]) for a in _audit(settings)] == [("expired", "The pin is gone.")]
