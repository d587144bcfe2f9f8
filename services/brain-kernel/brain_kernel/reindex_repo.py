"""SQL repository of the index rebuild: clearing entries and reading rows back for comparison.

``brain reindex`` clears the entries table and refills it from the vault in
the caller's transaction (the command commits once, so readers see either
the old index or the new one, never half of it). ``entry_rows`` returns the
rows without their bookkeeping timestamps, which is what a rebuild and an
incremental refresh must agree on.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from brain_kernel.models import Entry

COMPARED_COLUMNS = (
    "id",
    "kind",
    "title",
    "content",
    "project",
    "projects",
    "repo",
    "scope",
    "status",
    "severity",
    "heat",
    "vault_path",
    "occurred_at",
    "metadata",
)


def clear_entries(session: Session) -> int:
    """Delete every entry (the vault-derived part of the index); returns how many."""
    return session.execute(delete(Entry)).rowcount or 0


def delete_entries_updated_before(session: Session, cutoff: dt.datetime) -> int:
    """Delete entries last written before ``cutoff`` (rows a refresh did not rewrite); returns how many."""
    return session.execute(delete(Entry).where(Entry.updated_at < cutoff)).rowcount or 0


def entry_rows(session: Session) -> list[dict[str, Any]]:
    """Every entry as a dict of the compared columns, ordered by id."""
    table = Entry.__table__
    stmt = select(*(table.c[name] for name in COMPARED_COLUMNS)).order_by(table.c.id)
    return [dict(row._mapping) for row in session.execute(stmt)]
