"""``brain reindex``: rebuild the index from the vault, and the incremental refresh after writes.

The vault is the source of truth. ``rebuild`` walks the folders that hold
entries (``brain_core.vaultindex.INDEXED_PREFIXES``), parses every file with
``records_for`` and replaces the entries table, then records the projects
the entries name. ``refresh`` does the same for a few files: their old rows
are replaced by what the files hold now (none when a file is gone or became
a ``.merged.md`` tombstone). Both go through the same per-file parser and the
same upsert, so a refresh after each write leaves exactly the rows a full
rebuild would (tests/test_reindex.py compares them). Neither commits: the
command (or the keeper) owns the transaction, so a failed rebuild leaves the
old index in place. Rerunning either is safe.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.vaultindex import INDEXED_PREFIXES, kind_of_path, project_activity, records_for
from brain_kernel.feed_snapshots import collect
from brain_kernel.index import delete_entries_at, touch_project, upsert_entries
from brain_kernel.reindex_repo import clear_entries, delete_entries_updated_before
from brain_kernel.vault import Vault

Progress = Callable[[int, int], None]  # (files read, files in all), as brain_kernel.progress.reporter takes
# Rows written this long before a keeper scan began and not rewritten by it are stale.
STALE_MARGIN = dt.timedelta(minutes=5)


@dataclass
class ReindexSummary:
    """What a rebuild or refresh did."""

    files: int = 0
    entries: int = 0
    removed: int = 0
    projects: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

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
    unique: dict[str, EntryRecord] = {}
    for record in records:
        unique[record.id] = record
    return list(unique.values())


def record_projects(session: Session, records: Iterable[EntryRecord]) -> int:
    """Register the projects the records name and move their last activity forward."""
    count = 0
    for activity in project_activity(records):
        touch_project(session, activity.key, activity.repo, at=activity.last_active)
        count += 1
    return count


def replace_all(session: Session, records: Iterable[EntryRecord], *, scan_started: dt.datetime | None = None) -> ReindexSummary:
    """Make the entries table hold ``records`` and record their projects (no commit).

    Without ``scan_started`` the table is cleared first: an exact rebuild.
    With it (the keeper), the records are upserted first and then only rows
    last written more than ``STALE_MARGIN`` before the vault scan began are
    deleted, so a marker indexed while the scan ran is never dropped; a row of
    a file deleted in that margin goes at the next pass.
    """
    summary = ReindexSummary()
    rows = _dedupe(records)
    if scan_started is None:
        summary.removed = clear_entries(session)
        summary.entries = upsert_entries(session, rows)
    else:
        summary.entries = upsert_entries(session, rows)
        summary.removed = delete_entries_updated_before(session, scan_started - STALE_MARGIN)
    for record in rows:
        summary.by_kind[record.kind] = summary.by_kind.get(record.kind, 0) + 1
    summary.projects = record_projects(session, rows)
    collect(session)  # bound the feed change log; answers read since the previous refresh stay servable
    return summary


def rebuild(session: Session, vault: Vault, *, progress: Progress | None = None) -> ReindexSummary:
    """Replace every entry with what the vault holds now (no commit)."""
    scan = ReindexSummary()
    records: list[EntryRecord] = []
    files = list(vault_files(vault))
    for rel in files:
        records.extend(read_records(vault, rel, scan))
        scan.files += 1
        if progress is not None:
            progress(scan.files, len(files))
    summary = replace_all(session, records)
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
    records = _dedupe(records)
    summary.removed = delete_entries_at(session, rels, keep_ids=[r.id for r in records])
    summary.entries = upsert_entries(session, records)
    for record in records:
        summary.by_kind[record.kind] = summary.by_kind.get(record.kind, 0) + 1
    summary.projects = record_projects(session, records)
    return summary
