"""``brain reindex``: rebuild the index (entries and projects) from the vault alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from brain_kernel.cli import app, job_session, load_settings, operator_errors
from brain_kernel.errors import ConfigError
from brain_kernel.vault import Vault


def stderr_progress(every: int = 1000):
    """A progress callback: a counter on a terminal, a plain line every ``every`` files otherwise."""
    tty = sys.stderr.isatty()

    def report(count: int, rel: str) -> None:
        if tty:
            sys.stderr.write(f"\rindexed {count} files")
            sys.stderr.flush()
        elif count % every == 0:
            sys.stderr.write(f"indexed {count} files ({rel})\n")

    return report


def open_vault(path: Path) -> Vault:
    """The vault at ``path``; ConfigError when the folder does not exist."""
    vault = Vault(path)
    if not vault.root.is_dir():
        raise ConfigError(f"vault folder {vault.root} does not exist")
    return vault


@app.command()
@operator_errors
def reindex(
    vault: Optional[Path] = typer.Option(None, help="Vault folder (default ./vault, BRAIN_VAULT). Example: --vault /srv/vault"),
    database_url: Optional[str] = typer.Option(
        None, "--database-url", help="Postgres URL (default DATABASE_URL; unset = embedded under BRAIN_HOME). Example: --database-url postgresql://brain@db/brain"
    ),
) -> None:
    """Rebuild the index from the vault: every arc, lesson, decision, signal, milestone,
    intent and inject block, and the projects they name.

    The vault is the source of truth: the entries table is replaced in one
    transaction (readers see the old index until it commits); merged arc
    tombstones are not indexed. Safe to rerun. Prints a JSON summary.

    Example: BRAIN_VAULT=./vault brain reindex
    """
    from brain_ops.reindex import rebuild

    settings = load_settings(vault=vault, database_url=database_url)
    store = open_vault(settings.vault)
    with job_session(settings) as (_, session):
        summary = rebuild(session, store, progress=stderr_progress())
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    typer.echo(json.dumps(summary.as_dict()))
