"""The index: entries and projects derived from the vault, written and refreshed here.

All SQL about the ``entries`` and ``projects`` tables' writes lives here;
services and jobs call these functions with a session and never commit (the
entry point owns the transaction). Writes are upserts keyed by the stable ids
of ``brain_core.entries``, so every job can rerun safely.

Two ways the vault reaches the index, through the same per-file parser
(``brain_core.vault.records.records_for``) and the same upsert, so they give
the same rows (tests/test_reindex.py compares them):

- ``refresh(paths)`` after a write (``brain cluster``, merges, backfill):
  those files' old rows are replaced by what the files hold now (none when a
  file is gone or became a ``.merged.md`` tombstone);
- ``rebuild`` (``brain reindex``) and the keeper's ``replace_all``: every
  file's rows are upserted, then the rows this pass did not rewrite are
  deleted, but only those last written before the pass began.

Why a rebuild never drops an acknowledged write (ADR 0011): the pass reads
the database clock before it reads the first file (``scan_point``), and
every upsert stamps its rows with the database clock at the moment it runs
(``clock_timestamp()``), which for a marker is after its vault write. A row
stamped before the scan began was written to the vault before the scan
began, so the scan saw it and rewrote it unless its file no longer holds it;
a row stamped after is kept. Both times come from one clock, the database's.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import case, delete, func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.feed.collect import mitigate
from brain_core.membership import carriers
from brain_core.vault.layout import INDEXED_PREFIXES, kind_of_path
from brain_core.vault.records import attributable_by_session, attributed, project_activity, records_for
from brain_core.vault.regions import live_paths
from brain_kernel.feed_snapshots import collect
from brain_kernel.models import Entry, Project, SessionRow
from brain_kernel.projects import known_projects
from brain_kernel.vault import Vault

Progress = Callable[[int, int], None]  # (files read, files in all), as the CLI's progress reporter takes

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


# -- rows ------------------------------------------------------------------------------


def _row(record: EntryRecord) -> dict[str, object]:
    return {
        "id": record.id,
        "kind": record.kind,
        "title": record.title,
        "content": record.content,
        "project": record.project,
        "projects": list(record.projects),
        "repo": record.repo,
        "scope": record.scope,
        "status": record.status,
        "severity": record.severity,
        "heat": record.heat,
        "vault_path": record.vault_path,
        "occurred_at": record.occurred_at,
        "metadata": record.meta,
    }


@functools.cache
def _upsert_entries_stmt() -> Any:
    """The entry upsert, built once; rows are stamped with the database clock as the statement runs."""
    stmt = insert(Entry.__table__).values(updated_at=func.clock_timestamp())
    update = {c.name: stmt.excluded[c.name] for c in Entry.__table__.columns if c.name not in ("id", "created_at", "updated_at")}
    update["updated_at"] = func.clock_timestamp()
    return stmt.on_conflict_do_update(index_elements=["id"], set_=update)


def upsert_entries(session: Session, records: Iterable[EntryRecord]) -> int:
    """Insert or replace entries by id; returns how many were written."""
    rows = [_row(r) for r in records]
    for start in range(0, len(rows), 1000):
        session.execute(_upsert_entries_stmt(), rows[start : start + 1000])
    return len(rows)


def delete_entries_at(session: Session, vault_paths: Iterable[str], *, keep_ids: Iterable[str] = ()) -> int:
    """Remove the entries of the given vault files, except ``keep_ids``."""
    paths = list(vault_paths)
    if not paths:
        return 0
    stmt = delete(Entry).where(Entry.vault_path.in_(paths))
    keep = list(keep_ids)
    if keep:
        stmt = stmt.where(Entry.id.not_in(keep))
    return session.execute(stmt).rowcount or 0


def scan_point(session: Session) -> dt.datetime:
    """The database clock now: taken before a pass reads its first file."""
    return session.execute(text("SELECT clock_timestamp()")).scalar_one()


def delete_entries_written_before(session: Session, cutoff: dt.datetime) -> int:
    """Delete entries last written before ``cutoff`` (a database time); returns how many."""
    return session.execute(delete(Entry).where(Entry.updated_at < cutoff)).rowcount or 0


def entry_rows(session: Session) -> list[dict[str, Any]]:
    """Every entry as a dict of the compared columns, ordered by id (what a rebuild and a refresh agree on)."""
    table = Entry.__table__
    stmt = select(*(table.c[name] for name in COMPARED_COLUMNS)).order_by(table.c.id)
    return [dict(row._mapping) for row in session.execute(stmt)]


@functools.cache
def _touch_project_stmt() -> Any:
    """The project upsert, built once (statement building costs more than running it)."""
    table = Project.__table__
    stmt = insert(table)
    excluded = stmt.excluded
    return stmt.on_conflict_do_update(
        index_elements=["id"],
        set_={
            "last_active": func.greatest(table.c.last_active, excluded.last_active),
            "root": func.coalesce(excluded.root, table.c.root),
            # no aliases given keeps the known ones
            "aliases": case((func.cardinality(excluded.aliases) == 0, table.c.aliases), else_=excluded.aliases),
            "updated_at": func.now(),
        },
    )


def touch_project(
    session: Session,
    key: str,
    repo: str | None,
    *,
    at: dt.datetime | None = None,
    root: str | None = None,
    aliases: Iterable[str] = (),
) -> None:
    """Record a project (id = repo slug, else key); ``at`` (an entry's time) moves its last activity forward."""
    values = {
        "id": repo or key,
        "key": key,
        "repo": repo,
        "root": root,
        "aliases": sorted(set(aliases)),
        "last_active": at,
    }
    session.execute(_touch_project_stmt(), values)


# -- from the vault ------------------------------------------------------------------------


@dataclass
class ReindexSummary:
    """What a rebuild or refresh did."""

    files: int = 0
    entries: int = 0
    removed: int = 0
    projects: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def count(self, records: Iterable[EntryRecord]) -> None:
        """Add ``records`` to the counts by kind."""
        for record in records:
            self.by_kind[record.kind] = self.by_kind.get(record.kind, 0) + 1

    def as_dict(self) -> dict[str, object]:
        """The JSON summary the command prints."""
        return {
            "files": self.files,
            "entries": self.entries,
            "removed": self.removed,
            "projects": self.projects,
            "by_kind": dict(sorted(self.by_kind.items())),
            "skipped": self.skipped,
        }


def vault_files(vault: Vault) -> Iterator[str]:
    """Vault-relative paths of every file that can hold entries, in sorted order."""
    for prefix in INDEXED_PREFIXES:
        if not vault.exists(prefix):
            continue
        for path in vault.iter_files(prefix, suffixes=(".md",)):
            rel = vault.rel(path)
            if kind_of_path(rel) is not None:
                yield rel


ARC_CAPABLE_KINDS = ("arc", "region", "signal")


def live_vault_files(vault: Vault, extra: Iterable[str] = ()) -> list[str]:
    """``vault_files`` as the keeper scans them: tombstoned raw files and second copies of an arc left out.

    ``regions.live_paths`` decides; the keeper and a full rebuild both read
    this list, so they index the same documents. ``extra`` adds paths a dry
    run only pretends exist (inbox notes it would have moved).
    """
    paths = [*vault_files(vault), *extra]
    return list(live_paths(paths, [p for p in paths if kind_of_path(p) in ARC_CAPABLE_KINDS]).live)


def read_records(vault: Vault, rel: str, summary: ReindexSummary) -> list[EntryRecord]:
    """The entries of one file; an unreadable or unparsable file is skipped and reported."""
    try:
        text = vault.read_text(rel)
    except FileNotFoundError:
        return []
    except OSError as exc:
        summary.skipped.append(f"{rel}: {exc.strerror}")
        return []
    try:
        return records_for(rel, text)
    except Exception as exc:  # one bad file must not stop a rebuild of the whole vault
        summary.skipped.append(f"{rel}: {type(exc).__name__}: {exc}")
        return []


def _dedupe(records: Iterable[EntryRecord]) -> list[EntryRecord]:
    return list({record.id: record for record in records}.values())


def with_evidence(session: Session, records: list[EntryRecord]) -> list[EntryRecord]:
    """Records as the index holds them: what their files say, plus evidence only the index has.

    An unattributed marker whose session the session index knows takes that
    session's project (source ``session``); an upstream arc whose legacy
    ``project:`` names exactly one known project (key or alias) takes it
    (source ``legacy``), and any other stays unattributed for the backfill.
    The vault is left as it is, so a rebuild derives the same rows again.
    """
    sids = {sid for r in records if (sid := attributable_by_session(r))}
    sessions: dict[str, tuple[str, str | None]] = {}
    if sids:
        stmt = select(SessionRow.session_id, SessionRow.project, SessionRow.repo).where(
            SessionRow.session_id.in_(sorted(sids)), SessionRow.project.is_not(None)
        )
        sessions = {sid: (project, repo) for sid, project, repo in session.execute(stmt)}
    legacy = [r for r in records if r.project is None and r.meta.get("legacy_project")]
    known = known_projects(session) if legacy else []
    out = []
    for record in records:
        sid = attributable_by_session(record)
        if sid in sessions:
            record = attributed(record, *sessions[sid], "session")
        elif record.project is None and record.meta.get("legacy_project"):
            found = carriers(str(record.meta["legacy_project"]).strip().lower(), known)
            if len(found) == 1:
                record = attributed(record, found[0].key, found[0].repo, "legacy")
        out.append(record)
    return out


_ATTRIBUTE_SESSION = text(
    """
    UPDATE entries SET project = :project, projects = ARRAY[:project], repo = :repo,
           metadata = metadata || '{"project_source": "session"}'::jsonb, updated_at = clock_timestamp()
     WHERE (metadata ->> 'session_id') = :sid AND project IS NULL AND cardinality(projects) = 0
       AND scope = 'project' AND kind IN ('lesson', 'milestone', 'decision', 'signal')
    RETURNING occurred_at
    """
)


def attribute_session(session: Session, session_id: str, key: str, repo: str | None) -> int:
    """Attribute the session's markers written before it was known (``with_evidence``, applied in place); returns how many.

    The feed triggers log the change, so the stored answers these rows reach are invalidated.
    """
    times = [t for (t,) in session.execute(_ATTRIBUTE_SESSION, {"sid": session_id, "project": key, "repo": repo})]
    if times:
        touch_project(session, key, repo, at=max((t for t in times if t is not None), default=None))
    return len(times)


def record_projects(session: Session, records: Iterable[EntryRecord]) -> int:
    """Register the projects the records name and move their last activity forward."""
    count = 0
    for activity in project_activity(records):
        touch_project(session, activity.key, activity.repo, at=activity.last_active)
        count += 1
    return count


def replace_all(session: Session, records: Iterable[EntryRecord], *, scan_started: dt.datetime) -> ReindexSummary:
    """Make the entries table hold ``records``, keeping rows written since ``scan_started`` (no commit).

    ``scan_started`` is ``scan_point`` read before the pass read its first
    file: rows this pass did not rewrite are deleted only when they were last
    written before it (see the module docstring).
    """
    summary = ReindexSummary()
    rows = with_evidence(session, mitigate(_dedupe(records)))
    summary.entries = upsert_entries(session, rows)
    summary.removed = delete_entries_written_before(session, scan_started)
    summary.count(rows)
    summary.projects = record_projects(session, rows)
    collect(session)  # bound the feed change log; answers read since the previous refresh stay servable
    return summary


def rebuild(session: Session, vault: Vault, *, progress: Progress | None = None) -> ReindexSummary:
    """Make the index what the vault holds now, keeping writes acknowledged meanwhile (no commit)."""
    scan = ReindexSummary()
    started = scan_point(session)
    records: list[EntryRecord] = []
    files = live_vault_files(vault)
    for rel in files:
        records.extend(read_records(vault, rel, scan))
        scan.files += 1
        if progress is not None:
            progress(scan.files, len(files))
    summary = replace_all(session, records, scan_started=started)
    summary.files, summary.skipped = scan.files, scan.skipped
    return summary


def refresh(session: Session, vault: Vault, paths: Iterable[str | Path]) -> ReindexSummary:
    """Re-read the given files and replace their rows (deleted files lose theirs); no commit."""
    summary = ReindexSummary()
    rels = sorted({vault.rel(vault.path(p)) for p in paths})
    records: list[EntryRecord] = []
    for rel in rels:
        records.extend(read_records(vault, rel, summary) if kind_of_path(rel) else [])
        summary.files += 1
    records = with_evidence(session, _dedupe(records))
    summary.removed = delete_entries_at(session, rels, keep_ids=[r.id for r in records])
    summary.entries = upsert_entries(session, records)
    summary.count(records)
    summary.projects = record_projects(session, records)
    return summary
