"""Markers that name a session and no project: attributed in the index, and with ``--rewrite-markers`` in the vault.

The index attributes them once their sessions are recorded in the session
index (found in transcripts), which rebuilds derive from too;
``rewrite_marker_files`` also writes the attribution into the vault, entry by
entry (``brain_core.backfill.retag_markers``), audit line first, so a rerun
finds only the entries left.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from sqlalchemy import text as sql
from sqlalchemy.orm import Session

from brain_core.backfill import retag_markers, unattributed_markers
from brain_core.markers import Attribution
from brain_core.vault.records import parsed_document
from brain_kernel.identity.sessions import SessionRecord, record_sessions
from brain_kernel.index import filestats
from brain_kernel.vault_writes import VaultWrites
from brain_ops.backfill.evidence import Evidence
from brain_ops.backfill.follow import Follow
from brain_ops.backfill.summary import BackfillSummary


def rewrite_marker_files(
    writes: VaultWrites,
    rels: Sequence[str],
    evidence: Evidence,
    summary: BackfillSummary,
    follow: Follow | None,
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


def attribute_markers(db: Session, evidence: Evidence, summary: BackfillSummary, dry_run: bool) -> None:
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
