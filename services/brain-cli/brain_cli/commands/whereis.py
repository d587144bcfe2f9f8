"""``brain whereis``: resolve working folders to their project, one JSON object per line.

Works with no database (git, catalog and layout evidence only). With
DATABASE_URL set it also consults learned roots and records the roots git
finds, so a later run on a machine without the repositories still resolves.
"""

from __future__ import annotations

import json
import os

import typer

from brain_cli.common import job_session, load_settings, operator_errors
from brain_kernel.identity.resolver import IdentityResolver


@operator_errors
def whereis(
    paths: list[str] = typer.Argument(..., help="Working folders to resolve, e.g. . or ~/dev/api/src."),
    as_json: bool = typer.Option(True, "--json/--text", help="One JSON object per line (default), or a plain table. Example: brain whereis . --text"),
    learn: bool = typer.Option(
        True, "--learn/--no-learn", help="With a database, record the roots git finds (default on). Example: brain whereis ~/dev/api --no-learn"
    ),
    database_url: str | None = typer.Option(
        None,
        "--database-url",
        help="Postgres URL for learned roots (default DATABASE_URL; unset = no database). Example: --database-url postgresql://brain@db/brain",
    ),
) -> None:
    """Print the project of each PATH: cwd, project, repo, root, worktree, source.

    Resolution order: git, the operator catalog, learned roots (with a
    database), layout patterns; a folder with no evidence prints project null.

    Example: brain whereis . ~/scratchpad/api/task1 --json
    """
    settings = load_settings(database_url=database_url)
    folders = [os.path.abspath(os.path.expanduser(p)) if p.strip() else "" for p in paths]
    if settings.database_url:
        from sqlalchemy.exc import ProgrammingError

        from brain_kernel.errors import ConfigError

        try:  # a lookup: the schema is not created from here
            with job_session(settings, migrate=False) as (_, db):
                resolver = IdentityResolver(settings, db, learn=learn)
                identities = [resolver.resolve(f) for f in folders]
        except ProgrammingError:
            raise ConfigError("the database has no index schema yet: run `brain migrate`") from None
    else:
        resolver = IdentityResolver(settings)
        identities = [resolver.resolve(f) for f in folders]
    for identity in identities:
        data = identity.to_dict()
        if as_json:
            typer.echo(json.dumps(data))
        else:
            typer.echo("\t".join(str(data[k]) if data[k] is not None else "-" for k in ("cwd", "project", "repo", "source")))
