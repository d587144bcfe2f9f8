"""Stored project feed answers: served while exact, never after a write they did not see.

Two layers. Through the app: a second read is the stored answer, a write to
one project drops that project's answer only, a fleet-wide write drops them
all, and a long random sequence of real writes never lets a stored answer
differ from a fresh computation (``Cache-Control: no-cache``). Against the
repository with two real connections: the visibility rules themselves (a
write committed while an answer was being read, a writer still open at the
read point, the clock window, collection, TRUNCATE).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from brain_core.markers import Attribution, parse_request
from brain_core.vault import frontmatter
from brain_core.vault.logs import log_file_header, render_log_entry
from brain_kernel.db.engine import normalise_url
from brain_kernel.feed import snapshots
from brain_kernel.feed.snapshots import SnapshotKey
from brain_kernel.index.changes import sync_changes
from brain_kernel.index.entries import touch_project
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from tests.support.harness import ManualClock, Served
from tests.support.planting import PROJECTS, post, run_cli, stable, token

HEADER = "X-Brain-Feed"


def _read(client, ref: str, *, fresh: bool = False, **params: object) -> tuple[dict, str]:
    headers = {"Cache-Control": "no-cache"} if fresh else {}
    r = client.get("/feed", params={"project": ref, **params}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json(), r.headers[HEADER]


def test_a_second_read_is_the_stored_answer(client, planted) -> None:
    first, source = _read(client, "acme/web", top_n=3)
    assert source == "live"
    second, source = _read(client, "acme/web", top_n=3)
    assert source == "stored"
    assert stable(second) == stable(first)
    assert second["generated_at"] >= first["generated_at"]
    fresh, source = _read(client, "acme/web", fresh=True, top_n=3)
    assert source == "live" and stable(fresh) == stable(first)
    # Each reference and parameter set is its own answer.
    assert _read(client, "web", top_n=3)[1] == "live"
    assert _read(client, "acme/web", top_n=1)[1] == "live"
    assert _read(client, "acme/web", top_n=1)[1] == "stored"


def test_an_answer_stored_in_another_format_is_never_served(client, planted, db: Session) -> None:
    """An older version's stored answer (its blocks in another order, say) was served after an upgrade until a tick
    or a write: the answer's format is part of the key."""
    from sqlalchemy import text

    _read(client, "acme/web")
    assert _read(client, "acme/web")[1] == "stored"
    db.execute(text("UPDATE feed_snapshots SET vault_root = split_part(vault_root, '#', 1), body = '{\"old\": true}'"))  # as stored then
    db.commit()
    answer, source = _read(client, "acme/web")
    assert source == "live" and "old" not in answer


def test_the_keeper_tick_stores_every_active_projects_answer(client, planted, settings: Settings) -> None:
    post(client, "lesson", f"Fresh {token()}.", repo="acme/web")  # acme/web's stored answer is now stale
    summary = run_cli(settings, "tick", "--no-ai")
    answers = summary["feed_answers"]
    assert answers["computed"] >= 1 and answers["computed"] + answers["stored"] == len(PROJECTS) and answers["skipped"] == 0, answers
    for pid in PROJECTS:
        served, source = _read(client, pid)
        assert source == "stored", pid
        assert stable(served) == stable(_read(client, pid, fresh=True)[0]), pid
    dry = run_cli(settings, "tick", "--no-ai", "--dry-run")
    assert dry["feed_answers"] == {}


def test_unknown_and_ambiguous_references_are_never_stored(client, planted, db: Session) -> None:
    db.execute(text("delete from feed_snapshots"))  # the ones the keeper tick stored
    db.commit()
    for _ in range(2):
        assert _read(client, "nobody-here")[1] == "live"
        assert client.get("/feed", params={"project": "api"}).status_code == 409
    assert db.execute(text("select count(*) from feed_snapshots")).scalar() == 0


@pytest.mark.own_database
def test_a_database_that_refuses_the_store_still_answers(client, planted, db: Session, caplog: pytest.LogCaptureFixture) -> None:
    db.execute(text("create function refuse() returns trigger language plpgsql as $$ begin raise exception 'read-only here'; end $$"))
    db.execute(text("create trigger refuse before insert on feed_snapshots for each row execute function refuse()"))
    db.commit()
    expected = stable(_read(client, "acme/web", fresh=True, top_n=3)[0])
    for _ in range(2):
        feed, source = _read(client, "acme/web", top_n=3)
        assert source == "live" and stable(feed) == expected
    assert "project feed answer not stored: read-only here" in caplog.text


def test_a_write_to_one_project_drops_only_that_projects_answers(client, planted) -> None:
    for ref in ("acme/web", "web", "acme/billing", "org1/api"):
        _read(client, ref)
    t = token()
    post(client, "lesson", f"Fresh lesson {t}.", repo="acme/web")
    for ref in ("acme/web", "web"):
        feed, source = _read(client, ref)
        assert source == "live" and t in json.dumps(feed), ref
    for ref in ("acme/billing", "org1/api"):
        feed, source = _read(client, ref)
        assert source == "stored" and t not in json.dumps(feed), ref


def test_a_fleet_signal_drops_every_answer(client, planted) -> None:
    for ref in PROJECTS:
        _read(client, ref)
    t = token()
    post(client, "signal", f"Fleet-wide {t}.", title=f"Fleet {t}", severity="critical", scope="fleet")
    for ref in PROJECTS:
        feed, source = _read(client, ref)
        assert source == "live", ref
        entry = next(e for e in feed["entries"] if t in e["title"])
        assert entry["metadata"]["scope"] == "fleet"


def test_a_second_repository_with_the_same_key_drops_the_short_reference(client, planted, db: Session) -> None:
    assert _read(client, "web")[0]["project"]["repo"] == "acme/web"
    assert _read(client, "web")[1] == "stored"
    touch_project(db, "web", "other/web", root="/home/op/dev/other-web")
    db.commit()
    r = client.get("/feed", params={"project": "web"})
    assert r.status_code == 409, r.text
    assert set(r.json()["candidates"]) == {"acme/web", "other/web"}


def test_a_mentioned_key_that_gains_a_root_drops_the_short_reference(client, planted, db: Session) -> None:
    touch_project(db, "web", None)  # a marker named "web" without a repo: only a mention
    db.commit()
    assert _read(client, "web")[0]["project"]["repo"] == "acme/web"
    assert _read(client, "web")[1] == "stored"
    touch_project(db, "web", None, root="/srv/web")  # now a second, repo-less project called web
    db.commit()
    assert client.get("/feed", params={"project": "web"}).status_code == 409


def test_an_index_refresh_drops_only_the_answers_whose_rows_changed(client, planted, settings: Settings, db: Session) -> None:
    vault = Vault(settings.vault)
    web_arc = db.execute(text("select vault_path from entries where kind = 'arc' and repo = 'acme/web' order by vault_path limit 1")).scalar()
    for ref in ("acme/web", "acme/billing"):
        _read(client, ref)
    sync_changes(db, vault, [web_arc])  # the file is unchanged: its rows are rewritten as they were
    db.commit()
    assert [_read(client, ref)[1] for ref in ("acme/web", "acme/billing")] == ["stored", "stored"]
    t = token()
    vault.write_atomic(web_arc, frontmatter.update(vault.read_text(web_arc), {"summary": f"Now about {t}"}))
    sync_changes(db, vault, [web_arc])
    db.commit()
    feed, source = _read(client, "acme/web")
    assert source == "live" and t in json.dumps(feed)
    assert _read(client, "acme/billing")[1] == "stored"


def test_a_stored_answer_expires_when_its_oldest_lesson_leaves_the_window(client, planted, settings: Settings, db: Session, clock: ManualClock) -> None:
    vault = Vault(settings.vault)
    t = token()
    at = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1) + dt.timedelta(seconds=3)
    rel = f"left/reference/lessons-{at.date().isoformat()}.md"
    req = parse_request("lesson", f"Soon out of the window {t}.", {"repo": "acme/web"}, max_chars=4096)
    vault.append(rel, render_log_entry("lesson", req, Attribution("web", "acme/web"), marker_id=uuid.uuid4().hex, at=at), header=log_file_header("lesson", rel))
    sync_changes(db, vault, [rel])
    db.commit()
    feed, source = _read(client, "acme/web", lesson_days=1)
    assert source == "live" and t in json.dumps(feed)
    assert _read(client, "acme/web", lesson_days=1)[1] == "stored"
    clock.advance(4)
    feed, source = _read(client, "acme/web", lesson_days=1)
    assert source == "live" and t not in json.dumps(feed)


def _mutations(client, settings: Settings, db: Session, rng: random.Random) -> list:
    vault = Vault(settings.vault)
    attrs = {pid: a for pid, (a, _) in PROJECTS.items()}

    def marker() -> str:
        pid = rng.choice(list(PROJECTS))
        kind = rng.choice(("lesson", "decision", "milestone", "signal"))
        extra = {"title": f"T {token()}"} if kind in ("decision", "signal") else {}
        post(client, kind, f"Random {kind} {token()}.", **attrs[pid], **extra)
        return f"{kind} for {pid}"

    def fleet_signal() -> str:
        post(client, "signal", f"Fleet {token()}.", title=f"Fleet {token()}", scope="fleet")
        return "fleet signal"

    def unattributed() -> str:
        post(client, "lesson", f"Nobody's {token()}.")
        return "unattributed lesson"

    def reheat() -> str:
        arc = db.execute(text("select id from entries where kind = 'arc' order by random() limit 1")).scalar()
        db.execute(text("update entries set heat = :h where id = :id"), {"h": rng.uniform(0, 5), "id": arc})
        db.commit()
        return f"reheat {arc}"

    def resolve_signal() -> str:
        sig = db.execute(text("select id from entries where kind = 'signal' order by random() limit 1")).scalar()
        db.execute(text("update entries set status = 'resolved' where id = :id"), {"id": sig})
        db.commit()
        return f"resolve {sig}"

    def forget() -> str:
        row = db.execute(text("select id from entries where kind in ('lesson', 'decision', 'milestone') order by random() limit 1")).scalar()
        db.execute(text("delete from entries where id = :id"), {"id": row})
        db.commit()
        return f"delete {row}"

    def inject() -> str:
        target = rng.choice(("all", "acme/web", "infra", "tools/cli"))
        rel = f"brain-feed/inject/r{uuid.uuid4().hex[:8]}.md"
        vault.write_atomic(rel, frontmatter.render({"id": rel, "title": f"Inject {token()}", "target": target}, "Body.\n"))
        sync_changes(db, vault, [rel])
        db.commit()
        return f"inject for {target}"

    def new_alias() -> str:
        pid = rng.choice([p for p in PROJECTS if "/" in p])
        key, repo = PROJECTS[pid][1]
        touch_project(db, key, repo, aliases=[f"alias{rng.randrange(1000)}"])
        db.commit()
        return f"alias for {pid}"

    def tick() -> str:
        run_cli(settings, "tick", "--no-ai")
        return "keeper tick"

    def rewrite_unchanged() -> str:
        path = db.execute(text("select vault_path from entries order by random() limit 1")).scalar()
        sync_changes(db, vault, [path])
        db.commit()
        return f"refresh {path}"

    return [marker, marker, marker, fleet_signal, unattributed, reheat, resolve_signal, forget, inject, new_alias, tick, rewrite_unchanged]


def test_stored_answers_always_equal_a_fresh_computation(client, planted, settings: Settings, db: Session) -> None:
    """Every kind of real write, each twice, in a seeded random order; after each, every reference's served answer equals a fresh one.

    A schedule rather than 60 independent picks: each kind is certain to run
    (and to run after another kind has stored answers), for 40% of the reads.
    """
    rng = random.Random(20261129)
    refs = [*PROJECTS, "web", "cli", "billing"]
    mutations = _mutations(client, settings, db, rng)
    schedule = mutations * 2
    rng.shuffle(schedule)
    stored = 0
    for step, mutation in enumerate(schedule):
        done = mutation()
        for ref in refs:
            served, source = _read(client, ref)
            stored += source == "stored"
            fresh, _ = _read(client, ref, fresh=True)
            assert stable(served) == stable(fresh), f"step {step} ({done}): {ref} served a stale answer"
    assert stored > 0, "no answer was ever served from storage: the test would prove nothing"


# -- the visibility rules, against the repository ---------------------------------


@pytest.fixture
def sessions(database_url: str) -> Iterator[tuple[Session, Session]]:
    """Two sessions on separate connections: a reader and a writer."""
    engine = create_engine(normalise_url(database_url))
    reader, writer = Session(engine), Session(engine)
    try:
        yield reader, writer
    finally:
        reader.close()
        writer.close()
        engine.dispose()


KEY = SnapshotKey("acme/web", 10, 14, "/vault")
LATER = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)


def _write(session: Session, *projects: str, kind: str = "lesson", scope: str = "project") -> None:
    session.execute(
        text("insert into entries (id, kind, vault_path, projects, scope) values (:id, :kind, 'x.md', :p, :scope)"),
        {"id": uuid.uuid4().hex, "kind": kind, "p": list(projects), "scope": scope},
    )


def _store(session: Session, point: snapshots.ReadPoint, *, valid_until: dt.datetime | None = LATER, body: str = '{"a":1}') -> None:
    snapshots.store(session, KEY, point=point, scopes={"web", "acme/web"}, valid_until=valid_until, body=body)
    session.commit()


def _fetch(session: Session, now: dt.datetime | None = None) -> str | None:
    body, _ = snapshots.fetch(session, KEY, now=now or dt.datetime.now(dt.timezone.utc))
    session.commit()
    return body


def test_an_answer_is_served_until_a_write_it_did_not_see(sessions) -> None:
    reader, writer = sessions
    _store(reader, snapshots.read_point(reader))
    assert _fetch(reader) == '{"a":1}'
    _write(writer, "billing")  # another project: still exact
    writer.commit()
    assert _fetch(reader) == '{"a":1}'
    _write(writer, "web")
    writer.commit()
    assert _fetch(reader) is None


def test_a_write_committed_while_the_answer_was_read_drops_it(sessions) -> None:
    reader, writer = sessions
    point = snapshots.read_point(reader)
    reader.commit()
    _write(writer, "web")
    writer.commit()  # committed after the read point, before the answer is stored
    _store(reader, point)
    assert _fetch(reader) is None
    _store(reader, snapshots.read_point(reader))  # read after the write: exact
    assert _fetch(reader) == '{"a":1}'


def test_a_writer_open_at_the_read_point_drops_the_answer_when_it_commits(sessions) -> None:
    reader, writer = sessions
    _write(writer, "web")  # open, not committed
    _store(reader, snapshots.read_point(reader))
    assert _fetch(reader) == '{"a":1}'  # the write is not visible to anyone yet
    writer.commit()
    assert _fetch(reader) is None


def test_a_rolled_back_write_changes_nothing(sessions) -> None:
    reader, writer = sessions
    _store(reader, snapshots.read_point(reader))
    _write(writer, "web")
    writer.rollback()
    assert _fetch(reader) == '{"a":1}'


def test_fleet_rows_and_truncate_drop_every_answer(sessions) -> None:
    reader, writer = sessions
    _store(reader, snapshots.read_point(reader))
    _write(writer, "x", kind="signal", scope="fleet")
    writer.commit()
    assert _fetch(reader) is None
    _store(reader, snapshots.read_point(reader))
    _write(writer, kind="inject", scope="fleet")
    writer.commit()
    assert _fetch(reader) is None
    _store(reader, snapshots.read_point(reader))
    writer.execute(text("truncate entries"))
    writer.commit()
    assert _fetch(reader) is None


def test_storing_relaxes_durability_for_its_own_transaction_only(sessions) -> None:
    reader, _ = sessions
    _store(reader, snapshots.read_point(reader))
    assert reader.execute(text("show synchronous_commit")).scalar() == "on"


def test_an_answer_past_its_window_is_not_served(sessions) -> None:
    reader, _ = sessions
    _store(reader, snapshots.read_point(reader), valid_until=dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1))
    assert _fetch(reader) is None
    _store(reader, snapshots.read_point(reader), valid_until=None)  # no windowed row: valid until a write
    assert _fetch(reader) == '{"a":1}'
    _store(reader, snapshots.read_point(reader), valid_until=LATER)
    assert _fetch(reader, now=LATER - dt.timedelta(seconds=1)) == '{"a":1}'
    assert _fetch(reader, now=LATER) is None  # the caller's clock decides, not the database's


def test_collection_keeps_recent_answers_and_drops_what_the_horizon_passed(sessions) -> None:
    reader, writer = sessions
    old_point = snapshots.read_point(reader)
    reader.commit()
    _write(writer, "web")
    writer.commit()
    _store(reader, snapshots.read_point(reader))
    assert _fetch(reader) == '{"a":1}'
    assert snapshots.collect(writer) == 0  # the horizon moves to the previous collection's point
    writer.commit()
    assert _fetch(reader) == '{"a":1}'
    assert writer.execute(text("select count(*) from feed_changes")).scalar() > 0
    assert snapshots.collect(writer) == 1  # now past the answer's read point and the write
    writer.commit()
    assert writer.execute(text("select count(*) from feed_changes")).scalar() == 0
    assert writer.execute(text("select count(*) from feed_snapshots")).scalar() == 0
    writer.commit()
    assert _fetch(reader) is None
    # An answer read before the horizon (and stored after it) is never served:
    # the change that made it stale is no longer in the log.
    _store(reader, old_point)
    assert _fetch(reader) is None
    _store(reader, snapshots.read_point(reader))
    assert _fetch(reader) == '{"a":1}'


def test_rewriting_a_row_unchanged_invalidates_nothing(sessions) -> None:
    reader, writer = sessions
    _write(writer, "web")
    writer.commit()
    _store(reader, snapshots.read_point(reader))
    writer.execute(text("update entries set updated_at = now() + interval '1 second'"))  # what a refresh does to unchanged rows
    writer.commit()
    assert _fetch(reader) == '{"a":1}'
    writer.execute(text("update entries set heat = heat + 1"))
    writer.commit()
    assert _fetch(reader) is None


# -- read-your-writes across worker processes ------------------------------------


@pytest.mark.slow
def test_every_write_is_in_the_next_read_across_workers(served: Served) -> None:
    """8 clients on 4 workers each post a lesson and read the feed at once, 15 times over.

    Reads and writes of the same projects interleave freely, so stored answers
    are read, invalidated and recomputed concurrently; every read that starts
    after a client's post returned must hold that post, and every answer
    served must be one a fresh computation gives.
    """
    base = served.base
    refs = ["acme/web", "acme/billing"]
    with httpx.Client(base_url=base, timeout=60) as warmup:
        for ref in refs:
            warmup.post("/marker", json={"type": "lesson", "content": f"First {token()}.", "attrs": {"repo": ref}}).raise_for_status()

    def client_loop(n: int) -> list[str]:
        problems: list[str] = []
        ref = refs[n % 2]
        with httpx.Client(base_url=base, timeout=60) as c:
            for i in range(15):
                t = token()
                c.post("/marker", json={"type": "lesson", "content": f"Lesson {t}.", "attrs": {"repo": ref}}).raise_for_status()
                r = c.get("/feed", params={"project": ref})
                r.raise_for_status()
                if t not in r.text:
                    problems.append(f"client {n} round {i}: {r.headers['X-Brain-Feed']} answer lacks {t}")
        return problems

    with ThreadPoolExecutor(8) as pool:
        problems = [p for result in pool.map(client_loop, range(8)) for p in result]
    assert not problems, problems[:5]
    with httpx.Client(base_url=base, timeout=60) as c:
        for ref in refs:
            served = c.get("/feed", params={"project": ref})
            fresh = c.get("/feed", params={"project": ref}, headers={"Cache-Control": "no-cache"})
            assert stable(served.json()) == stable(fresh.json())
