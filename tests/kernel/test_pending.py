"""What the search index lags (``brain_kernel.search.pending``): counted by project and scope, cleared by embedding.

Entries are written through the index's upsert, as every writer's rows are;
the embed run (``brain_kernel.search.embed_run.run_embed``) uses a deterministic
embedder of the index column's width (what is embedded is counted here, not
what it means). The count is read from the partial index of pending rows,
so its plan is checked as well as its figures.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import replace

import pytest
from sqlalchemy import event, text
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_kernel.index.entries import touch_project, upsert_entries
from brain_kernel.search import embeddings
from brain_kernel.search.embed_run import run_embed
from brain_kernel.search.embedders import OFFLINE_DIM
from brain_kernel.search.pending import mark_embedded, pending, pending_entries
from tests.support.records import lesson_record, merged_arc_record

NOW = dt.datetime.now(dt.timezone.utc)


RECORDS = [
    lesson_record(1, "api", "org1/api", "Pin the clock in the auth test so it stops flaking.", at=NOW),
    lesson_record(2, "api", "org1/api", "Retry the token refresh once before failing the request.", at=NOW),
    lesson_record(3, "web", "acme/web", "Update the helm chart values for the web frontend.", at=NOW),
    lesson_record(4, None, None, "An unattributed note about flaky auth tests.", at=NOW),
    merged_arc_record("Checkout flow shared by web and billing.", at=NOW),
    # Kinds the search index does not embed are never pending.
    EntryRecord(id="milestone:left/projects/api/BLOCKS.md#1", kind="milestone", vault_path="left/projects/api/BLOCKS.md", content="shipped", project="api"),
]


def _plant(db: Session) -> None:
    upsert_entries(db, RECORDS)
    for key, repo in (("api", "org1/api"), ("web", "acme/web"), ("billing", "acme/billing")):
        touch_project(db, key, repo, at=NOW)
    db.commit()


class _Hashed:
    """Vectors from each text's hash (same text, same vector), as wide as the migrated column."""

    name = "hashed"
    dim = OFFLINE_DIM

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[float(b) - 127.5 for b in hashlib.shake_256(t.encode()).digest(self.dim)] for t in texts]


@pytest.fixture
def offline() -> _Hashed:
    return _Hashed()


def test_pending_counts_by_project_and_scope_and_embedding_clears_it(db: Session, offline: _Hashed) -> None:
    _plant(db)
    assert pending(db) == 5
    assert pending(db, ("api", "org1/api")) == 2
    assert pending(db, ("web", "acme/web")) == 2  # its lesson and the merged arc
    assert pending(db, ("billing", "acme/billing")) == 1  # the merged arc holds billing too
    assert pending(db, ("nobody", None)) == 0
    assert pending(db, within=[("api", "org1/api")]) == 2
    assert pending(db, within=[("api", "org1/api"), ("billing", "acme/billing")]) == 3
    assert pending(db, ("web", "acme/web"), within=[("api", "org1/api")]) == 0  # a project outside the token's scope
    assert pending(db, within=[]) == 0
    assert sorted(r.id for r in pending_entries(db)) == sorted(r.id for r in RECORDS if r.kind != "milestone")

    summary = run_embed(db, offline, only_pending=True)
    db.commit()
    assert (summary.embedded, summary.unchanged) == (5, 0)
    assert pending(db) == 0 and pending(db, ("api", "org1/api")) == 0 and pending_entries(db) == []
    again = run_embed(db, offline, only_pending=True)
    assert (again.entries, again.embedded, again.chunks) == (0, 0, 0)  # nothing pending: nothing read, nothing embedded

    # A changed lesson is pending again (stale: its hash differs), in its project only; a heat change is not.
    upsert_entries(db, [replace(RECORDS[1], content="Retry the token refresh twice."), replace(RECORDS[4], heat=2.0)])
    db.commit()
    assert pending(db) == 1 and pending(db, ("api", "org1/api")) == 1 and pending(db, ("web", "acme/web")) == 0
    summary = run_embed(db, offline, only_pending=True)
    db.commit()
    assert (summary.entries, summary.embedded, summary.by_kind) == (1, 1, {"lesson": 1})
    assert pending(db) == 0


def test_a_row_indexed_again_unchanged_is_not_embedded_again(db: Session, offline: _Hashed) -> None:
    """Its bookkeeping lost (a rebuild's delete and insert), the index still holds its text: marked, not embedded."""
    _plant(db)
    run_embed(db, offline)
    db.commit()
    db.execute(text("UPDATE entries SET embedded_hash = NULL"))
    db.commit()
    assert pending(db) == 5
    summary = run_embed(db, offline, only_pending=True)
    db.commit()
    assert (summary.embedded, summary.unchanged, summary.chunks) == (0, 5, 0)
    assert pending(db) == 0


def test_a_mark_for_text_that_changed_since_leaves_the_entry_pending(db: Session) -> None:
    """The embed step read the old text; a marker rewrote the entry meanwhile: the new text stays pending."""
    _plant(db)
    [old] = [r for r in pending_entries(db) if r.id == RECORDS[0].id]
    upsert_entries(db, [replace(RECORDS[0], content="Pin the clock, and freeze time in the fixture.")])
    from brain_core.chunks import entry_doc

    doc = entry_doc(old)
    assert doc is not None
    assert mark_embedded(db, [(old.id, doc.content_hash)]) == 0
    assert RECORDS[0].id in {r.id for r in pending_entries(db)}


def test_the_count_reads_the_partial_index(db: Session) -> None:
    """The statement ``pending`` runs, explained with its own parameters: a scan of the pending rows' index."""
    _plant(db)
    seen: list[tuple[str, object]] = []

    def capture(_conn: object, _cursor: object, statement: str, parameters: object, _context: object, _many: bool) -> None:
        seen.append((statement, parameters))

    connection = db.connection()
    event.listen(connection, "before_cursor_execute", capture)
    try:
        pending(db, ("api", "org1/api"))
    finally:
        event.remove(connection, "before_cursor_execute", capture)
    [(statement, parameters)] = seen
    db.execute(text("SET LOCAL enable_seqscan = off"))  # a six-row table is read whole by choice; the index must serve it
    plan = "\n".join(row[0] for row in connection.exec_driver_sql(f"EXPLAIN {statement}", parameters))  # type: ignore[arg-type]
    assert "ix_entries_embed_pending" in plan, plan


@pytest.mark.own_database  # the column changes width
def test_a_width_change_embeds_every_entry_again_not_only_the_pending(db: Session, offline: _Hashed) -> None:
    """EMBED_DIM_FORCE_MIGRATE drops the chunks of the old width: the run embeds all, so nothing is left unsearchable."""
    _plant(db)
    run_embed(db, offline)
    db.commit()
    upsert_entries(db, [replace(RECORDS[0], content="Pin the clock, and freeze time in the fixture.")])
    db.commit()
    wider = _Hashed()
    wider.dim = OFFLINE_DIM + 8
    summary = run_embed(db, wider, only_pending=True, force_dim=True)
    db.commit()
    assert (summary.entries, summary.embedded) == (5, 5) and embeddings.column_dimension(db) == OFFLINE_DIM + 8
    assert embeddings.count_chunks(db) == 5 and pending(db) == 0


def test_a_limited_run_takes_the_newest_pending_first(db: Session, offline: _Hashed) -> None:
    """A tick behind a backlog embeds at most its limit, newest first; the rest stay counted and wait."""
    records = [replace(r, occurred_at=NOW - dt.timedelta(days=n)) for n, r in enumerate(RECORDS)]
    upsert_entries(db, records)
    db.commit()
    summary = run_embed(db, offline, only_pending=True, limit=2)
    db.commit()
    assert (summary.entries, summary.embedded) == (2, 2) and pending(db) == 3
    assert {r.id for r in pending_entries(db)} == {r.id for r in records[2:5]}  # the two newest went first
