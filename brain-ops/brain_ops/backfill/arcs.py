"""The arcs' projects re-resolved and corrected in place: read ahead, decided, audited, written.

Each arc is read and parsed once: the edited arc's document is derived from
that parse (``frontmatter.edit``) and feeds the index rows, the file stats
facts and the search index. Only ``project``, ``projects``, ``repo``,
``worktrees`` and ``project_source`` change, through the one frontmatter
codec; every other byte stays. Writes go through the kernel's
``VaultWrites`` on a few threads (``ArcWriter``) and are taken back in
order, so the audit line of a change always precedes its write.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TextIO

from brain_core.backfill import (
    CLEARED,
    RESOLVED,
    UNVERIFIABLE,
    ArcDecision,
    SessionEvidence,
    arc_changes,
    decide,
    edit_arc,
    legacy_project,
    old_values,
    session_table,
    source_sessions,
)
from brain_core.membership import KnownProject
from brain_core.progress import Progress
from brain_core.vault import frontmatter
from brain_core.vault.layout import is_arc, kind_of_path
from brain_kernel.index import filestats
from brain_kernel.vault_store import Vault
from brain_kernel.vault_writes import VaultWrites
from brain_ops.backfill.evidence import Evidence
from brain_ops.backfill.follow import Follow
from brain_ops.backfill.summary import BackfillSummary

WRITERS = 2  # threads writing arcs: they overlap fsyncs; more only contend for the interpreter with the run and the follower
AUDIT_BATCH = 32  # changes audited (one flush) before their writes are submitted
ARC_CHUNK = 1000  # arcs read ahead of the decisions (their sessions looked up in one query)
WRITE_WINDOW = 64  # writes in flight at most (each holds its text)


@dataclass
class _Arc:
    rel: str
    text: str
    doc: frontmatter.Document
    sessions: list[str]

    @property
    def meta(self) -> dict[str, Any]:
        return self.doc.meta


def _read_arc(vault: Vault, rel: str, summary: BackfillSummary) -> _Arc | None:
    try:
        text = vault.listed(rel).read_bytes().decode("utf-8")  # exact bytes: CRLF files stay CRLF
    except FileNotFoundError:
        return None
    except OSError as exc:
        summary.skipped.append(f"{rel}: {exc.strerror}")
        return None
    except UnicodeDecodeError:
        summary.skipped.append(f"{rel}: not UTF-8, left as it is")  # an edit could not give back its other bytes
        return None
    doc = frontmatter.parse(text)
    meta = doc.meta
    if not is_arc(kind_of_path(rel), meta):
        return None  # a standing document or a signal file: not an arc
    return _Arc(rel, text, doc, source_sessions(meta))


def _evidence_of(arc: _Arc, evidence: Evidence) -> list[SessionEvidence]:
    table = session_table(arc.doc.body) if arc.sessions else {}
    lone_cwd = arc.meta.get("cwd") if len(arc.sessions) == 1 and isinstance(arc.meta.get("cwd"), str) else None
    out = []
    for sid in arc.sessions:
        row = table.get(sid)
        folder = row.folder if row is not None else lone_cwd
        out.append(SessionEvidence(sid, evidence.of_session(sid, folder), row.turns if row is not None else 0.0))
    return out


def _audit_line(arc: _Arc, decision: ArcDecision, changes: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    return {
        "path": arc.rel,
        "old": old_values(arc.meta),
        "new": {**old_values(arc.meta), **changes},
        "changed_keys": sorted(changes),
        "outcome": decision.outcome,
        "source": decision.source,
        "sessions": list(decision.sessions_used),
        "dry_run": dry_run,
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def read_ahead(vault: Vault, rels: Sequence[str], summary: BackfillSummary, evidence: Evidence, follow: Follow | None) -> Iterator[tuple[int, _Arc]]:
    """The arcs among ``rels`` with their positions, read and parsed a chunk ahead of the decisions.

    Each chunk's sessions are looked up in the session index in one query,
    on the follower's thread when there is one (which holds the session),
    while the chunk before is decided: the index follows the first writes
    from the start and only a chunk of texts is held at a time.
    """
    chunks = [rels[i : i + ARC_CHUNK] for i in range(0, len(rels), ARC_CHUNK)]

    def read(chunk: Sequence[str]) -> tuple[list[_Arc | None], Future[None] | None]:
        arcs = [_read_arc(vault, rel, summary) for rel in chunk]
        sids = [sid for arc in arcs if arc is not None for sid in arc.sessions]
        if follow is not None:
            return arcs, follow.call(evidence.preload, sids)
        evidence.preload(sids)
        return arcs, None

    ahead = read(chunks[0]) if chunks else None
    position = 0
    for k in range(len(chunks)):
        assert ahead is not None
        arcs, ready = ahead
        ahead = read(chunks[k + 1]) if k + 1 < len(chunks) else None
        if ready is not None:
            ready.result()
        for arc in arcs:
            position += 1
            if arc is not None:
                yield position, arc


def correct_arcs(
    arcs: Iterable[tuple[int, _Arc]],
    total: int,
    evidence: Evidence,
    known: Sequence[KnownProject],
    summary: BackfillSummary,
    dry_run: bool,
    audit: TextIO | None,
    plan: Callable[[dict[str, Any]], None] | None,
    progress: Progress,
    writer: ArcWriter,
) -> None:
    """Decide each arc, audit each change and hand its write to ``writer``.

    Changes are staged a few at a time: their audit lines are flushed once,
    then their writes submitted, so every write still follows its audit line.
    """
    staged: list[tuple[str, str, frontmatter.Document]] = []

    def submit() -> None:
        if audit is not None:
            audit.flush()
        for item in staged:
            writer.submit(*item)
        staged.clear()

    with writer:
        for n, arc in arcs:
            decision = decide(_evidence_of(arc, evidence), legacy=legacy_project(arc.meta, known))
            summary.scanned += 1
            summary.by_outcome[decision.outcome] += 1
            if decision.outcome in (CLEARED, UNVERIFIABLE):
                summary.unresolved += 1
            if decision.outcome in (RESOLVED, CLEARED) and decision.source:
                summary.by_source[decision.source] += 1
            changes = arc_changes(arc.meta, decision)
            if not changes:
                summary.unchanged += 1
            else:
                summary.changed += 1
                line = _audit_line(arc, decision, changes, dry_run)
                if audit is not None:
                    audit.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
                if plan is not None:
                    plan(line)
                if not dry_run:
                    staged.append((arc.rel, *edit_arc(arc.text, arc.doc, changes)))
                if len(staged) >= AUDIT_BATCH:
                    submit()
            progress.step(n, total)
        submit()


class ArcWriter:
    """The arcs' atomic writes (``VaultWrites.rewrite_listed``) on a few threads (an fsync releases the interpreter), completed in order.

    The main thread audits a change and then submits its write; each write is
    taken back in submission order, so ``after_write`` and the index see the
    files in the run's order, and at most ``WRITE_WINDOW`` are in flight. A
    failed write (or an ``after_write`` that raises) ends the run after the
    writes in flight, which are audited, finish or are cancelled: what a
    killed run leaves, which the rerun converges from. The folders written
    are fsynced once each at the end, before the caller commits the index.
    """

    def __init__(self, writes: VaultWrites, summary: BackfillSummary, follow: Follow | None, after_write: Callable[[str], None] | None) -> None:
        self.writes, self.summary, self.follow, self.after_write = writes, summary, follow, after_write
        self.pool = ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="backfill-write")
        self.pending: deque[tuple[str, str, frontmatter.Document, Future[os.stat_result | None]]] = deque()

    def __enter__(self) -> ArcWriter:
        return self

    def submit(self, rel: str, text_: str, doc: frontmatter.Document) -> None:
        self.pending.append((rel, text_, doc, self.pool.submit(self.writes.rewrite_listed, rel, text_)))
        while len(self.pending) > WRITE_WINDOW:
            self._take()

    def _take(self) -> None:
        rel, text_, doc, future = self.pending.popleft()
        info = future.result()
        assert info is not None  # a dry run submits no write
        self.summary.files_written += 1
        if self.follow is not None:
            self.follow.add(rel, text_, doc, filestats.Stat(info.st_size, info.st_mtime_ns))
        if self.after_write is not None:
            self.after_write(rel)

    def __exit__(self, exc_type: Any, _exc: Any, _tb: Any) -> None:
        try:
            if exc_type is None:
                while self.pending:
                    self._take()
                self.writes.sync_folders()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
