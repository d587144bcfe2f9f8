"""Embedding runs: the index's arcs, lessons, decisions and signals into the search index, with their projects.

Every embeddable entry (``brain_core.chunks.entry_doc``) is compared with
what the search index holds by content hash, in the database (not a state
file in the vault): only new and changed entries are embedded again, so a
rerun embeds nothing. ``brain embed`` runs it over every entry; ``--prune``
drops the chunks of entries the index no longer holds (merged arcs, deleted
files); ``--force-all`` re-embeds everything. Never commits: the caller does,
once.

``embed_pending`` is the same run over only the entries the pending index
lists (``brain_kernel.search.pending``), in a transaction of its own: every
tick ends with it (ADR 0046), and a process that writes markers runs it
a moment after each burst (``embed_follow``, ADR 0067), so a lesson is
searchable within seconds, and an embeddings endpoint that is down leaves the
write done and the entries pending for the next pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from brain_core.chunks import EMBEDDED_KINDS, PRODUCERS, EmbeddingDoc, entry_doc
from brain_core.jsonable import SORTED_KEYS, JobSummary
from brain_core.progress import SILENT, Progress
from brain_kernel.db.engine import read_session_factory, session_factory, unit_of_work
from brain_kernel.feed import snapshots
from brain_kernel.feed.feed_repo import entries_of_kinds
from brain_kernel.search import embeddings
from brain_kernel.search.embedders import Embedder, embedder_for
from brain_kernel.search.follower import Follower
from brain_kernel.search.pending import mark_embedded, pending, pending_entries
from brain_kernel.settings import Settings

BATCH = 256
# Entries one tick embeds at most; the rest wait for the next tick. The offline model embedded 1,027 chunks in
# 56 to 137 s on two busy cores: about a minute or two per tick at most, not hours behind a new index.
TICK_EMBED_LIMIT = 1_000
# Entries one follower pass embeds at most (a Stop's burst; about 0.1 s with the offline model on a free core), so
# the embed lock is held briefly; it goes on while more wait. 100 drained a burst faster for the same cost to the
# writes (docs/performance.md).
FOLLOW_LIMIT = 25
# Passes in a row a follower finds the lock held before it leaves its entries to the next write or tick.
FOLLOW_SKIPS = 120
# How long the tick waits for a run another process holds (a follower's pass takes well under a second; a
# ``brain embed`` over everything takes minutes, and then the tick leaves it the work).
TICK_LOCK_WAIT_S = 30.0
# One embed run at a time: two would replace the same keys' chunks together (and embed them twice).
_EMBED_LOCK = 0x0A6B3130
_LOCK_POLL_S = 0.05

log = logging.getLogger("brain.embed")


@dataclass
class EmbedSummary(JobSummary):
    """What a run did."""

    entries: int = 0
    embedded: int = 0
    relabelled: int = 0
    unchanged: int = 0
    chunks: int = 0
    pruned: int = 0
    seconds: float = 0.0
    by_kind: dict[str, int] = field(default_factory=dict, metadata=SORTED_KEYS)

    def as_dict(self) -> dict[str, Any]:
        """The JSON summary the command prints: the fields, ``seconds`` rounded, then the rate."""
        rate = round(self.chunks / self.seconds, 1) if self.seconds > 0 else None
        return {**super().as_dict(), "seconds": round(self.seconds, 2), "chunks_per_s": rate}


def run_embed(
    session: Session,
    embedder: Embedder,
    *,
    force_all: bool = False,
    prune: bool = False,
    force_dim: bool = False,
    only_pending: bool = False,
    limit: int | None = None,
    progress: Progress = SILENT,
) -> EmbedSummary:
    """Embed what changed since the last run (everything with ``force_all``); no commit.

    ``only_pending``: the entries the pending index lists (``brain_kernel.search.pending``),
    not every entry: the tick's step, one indexed read when nothing changed;
    ``limit``: at most that many of them, newest first.
    Either way each entry looked at is marked as held, so it leaves the
    pending count (a full run also repairs that bookkeeping).
    """
    started = time.perf_counter()
    summary = EmbedSummary()
    session.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _EMBED_LOCK})
    if force_dim and not force_all and _width_changes(session, embedder):
        # The first store drops every chunk of the old width: all entries are embedded again, not only the changed ones.
        force_all, only_pending = True, False
    records = pending_entries(session, limit=limit) if only_pending else entries_of_kinds(session, EMBEDDED_KINDS)
    looked = [(record.id, doc) for record in records if (doc := entry_doc(record)) is not None]
    docs = [doc for _, doc in looked]
    summary.entries = len(docs)
    by_producer: dict[str, list[EmbeddingDoc]] = {}
    for doc in {(d.producer, d.key): d for d in docs}.values():
        by_producer.setdefault(doc.producer, []).append(doc)
    todo: list[EmbeddingDoc] = []
    moved: list[EmbeddingDoc] = []  # the same text under other labels: a backfill, a merge, a move (ADR 0068)
    for producer, group in by_producer.items():
        stored = {} if force_all else embeddings.stored_state(session, producer, [d.key for d in group])
        for doc in group:
            held = stored.get(doc.key)
            if held is None or held.content_hash != doc.content_hash or held.copies > 1:
                todo.append(doc)
            elif held.labels != doc.labels:
                moved.append(doc)
            else:
                summary.unchanged += 1
    summary.relabelled = embeddings.relabel(session, moved)
    if todo:  # the first batch settles the column's dimension before any bulk work
        summary.chunks += embeddings.store_docs(session, embedder, todo[:BATCH], force_dim=force_dim)
    if len(todo) > BATCH:  # bulk_load counts the table: not for a tick's few entries
        with embeddings.bulk_load(session, rows=len(todo) - BATCH):
            for start in range(BATCH, len(todo), BATCH):
                summary.chunks += embeddings.store_docs(session, embedder, todo[start : start + BATCH], force_dim=force_dim)
                progress.step(min(start + BATCH, len(todo)), len(todo))
    summary.embedded = len(todo)
    for doc in todo:
        summary.by_kind[doc.kind] = summary.by_kind.get(doc.kind, 0) + 1
    # A lesson's vector groups it with its repeats in its project's feed (ADR 0048): the stored answers go.
    embedded_lessons = {(d.producer, d.key) for d in todo if d.kind == "lesson"}
    snapshots.touch(session, [entry_id for entry_id, doc in looked if (doc.producer, doc.key) in embedded_lessons])
    # Every entry looked at is held now, by its key (two entries of one key: the index holds one of them, as before).
    mark_embedded(session, [(entry_id, doc.index_hash) for entry_id, doc in looked])
    if prune:
        for producer in PRODUCERS.values():
            keep = [d.key for d in by_producer.get(producer, [])]
            summary.pruned += embeddings.prune(session, producer, keep)["deleted"]
    summary.seconds = time.perf_counter() - started
    return summary


def _width_changes(session: Session, embedder: Embedder) -> bool:
    """Whether the index holds chunks of another width than the embedder makes (a store would drop them)."""
    current = embeddings.column_dimension(session)
    return current is not None and current != embedder.dim and embeddings.count_chunks(session) > 0


def _take_lock(session: Session, wait_s: float) -> bool:
    """The embed lock for this transaction, waiting up to ``wait_s`` seconds for another run to finish.

    Polled rather than waited on with ``lock_timeout``: a timed-out wait aborts
    the transaction, and the caller still counts the pending rows in it.
    """
    deadline = time.monotonic() + wait_s
    while not session.execute(text("SELECT pg_try_advisory_xact_lock(:id)"), {"id": _EMBED_LOCK}).scalar_one():
        if time.monotonic() >= deadline:
            return False
        time.sleep(_LOCK_POLL_S)
    return True


def embed_pending(
    engine: Engine,
    settings: Settings,
    *,
    waiting: int | None = None,
    limit: int | None = TICK_EMBED_LIMIT,
    embedder: Embedder | None = None,
    lock_wait_s: float = 0.0,
    progress: Progress = SILENT,
) -> dict[str, Any]:
    """The pending entries embedded in a transaction of their own (the tick's step, a follower's pass); never raises.

    ``waiting``: the pending count the caller read in its own transaction;
    0 skips the step's connection (a tick over an unchanged vault pays only
    that count). ``limit``: at most that many entries per run, newest first
    (``TICK_EMBED_LIMIT`` for a tick), so a backlog (a new index, a long
    outage) is worked off over several runs instead of holding one for hours.

    Returns what the tick summary reports: ``ok``, ``embedded``,
    ``relabelled`` and ``unchanged`` entries, ``chunks``, ``pending`` (entries still waiting:
    written meanwhile, or all of them when the step failed), ``ms``, and on
    failure ``error`` (the endpoint down, a dimension refused): the tick
    stands, and the next one retries. While another run holds the lock
    (``brain embed``, a tick or a follower beside this one) the step waits
    ``lock_wait_s`` for it, then leaves it the work (``skipped``).
    """
    started = time.perf_counter()
    report: dict[str, Any] = {"ok": True}
    if waiting == 0:
        return {**report, "embedded": 0, "relabelled": 0, "unchanged": 0, "chunks": 0, "pending": 0, "ms": round((time.perf_counter() - started) * 1000, 1)}
    try:
        with unit_of_work(session_factory(engine)) as session:
            if not _take_lock(session, lock_wait_s):
                report["skipped"] = "another embed run holds the lock"
            else:
                done = run_embed(
                    session,
                    embedder or embedder_for(settings),
                    only_pending=True,
                    limit=limit,
                    force_dim=settings.embed_dim_force_migrate,
                    progress=progress,
                )
                report.update(embedded=done.embedded, relabelled=done.relabelled, unchanged=done.unchanged, chunks=done.chunks)
            report["pending"] = pending(session)  # in the same transaction: a connection costs more than the count
    except Exception as exc:  # the writes have committed; the entries stay pending and the next run retries them
        report = {"ok": False, "error": f"{type(exc).__name__}: {exc}".replace("\n", " ")}
        progress.say(f"embedding failed, retried next tick: {report['error']}")
        try:
            with read_session_factory(engine)() as session:
                report["pending"] = pending(session)
        except Exception as count_exc:  # the count is a report only
            report["pending"] = None
            progress.say(f"could not count the pending entries: {type(count_exc).__name__}: {count_exc}")
    report["ms"] = round((time.perf_counter() - started) * 1000, 1)
    return report


def embed_follow(engine: Engine, settings: Settings, embedder: Embedder) -> Callable[[list[str]], bool]:
    """A follower's pass (``brain_kernel.search.follower``): the pending entries embedded, ``FOLLOW_LIMIT`` at a time.

    Returns whether another pass should follow: more are pending than one
    pass takes, or another run held the lock (it may have read the pending
    rows before this process's write committed). A failure (the endpoint
    down) is logged once a pass and left to the next write or tick (ADR 0067).
    """

    skips = 0
    held_at: int | None = None  # the pending count after a pass that found only what the index holds already

    def follow(_: list[str]) -> bool:
        nonlocal skips, held_at
        report = embed_pending(engine, settings, limit=FOLLOW_LIMIT, embedder=embedder)
        if not report["ok"]:
            log.warning("entries left pending for the next write or tick: %s", report["error"])
            return False
        if "skipped" in report:  # a long run (``brain embed``) is tried again a while, then left to the tick
            skips += 1
            return skips <= FOLLOW_SKIPS
        skips = 0
        if not report["pending"] or report["embedded"] + report["relabelled"] > 0:
            held_at = None
            return bool(report["pending"])
        # Only entries the index holds: marked, they leave the pending count. One it cannot mark (hashed by an earlier
        # version, until a tick or a reindex writes its row again) would have a pass every second: a pass that
        # leaves the count as the last one did ends the run, and the next write starts another.
        again = report["unchanged"] > 0 and report["pending"] != held_at
        held_at = report["pending"]
        return again

    return follow


def embed_follower(engine: Engine, settings: Settings, embedder: Embedder) -> Follower | None:
    """The follower a process that writes markers keeps (``embed_follow``'s passes), None when the setting is 0."""
    interval = settings.embed_follow_seconds
    if interval <= 0:
        return None
    # What it has not begun when the process stops is left to the tick (``drain=False``).
    return Follower(embed_follow(engine, settings, embedder), interval=interval, drain=False, name="brain-embed-follow")
