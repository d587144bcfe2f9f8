"""``brain repair``: vaults damaged by upstream's defects made whole, in place, auditable and safe to rerun.

The four repairs of upstream's one-off scripts (UPSTREAM.md 5.8), as
``brain_core.vault.repairs`` defines them: ``.merged.merged`` chains
collapsed to one tombstone; arc titles polluted with a merge's rationale
cleaned; duplicate edges (and self-loops) removed, strongest type kept;
signal openings whose quoting was lost quoted again (with repeated
``## Merged from`` sections dropped on the way). The files read are the
markdown files under ``clusters/`` and the region folders; the title, edge
and merge repairs touch arcs only (an arc by its path, or a document with a
``cluster_id`` that is not a signal), the signal repair any of them.

Every byte outside a repaired span is kept: a file is read as bytes (line
ends as they are; a file that is not UTF-8 is skipped and listed) and
written through the job's ``VaultWrites`` (ADR 0039). One audit line per
change ``{file, what, before, after, dry_run, at}`` is written before the
change is made; a file a chain drops has its whole text as ``before``, so
every change can be undone from the audit. Why a rerun is safe: each repair
of a repaired text finds nothing (``brain_core.vault.repairs``), so a rerun
writes nothing and audits nothing. The index follows the files written
through the one path (``index.changes.sync_changes``, ADR 0038); the caller
commits ``db``. A dry run writes no file and no row.
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
from brain_core.vault import frontmatter
from brain_core.vault.layout import CLUSTERS_DIR, REGION_DIRS, is_arc, kind_of_path
from brain_core.vault.regions import canonical_id
from brain_core.vault.repairs import CHAIN, REPAIRS, Fix, merge_chains, merged_levels, repair_arc, requote_signals
from brain_kernel.db.engine import hold_keeper_lock
from brain_kernel.index import filestats
from brain_kernel.index.changes import SEARCH, stale_paths, sync_changes
from brain_kernel.index.entries import scan_point
from brain_kernel.index.rebuild import live_vault_files
from brain_kernel.vault_store import Vault
from brain_kernel.vault_writes import VaultWrites

SCANNED_PREFIXES = (CLUSTERS_DIR, *REGION_DIRS)


@dataclass
class RepairSummary(JobSummary):
    """What a run found and did; ``as_dict`` is the command's last stdout line, counts first."""

    scanned: int = 0
    changed: int = 0
    removed: int = 0
    repairs: Counter[str] = field(default_factory=lambda: Counter(dict.fromkeys(REPAIRS, 0)), metadata=SORTED_KEYS)
    skipped: list[str] = field(default_factory=list)
    dry_run: bool = False
    files_written: list[str] = field(default_factory=list)
    index: dict[str, Any] = field(default_factory=lambda: {"refreshed": False})


def candidates(vault: Vault) -> list[str]:
    """The vault paths a run reads (module docstring), sorted."""
    return filestats.markdown_under(vault.root, SCANNED_PREFIXES)


class _Run:
    """One run's reads, writes and audit lines."""

    def __init__(self, vault: Vault, dry_run: bool, audit: TextIO | None, plan: Callable[[dict[str, Any]], None] | None) -> None:
        self.vault, self.dry_run, self.audit, self.plan = vault, dry_run, audit, plan
        self.writes = VaultWrites(vault, dry_run=dry_run)
        self.summary = RepairSummary(dry_run=dry_run)
        self.written: set[str] = set()

    def read(self, rel: str) -> str | None:
        """The file's exact text as this run leaves it; None (listed as skipped) when it cannot be read as UTF-8."""
        held = self.writes.texts.get(rel)
        if held is not None:
            return held
        try:
            return self.vault.listed(rel).read_bytes().decode("utf-8")  # exact bytes: CRLF files stay CRLF
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.summary.skipped.append(f"{rel}: {exc.strerror}")
        except UnicodeDecodeError:
            self.summary.skipped.append(f"{rel}: not UTF-8, left as it is")
        return None

    def record(self, rel: str, fix: Fix) -> None:
        """Audit one change before it is made."""
        line = {
            "file": rel,
            "what": fix.what,
            "before": fix.before,
            "after": fix.after,
            "dry_run": self.dry_run,
            "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        }
        if self.audit is not None:
            self.audit.write(json.dumps(line, ensure_ascii=False) + "\n")
            self.audit.flush()
        if self.plan is not None:
            self.plan(line)
        self.summary.repairs[fix.what] += 1

    def collapse_chains(self, rels: list[str]) -> set[str]:
        """Each ``.merged.merged`` chain made one tombstone; the paths removed."""
        texts = {rel: text for rel in rels if merged_levels(rel) >= 1 and (text := self.read(rel)) is not None}
        gone: set[str] = set()
        for chain in merge_chains({rel: len(text) for rel, text in texts.items()}):
            kept = texts[chain.keep]
            if chain.keep != chain.target:
                self.record(chain.target, Fix(CHAIN, texts.get(chain.target), kept))
                self.writes.write(chain.target, kept, changed=True)
                self.written.add(chain.target)
            for rel in chain.drop:
                self.record(rel, Fix(CHAIN, texts[rel], None))
                self.writes.remove(rel)
                self.summary.removed += 1
                gone.add(rel)
        return gone

    def repair_file(self, rel: str) -> None:
        text = self.read(rel)
        if text is None:
            return
        self.summary.scanned += 1
        doc = frontmatter.parse(text)
        if is_arc(kind_of_path(rel), doc.meta):
            own = (str(doc.meta.get("cluster_id") or ""), canonical_id(rel))
            repaired = repair_arc(text, own)
        else:
            repaired = requote_signals(text)
        if repaired is None:
            return
        for fix in repaired.fixes:
            self.record(rel, fix)
        self.writes.write(rel, repaired.text, changed=True)
        self.written.add(rel)


def run_repair(
    vault: Vault,
    *,
    db: Session | None = None,
    dry_run: bool = False,
    audit: TextIO | None = None,
    progress: Progress = SILENT,
    plan: Callable[[dict[str, Any]], None] | None = None,
) -> RepairSummary:
    """Make the four repairs over the vault (module docstring); the caller commits ``db``.

    ``audit`` receives one JSON line per change before it is made, ``plan`` the same line as a dict.
    """
    if db is not None and not dry_run:
        hold_keeper_lock(db)  # not beside a tick, an apply or a scrub: they rewrite the same arcs
    # Rows written from here on are markers acknowledged while it runs: its re-read of a shared log must keep them.
    started = scan_point(db) if db is not None and not dry_run else None
    run = _Run(vault, dry_run, audit, plan)
    rels = candidates(vault)
    progress.say(f"{len(rels)} files to read")
    gone = run.collapse_chains(rels)
    for done, rel in enumerate(rels, 1):
        progress.step(done, len(rels))
        if rel not in gone:
            run.repair_file(rel)
    summary = run.summary
    summary.changed = len(run.written)
    touched = run.writes.touched
    if dry_run:
        return summary
    summary.files_written = [rel for rel in touched if run.writes.exists(rel)]
    if db is not None:
        # and the files a killed run wrote (or removed) before its commit: the index still holds their old rows
        touched = sorted(set(touched) | set(stale_paths(db, vault, rels, SCANNED_PREFIXES)))
    if touched and db is not None:
        progress.say(f"bringing the index up to {len(touched)} files")
        live = set(live_vault_files(filestats.stat_files(vault)))
        result = sync_changes(db, vault, [rel for rel in touched if rel in live], before=started)
        sync_changes(db, vault, [rel for rel in touched if rel not in live], stores=frozenset({SEARCH}))  # tombstones, gone files
        summary.index = {"refreshed": True, "files": len(touched), "entries_written": result.entries, "removed": result.removed}
    return summary
