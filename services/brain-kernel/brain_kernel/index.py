"""SQL repository of the index: entries, projects, sessions, learned roots.

All SQL about those tables lives here; services and jobs call these functions
with a session and never commit (the entry point owns the transaction).
Writes are upserts keyed by the stable ids of ``brain_core.entries``, so a
job can rerun safely.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterable
from typing import Any

from sqlalchemy import any_, case, delete, func, literal, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_kernel.models import Entry, Project


def _row(record: EntryRecord) -> dict[str, object]:
    return {
        "id": record.id,
        "kind": record.kind,
        "title": record.title,
        "content": record.content,
        "project": record.project,
        "projects": list(record.projects),
        "repo": record.repo,
        "scope": record.scope,
        "status": record.status,
        "severity": record.severity,
        "heat": record.heat,
        "vault_path": record.vault_path,
        "occurred_at": record.occurred_at,
        "metadata": record.meta,
    }


@functools.cache
def _upsert_entries_stmt() -> Any:
    """The entry upsert, built once: executed with a list of rows, SQLAlchemy batches the VALUES."""
    stmt = insert(Entry.__table__)
    update = {c.name: stmt.excluded[c.name] for c in Entry.__table__.columns if c.name not in ("id", "created_at", "updated_at")}
    update["updated_at"] = func.now()
    return stmt.on_conflict_do_update(index_elements=["id"], set_=update)


def upsert_entries(session: Session, records: Iterable[EntryRecord]) -> int:
    """Insert or replace entries by id; returns how many were written."""
    rows = [_row(r) for r in records]
    if not rows:
        return 0
    for start in range(0, len(rows), 1000):
        session.execute(_upsert_entries_stmt(), rows[start : start + 1000])
    return len(rows)


def delete_entries_at(session: Session, vault_paths: Iterable[str], *, keep_ids: Iterable[str] = ()) -> int:
    """Remove the entries of the given vault files, except ``keep_ids`` (used by incremental refresh)."""
    paths = list(vault_paths)
    if not paths:
        return 0
    stmt = delete(Entry).where(Entry.vault_path.in_(paths))
    keep = list(keep_ids)
    if keep:
        stmt = stmt.where(Entry.id.not_in(keep))
    return session.execute(stmt).rowcount or 0


@functools.cache
def _touch_project_stmt() -> Any:
    """The project upsert, built once (statement building costs more than running it)."""
    table = Project.__table__
    stmt = insert(table)
    excluded = stmt.excluded
    return stmt.on_conflict_do_update(
        index_elements=["id"],
        set_={
            "last_active": func.greatest(table.c.last_active, excluded.last_active),
            "root": func.coalesce(excluded.root, table.c.root),
            # no aliases given keeps the known ones
            "aliases": case((func.cardinality(excluded.aliases) == 0, table.c.aliases), else_=excluded.aliases),
            "updated_at": func.now(),
        },
    )


def touch_project(
    session: Session,
    key: str,
    repo: str | None,
    *,
    at: dt.datetime | None = None,
    root: str | None = None,
    aliases: Iterable[str] = (),
) -> None:
    """Record a project (id = repo slug, else key) and move its last activity forward."""
    values = {
        "id": repo or key,
        "key": key,
        "repo": repo,
        "root": root,
        "aliases": sorted(set(aliases)),
        "last_active": at,
    }
    session.execute(_touch_project_stmt(), values)


def projects_with_key(session: Session, key: str) -> list[Project]:
    """Projects whose short key or an alias equals ``key`` (more than one = ambiguous)."""
    stmt = select(Project).where((Project.key == key) | (literal(key) == any_(Project.aliases))).order_by(Project.id)
    return list(session.scalars(stmt))
