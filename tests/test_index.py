"""The index repository: upserts are idempotent, projects keep their latest activity."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import any_, literal, select
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord, entry_id
from brain_kernel.index import touch_project, upsert_entries
from brain_kernel.models import Entry, Project


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
