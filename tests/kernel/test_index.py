"""The index repository: upserts are idempotent, projects keep their latest activity."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from sqlalchemy import any_, create_engine, literal, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from brain_core.entries import EntryRecord, entry_id
from brain_kernel.db.engine import normalise_url
from brain_kernel.db.models import Entry, Project
from brain_kernel.index.entries import delete_entries_at, touch_project, upsert_entries


def projects_with_key(db: Session, key: str) -> list[Project]:
    """Project rows whose short key or an alias equals ``key``."""
    stmt = select(Project).where((Project.key == key) | (literal(key) == any_(Project.aliases))).order_by(Project.id)
    return list(db.scalars(stmt))


def test_upsert_replaces_an_entry_by_id(tx: Session) -> None:
    rid = entry_id("arc", "clusters/2026-11-28/c1.md")
    upsert_entries(tx, [EntryRecord(id=rid, kind="arc", vault_path="clusters/2026-11-28/c1.md", title="a", project="api", repo="org1/api")])
    upsert_entries(tx, [EntryRecord(id=rid, kind="arc", vault_path="clusters/2026-11-28/c1.md", title="b", project="api", repo="org1/api", heat=3.5)])
    tx.commit()
    rows = tx.scalars(select(Entry)).all()
    assert [(r.title, r.heat, r.projects) for r in rows] == [("b", 3.5, ["api"])]


def test_touch_project_keeps_the_latest_activity_and_finds_shared_keys(tx: Session) -> None:
    early, late = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc), dt.datetime(2026, 11, 20, tzinfo=dt.timezone.utc)
    touch_project(tx, "api", "org1/api", at=late)
    touch_project(tx, "api", "org1/api", at=early)
    touch_project(tx, "api", "org2/api", at=early)
    tx.commit()
    found = projects_with_key(tx, "api")
    assert [(p.id, p.last_active) for p in found] == [("org1/api", late), ("org2/api", early)]


def test_touching_a_project_without_aliases_keeps_its_aliases(tx: Session) -> None:
    touch_project(tx, "billing", "acme/billing", aliases=["bill"])
    touch_project(tx, "billing", "acme/billing", at=dt.datetime(2026, 11, 2, tzinfo=dt.timezone.utc))
    tx.commit()
    assert [p.aliases for p in projects_with_key(tx, "bill")] == [["bill"]]


def test_deleting_a_files_rows_keeps_more_ids_than_a_statement_has_parameters(tx: Session) -> None:
    """A batch of shared logs can hold over 65,535 entries (a year's lesson logs): the kept ids are one parameter."""
    path = "left/reference/lessons-2026-11-28.md"
    kept, stale = entry_id("lesson", path, "id:kept"), entry_id("lesson", path, "id:stale")
    upsert_entries(tx, [EntryRecord(id=i, kind="lesson", vault_path=path, content=i, project="api") for i in (kept, stale)])
    keep = [kept, *(f"id-{n}" for n in range(70_000))]
    assert delete_entries_at(tx, [path], keep_ids=keep) == 1
    assert tx.scalars(select(Entry.id)).all() == [kept]


def _batch(n: int, *, title: str = "t", heat: float = 0.0) -> list[EntryRecord]:
    at = dt.datetime(2026, 11, 28, 12, tzinfo=dt.timezone.utc)
    return [
        EntryRecord(
            id=entry_id("lesson", "left/reference/lessons-2026-11-28.md", f"id:{i}"),
            kind="lesson",
            vault_path="left/reference/lessons-2026-11-28.md",
            title=f"{title} {i}",
            content=f"lesson {i}",
            project="api",
            repo="org1/api",
            heat=heat,
            occurred_at=at,
            meta={"n": i, "tags": ["a"]},
        )
        for i in range(n)
    ]


def test_many_rows_are_merged_through_copy_with_the_small_upserts_rule(tx: Session) -> None:
    """A batch of STAGED_ROWS or more goes through COPY and one merge: same rows as the small path, unchanged rows untouched."""
    from brain_kernel.index.entries import STAGED_ROWS, entry_rows

    many = _batch(STAGED_ROWS + 50)
    upsert_entries(tx, many)
    staged = entry_rows(tx)
    for start in range(0, len(many), STAGED_ROWS - 1):  # the same rows through the small path, in another table state
        tx.execute(Entry.__table__.delete())
        upsert_entries(tx, many[start : start + STAGED_ROWS - 1])
    tx.execute(Entry.__table__.delete())
    for start in range(0, len(many), STAGED_ROWS - 1):
        upsert_entries(tx, many[start : start + STAGED_ROWS - 1])
    assert entry_rows(tx) == staged

    versions = dict(tx.execute(text("SELECT id, ctid::text FROM entries")).all())  # a rewritten row moves
    changed = _batch(STAGED_ROWS + 50)
    changed[3] = dataclasses.replace(changed[3], title="renamed", meta={"n": 3, "tags": ["b"]})
    upsert_entries(tx, [*changed, changed[3]])  # an id twice: its last row
    after = dict(tx.execute(text("SELECT id, ctid::text FROM entries")).all())  # a rewritten row moves
    assert [i for i in after if after[i] != versions[i]] == [changed[3].id]
    row = tx.execute(select(Entry.title, Entry.meta).where(Entry.id == changed[3].id)).one()
    assert (row.title, row.meta) == ("renamed", {"n": 3, "tags": ["b"]})


def test_a_touch_that_changes_nothing_writes_nothing_and_takes_no_row_lock(db: Session, database_url: str) -> None:
    """Markers to one project in one second must not queue on its row: only a touch that moves it locks it."""
    at = dt.datetime(2026, 11, 20, 12, tzinfo=dt.timezone.utc)
    touch_project(db, "api", "org1/api", at=at, root="/src/api", aliases=["a"])
    db.commit()
    stamp = db.execute(text("SELECT xmin::text FROM projects WHERE id = 'org1/api'")).scalar_one()
    db.commit()
    engine = create_engine(normalise_url(database_url), poolclass=NullPool)
    probe = "SELECT 1 FROM projects WHERE id = 'org1/api' FOR UPDATE NOWAIT"
    try:
        with engine.connect() as other:
            for same in ({"at": at}, {"at": at - dt.timedelta(days=1)}, {}, {"root": "/src/api"}, {"aliases": ["a"]}):
                touch_project(db, "api", "org1/api", **same)
                other.execute(text(probe))  # not locked by the open transaction
                other.rollback()
            db.commit()
            assert db.execute(text("SELECT xmin::text FROM projects WHERE id = 'org1/api'")).scalar_one() == stamp
            for moved in ({"at": at + dt.timedelta(seconds=1)}, {"root": "/src/api2"}, {"aliases": ["b"]}):
                touch_project(db, "api", "org1/api", **moved)
                with pytest.raises(OperationalError):
                    other.execute(text(probe))
                other.rollback()
                db.commit()
    finally:
        engine.dispose()
    (row,) = projects_with_key(db, "api")
    assert (row.last_active, row.root, row.aliases) == (at + dt.timedelta(seconds=1), "/src/api2", ["b"])
