"""``brain backfill``: re-resolve the project of every existing arc and correct it in place (DESIGN 1.7).

Every arc file the keeper scans (``clusters/`` and the region folders, merge
tombstones and second copies included, so their projects stay right) is read;
each source session's evidence is gathered (``evidence``) and
``brain_core.backfill`` decides; the arcs are corrected in place (``arcs``),
the markers that name only a session are attributed (``markers``), and the
derived stores follow what was written (``follow``). This module runs the
four in order.

Why a rerun and a killed run converge: the decision is a function of the
evidence, and a file that already says it is not written; the audit line
of a change is appended before its write, so a change is never unaudited
(a killed run may log one twice). The index follows the files written, and
also every live arc whose size or mtime differs from its file stats
(what a killed run wrote but never committed), through the kernel's one
path to the derived stores (``index.changes.sync_changes``: entries, file
stats, search). Marker entries already tagged are not candidates, so a
rerun finds only the entries left.

``dry_run`` writes no arc and no row (the plan goes to the audit file and
the plan callback); the function never commits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from sqlalchemy.orm import Session

from brain_core.backfill import KNOWLEDGE, MARKER_KINDS
from brain_core.membership import KnownProject
from brain_core.progress import SILENT, Progress
from brain_core.vault.layout import kind_of_path
from brain_kernel.db.engine import hold_keeper_lock
from brain_kernel.identity.projects import known_projects
from brain_kernel.identity.resolver import IdentityResolver
from brain_kernel.index import filestats
from brain_kernel.index.entries import scan_point
from brain_kernel.index.rebuild import ARC_CAPABLE_KINDS
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_kernel.vault_writes import VaultWrites
from brain_ops.backfill.arcs import ArcWriter, correct_arcs, read_ahead
from brain_ops.backfill.evidence import Evidence
from brain_ops.backfill.follow import Follow
from brain_ops.backfill.markers import attribute_markers, rewrite_marker_files
from brain_ops.backfill.summary import BackfillSummary


def _files(vault: Vault, disk: dict[str, filestats.Stat], kinds: Sequence[str], only: Sequence[str]) -> list[str]:
    """The listed files of ``kinds``, in order, limited to the files and folders ``only`` names."""
    rels = sorted(p for p in disk if kind_of_path(p) in kinds)
    if only:
        wanted = [vault.rel(vault.path(p)) for p in only]  # vault-relative or absolute; VaultPathError outside the vault
        rels = [r for r in rels if any(r == w or r.startswith(w.rstrip("/") + "/") for w in wanted)]
    return rels


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
    evidence = Evidence(settings, db, resolver, claude, codex)
    started = scan_point(db) if db is not None else None  # rows a marker write adds from here on are kept
    disk = filestats.stat_files(vault)
    rels = _files(vault, disk, ARC_CAPABLE_KINDS, only)
    resolver.preload()  # from here resolutions read no row: the session is lent to the follower's thread
    known: list[KnownProject] = known_projects(db) if db is not None else []
    follow = Follow(db, vault, disk, started, markers=rewrite_markers) if db is not None and not dry_run else None
    writes = VaultWrites(vault, dry_run=dry_run)
    try:
        arcs = read_ahead(vault, rels, summary, evidence, follow)
        correct_arcs(arcs, len(rels), evidence, known, summary, dry_run, audit, plan, progress, ArcWriter(writes, summary, follow, after_write))
        if follow is not None:
            progress.say("bringing the index up to the arcs written")
            follow.wait()  # the session is the main thread's again
        if rewrite_markers:
            rewrite_marker_files(writes, _files(vault, disk, MARKER_KINDS, only), evidence, summary, follow, dry_run, audit, plan, after_write)
            if follow is not None:
                follow.wait()
        if db is not None:
            attribute_markers(db, evidence, summary, dry_run)
            if not dry_run:
                resolver.flush_learned()
        if follow is not None:
            progress.say("bringing the index up to the files a killed run left")
            summary.index = follow.finish()
    finally:
        if follow is not None:
            follow.close()  # a failed run: the write in flight ends before the caller rolls the session back
    summary.by_outcome.setdefault(KNOWLEDGE, 0)
    return summary
