"""Run the schema's Alembic revisions from code: ``brain migrate``, ``brain serve``, ``/health/deep`` and the tests.

It lives beside the revisions it runs, above the kernel whose models they
target (core <- kernel <- migrations <- {api, ops} <- cli, ADR 0011).
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from brain_kernel.db.engine import make_engine, normalise_url

SCRIPTS = Path(__file__).resolve().parent
log = logging.getLogger("brain.migrate")


def alembic_config(database_url: str, *, embed_dim: int | None = None) -> Config:
    """An Alembic config pointing at the packaged migrations and the given database."""
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    cfg.set_main_option("sqlalchemy.url", normalise_url(database_url).replace("%", "%%"))
    cfg.attributes["embed_dim"] = embed_dim
    return cfg


def upgrade_to_head(database_url: str, *, embed_dim: int | None = None) -> None:
    """Apply every pending revision; none when a newer kernel already took the schema past this one's head.

    A rolling upgrade runs the new kernel's migration while older pods and jobs
    still start: one of them must neither fail on a revision it does not know
    nor move the schema (ADR 0069). It logs why and goes on at that schema.
    """
    engine = make_engine(database_url, pooled=False)
    try:
        current = current_revision(engine)
    finally:
        engine.dispose()
    if schema_ahead(current):
        log.warning("the schema is at revision %s, newer than this kernel's %s: not migrating (a newer kernel runs it)", current, head_revision())
        return
    command.upgrade(alembic_config(database_url, embed_dim=embed_dim), "head")


def schema_ahead(current: str | None) -> bool:
    """Whether the database is at a revision newer than this code's head (revision ids are zero-padded numbers)."""
    head = head_revision()
    return current is not None and head is not None and current > head


def migrate_to(database_url: str, revision: str) -> str | None:
    """Move the schema to ``revision`` (an older one runs the downgrades: a rollback); returns the revision it was at.

    Revision ids are zero-padded numbers, so their order is the order of the chain.
    """
    engine = make_engine(database_url, pooled=False)
    try:
        before = current_revision(engine)
    finally:
        engine.dispose()
    cfg = alembic_config(database_url)
    ScriptDirectory.from_config(cfg).get_revision(revision)  # an unknown id fails here, before anything moves
    if before is not None and revision != "head" and revision < before:
        command.downgrade(cfg, revision)
    else:
        command.upgrade(cfg, revision)
    return before


@functools.cache
def head_revision() -> str | None:
    """The newest revision shipped with this code (read once: ``/health/deep`` asks on every probe)."""
    cfg = alembic_config("postgresql://localhost/unused")
    return ScriptDirectory.from_config(cfg).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()
