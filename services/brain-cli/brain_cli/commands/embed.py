"""``brain embed``: the index's entries into the search index, only what changed (``brain_kernel.search.embed_run``)."""

from __future__ import annotations

import json

import typer

from brain_cli.common import DatabaseOption, job_session, load_settings, operator_errors
from brain_cli.progress import reporter


@operator_errors
def embed(
    prune: bool = typer.Option(False, "--prune", help="Also drop the chunks of entries the index no longer holds. Example: brain embed --prune"),
    force_all: bool = typer.Option(False, "--force-all", help="Embed every entry again, changed or not. Example: brain embed --force-all"),
    database_url: DatabaseOption = None,
) -> None:
    """Embed arcs, lessons, decisions and signals with their project on every chunk.

    Uses the OpenAI-compatible endpoint when BRAIN_EMBED_BASE_URL (or
    LLM_API_BASE) is set, else the offline model shipped with the kernel.
    Only new and changed entries are embedded (content hashes in the
    database). Progress on stderr, a JSON summary on stdout.

    Example: brain embed --prune
    """
    settings = load_settings(database_url=database_url)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_kernel.search.embed_run import run_embed
    from brain_kernel.search.embedders import embedder_for

    with job_session(settings) as (ready, db):
        summary = run_embed(db, embedder_for(ready), force_all=force_all, prune=prune, force_dim=ready.embed_dim_force_migrate, progress=reporter("embed"))
    typer.echo(json.dumps(summary.as_dict()))
