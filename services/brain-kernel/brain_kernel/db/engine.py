"""Database engine and session handling.

The entry point owns the transaction: an HTTP request or a CLI command opens a
session, services and repositories use it, and the entry point commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from brain_kernel.errors import ConfigError


def normalise_url(url: str) -> str:
    """Use the psycopg 3 driver for plain ``postgresql://`` URLs."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"DATABASE_URL is not a valid database URL: {exc}") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if not parsed.drivername.startswith("postgresql"):
        raise ConfigError(f"DATABASE_URL must point at PostgreSQL, not {parsed.drivername}")
    return parsed.render_as_string(hide_password=False)


def make_engine(url: str, *, pool_size: int = 10, pooled: bool = True) -> Engine:
    """An engine for the index database (``pooled=False`` for one-shot jobs such as migrations).

    The pool holds enough connections for a worker's usual concurrency: overflow
    connections are closed on return, and reconnecting per request costs more
    than the request itself. Four workers at 10 + 10 stay under Postgres's
    default of 100 connections.
    """
    if not pooled:
        return create_engine(normalise_url(url), poolclass=NullPool)
    return create_engine(normalise_url(url), pool_size=pool_size, max_overflow=10, pool_pre_ping=False, pool_recycle=1800)


def check_reachable(engine: Engine, *, timeout_s: int = 5) -> None:
    """Raise ConfigError with one clear line when the database does not answer."""
    try:
        with engine.connect() as conn:
            conn.execute(text("select 1"))
    except OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        safe = engine.url.render_as_string(hide_password=True)
        raise ConfigError(f"cannot reach the database at {safe}: {reason}") from None


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def read_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions in autocommit mode on the same pool: each statement is its own transaction.

    For read paths (no BEGIN/COMMIT round trips) and for work that must not
    run inside a caller's transaction, such as storing feed answers after a
    keeper tick has committed.
    """
    return session_factory(engine.execution_options(isolation_level="AUTOCOMMIT"))


@contextmanager
def unit_of_work(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session that commits when the block succeeds and rolls back otherwise."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


# One key for every job that rewrites the vault as a whole (a keeper tick, ``brain apply``, ``brain backfill``).
KEEPER_LOCK = 0x62726169  # "brai"


def hold_keeper_lock(session: Session) -> None:
    """Wait for (then hold until the transaction ends) the keeper's lock: such jobs run one at a time.

    Two schedulers can start them together (a tick CronJob beside the drain's,
    an operator's ``brain apply`` during a tick); the second waits for the
    first to commit and then works from what it left, instead of both moving
    and rewriting the same files. The wait obeys ``lock_timeout``.
    """
    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": KEEPER_LOCK})


# A table's secondary indexes (none backs a constraint: the primary key and any unique one stay), as the
# system catalogs (pg_index) define them, so what is rebuilt is exactly what the migrations made.
_SECONDARY_INDEXES = """SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = CAST(:table AS regclass) AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
 ORDER BY c.relname"""
# And its foreign keys: each checked row by row on a load (an index lookup a row), once by one join when added back.
_FOREIGN_KEYS = """SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = CAST(:table AS regclass) AND contype = 'f'
 ORDER BY conname"""


def defer_indexes(session: Session, *tables: str) -> list[str] | None:
    """For a first load into empty ``tables``: lock them, drop their secondary indexes and foreign keys, return the
    DDL that makes them again.

    Building an index once over loaded rows costs a fraction of maintaining
    it row by row, and a foreign key added back is checked by one join
    instead of a lookup for every row loaded. The tables stay locked
    (ACCESS EXCLUSIVE, as ``DROP INDEX`` takes) until the caller's
    transaction ends: nobody reads or writes them half-indexed or
    unchecked, and no row arrives between the check and the load. When a
    table holds a row once locked, nothing is dropped, the locks are
    released (a savepoint) and None is returned.
    """
    if any(session.execute(text(f"SELECT EXISTS (SELECT 1 FROM {table})")).scalar() for table in tables):
        return None  # not a first load: no lock taken
    nested = session.begin_nested()
    for table in tables:
        session.execute(text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
        if session.execute(text(f"SELECT EXISTS (SELECT 1 FROM {table})")).scalar():
            nested.rollback()
            return None
    ddl = []
    for table in tables:
        for name, definition in session.execute(text(_SECONDARY_INDEXES), {"table": table}).all():
            session.execute(text(f'DROP INDEX "{name}"'))
            ddl.append(definition)
    for table in tables:  # after the indexes: a key's check reads the loaded rows once
        for name, definition in session.execute(text(_FOREIGN_KEYS), {"table": table}).all():
            session.execute(text(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"'))
            ddl.append(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
    nested.commit()
    return ddl


def restore_indexes(session: Session, ddl: list[str]) -> None:
    """Build the indexes and add the foreign keys ``defer_indexes`` dropped (with room to sort in memory)."""
    if ddl:
        session.execute(text("SET LOCAL maintenance_work_mem = '256MB'"))
    for definition in ddl:
        session.execute(text(definition))


def text_array(values: Iterable[str]) -> str:
    """``values`` as one Postgres array literal, to bind where the statement casts it (``%(p)s::text[]``).

    psycopg adapts a Python list element by element, about 3 µs each: 6 ms for
    the 2,000 withdrawn ids a search binds, in every statement that names them,
    against 0.8 ms for this one string (bench/bench_withdrawn.py). Each element
    is quoted, so commas, braces, quotes and backslashes stay in it.
    """
    return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"
