"""What the search index lags behind the entries: counted on every search, embedded by the tick (ADR 0046).

An entry row carries ``embed_hash``, the hash of the text the search index
embeds for it (``brain_core.chunks.entry_doc``), written with the row by the
index's one path (ADR 0038), and ``embedded_hash``, the hash the search index
held for the entry's key when the embed step last looked. Where the two
differ the entry is pending (``embed_pending``, a generated column): written
since, or never embedded. The partial index ``ix_entries_embed_pending``
holds only those rows, so ``pending`` and ``pending_entries`` read as many
rows as are pending, whatever the index holds; in the steady state (every
entry embedded) that is none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, or_, select, text
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from brain_core.entries import EntryRecord
from brain_kernel.db.models import Entry
from brain_kernel.feed.feed_repo import entry_records, key_owned_sql, member

# The partial index's predicate: a stored generated column (revision 0018), so the planner knows how few rows hold it.
PENDING = Entry.embed_pending


def _belongs(of: Any, project: tuple[str, str | None] | None, within: Sequence[tuple[str, str | None]] | None) -> list[ColumnElement[bool]]:
    """The conditions a search with these filters puts on its rows (the feed's membership rule), over ``of``'s columns."""
    where = []
    if project is not None:
        key, repo = project
        where.append(member(key, repo, key_owned_sql(key, repo), of=of))
    if within is not None:
        where.append(or_(*(member(key, repo, key_owned_sql(key, repo), of=of) for key, repo in within)))
    return where


def pending(session: Session, project: tuple[str, str | None] | None = None, within: Sequence[tuple[str, str | None]] | None = None) -> int:
    """How many embeddable entries the search index does not hold as they are now (not embedded yet, or changed since).

    ``project`` (key, repo): only that project's entries, by the rule a
    project search filters its chunks with; ``within``: only entries of these
    projects (a restricted token's scope; empty = none). One statement over
    the partial index of pending rows.
    """
    if within is not None and not within:
        return 0
    if project is None and within is None:
        return int(session.execute(select(func.count()).select_from(Entry).where(PENDING)).scalar_one())
    # The pending rows first, then the membership rule over them: left to itself the planner reads a large
    # project's every row through the projects index to find its few pending ones.
    rows = select(Entry.project, Entry.projects, Entry.repo).where(PENDING).cte("pending_rows").prefix_with("MATERIALIZED")
    stmt = select(func.count()).select_from(rows).where(*_belongs(rows.c, project, within))
    return int(session.execute(stmt).scalar_one())


def pending_entries(session: Session, *, limit: int | None = None) -> list[EntryRecord]:
    """The pending entries as records (what the embed step embeds, or finds the index already holds).

    Newest first, so with ``limit`` a tick behind a large backlog still makes
    the lessons just written searchable.
    """
    newest = (Entry.occurred_at.desc().nulls_last(), Entry.id)
    return entry_records(session, PENDING, Entry.embed_hash.is_not(None), order_by=newest, limit=limit)


_MARK = (
    "UPDATE entries e SET embedded_hash = v.held FROM unnest(CAST(:ids AS text[]), CAST(:held AS varchar[])) AS v(id, held) "
    "WHERE e.id = v.id AND e.embedded_hash IS DISTINCT FROM v.held AND e.embed_hash IS NOT DISTINCT FROM v.held"
)
_MARK_BATCH = 10_000


def mark_embedded(session: Session, held: Sequence[tuple[str, str]]) -> int:
    """Record that the search index holds each entry's text as hashed: (entry id, hash) pairs; returns rows changed.

    A row whose text changed since (its ``embed_hash`` is another) stays
    pending, so a marker written while the step embedded is embedded next.
    Only ``embedded_hash`` changes: the feed's change log and the project
    counts compare the columns an answer reads, so nothing is invalidated.
    """
    changed = 0
    for start in range(0, len(held), _MARK_BATCH):
        batch = held[start : start + _MARK_BATCH]
        result = session.execute(text(_MARK), {"ids": [i for i, _ in batch], "held": [h for _, h in batch]})
        changed += result.rowcount or 0  # type: ignore[attr-defined]
    return changed
