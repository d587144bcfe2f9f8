"""``brain cluster``: an extract bundle -> arc files ``clusters/<date>/<cluster_id>.md``.

A thin wrapper over ``brain_ops.cluster.run_cluster``. Reads the bundle from a
file or stdin, prints a JSON summary; with DATABASE_URL set the arcs it writes
are also upserted into the index.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from brain_cli.common import job_session, load_settings, open_vault, operator_errors
from brain_cli.progress import reporter
from brain_kernel.errors import ConfigError


def _read_bundle(bundle: Path | None) -> dict:
    """The bundle from a file, or from stdin when no file (or ``-``) is given."""
    try:
        text = sys.stdin.read() if bundle is None or str(bundle) == "-" else bundle.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read bundle {bundle}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"the bundle is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("the bundle is not an extract bundle: expected a JSON object")
    return data


@operator_errors
def cluster(
    bundle: Path | None = typer.Option(None, help="Bundle written by brain extract (default: read stdin). Example: --bundle bundle.json"),
    out_dir: Path | None = typer.Option(
        None, "--out-dir", help="Vault to write arcs into, or its clusters/ folder (default BRAIN_VAULT). Example: --out-dir ./vault"
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Report the arcs that would be written, write nothing. Example: brain cluster --bundle b.json --out-dir ./vault --dry-run"
    ),
    gap_minutes: int = typer.Option(
        240, "--gap-minutes", min=1, help="Split a project's sessions into arcs where they are further apart than this. Example: --gap-minutes 120"
    ),
    database_url: str | None = typer.Option(
        None,
        "--database-url",
        help="Postgres URL to index the written arcs (default DATABASE_URL; unset = vault only). Example: --database-url postgresql://brain@db/brain",
    ),
) -> None:
    """Group a bundle's sessions into arcs by canonical project and write them to the vault.

    Sessions of one repository (primary checkout and linked worktrees alike)
    close in time share an arc; same-named repos never do. Cluster ids come
    from the sorted session ids, so rerunning on the same bundle writes
    nothing new. Prints a JSON summary on stdout.

    Example: brain extract --since 24h | brain cluster --out-dir ./vault
    """
    settings = load_settings(database_url=database_url)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_ops.cluster import run_cluster

    target = out_dir or settings.vault
    # A vault that does not exist is a typo, not a new vault (exit 2, as every vault command): its clusters/ may be new.
    open_vault(target.parent if target.name == "clusters" else target)
    data = _read_bundle(bundle)
    progress = reporter("cluster")
    if settings.database_url and not dry_run:
        with job_session(settings) as (_, db):
            summary = run_cluster(data, target, dry_run, db=db, gap_minutes=gap_minutes, progress=progress)
    else:
        summary = run_cluster(data, target, dry_run, gap_minutes=gap_minutes, progress=progress)
    typer.echo(json.dumps(summary))
