"""``brain serve`` and ``brain migrate``: the API process and the schema upgrade."""

from __future__ import annotations

import json

import typer

from brain_cli.common import DatabaseOption, VaultOption, fail, load_settings, operator_errors


@operator_errors
def serve(
    host: str = typer.Option(None, help="Interface to bind (default 127.0.0.1, BRAIN_HOST)."),
    port: int = typer.Option(None, help="Port to listen on (default 8080, BRAIN_PORT)."),
    vault: VaultOption = None,
    database_url: DatabaseOption = None,
    workers: int = typer.Option(None, help="Worker processes (default 1, BRAIN_WORKERS)."),
) -> None:
    """Run the HTTP API.

    Without a database URL an embedded Postgres with pgvector starts under
    BRAIN_HOME (default ./.brain); migrations run and the vault is scaffolded
    before the server listens. Ctrl-C or SIGTERM stops the server and the
    embedded database cleanly.

    Example: brain serve --port 8080 --vault ./vault
    """
    settings = load_settings(host=host, port=port, vault=vault, database_url=database_url, workers=workers)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_cli.runtime import serve as run_server

    run_server(settings)


@operator_errors
def migrate(
    database_url: DatabaseOption = None,
    to: str = typer.Option(None, "--to", help="Move the schema to this revision instead; an older one runs the downgrades (a rollback). Example: --to 0020"),
) -> None:
    """Upgrade the index schema to the latest revision (alembic upgrade head), or move it to --to.

    A rollback to an older release: `brain migrate --to <its head revision>` with
    the current release's image, then start the older one.

    Example: DATABASE_URL=postgresql://brain@db/brain brain migrate
    """
    settings = load_settings(database_url=database_url)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from alembic.util import CommandError

    from brain_cli.runtime import open_database
    from brain_migrations.runner import head_revision, migrate_to

    if to is None:
        # This is the migration job: it migrates whatever BRAIN_MIGRATE_ON_START says of the other processes.
        with open_database(settings.with_overrides(migrate_on_start=True), migrate=True):
            typer.echo(json.dumps({"migrated": True, "revision": head_revision()}))
        return
    with open_database(settings, migrate=False) as ready:
        try:
            before = migrate_to(ready.database_url or "", to)
        except CommandError as exc:
            fail(f"cannot migrate to {to}: {exc}")
        typer.echo(json.dumps({"migrated": True, "from": before, "revision": to}))
