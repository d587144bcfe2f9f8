"""The derived stores follow a ``brain backfill`` run: the arcs it wrote, and those a killed run left stale.

Through the kernel's one path (``index.changes.sync_changes``: entries, file
stats, search), in batches on a thread of its own, from the texts the run
already holds; the stored feed answers are invalidated by the index's own
triggers and the next tick reads nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from sqlalchemy.orm import Session

from brain_core.backfill import MARKER_KINDS
from brain_core.vault import frontmatter
from brain_core.vault.layout import is_tombstone, kind_of_path
from brain_core.vault.records import parsed_document
from brain_core.vault.regions import live_paths
from brain_kernel.index import filestats
from brain_kernel.index.changes import Changed, sync_changes
from brain_kernel.index.rebuild import ARC_CAPABLE_KINDS
from brain_kernel.vault_store import Vault

INDEX_BATCH = 500


def _as_read(text_: str) -> str:
    """The text as ``Vault.read_text`` gives it (universal newlines), which the keeper and a rebuild index and hash."""
    return text_.replace("\r\n", "\n").replace("\r", "\n")


class Follow:
    """The index, the file stats and the search index follow the live arcs written, and those a killed run left stale.

    Written files are refreshed in batches of ``INDEX_BATCH`` as their writes
    complete, from the text and the document the run already holds (no file
    is read or parsed again); ``finish`` refreshes the stale rest, reading
    and parsing each once.

    A full batch is written on the follower's own thread, one batch at a
    time, while the run goes on deciding and writing arcs: the database's
    work (the search index's trigram inserts above all) overlaps the run's.
    The session is then the follower's: the run touches no row until
    ``wait`` (which also raises a failed batch's error), and ``close`` ends
    the batch in flight before a failed run's caller rolls back.
    """

    def __init__(self, db: Session, vault: Vault, disk: dict[str, filestats.Stat], before: dt.datetime | None, *, markers: bool) -> None:
        self.db, self.vault, self.before = db, vault, before
        self.live = set(live_paths(disk, [p for p in disk if kind_of_path(p) in ARC_CAPABLE_KINDS]).live)
        known = filestats.load(db)
        self.stale = {rel for rel in self.live if kind_of_path(rel) in ARC_CAPABLE_KINDS and (known.get(rel) is None or known[rel].stat != disk[rel])}
        if markers:  # marker files a killed --rewrite-markers run wrote (or appended to since the last tick)
            self.stale |= {rel for rel in disk if kind_of_path(rel) in MARKER_KINDS and (known.get(rel) is None or known[rel].stat != disk[rel])}
        self.batch: list[tuple[str, str, frontmatter.Document | None, filestats.Stat]] = []
        self.done: set[str] = set()
        self.entries = self.removed = self.tombstones = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="backfill-index")
        self._inflight: Future[None] | None = None

    def add(self, rel: str, text_: str, doc: frontmatter.Document | None, stat: filestats.Stat) -> None:
        """Refresh ``rel`` with the next batch; ``doc``: its parsed text, for the kinds ``parsed_records`` reads (else None)."""
        if is_tombstone(rel):
            self.tombstones += 1
        if kind_of_path(rel) in ARC_CAPABLE_KINDS and rel not in self.live:
            return  # tombstones and second copies are edited, not indexed (as the keeper does)
        if "\r" in text_:  # the index holds the text as read (universal newlines), whose body differs
            text_ = _as_read(text_)
            doc = frontmatter.parse(text_) if doc is not None else None
        self.batch.append((rel, text_, doc, stat))
        if len(self.batch) >= INDEX_BATCH:
            self.wait()
            batch, self.batch = self.batch, []
            self._inflight = self._pool.submit(self._write, batch)

    def call(self, fn: Callable[..., None], *args: Any) -> Future[None]:
        """Run ``fn`` on the follower's thread, after the batches given before (it may use the session)."""
        return self._pool.submit(fn, *args)

    def wait(self) -> None:
        """Until the batch in flight is written (its error raised here); the session is the caller's again."""
        inflight, self._inflight = self._inflight, None
        if inflight is not None:
            inflight.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _write(self, batch: list[tuple[str, str, frontmatter.Document | None, filestats.Stat]]) -> None:
        if not batch:
            return
        part = sync_changes(self.db, self.vault, [Changed(rel, t, doc, st) for rel, t, doc, st in batch], before=self.before)
        self.entries, self.removed = self.entries + part.entries, self.removed + part.removed
        self.done.update(rel for rel, *_ in batch)

    def finish(self) -> dict[str, Any]:
        for rel in sorted(self.stale - self.done - {rel for rel, *_ in self.batch}):
            try:
                text_ = self.vault.read_text(rel)
                info = self.vault.listed(rel).stat()
            except OSError:
                continue
            doc = parsed_document(rel, text_)
            self.add(rel, text_, doc, filestats.Stat(info.st_size, info.st_mtime_ns))
        self.wait()
        batch, self.batch = self.batch, []
        self._write(batch)
        return {"refreshed": True, "files": len(self.done), "entries_written": self.entries, "removed": self.removed, "tombstones_written": self.tombstones}
