"""``brain apply``: a keeper AI answer's six sections applied to the vault and the index."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from brain_cli.common import DatabaseOption, VaultOption, job_session, load_settings, open_vault, operator_errors
from brain_cli.progress import reporter


@operator_errors
def apply(
    ai_output: Path = typer.Option(..., "--ai-output", help="The AI answer to apply (markdown, six sections). Example: --ai-output tick-answer.md"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report what would change, write nothing. Example: brain apply --ai-output a.md --dry-run"),
    vault: VaultOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Apply a keeper AI answer (edges, merges, signals, intent, health, summaries) to the vault.

    The six sections of UPSTREAM.md 5.6, in order: 1. edges, 2. MERGE/SPLIT, 3. ESCALATE/CLEAR,
    4. operator intent (a paragraph, or a JSON object project -> intent), 5. health, 6. summaries.

    Bullets, backticks and both -> and → are accepted. Edges need both arcs to exist
    (strongest type per pair); a merge keeps every project of both arcs and tombstones
    the absorbed arc as <id>.merged.md; SPLIT is refused with its reason; ESCALATE and
    CLEAR act on signals of exactly that source. The index follows in the same run.
    Rerunning the same answer changes nothing. Prints a JSON summary.

    Example: brain apply --ai-output brain-feed/ticks/2026-11-29T12-00-00Z-ai-output.md --dry-run
    """
    settings = load_settings(vault=vault, database_url=database_url)
    store = open_vault(settings.vault)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_ops.keeper.apply import apply_ai_output

    text = ai_output.read_text(encoding="utf-8")

    with job_session(settings, embed_after=not dry_run) as (ready, session):
        summary = apply_ai_output(session, store, ready, text, dry_run=dry_run, progress=reporter("apply"))
    typer.echo(json.dumps(summary.as_dict(), ensure_ascii=False))
