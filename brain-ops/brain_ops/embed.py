"""``brain embed``: the index's arcs, lessons, decisions and signals into the search index, with their projects.

Every embeddable entry (``brain_core.chunks.entry_doc``) is compared with
what the search index holds by content hash, in the database (not a state
file in the vault): only new and changed entries are embedded again, so a
rerun embeds nothing. ``--prune`` drops the chunks of entries the index no
longer holds (merged arcs, deleted files); ``--force-all`` re-embeds
everything. Never commits: the command does, once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from brain_core.chunks import EMBEDDED_KINDS, PRODUCERS, EmbeddingDoc, entry_doc
from brain_core.jsonable import SORTED_KEYS, JobSummary
from brain_core.progress import SILENT, Progress
from brain_kernel.feed.feed_repo import entries_of_kinds
from brain_kernel.search import embeddings
from brain_kernel.search.embedders import Embedder

BATCH = 256


@dataclass
class EmbedSummary(JobSummary):
    """What a run did."""

    entries: int = 0
    embedded: int = 0
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
    progress: Progress = SILENT,
) -> EmbedSummary:
    """Embed what changed since the last run (everything with ``force_all``); no commit."""
    started = time.perf_counter()
    summary = EmbedSummary()
    docs = [doc for record in entries_of_kinds(session, EMBEDDED_KINDS) if (doc := entry_doc(record)) is not None]
    summary.entries = len(docs)
    by_producer: dict[str, list[EmbeddingDoc]] = {}
    for doc in {(d.producer, d.key): d for d in docs}.values():
        by_producer.setdefault(doc.producer, []).append(doc)
    todo: list[EmbeddingDoc] = []
    for producer, group in by_producer.items():
        stored = {} if force_all else embeddings.stored_hashes(session, producer, [d.key for d in group])
        for doc in group:
            if stored.get(doc.key) == doc.content_hash:
                summary.unchanged += 1
            else:
                todo.append(doc)
    if todo:  # the first batch settles the column's dimension before any bulk work
        summary.chunks += embeddings.store_docs(session, embedder, todo[:BATCH], force_dim=force_dim)
    with embeddings.bulk_load(session, rows=len(todo) - BATCH):
        for start in range(BATCH, len(todo), BATCH):
            summary.chunks += embeddings.store_docs(session, embedder, todo[start : start + BATCH], force_dim=force_dim)
            progress.step(min(start + BATCH, len(todo)), len(todo))
    summary.embedded = len(todo)
    for doc in todo:
        summary.by_kind[doc.kind] = summary.by_kind.get(doc.kind, 0) + 1
    if prune:
        for producer in PRODUCERS.values():
            keep = [d.key for d in by_producer.get(producer, [])]
            summary.pruned += embeddings.prune(session, producer, keep)["deleted"]
    summary.seconds = time.perf_counter() - started
    return summary
