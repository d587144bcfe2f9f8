"""``brain reindex``: rebuild the index (entries and projects) from the vault alone."""

from __future__ import annotations

import json

import typer

from brain_cli.common import DatabaseOption, VaultOption, job_session, load_settings, open_vault, operator_errors
from brain_cli.progress import reporter


@operator_errors
def reindex(
    vault: VaultOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Rebuild the index and the search index from the vault alone.

    Every arc, lesson, decision, signal, milestone, intent and inject block,
    the projects they name, and every searchable file's segments; the
    idempotency keys of markers younger than BRAIN_IDEMPOTENCY_TTL_SECONDS
    are remembered again, so replaying them writes nothing.

    The vault is the source of truth: the entries table is replaced in one
    transaction (readers see the old index until it commits); merged arc
    tombstones are not indexed. Safe to rerun. Prints a JSON summary.

    Example: BRAIN_VAULT=./vault brain reindex
    """
    settings = load_settings(vault=vault, database_url=database_url)
    store = open_vault(settings.vault)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_kernel.index.rebuild import rebuild

    with job_session(settings) as (_, session):
        summary = rebuild(session, store, progress=reporter("reindex"), key_ttl_seconds=settings.idempotency_ttl_seconds)
    typer.echo(json.dumps(summary.as_dict()))
