"""``brain extract``: Claude Code and Codex transcripts -> a JSON bundle of resolved sessions.

A thin wrapper over ``brain_ops.extract.run_extract``. Works with no database
at all (git, transcript, catalog and layout evidence); when DATABASE_URL is set
(or ``--with-database`` asks for the embedded one) it also reads the session
index and learned roots, and records session rows, their outcomes and learned
roots, committed when the run succeeds.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from brain_cli.common import job_session, load_settings, operator_errors
from brain_cli.progress import reporter


@operator_errors
def extract(
    since: str = typer.Option("24h", help="Only sessions active after this: a duration back from now or an ISO date. Example: --since 7d"),
    until: str | None = typer.Option(None, help="Only sessions started before this (duration or ISO date). Example: --until 2026-11-28"),
    claude_dir: Path | None = typer.Option(
        None, "--claude-dir", help="Claude Code transcripts (default BRAIN_CLAUDE_DIR, else ~/.claude/projects). Example: --claude-dir /mnt/claude/projects"
    ),
    codex_dir: Path | None = typer.Option(
        None, "--codex-dir", help="Codex home holding sessions/ (default BRAIN_CODEX_DIR or CODEX_HOME, else ~/.codex). Example: --codex-dir ~/.codex"
    ),
    project: str | None = typer.Option(None, help="Keep only sessions of this project (short key or owner/name). Example: --project acme/widget"),
    min_turns: int = typer.Option(5, "--min-turns", min=0, help="Skip sessions with fewer user+assistant turns. Example: --min-turns 2"),
    database_url: str | None = typer.Option(
        None,
        "--database-url",
        help="Postgres URL for the session index (default DATABASE_URL; unset = no database). Example: --database-url postgresql://brain@db/brain",
    ),
    with_database: bool = typer.Option(
        False,
        "--with-database",
        help="Use the kernel's database even with DATABASE_URL unset: the embedded one under BRAIN_HOME, started for the run, "
        "so sessions and their outcomes are recorded (what the trial's report compares). Example: brain extract --since 30d --with-database",
    ),
) -> None:
    """Print a JSON bundle of sessions, each with agent, project, repo, worktree, project_source.

    Each session's project is resolved before anything groups it (session
    index, Codex repository_url, git, catalog, learned roots, layout); the
    bundle also reports sessions_scanned, sessions_returned and skipped.
    Progress goes to stderr.

    Example: brain extract --since 24h --min-turns 5 > bundle.json
    """
    settings = load_settings(database_url=database_url)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_ops.extract import parse_when, run_extract

    window = {"since": parse_when(since), "until": parse_when(until)}
    options = {"claude_dir": claude_dir, "codex_dir": codex_dir, "project": project, "min_turns": min_turns, "progress": reporter("extract")}
    if settings.database_url or with_database:
        with job_session(settings) as (ready, db):
            bundle = run_extract(ready, **window, **options, db=db)
    else:
        bundle = run_extract(settings, **window, **options)
    typer.echo(json.dumps(bundle))
