"""An entry filed under another project (a backfill, a merge) is searched there, with no new vector.

The index path writes the entry again with its new project; the embed run
finds its text held and only its chunks' project columns and metadata
stale, and rewrites those. Real pieces: the index path (``upsert_entries``),
the embed run, the project-filtered search, a counting embedder whose
vectors the test chooses.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import text
from sqlalchemy.orm import Session

from brain_kernel.index.entries import touch_project, upsert_entries
from brain_kernel.search import embeddings
from brain_kernel.search.embed_run import run_embed
from brain_kernel.search.pending import pending
from tests.support.records import lesson_record, merged_arc_record

NOW = dt.datetime.now(dt.timezone.utc)
DIM = 256
LESSON = "Pin the clock in the auth test so it stops flaking."
ARC = "Checkout flow shared by web and billing; flaky auth test fixed on the way."


class Counting:
    """Every text at one unit vector; counts the texts it was asked for."""

    name = "counting"
    dim = DIM

    def __init__(self) -> None:
        self.texts = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.texts += len(texts)
        return [[1.0, *([0.0] * (DIM - 1))] for _ in texts]


def _keys(db: Session, project: tuple[str, str | None]) -> list[str]:
    hits, _ = embeddings.search(db, [1.0, *([0.0] * (DIM - 1))], project=project, limit=10)
    return sorted(h.key for h in hits)


def test_an_entry_filed_under_another_project_is_found_there_and_not_where_it_was(db: Session) -> None:
    lesson = lesson_record(1, "api", "org1/api", LESSON, at=NOW)
    arc = merged_arc_record(ARC, at=NOW)
    upsert_entries(db, [lesson, arc])
    for key, repo in (("api", "org1/api"), ("web", "acme/web"), ("billing", "acme/billing"), ("shop", "acme/shop")):
        touch_project(db, key, repo, at=NOW)
    embedder = Counting()
    first = run_embed(db, embedder, only_pending=True)
    db.commit()
    assert first.embedded == 2 and embedder.texts == 2 and pending(db) == 0
    assert _keys(db, ("api", "org1/api")) == [lesson.id] and _keys(db, ("billing", None)) == ["arc-merged"]

    # The backfill files the lesson under web; a merge's correction takes billing off the arc for shop.
    moved = dataclasses.replace(lesson, project="web", projects=("web",), repo="acme/web")
    remerged = dataclasses.replace(arc, projects=("web", "shop"), vault_path="clusters/2026-11-30/arc-merged.md")
    upsert_entries(db, [moved, remerged])
    db.commit()
    assert pending(db) == 2  # not searchable as they are now

    second = run_embed(db, embedder, only_pending=True)
    db.commit()
    assert (second.embedded, second.relabelled, second.unchanged) == (0, 2, 0) and embedder.texts == 2  # no new vector
    assert pending(db) == 0
    assert _keys(db, ("api", "org1/api")) == [] and _keys(db, ("billing", None)) == []
    assert _keys(db, ("web", "acme/web")) == sorted([lesson.id, "arc-merged"]) and _keys(db, ("shop", None)) == ["arc-merged"]
    [[path, project]] = db.execute(text("SELECT metadata->>'path', metadata->>'project' FROM content_embeddings WHERE key = 'arc-merged'")).all()
    assert path == "clusters/2026-11-30/arc-merged.md" and project == "web"  # a result links to where the arc is now
    [[projects]] = db.execute(text("SELECT metadata->'projects' FROM content_embeddings WHERE key = :k"), {"k": lesson.id}).all()
    assert projects == ["web"]

    assert run_embed(db, embedder).unchanged == 2 and embedder.texts == 2  # a full run finds nothing to do


def test_a_full_run_relabels_chunks_a_lost_bookkeeping_left_stale(db: Session) -> None:
    """``brain embed`` compares every entry's labels too: it repairs chunks filed under a project they left."""
    lesson = lesson_record(1, "api", "org1/api", LESSON, at=NOW)
    upsert_entries(db, [lesson])
    touch_project(db, "api", "org1/api", at=NOW)
    touch_project(db, "web", "acme/web", at=NOW)
    embedder = Counting()
    run_embed(db, embedder)
    upsert_entries(db, [dataclasses.replace(lesson, project="web", projects=("web",), repo="acme/web")])
    db.execute(text("UPDATE entries SET embedded_hash = embed_hash"))  # the pending mark lost (a restored database)
    db.commit()
    assert pending(db) == 0 and _keys(db, ("api", "org1/api")) == [lesson.id]
    summary = run_embed(db, embedder)
    db.commit()
    assert summary.relabelled == 1 and embedder.texts == 1
    assert _keys(db, ("web", "acme/web")) == [lesson.id] and _keys(db, ("api", "org1/api")) == []


def test_a_lesson_written_before_its_session_was_known_is_found_in_the_sessions_project(client, db: Session) -> None:
    """A marker whose session registers later is attributed in place; its chunks follow at the next embed run."""
    posted = client.post("/marker", json={"type": "lesson", "content": LESSON, "attrs": {"session_id": "s-late"}})
    assert posted.status_code == 201 and posted.json()["project"] is None, posted.text
    embedder = Counting()
    run_embed(db, embedder, only_pending=True)
    db.commit()
    assert pending(db) == 0 and _keys(db, ("api", "org1/api")) == []
    assert client.post("/sessions", json={"session_id": "s-late", "project": "api", "repo": "org1/api", "cwd": "/tmp"}).status_code == 200
    assert pending(db) == 1  # filed under no project in the search index, until the run
    summary = run_embed(db, embedder, only_pending=True)
    db.commit()
    assert (summary.relabelled, embedder.texts) == (1, 1)
    [key] = _keys(db, ("api", "org1/api"))
    assert key.startswith("lesson:")
