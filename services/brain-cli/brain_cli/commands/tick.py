"""``brain tick``: the keeper pass (heat and status, feed files, per-project intent, index refresh)."""

from __future__ import annotations

import json
import sys

import typer

from brain_cli.common import DatabaseOption, VaultOption, job_engine, load_settings, open_vault, operator_errors


@operator_errors
def tick(
    no_ai: bool = typer.Option(False, "--no-ai", help="Derive intents from hot arcs even when an LLM endpoint is configured. Example: brain tick --no-ai"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Compute and report, write nothing (no vault file, no index row). Example: brain tick --dry-run"),
    vault: VaultOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Run one keeper pass: score arcs (heat, status), write brain-feed/ (hot-arcs.md,
    signals.md, lessons.md, inject-blocks.md, intent.md), write one intent per project
    active in the last 72 hours (brain-feed/projects/<project>/intent.md), refresh
    the index from the vault, then store the default project feed answer of each
    active project so the next session start is served without recomputing it.

    With BRAIN_LLM_BASE_URL set (and no --no-ai) the intents come from one
    chat completion call; otherwise they are derived from each project's
    hottest arcs. Prints a JSON summary; progress goes to stderr.

    Example: brain tick --no-ai
    """
    from brain_ops.drain import run_tick_and_warm

    settings = load_settings(vault=vault, database_url=database_url)
    store = open_vault(settings.vault)

    def progress(message: str) -> None:
        sys.stderr.write(f"tick: {message}\n")

    with job_engine(settings) as (ready, engine):
        summary = run_tick_and_warm(engine, store, ready, use_ai=not no_ai, dry_run=dry_run, progress=progress)
    typer.echo(json.dumps(summary.as_dict()))
