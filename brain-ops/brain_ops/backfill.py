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
also every live arc whose size or mtime differs from the vault catalogue
(what a killed run wrote but never committed), through the same
``write_file_records`` a tick uses, with the catalogue and the search index:
the stored feed answers are invalidated by the index's own triggers and the
next tick reads nothing. Markers with a session id and no project are
attributed in the index by recording their sessions (found in transcripts)
in the session index, which rebuilds derive from too.

``dry_run`` writes no arc and no row (the plan goes to the audit file and
the plan callback); the function never commits.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sqlalchemy import text as sql
from sqlalchemy.orm import Session

from brain_core import identity as core_identity
from brain_core.backfill import (
    CLEARED,
    KNOWLEDGE,
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
from brain_core.identity import ProjectIdentity
from brain_core.membership import KnownProject
from brain_core.vault import frontmatter
from brain_core.vault.layout import is_tombstone, kind_of_path
from brain_core.vault.records import records_for
from brain_core.vault.regions import live_paths
from brain_kernel import catalogue, index
from brain_kernel.db import hold_keeper_lock
from brain_kernel.identity import IdentityResolver
from brain_kernel.identity_repo import SessionRecord, record_sessions, stored_identities
from brain_kernel.index import ARC_CAPABLE_KINDS, arc_facts_of
from brain_kernel.projects import known_projects
from brain_kernel.settings import Settings
from brain_kernel.transcripts import TranscriptFile, find_transcripts, read_summary
from brain_kernel.vault import Vault

Progress = Callable[[int, int], None]
INDEX_BATCH = 500
HEAD_LINES = 200  # both agents record the working folder (and Codex the repository URL) in the first lines


@dataclass
class BackfillSummary:
    """What one run did; ``as_dict`` is the JSON summary of DESIGN section 4 plus details."""

    dry_run: bool
    scanned: int = 0
    changed: int = 0
    unchanged: int = 0
    unresolved: int = 0
    by_source: Counter = field(default_factory=Counter)
    by_outcome: Counter = field(default_factory=Counter)
    files_written: int = 0
    markers: dict[str, int] = field(default_factory=lambda: {"sessions": 0, "sessions_recorded": 0})
    index: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "unresolved": self.unresolved,
            "by_source": dict(sorted(self.by_source.items())),
            "by_outcome": dict(sorted(self.by_outcome.items())),
            "dry_run": self.dry_run,
            "files_written": self.files_written,
            "markers": self.markers,
            "index": self.index,
            "skipped": self.skipped,
        }


@dataclass
class _Arc:
    rel: str
    text: str
    meta: dict[str, Any]
    body: str
    sessions: list[str]


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


def _arc_files(vault: Vault, only: Sequence[str]) -> tuple[list[str], dict[str, catalogue.Stat]]:
    disk = catalogue.stat_files(vault)
    rels = sorted(p for p in disk if kind_of_path(p) in ARC_CAPABLE_KINDS)
    if only:
        wanted = [vault.rel(vault.path(p)) for p in only]  # vault-relative or absolute; VaultPathError outside the vault
        rels = [r for r in rels if any(r == w or r.startswith(w.rstrip("/") + "/") for w in wanted)]
    return rels, disk


def _read_arc(vault: Vault, rel: str, summary: BackfillSummary) -> _Arc | None:
    try:
        text = vault.path(rel).read_bytes().decode("utf-8")  # exact bytes: CRLF files stay CRLF
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
    return _Arc(rel, text, meta, doc.body, source_sessions(meta))


def _evidence_of(arc: _Arc, evidence: _Evidence) -> list[SessionEvidence]:
    table = session_table(arc.body) if arc.sessions else {}
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
    progress: Progress | None = None,
    plan: Callable[[dict[str, Any]], None] | None = None,
    after_write: Callable[[str], None] | None = None,
) -> BackfillSummary:
    """Correct the projects of the vault's arcs (module docstring); the caller commits ``db``.

    ``audit`` receives one JSON line per change (before its write), ``plan``
    each change as a dict, ``after_write`` each path written (a test stops
    the run there).
    """
    if db is not None and not dry_run:
        hold_keeper_lock(db)  # not beside a tick or an apply: they rewrite the same arcs
    summary = BackfillSummary(dry_run=dry_run)
    claude = Path(claude_dir).expanduser() if claude_dir else settings.resolved_claude_dir
    codex = Path(codex_dir).expanduser() if codex_dir else settings.resolved_codex_dir
    resolver = IdentityResolver(settings, db, learn=not dry_run, batch=db is not None)
    evidence = _Evidence(settings, db, resolver, claude, codex)
    rels, disk = _arc_files(vault, only)
    arcs: list[_Arc] = []
    for rel in rels:
        arc = _read_arc(vault, rel, summary)
        if arc is not None:
            arcs.append(arc)
    evidence.preload(sid for arc in arcs for sid in arc.sessions)
    known: list[KnownProject] = known_projects(db) if db is not None else []
    written: dict[str, str] = {}
    for n, arc in enumerate(arcs, 1):
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
                audit.flush()
            if plan is not None:
                plan(line)
            if not dry_run:
                new_text = edit_arc(arc.text, changes)
                vault.write_atomic(arc.rel, new_text)
                written[arc.rel] = new_text
                summary.files_written += 1
                if after_write is not None:
                    after_write(arc.rel)
        if progress is not None:
            progress(n, len(arcs))
    if db is not None:
        _attribute_markers(db, evidence, summary, dry_run)
        if not dry_run:
            resolver.flush_learned()
            _follow(db, vault, disk, written, summary)
    summary.by_outcome.setdefault(KNOWLEDGE, 0)
    return summary


def _as_read(text_: str) -> str:
    """The text as ``Vault.read_text`` gives it (universal newlines), which the keeper and a rebuild index and hash."""
    return text_.replace("\r\n", "\n").replace("\r", "\n")


def _follow(db: Session, vault: Vault, disk: dict[str, catalogue.Stat], written: dict[str, str], summary: BackfillSummary) -> None:
    """The index, the catalogue and the search index follow the live arcs written or left stale by a killed run."""
    live = set(live_paths(disk, [p for p in disk if kind_of_path(p) in ARC_CAPABLE_KINDS]).live)
    known = catalogue.load(db)
    stale = [rel for rel in live if kind_of_path(rel) in ARC_CAPABLE_KINDS and (known.get(rel) is None or known[rel].stat != disk[rel])]
    targets = sorted({*(rel for rel in written if rel in live), *stale})
    entries = removed = 0
    for start in range(0, len(targets), INDEX_BATCH):
        batch = targets[start : start + INDEX_BATCH]
        texts: dict[str, str] = {}
        for rel in batch:
            if rel in written:
                texts[rel] = _as_read(written[rel])
                continue
            try:
                texts[rel] = vault.read_text(rel)
            except OSError:
                continue
        records = [r for rel, text_ in texts.items() for r in records_for(rel, text_)]
        part = index.write_file_records(db, list(texts), records)
        entries, removed = entries + part.entries, removed + part.removed
        rows = []
        for rel, text_ in texts.items():
            stat = catalogue.stat_one(vault, rel)
            if stat is not None:
                rows.append(catalogue.Entry(rel, stat.size, stat.mtime_ns, catalogue.digest(text_), kind_of_path(rel), arc_facts_of(rel, text_, stat.mtime_ns)))
        catalogue.save(db, rows)
        index.follow_search(db, vault, list(texts))
    summary.index = {
        "refreshed": True,
        "files": len(targets),
        "entries_written": entries,
        "removed": removed,
        "tombstones_written": sum(1 for rel in written if is_tombstone(rel)),
    }


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
