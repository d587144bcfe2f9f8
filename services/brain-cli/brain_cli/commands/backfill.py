"""``brain backfill``: re-resolve the project of existing arcs and correct them in place, auditable and safe to rerun."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from brain_cli.common import DatabaseOption, VaultOption, audit_and_plan, fail, job_session, load_settings, open_vault, operator_errors
from brain_cli.progress import reporter


@operator_errors
def backfill(
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the plan (one JSON line per change), write no arc and no index row. Example: brain backfill --dry-run"
    ),
    audit: Path | None = typer.Option(
        None,
        "--audit",
        help="Append one JSON line per change (path, old and new values, source, sessions) to this file. Example: --audit /vault/raw/backfill/audit.jsonl",
    ),
    claude_dir: Path | None = typer.Option(
        None, "--claude-dir", help="Claude Code transcripts (default BRAIN_CLAUDE_DIR, else ~/.claude/projects). Example: --claude-dir /mnt/claude/projects"
    ),
    codex_dir: Path | None = typer.Option(
        None, "--codex-dir", help="Codex home holding sessions/ (default BRAIN_CODEX_DIR or CODEX_HOME, else ~/.codex). Example: --codex-dir ~/.codex"
    ),
    only: list[str] = typer.Option(
        [], "--only", help="Only these arc files or folders (vault-relative or absolute; repeat the option). Example: --only clusters/2026-11-28 --only left"
    ),
    rewrite_markers: bool = typer.Option(
        False,
        "--rewrite-markers",
        help="Also tag, in the vault, each lesson, milestone, signal and decision entry that names a session and no project"
        " with the project its session resolves to (only that entry's tag or project keys change). Example: brain backfill --rewrite-markers",
    ),
    vault: VaultOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Re-resolve the project of every arc from its source sessions, safely and auditably.

    Every arc (clusters/ and the region folders, merge tombstones included) is
    resolved from its source sessions: the session index, the Claude and Codex transcripts
    found by session id, git (a deleted folder through its nearest existing ancestor), the
    catalog, learned roots, layout patterns, and an upstream project: naming exactly one
    known project (legacy). Writes project, projects, repo, worktrees and project_source and
    no other byte; an arc whose sessions say "no project" (home folder, a folder outside any
    repository) is cleared, one with no surviving evidence is left as it is (unverifiable),
    a knowledge arc (no sessions) stays unattributed. The index, the file stats and the stored
    feed answers follow. Sessions of markers that name no project are recorded, which
    attributes those markers in the index; --rewrite-markers also writes their project
    into the vault files, entry by entry. Safe to rerun; a killed run rerun ends in the same state.
    The last stdout line is the JSON summary {scanned, changed, unchanged, unresolved, by_source, ...}.

    Example: brain backfill --dry-run --audit /vault/raw/backfill/audit-dry.jsonl
    """
    settings = load_settings(vault=vault, database_url=database_url)
    store = open_vault(settings.vault)
    for named in only:  # a mistyped path would scan nothing and say nothing was wrong
        path = (Path(named) if Path(named).is_absolute() else store.root / named).resolve()
        if not (path == store.root.resolve() or path.is_relative_to(store.root.resolve())):
            fail(f"--only {named}: not in the vault ({store.root})")
        if not path.exists():
            fail(f"--only {named}: no such file or folder in the vault ({store.root})")
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_ops.backfill.run import run_backfill

    # docs/operations.md's flow audits to raw/backfill/ in the vault, a folder the scaffold does not make.
    with audit_and_plan(audit, dry_run=dry_run, make_folder=True) as (sink, show), job_session(settings, embed_after=not dry_run) as (ready, session):
        summary = run_backfill(
            ready,
            store,
            db=session,
            dry_run=dry_run,
            audit=sink,
            claude_dir=claude_dir,
            codex_dir=codex_dir,
            only=only,
            progress=reporter("backfill"),
            plan=show,
            rewrite_markers=rewrite_markers,
        )
    typer.echo(json.dumps(summary.as_dict(), ensure_ascii=False))
