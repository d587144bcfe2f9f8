"""What every ``brain`` command shares: settings from the environment, ``.env`` and flags, errors as one
line with an exit code that says whose they are, and the database block of a one-shot job.

An error ends the command with one ``error:`` line on stderr, never a
traceback, and an exit code (ADR 0058, docs/cli.md): 2 when the command line
or the configuration is wrong (a bad option, a bad setting, a missing file the
operator named), 1 when the work failed (a database that does not answer, a
job that failed, a kernel that refused or cannot be reached). Machine output
goes to stdout as JSON, progress to stderr.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO, TypeVar

import typer
from pydantic import ValidationError

from brain_cli.exits import OPERATOR_PATH_ERRORS, ExitCode, fail
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


def _database_outage(exc: Exception) -> bool:
    """Whether ``exc`` is the database driver losing or refusing its connection mid-command."""
    sqlalchemy_errors = sys.modules.get("sqlalchemy.exc")  # loaded by every command that opened a database
    return sqlalchemy_errors is not None and isinstance(exc, sqlalchemy_errors.OperationalError)


def operator_errors(func: F) -> F:
    """Turn configuration errors (2) and runtime failures (1) into one line and their exit code."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ConfigError as exc:
            fail(str(exc), ExitCode.USAGE)
        except BrainError as exc:  # Failure, and the kernel's own: an LLM, the event bus, a sync that stopped
            fail(str(exc), ExitCode.FAILED)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            said = str(first.get("msg")).removeprefix("Value error, ")
            fail(f"invalid setting {where}: {said}" if where else f"invalid settings: {said}", ExitCode.USAGE)
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            code = ExitCode.USAGE if exc.filename and exc.errno in OPERATOR_PATH_ERRORS else ExitCode.FAILED
            fail(f"{where}{exc.strerror or exc}", code)
        except Exception as exc:
            if not _database_outage(exc):
                raise  # a defect: its traceback is what a bug report needs
            fail(f"the database failed: {str(getattr(exc, 'orig', None) or exc).strip().splitlines()[0]}", ExitCode.FAILED)

    return wrapper  # type: ignore[return-value]


def load_settings(*, env_file: bool = True, **overrides: Any) -> Settings:
    """Settings from the environment over ``.env`` (without it: ``env_file=False``), with CLI flag overrides applied.

    ``brain mcp`` reads no ``.env``: an agent starts it in the user's repository, whose
    ``.env`` is the user's application's, not ours (ADR 0058); ``brain hook`` reads no
    settings at all (its client file, ADR 0042).
    """
    base = Settings.load() if env_file else Settings()
    return base.with_overrides(**overrides) if any(v is not None for v in overrides.values()) else base


def open_vault(path: Path) -> Vault:
    """The vault at ``path``; ConfigError when the folder does not exist or is not a folder."""
    vault = Vault(path)
    if vault.root.exists() and not vault.root.is_dir():
        raise ConfigError(f"vault {vault.root} is not a folder")
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


def output_file(path: Path, flag: str) -> Path:
    """``path`` (``~`` expanded) for a command to write; ConfigError when its folder does not exist.

    A mistyped folder is the operator's to fix (exit 2, ADR 0058): making it
    would leave the output where nobody looks, and folders behind on a dry run.
    """
    path = path.expanduser()
    if not path.parent.is_dir():
        raise ConfigError(f"{flag} {path}: folder {path.parent} does not exist")
    return path


class _AuditOnFirstLine:
    """A dry run's audit file, created when its first line comes: a dry run with nothing to change writes nothing."""

    def __init__(self, path: Path, make_folder: bool) -> None:
        self.path, self.make_folder = path, make_folder
        self.file: TextIO | None = None

    def write(self, text: str) -> int:
        if self.file is None:
            if self.make_folder:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.file = self.path.open("a", encoding="utf-8")
        return self.file.write(text)

    def flush(self) -> None:
        if self.file is not None:
            self.file.flush()


@contextmanager
def audit_and_plan(audit: Path | None, *, dry_run: bool, make_folder: bool = False) -> Iterator[tuple[TextIO | None, Callable[[dict[str, Any]], None]]]:
    """What the commands that rewrite the vault in place share: ``--audit``'s file opened for appending (its folder
    must exist unless ``make_folder``), and the plan printer that shows a dry run's change lines on stdout (a real
    run prints only its summary). A dry run creates the file, and a folder made for it, with its first line only."""

    def show(line: dict[str, Any]) -> None:
        if dry_run:
            typer.echo(json.dumps(line, ensure_ascii=False, default=str))

    if audit is None:
        yield None, show
        return
    path = audit.expanduser() if make_folder else output_file(audit, "--audit")
    if dry_run:
        lazy = _AuditOnFirstLine(path, make_folder)
        try:
            yield lazy, show  # type: ignore[misc]
        finally:
            if lazy.file is not None:
                lazy.file.close()
        return
    if make_folder:
        path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as sink:
        yield sink, show


@contextmanager
def job_session(settings: Settings, *, migrate: bool = True, embed_after: bool = False) -> Iterator[tuple[Settings, Session]]:
    """``job_engine`` with one unit of work: committed when the command's block succeeds.

    ``embed_after``: then the search index is brought up to what the job
    wrote, as a tick's embed step would (ADR 0068): a scrub's texts embedded
    again, a backfill's or a merge's entries relabelled. A failure is a note on
    stderr; the job stands and the next tick retries.
    """
    from brain_kernel.db.engine import session_factory, unit_of_work

    with job_engine(settings, migrate=migrate) as (ready, engine):
        with unit_of_work(session_factory(engine)) as session:
            yield ready, session
        if embed_after:
            _embed_written(engine, ready)


def _embed_written(engine: Any, settings: Settings) -> None:
    from brain_cli.progress import reporter
    from brain_kernel.search.embed_run import TICK_LOCK_WAIT_S, embed_pending

    report = embed_pending(engine, settings, lock_wait_s=TICK_LOCK_WAIT_S, progress=reporter("search index"))
    if not report["ok"]:
        typer.echo(f"search index not brought up to the job's writes ({report['error']}); the next tick retries", err=True)
    elif "skipped" in report:
        typer.echo(f"search index: another embed run holds it; {report['pending']} entries left to the next tick", err=True)
    else:
        typer.echo(
            f"search index: {report['embedded']} entries embedded, {report['relabelled']} relabelled, {report['pending']} left to the next tick",
            err=True,
        )
