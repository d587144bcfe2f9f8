"""``brain scrub``: secrets taken out of the arcs already in the vault, and of the keeper's copies of them, in place.

Arcs clustered before the extractor scrubbed what it mined hold the agent's
prompts as the transcript had them, and the keeper copied their titles into
the day dashboards, the hot table and the intents (ADR 0036). This job reads
every ``.md`` file under ``clusters/`` (arcs, merge tombstones, dashboards),
every arc in the region folders (an arc by its path, or a document with a
``cluster_id`` that is not a signal, as the backfill reads them) and every
file under ``brain-feed/``, and applies ``brain_core.redact.scrub_document``
to its text. Lesson and milestone logs, decisions and signals hold markers,
scrubbed when they were written, and are not read.

Only the secret spans change: the file is read as bytes and written back as
bytes, every other byte and line end kept, atomically with its mode
(``Vault.rewrite_listed``). A file with frontmatter is written only when the
scrubbed text still parses, through the one codec, to the same keys in the
same way; otherwise, and for a file that is not UTF-8, it is skipped and
listed. A file without a secret is not written at all.

Why a rerun is safe: the scrub of scrubbed text is that text (a value that
is already the placeholder is neither replaced nor counted), so a rerun
writes nothing; the audit line of a change is flushed before its write, so a
change is never unaudited (a killed run may log one twice). The index
follows the files written through the kernel's one path: live documents by
``index.changes.sync_changes`` (entries, file stats and the search index; the stored feed answers are
invalidated by the index's triggers), the rest (dashboards, feed tables,
second copies) by its search store only; the next tick re-reads them
because their size and mtime moved. A rerun also brings the index up to the
files a killed run wrote but never committed (``index.changes.stale_paths``). ``dry_run`` writes no file and no row;
the function never commits.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from sqlalchemy.orm import Session

from brain_core.jsonable import SORTED_KEYS, JobSummary
from brain_core.progress import SILENT, Progress
from brain_core.redact import Scrubbed, scrub_document
from brain_core.vault import frontmatter
from brain_core.vault.layout import CLUSTERS_DIR, FEED_DIR, REGION_DIRS, is_arc, kind_of_path
from brain_kernel.db.engine import hold_keeper_lock
from brain_kernel.index import filestats
from brain_kernel.index.changes import SEARCH, stale_paths, sync_changes
from brain_kernel.index.entries import scan_point
from brain_kernel.index.rebuild import live_vault_files
from brain_kernel.vault_store import Vault

SCANNED_PREFIXES = (CLUSTERS_DIR, *REGION_DIRS, FEED_DIR)


@dataclass
class ScrubSummary(JobSummary):
    """What a run found and did; ``as_dict`` is the command's last stdout line, counts first."""

    scanned: int = 0
    changed: int = 0
    unchanged: int = 0
    secrets_removed: int = 0
    kinds: Counter[str] = field(default_factory=Counter, metadata=SORTED_KEYS)
    skipped: list[str] = field(default_factory=list)
    dry_run: bool = False
    files_written: list[str] = field(default_factory=list)
    index: dict[str, Any] = field(default_factory=lambda: {"refreshed": False})


def candidates(vault: Vault) -> list[str]:
    """The vault paths a run considers (module docstring), sorted; region documents are filtered once read."""
    return filestats.markdown_under(vault.root, SCANNED_PREFIXES)


def _in_regions(rel: str) -> bool:
    return rel.split("/", 1)[0] in REGION_DIRS


def same_structure(before: frontmatter.Document, after: frontmatter.Document) -> bool:
    """Whether a scrubbed file's frontmatter parses as the original's did: present or not, strictly or not, same keys in order."""
    return (before.has_frontmatter, before.strict, list(before.meta)) == (after.has_frontmatter, after.strict, list(after.meta))


def _audit_line(rel: str, result: Scrubbed, dry_run: bool) -> dict[str, Any]:
    return {
        "path": rel,
        "secrets_removed": result.removed,
        "kinds": result.kinds,
        "dry_run": dry_run,
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def run_scrub(
    vault: Vault,
    *,
    db: Session | None = None,
    dry_run: bool = False,
    audit: TextIO | None = None,
    progress: Progress = SILENT,
    plan: Callable[[dict[str, Any]], None] | None = None,
) -> ScrubSummary:
    """Scrub the vault's arcs and feed copies in place (module docstring); the caller commits ``db``.

    ``audit`` receives one JSON line per file changed (before its write), ``plan``
    the same line as a dict; neither ever holds a secret, only counts by kind.
    """
    if db is not None and not dry_run:
        hold_keeper_lock(db)  # not beside a tick, an apply or a backfill: they rewrite the same arcs
    # Rows written from here on are markers acknowledged while it runs: its re-read of a shared log must keep them.
    started = scan_point(db) if db is not None and not dry_run else None
    summary = ScrubSummary(dry_run=dry_run)
    rels = candidates(vault)
    for done, rel in enumerate(rels, 1):
        progress.step(done, len(rels))
        try:
            text = vault.listed(rel).read_bytes().decode("utf-8")  # exact bytes: CRLF files stay CRLF
        except FileNotFoundError:
            continue
        except OSError as exc:
            summary.skipped.append(f"{rel}: {exc.strerror}")
            continue
        except UnicodeDecodeError:
            summary.skipped.append(f"{rel}: not UTF-8, left as it is")  # a rewrite could not give back its other bytes
            continue
        doc = frontmatter.parse(text)
        if _in_regions(rel) and not is_arc(kind_of_path(rel), doc.meta):
            continue  # a log of markers, a decision, a signal or a standing document: not mined text
        summary.scanned += 1
        result = scrub_document(text)
        if not result.removed:
            summary.unchanged += 1
            continue
        if not same_structure(doc, frontmatter.parse(result.text)):
            summary.skipped.append(f"{rel}: the scrubbed frontmatter would not parse as before, left as it is")
            continue
        summary.changed += 1
        summary.secrets_removed += result.removed
        summary.kinds.update(result.kinds)
        line = _audit_line(rel, result, dry_run)
        if audit is not None:
            audit.write(json.dumps(line, ensure_ascii=False) + "\n")
            audit.flush()
        if plan is not None:
            plan(line)
        if not dry_run:
            vault.rewrite_listed(rel, result.text.encode("utf-8"))
            summary.files_written.append(rel)
    if summary.files_written:
        vault.sync_folders(summary.files_written)
    if db is not None and not dry_run:
        _follow(db, vault, summary, rels, progress, before=started)
    return summary


def _follow(db: Session, vault: Vault, summary: ScrubSummary, scanned: list[str], progress: Progress, *, before: dt.datetime | None) -> None:
    """The index follows the files written, and those a killed run wrote before its commit (their secrets would
    otherwise stay in the index's rows and search text until the next tick): live documents' rows and search
    text, the others' search text."""
    touched = sorted(set(summary.files_written) | set(stale_paths(db, vault, scanned, SCANNED_PREFIXES)))
    if not touched:
        return
    progress.say(f"bringing the index up to {len(touched)} files")
    live = set(live_vault_files(filestats.stat_files(vault)))
    result = sync_changes(db, vault, [rel for rel in touched if rel in live], before=before)
    sync_changes(db, vault, [rel for rel in touched if rel not in live], stores=frozenset({SEARCH}))  # they hold no entries
    summary.index = {"refreshed": True, "files": len(touched), "entries_written": result.entries, "removed": result.removed}
