"""The ``brain`` command: thin wrappers over the kernel's services and jobs.

Each command builds the settings once (environment, then flags), calls a
library function, prints machine output as JSON on stdout and progress on
stderr. Operator errors (bad configuration, unreachable database) end with one
``error:`` line and exit code 2, never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, TypeVar

import typer
from pydantic import ValidationError

from brain_kernel.errors import BrainError
from brain_kernel.settings import Settings

if TYPE_CHECKING:  # the CLI imports SQLAlchemy only for commands that use the database
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

app = typer.Typer(
    name="brain",
    help="The brain kernel: project-scoped memory for a fleet of coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = 2) -> None:
    """Print one error line and exit."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def operator_errors(func: F) -> F:
    """Turn configuration and operator errors into one line and a non-zero exit."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BrainError as exc:
            fail(str(exc))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            fail(f"invalid setting {where}: {first.get('msg')}")
        except OSError as exc:  # an unreadable or unwritable path given by the operator
            where = f"{exc.filename}: " if exc.filename else ""
            fail(f"{where}{exc.strerror or exc}")

    return wrapper  # type: ignore[return-value]


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment with CLI flag overrides applied."""
    base = Settings()
    return base.with_overrides(**overrides) if any(v is not None for v in overrides.values()) else base


@contextmanager
def database(settings: Settings, *, migrate: bool = True) -> Iterator[Settings]:
    """Yield settings with a reachable, migrated database (embedded when DATABASE_URL is unset)."""
    from brain_kernel.runtime import open_database

    with open_database(settings, migrate=migrate) as ready:
        yield ready


@contextmanager
def job_engine(settings: Settings, *, migrate: bool = True) -> Iterator[tuple[Settings, Engine]]:
    """``database`` plus a pool-less engine on it for a one-shot command, disposed at the end."""
    from brain_kernel.db import make_engine

    with database(settings, migrate=migrate) as ready:
        assert ready.database_url is not None
        engine = make_engine(ready.database_url, pooled=False)
        try:
            yield ready, engine
        finally:
            engine.dispose()


@contextmanager
def job_session(settings: Settings, *, migrate: bool = True) -> Iterator[tuple[Settings, Session]]:
    """``job_engine`` with one unit of work: committed when the command's block succeeds."""
    from brain_kernel.db import session_factory, unit_of_work

    with job_engine(settings, migrate=migrate) as (ready, engine), unit_of_work(session_factory(engine)) as session:
        yield ready, session


@app.command()
@operator_errors
def serve(
    host: str = typer.Option(None, help="Interface to bind (default 127.0.0.1, BRAIN_HOST)."),
    port: int = typer.Option(None, help="Port to listen on (default 8080, BRAIN_PORT)."),
    vault: Path = typer.Option(None, help="Vault folder (default ./vault, BRAIN_VAULT)."),
    database_url: str = typer.Option(None, "--database-url", help="Postgres URL; unset = embedded Postgres under BRAIN_HOME."),
    workers: int = typer.Option(None, help="Worker processes (default 1, BRAIN_WORKERS)."),
) -> None:
    """Run the HTTP API.

    Without a database URL an embedded Postgres with pgvector starts under
    BRAIN_HOME (default ./.brain); migrations run and the vault is scaffolded
    before the server listens. Ctrl-C or SIGTERM stops the server and the
    embedded database cleanly.

    Example: brain serve --port 8080 --vault ./vault
    """
    from brain_kernel.runtime import serve as run_server

    settings = load_settings(host=host, port=port, vault=vault, database_url=database_url, workers=workers)
    run_server(settings)


@app.command()
@operator_errors
def migrate(
    database_url: str = typer.Option(None, "--database-url", help="Postgres URL; unset = embedded Postgres under BRAIN_HOME."),
) -> None:
    """Upgrade the index schema to the latest revision (alembic upgrade head).

    Example: DATABASE_URL=postgresql://brain@db/brain brain migrate
    """
    from brain_kernel.migrate import head_revision

    settings = load_settings(database_url=database_url)
    with database(settings, migrate=True):
        typer.echo(json.dumps({"migrated": True, "revision": head_revision()}))


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


def _register_commands() -> None:
    """Import the command modules; each adds its commands to ``app``."""
    from brain_kernel.commands import cluster, extract, reindex, tick, whereis  # noqa: F401


_register_commands()
