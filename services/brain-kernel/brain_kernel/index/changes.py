"""The one path from vault writes to the derived stores: index entries, file stats and search documents.

Every writer of the vault (the keeper's pass, apply, backfill, cluster,
scrub, markers, inbox notes) hands the files it changed to ``sync_changes``
in its own unit of work; nothing else writes those stores, which
tests/test_architecture.py checks (ADR 0038). ``brain reindex``
(``entries.rebuild``) makes the same stores anew from the whole vault; the
search index's catch-up of files whose size or mtime moved is ``catch_up_search``.

A writer says what it holds, so nothing is read twice: a file's text, its
parsed document, its stat or its rows, when it has them (``Changed``);
otherwise the file is read here. A marker appended to a shared log passes
only its own rows (``appended``): they are upserted and the log's other
rows are left alone. ``stores`` limits a call to some stores, for the two
writers that split them on purpose: a marker indexes its entry in its
request and its search document after the commit (ADR 0032).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.vault import frontmatter
from brain_core.vault.layout import is_tombstone, kind_of_path
from brain_core.vault.records import ActivityTally
from brain_kernel.index import filestats
from brain_kernel.index.entries import drop_paths_not_in, upsert_entries, write_file_records
from brain_kernel.index.rebuild import arc_facts_of, file_records
from brain_kernel.search import search_docs
from brain_kernel.vault_store import Vault

ENTRIES, FILE_STATS, SEARCH = "entries", "file_stats", "search"
ALL_STORES = frozenset({ENTRIES, FILE_STATS, SEARCH})


@dataclass
class Changed:
    """A file a writer wrote, with what it already holds of it (None: read or derive it here)."""

    path: str
    text: str | None = None
    doc: frontmatter.Document | None = None
    stat: filestats.Stat | None = None
    records: Sequence[EntryRecord] | None = None
    sha256: str | None = None
    facts: Mapping[str, Any] | None = None  # an arc's heat facts when the writer computed them (the keeper)
    kind: str | None = None


@dataclass
class SyncSummary:
    """What one call brought up to date."""

    files: int = 0
    entries: int = 0
    removed: int = 0
    file_stats: int = 0
    forgotten: int = 0
    skipped: list[str] = field(default_factory=list)


def _keeps_file_stats(rel: str) -> bool:
    """Files the keeper's scan keeps file stats of: documents that can hold entries (no tombstone, no ``_`` page)."""
    return bool(kind_of_path(rel)) and not is_tombstone(rel) and not rel.rsplit("/", 1)[-1].startswith("_")


def _load(vault: Vault, item: Changed, summary: SyncSummary) -> bool | None:
    """Fill ``item.text`` from the vault: True when read, False when the file is gone (its rows go), None when it
    cannot be read (reported; its rows are left as they were)."""
    try:
        item.text = vault.read_text(item.path)
        return True
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError) as exc:
        summary.skipped.append(f"{item.path}: {getattr(exc, 'strerror', None) or exc}")
        return None


def _rows(item: Changed, summary: SyncSummary) -> list[EntryRecord]:
    """The entries a written file holds (none for a file no kind indexes)."""
    if item.records is not None:
        return list(item.records)
    if not kind_of_path(item.path):
        return []
    assert item.text is not None
    rows, item.doc = file_records(item.path, item.text, summary.skipped, doc=item.doc)
    return rows


def sync_changes(
    session: Session,
    vault: Vault,
    changed: Iterable[str | Path | Changed] = (),
    *,
    removed: Iterable[str | Path] = (),
    appended: Mapping[str, Sequence[EntryRecord]] | None = None,
    stores: frozenset[str] = ALL_STORES,
    before: dt.datetime | None = None,
    tally: ActivityTally | None = None,
    fresh: bool = False,
) -> SyncSummary:
    """Bring every derived store up to date with these vault files, in the caller's unit of work (no commit).

    ``changed``: files written or moved in (paths, or ``Changed`` with what the
    writer holds); a path no longer on disk counts as removed. ``removed``:
    files gone (their rows, file stats and search document go). ``appended``:
    rows appended to a shared file, upserted without touching its other rows.
    ``before``: rows written at or after it are kept (a marker acknowledged
    while a pass ran, ADR 0011); ``tally``: project activity gathered for the
    caller to record once; ``fresh``: the rows are new (no pre-read).
    """
    summary = SyncSummary()
    present: list[Changed] = []
    given: dict[str, str] = {}  # texts the writer holds: the search index takes them as they are
    read_here: dict[str, str] = {}  # texts read here: the search index reads them again under its row lock
    gone = [vault.rel(vault.path(p)) for p in removed]
    needs_text = bool(stores & {ENTRIES, FILE_STATS})  # the search store reads what it needs itself
    for entry in changed:
        item = entry if isinstance(entry, Changed) else Changed(vault.rel(vault.path(entry)))
        if item.text is not None:
            given[item.path] = item.text
        elif needs_text:
            state = _load(vault, item, summary)
            if state is None:
                continue
            if not state:
                gone.append(item.path)
                continue
            read_here[item.path] = item.text or ""
        present.append(item)
    gone = sorted(set(gone))
    paths = sorted({item.path for item in present} | set(gone))
    summary.files = len(paths)
    if ENTRIES in stores:
        if paths:
            rows = [r for item in present for r in _rows(item, summary)]
            written = write_file_records(session, paths, rows, before=before, tally=tally, fresh=fresh)
            summary.entries, summary.removed = written.entries, written.removed
        for records in (appended or {}).values():
            summary.entries += upsert_entries(session, list(records), fresh=fresh)
    if FILE_STATS in stores:
        summary.file_stats, summary.forgotten = _file_stats(session, vault, present, gone)
    if SEARCH in stores:
        _follow_search(session, vault, [*paths, *(appended or {})], given=given, read_here=read_here)
    return summary


def _file_stats(session: Session, vault: Vault, present: list[Changed], gone: list[str]) -> tuple[int, int]:
    """Save the stat, digest and arc facts of each written document the keeper scans; forget the rest."""
    rows, forget = [], list(gone)
    for item in present:
        stat = item.stat or filestats.stat_one(vault, item.path)
        if stat is None or not _keeps_file_stats(item.path):
            forget.append(item.path)
            continue
        if item.facts is not None:
            facts: Mapping[str, Any] | None = item.facts
        else:
            assert item.text is not None
            facts = arc_facts_of(item.path, item.text, stat.mtime_ns, meta=item.doc.meta if item.doc is not None else None)
        digest = item.sha256 or filestats.digest(item.text or "")
        kind = item.kind or kind_of_path(item.path)
        rows.append(filestats.StatRow(item.path, stat.size, stat.mtime_ns, digest, kind, dict(facts) if facts else None))
    filestats.save(session, rows)
    filestats.forget(session, forget)
    return len(rows), len(forget)


def sync_file_stats(session: Session, vault: Vault, changed: Iterable[Changed]) -> int:
    """Only the file stats of these documents (the keeper's pass: each with its stat, digest and facts, ``{}`` for none)."""
    return _file_stats(session, vault, list(changed), [])[0]


def drop_missing(session: Session, live: Iterable[str], known: Iterable[str], *, before: dt.datetime) -> int:
    """After a full scan: the rows of files not in ``live`` go (those written since ``before`` stay), and their file stats."""
    live = list(live)
    removed = drop_paths_not_in(session, live, before=before)
    filestats.forget(session, set(known) - set(live))
    return removed


def stale_paths(session: Session, vault: Vault, present: Iterable[str], prefixes: Sequence[str]) -> list[str]:
    """Of the files ``present`` (and those the file stats hold under ``prefixes`` that are gone), the ones whose size or
    mtime differ from what the index last read: what a writer killed between its vault writes and its commit left.

    A file that holds entries is judged by its file stats; any other (a dashboard, a feed table, a tombstone) by
    the search index's stamp of it. A file the index never read is not stale here: a tick or a rebuild reads it.
    """
    wanted = set(present)
    known = filestats.load(session)
    wanted |= {rel for rel in known if rel.startswith(tuple(prefixes))}
    held: dict[str, tuple[int, int]] = {}
    if wanted:
        rows = session.connection().exec_driver_sql(
            "SELECT path, size, mtime_ns FROM vault_documents WHERE path = ANY(%(paths)s::text[])", {"paths": sorted(wanted)}
        )
        held = {path: (size, mtime) for path, size, mtime in rows}
    out = []
    for rel in sorted(wanted):
        now = filestats.stat_one(vault, rel)
        row = known.get(rel)
        if row is not None:
            if now is None or row.stat != now:
                out.append(rel)
        elif rel in held and (now is None or held[rel] != (now.size, now.mtime_ns)):
            out.append(rel)
    return out


def catch_up_search(session: Session, vault: Vault) -> None:
    """The search index brought up to every file whose size or mtime moved, once a rebuild built it."""
    if search_docs.indexed(session, vault):
        search_docs.rebuild_documents(session, vault)


def _follow_search(session: Session, vault: Vault, rels: Iterable[str], *, given: Mapping[str, str], read_here: Mapping[str, str]) -> None:
    """Keep the search index (``search_docs``) current for these files, once a rebuild built it.

    ``given``: texts a writer holds, taken as they are; every other file is
    read (``read_here``: already read by this call) and read again under its
    row lock, since a concurrent append may be newer.
    """
    wanted = sorted(set(rels))
    if not wanted or not search_docs.indexed(session, vault):
        return
    taken, present, gone = [], [], []
    for rel in wanted:
        if rel in given:
            taken.append((rel, given[rel]))
            continue
        if rel in read_here:
            present.append((rel, read_here[rel]))
            continue
        try:
            present.append((rel, vault.read_text(rel)))
        except FileNotFoundError:
            gone.append(rel)
        except (OSError, UnicodeDecodeError):
            continue
    search_docs.upsert_documents(session, taken)
    search_docs.upsert_documents(session, present, reread=vault)
    search_docs.delete_documents(session, gone)
