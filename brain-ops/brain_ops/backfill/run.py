"""``brain backfill``: re-resolve the project of every existing arc and correct it in place (DESIGN 1.7).

Every arc file the keeper scans (``clusters/`` and the region folders, merge
tombstones and second copies included, so their projects stay right) is read;
each source session's evidence is gathered in the resolution order of ADR
0002 (the session index; the Claude or Codex transcript found by session id,
resolved with its folder and repository URL; the folder the arc's own
session table or ``cwd`` records, resolved by git, the catalog, learned
roots, a deleted folder's existing ancestor and layout) and
``brain_core.backfill`` decides. A folder that resolves to nothing counts as
"no project" only when it exists (or is the home folder): a folder gone
from disk proves nothing. Only ``project``, ``projects``, ``repo``,
``worktrees`` and ``project_source`` change, through the one frontmatter
codec; every other byte stays, each write is atomic and keeps the file's mode.

Why a rerun and a killed run converge: the decision is a function of the
evidence, and a file that already says it is not written; the audit line
of a change is appended before its write, so a change is never unaudited
(a killed run may log one twice). The index follows the files written, and
also every live arc whose size or mtime differs from its file stats
(what a killed run wrote but never committed), through the kernel's one
path to the derived stores (``index.changes.sync_changes``: entries, file stats, search):
the stored feed answers are invalidated by the index's own triggers and the
next tick reads nothing. Markers with a session id and no project are
attributed in the index by recording their sessions (found in transcripts)
in the session index, which rebuilds derive from too; ``rewrite_markers``
also writes their attribution into the vault, entry by entry
(``brain_core.backfill.retag_markers``), with the same audit-then-write
order, so a rerun finds only the entries left.

Each arc is read and parsed once: the edited arc's document is derived from
that parse (``frontmatter.edit``) and feeds the index rows, the file stats
facts and the search index. Writes go through the kernel's ``VaultWrites``
on a few threads (``_Writer``) and are taken back in order, so the audit
still precedes every write.

``dry_run`` writes no arc and no row (the plan goes to the audit file and
the plan callback); the function never commits.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sqlalchemy import text as sql
from sqlalchemy.orm import Session

from brain_core import identity as core_identity
from brain_core.backfill import (
    CLEARED,
    KNOWLEDGE,
    MARKER_KINDS,
    RESOLVED,
    UNVERIFIABLE,
    ArcDecision,
    SessionEvidence,
    arc_changes,
    decide,
    edit_arc,
    legacy_project,
    old_values,
    retag_markers,
    session_table,
    source_sessions,
    unattributed_markers,
)
from brain_core.identity import ProjectIdentity
from brain_core.jsonable import SORTED_KEYS, JobSummary
from brain_core.markers import Attribution
from brain_core.membership import KnownProject
from brain_core.progress import SILENT, Progress
from brain_core.vault import frontmatter
from brain_core.vault.layout import is_tombstone, kind_of_path
from brain_core.vault.records import parsed_document
from brain_core.vault.regions import live_paths
from brain_kernel.db.engine import hold_keeper_lock
from brain_kernel.identity.projects import known_projects
from brain_kernel.identity.resolver import IdentityResolver
from brain_kernel.identity.sessions import SessionRecord, record_sessions, stored_identities
from brain_kernel.identity.transcript_files import TranscriptFile, find_transcripts, read_summary
from brain_kernel.index import filestats
from brain_kernel.index.changes import Changed, sync_changes
from brain_kernel.index.entries import scan_point
from brain_kernel.index.rebuild import ARC_CAPABLE_KINDS
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_kernel.vault_writes import VaultWrites

INDEX_BATCH = 500
WRITERS = 2  # threads writing arcs: they overlap fsyncs; more only contend for the interpreter with the run and the follower
AUDIT_BATCH = 32  # changes audited (one flush) before their writes are submitted
ARC_CHUNK = 1000  # arcs read ahead of the decisions (their sessions looked up in one query)
WRITE_WINDOW = 64  # writes in flight at most (each holds its text)
HEAD_LINES = 200  # both agents record the working folder (and Codex the repository URL) in the first lines


@dataclass(kw_only=True)
class BackfillSummary(JobSummary):
    """What one run did; ``as_dict`` is the JSON summary of DESIGN section 4 plus details, keys in the fields' order."""

    scanned: int = 0
    changed: int = 0
    unchanged: int = 0
    unresolved: int = 0
    by_source: Counter = field(default_factory=Counter, metadata=SORTED_KEYS)
    by_outcome: Counter = field(default_factory=Counter, metadata=SORTED_KEYS)
    dry_run: bool
    files_written: int = 0
    markers: dict[str, int] = field(default_factory=lambda: {"sessions": 0, "sessions_recorded": 0, "entries_retagged": 0, "files_rewritten": 0})
    index: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


@dataclass
class _Arc:
    rel: str
    text: str
    doc: frontmatter.Document
    sessions: list[str]

    @property
    def meta(self) -> dict[str, Any]:
        return self.doc.meta


class _Evidence:
    """Each session's evidence, read once per run: the session index in bulk, transcripts listed once on demand."""

    def __init__(self, settings: Settings, db: Session | None, resolver: IdentityResolver, claude: Path, codex: Path) -> None:
        self.settings, self.db, self.resolver = settings, db, resolver
        self.claude, self.codex = claude, codex
        self.stored: dict[str, ProjectIdentity] = {}
        self._transcripts: dict[str, TranscriptFile] | None = None
        self._paths: dict[tuple[str | None, str | None], ProjectIdentity | None] = {}
        home = settings.user_home.expanduser()
        self._home = core_identity.norm_path(str(home))

    def preload(self, session_ids: Iterable[str]) -> None:
        wanted = sorted(set(session_ids) - set(self.stored))
        if self.db is not None and wanted:
            self.stored.update(stored_identities(self.db, wanted))

    def transcript(self, session_id: str) -> TranscriptFile | None:
        if self._transcripts is None:
            self._transcripts = {t.session_id: t for t in find_transcripts(self.claude, self.codex)}
        return self._transcripts.get(session_id)

    def of_session(self, session_id: str, folder: str | None) -> ProjectIdentity | None:
        """The session's identity in DESIGN order; unresolved = evidence of no project; None = nothing survives."""
        stored = self.stored.get(session_id)
        if stored is not None and stored.project:
            return stored
        found = self.transcript(session_id)
        if found is not None:
            try:
                head = read_summary(found, max_lines=HEAD_LINES)
            except OSError:
                head = None
            if head is not None and (head.cwd or head.repo_url):
                hit = self._resolve(head.cwd, head.repo_url)
                if hit is not None:
                    return hit
        for cwd in (stored.cwd if stored is not None else None, folder):
            if cwd:
                hit = self._resolve(cwd, None)
                if hit is not None:
                    return hit
        return None

    def _resolve(self, cwd: str | None, repo_url: str | None) -> ProjectIdentity | None:
        key = (cwd, repo_url)
        if key not in self._paths:
            hit = self.resolver.resolve(cwd, transcript_repo_url=repo_url)
            self._paths[key] = hit if hit.resolved or self._says_none(hit.cwd) else None
        return self._paths[key]

    def _says_none(self, cwd: str | None) -> bool:
        """An unresolved folder proves "no project" only when it is there to look at (or is the home folder)."""
        path = core_identity.norm_path(cwd)
        if path is None:
            return False
        return core_identity.is_home_or_above(path, self._home) or os.path.isdir(path)


def _files(vault: Vault, disk: dict[str, filestats.Stat], kinds: Sequence[str], only: Sequence[str]) -> list[str]:
    rels = sorted(p for p in disk if kind_of_path(p) in kinds)
    if only:
        wanted = [vault.rel(vault.path(p)) for p in only]  # vault-relative or absolute; VaultPathError outside the vault
        rels = [r for r in rels if any(r == w or r.startswith(w.rstrip("/") + "/") for w in wanted)]
    return rels


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
    if kind_of_path(rel) != "arc" and not (meta.get("cluster_id") and meta.get("type") != "signal"):
        return None  # a standing document or a signal file: not an arc
    return _Arc(rel, text, doc, source_sessions(meta))


def _evidence_of(arc: _Arc, evidence: _Evidence) -> list[SessionEvidence]:
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


def run_backfill(
    settings: Settings,
    vault: Vault,
    *,
    db: Session | None = None,
    dry_run: bool = False,
    audit: TextIO | None = None,
    claude_dir: Path | None = None,
    codex_dir: Path | None = None,
    only: Sequence[str] = (),
    progress: Progress = SILENT,
    plan: Callable[[dict[str, Any]], None] | None = None,
    after_write: Callable[[str], None] | None = None,
    rewrite_markers: bool = False,
) -> BackfillSummary:
    """Correct the projects of the vault's arcs (module docstring); the caller commits ``db``.

    ``audit`` receives one JSON line per change (before its write), ``plan``
    each change as a dict, ``after_write`` each path written (a test stops
    the run there). ``rewrite_markers`` also tags, in the vault, the lesson,
    milestone, signal and decision entries that name a session and no project.
    """
    if db is not None and not dry_run:
        hold_keeper_lock(db)  # not beside a tick or an apply: they rewrite the same arcs
    summary = BackfillSummary(dry_run=dry_run)
    claude = Path(claude_dir).expanduser() if claude_dir else settings.resolved_claude_dir
    codex = Path(codex_dir).expanduser() if codex_dir else settings.resolved_codex_dir
    resolver = IdentityResolver(settings, db, learn=not dry_run, batch=db is not None)
    evidence = _Evidence(settings, db, resolver, claude, codex)
    started = scan_point(db) if db is not None else None  # rows a marker write adds from here on are kept
    disk = filestats.stat_files(vault)
    rels = _files(vault, disk, ARC_CAPABLE_KINDS, only)
    resolver.preload()  # from here resolutions read no row: the session is lent to the follower's thread
    known: list[KnownProject] = known_projects(db) if db is not None else []
    follow = _Follow(db, vault, disk, started, markers=rewrite_markers) if db is not None and not dry_run else None
    writes = VaultWrites(vault, dry_run=dry_run)
    try:
        arcs = _read_ahead(vault, rels, summary, evidence, follow)
        _correct_arcs(arcs, len(rels), evidence, known, summary, dry_run, audit, plan, progress, _Writer(writes, summary, follow, after_write))
        if follow is not None:
            follow.wait()  # the session is the main thread's again
        if rewrite_markers:
            _rewrite_markers(writes, _files(vault, disk, MARKER_KINDS, only), evidence, summary, follow, dry_run, audit, plan, after_write)
            if follow is not None:
                follow.wait()
        if db is not None:
            _attribute_markers(db, evidence, summary, dry_run)
            if not dry_run:
                resolver.flush_learned()
        if follow is not None:
            summary.index = follow.finish(summary)
    finally:
        if follow is not None:
            follow.close()  # a failed run: the write in flight ends before the caller rolls the session back
    summary.by_outcome.setdefault(KNOWLEDGE, 0)
    return summary


def _read_ahead(vault: Vault, rels: Sequence[str], summary: BackfillSummary, evidence: _Evidence, follow: _Follow | None) -> Iterator[tuple[int, _Arc]]:
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


def _correct_arcs(
    arcs: Iterable[tuple[int, _Arc]],
    total: int,
    evidence: _Evidence,
    known: Sequence[KnownProject],
    summary: BackfillSummary,
    dry_run: bool,
    audit: TextIO | None,
    plan: Callable[[dict[str, Any]], None] | None,
    progress: Progress,
    writer: _Writer,
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


def _as_read(text_: str) -> str:
    """The text as ``Vault.read_text`` gives it (universal newlines), which the keeper and a rebuild index and hash."""
    return text_.replace("\r\n", "\n").replace("\r", "\n")


class _Writer:
    """The arcs' atomic writes (``VaultWrites.rewrite_listed``) on a few threads (an fsync releases the interpreter), completed in order.

    The main thread audits a change and then submits its write; each write is
    taken back in submission order, so ``after_write`` and the index see the
    files in the run's order, and at most ``WRITE_WINDOW`` are in flight. A
    failed write (or an ``after_write`` that raises) ends the run after the
    writes in flight, which are audited, finish or are cancelled: what a
    killed run leaves, which the rerun converges from. The folders written
    are fsynced once each at the end, before the caller commits the index.
    """

    def __init__(self, writes: VaultWrites, summary: BackfillSummary, follow: _Follow | None, after_write: Callable[[str], None] | None) -> None:
        self.writes, self.summary, self.follow, self.after_write = writes, summary, follow, after_write
        self.pool = ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="backfill-write")
        self.pending: deque[tuple[str, str, frontmatter.Document, Future[os.stat_result | None]]] = deque()

    def __enter__(self) -> _Writer:
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


class _Follow:
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

    def finish(self, summary: BackfillSummary) -> dict[str, Any]:
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


def _rewrite_markers(
    writes: VaultWrites,
    rels: Sequence[str],
    evidence: _Evidence,
    summary: BackfillSummary,
    follow: _Follow | None,
    dry_run: bool,
    audit: TextIO | None,
    plan: Callable[[dict[str, Any]], None] | None,
    after_write: Callable[[str], None] | None,
) -> None:
    """``--rewrite-markers``: tag, in the vault, each marker entry naming a session whose project the evidence knows.

    A file is rewritten whole and atomically, a log under its appenders' lock
    (``VaultWrites.rewrite_locked``: nothing appended meanwhile is lost), after the
    audit lines of its entries; an entry already tagged is not a candidate,
    so a rerun, or the rerun of a killed run, writes only what is left. A dry
    run audits the same entries and writes nothing.
    """
    vault = writes.vault
    texts: dict[str, str] = {}
    for rel in rels:
        try:
            texts[rel] = vault.listed(rel).read_bytes().decode("utf-8")
        except OSError:
            continue
        except UnicodeDecodeError:
            summary.skipped.append(f"{rel}: not UTF-8, left as it is")
    found = {rel: unattributed_markers(rel, text_) for rel, text_ in texts.items()}
    evidence.preload(str(r.meta["session_id"]) for markers in found.values() for r, _ in markers)

    def chosen_in(rel: str, text_: str) -> list[tuple[Any, Any, Attribution]]:
        out = []
        for record, entry in unattributed_markers(rel, text_):
            ident = evidence.of_session(str(record.meta["session_id"]), None)
            if ident is not None and ident.project:
                out.append((record, entry, Attribution(ident.project, ident.repo, ident.worktree, ident.source)))
        return out

    def edit(rel: str, text_: str) -> str | None:
        chosen = chosen_in(rel, text_)
        new = retag_markers(rel, text_, chosen) if chosen else None
        if chosen and new is None:
            summary.skipped.append(f"{rel}: markers left as they are (the edit would change more than their attribution)")
        if new is None:
            return None
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        for record, _, who in chosen:
            line = {
                "path": rel,
                "marker": record.id,
                "kind": record.kind,
                "old": {"project": None, "repo": record.repo},
                "new": {"project": who.project, "repo": who.repo},
                "source": who.source,
                "sessions": [record.meta["session_id"]],
                "dry_run": dry_run,
                "at": now,
            }
            if audit is not None:
                audit.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
            if plan is not None:
                plan(line)
        if audit is not None:
            audit.flush()
        summary.markers["entries_retagged"] += len(chosen)
        return new

    for rel, markers in found.items():
        if not markers:
            continue
        written: dict[str, str] = {}

        def locked_edit(text_: str, rel: str = rel, written: dict[str, str] = written) -> str | None:
            new = edit(rel, text_)  # the text as it is under the lock: entries appended since the scan are seen
            if new is not None:
                written[rel] = new
            return new

        info = writes.rewrite_locked(rel, locked_edit)
        if info is None:
            continue
        summary.markers["files_rewritten"] += 1
        writes.sync_folders()
        if follow is not None:
            new = written[rel]
            follow.add(rel, new, parsed_document(rel, new), filestats.Stat(info.st_size, info.st_mtime_ns))
        if after_write is not None:
            after_write(rel)


_UNATTRIBUTED_MARKERS = sql(
    """
    SELECT DISTINCT metadata ->> 'session_id' FROM entries
     WHERE project IS NULL AND cardinality(projects) = 0 AND scope = 'project'
       AND kind IN ('lesson', 'milestone', 'decision', 'signal') AND (metadata ->> 'session_id') IS NOT NULL
    """
)


def _attribute_markers(db: Session, evidence: _Evidence, summary: BackfillSummary, dry_run: bool) -> None:
    """Markers naming only a session: record the sessions the transcripts resolve, which attributes them in the index."""
    sids = sorted(sid for (sid,) in db.execute(_UNATTRIBUTED_MARKERS) if sid)
    evidence.preload(sids)
    records = []
    for sid in sids:
        if (stored := evidence.stored.get(sid)) is not None and stored.project:
            continue  # the index knows it already; with_evidence attributes its markers on their next refresh
        found = evidence.of_session(sid, None)
        if found is not None and found.project:
            records.append(SessionRecord(sid, found))
    summary.markers["sessions"] = len(records)
    if records and not dry_run:
        summary.markers["sessions_recorded"] = record_sessions(db, records)
