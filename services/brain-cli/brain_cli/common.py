"""What every ``brain`` command shares: settings from the environment and flags, operator errors
as one line, and the database block of a one-shot job.

Operator errors (bad configuration, unreachable database, an unreadable path
the operator gave) end with one ``error:`` line on stderr and exit code 2,
never a traceback. Machine output goes to stdout as JSON, progress to stderr.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from pydantic import ValidationError

from brain_kernel.errors import BrainError, ConfigError
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault

if TYPE_CHECKING:  # commands that never touch the database do not pay for importing SQLAlchemy
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

F = TypeVar("F", bound=Callable[..., Any])

# The options every command that opens the vault or the index shares.
VaultOption = Annotated[Path | None, typer.Option("--vault", help="Vault folder (default ./vault, BRAIN_VAULT). Example: --vault /srv/vault")]
DatabaseOption = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="Postgres URL (default DATABASE_URL; unset = embedded Postgres under BRAIN_HOME). Example: --database-url postgresql://brain@db/brain",
    ),
]


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


def open_vault(path: Path) -> Vault:
    """The vault at ``path``; ConfigError when the folder does not exist."""
    vault = Vault(path)
    if not vault.root.is_dir():
        raise ConfigError(f"vault folder {vault.root} does not exist")
    return vault


@contextmanager
def job_engine(settings: Settings, *, migrate: bool = True) -> Iterator[tuple[Settings, Engine]]:
    """A reachable (and migrated) database with a pool-less engine for a one-shot command, disposed at the end."""
    from brain_cli.runtime import open_database
    from brain_kernel.db.engine import make_engine

    with open_database(settings, migrate=migrate) as ready:
        assert ready.database_url is not None
        engine = make_engine(ready.database_url, pooled=False)
        try:
            yield ready, engine
        finally:
            engine.dispose()


@contextmanager
def job_session(settings: Settings, *, migrate: bool = True) -> Iterator[tuple[Settings, Session]]:
    """``job_engine`` with one unit of work: committed when the command's block succeeds."""
    from brain_kernel.db.engine import session_factory, unit_of_work

    with job_engine(settings, migrate=migrate) as (ready, engine), unit_of_work(session_factory(engine)) as session:
        yield ready, session
