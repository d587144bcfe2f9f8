"""Run the schema's Alembic revisions from code: ``brain migrate``, ``brain serve``, ``/health/deep`` and the tests.

It lives beside the revisions it runs, above the kernel whose models they
target (core <- kernel <- migrations <- {api, ops} <- cli, ADR 0011).
"""

from __future__ import annotations

import functools
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from brain_kernel.db.engine import normalise_url

SCRIPTS = Path(__file__).resolve().parent


def alembic_config(database_url: str, *, embed_dim: int | None = None) -> Config:
    """An Alembic config pointing at the packaged migrations and the given database."""
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    cfg.set_main_option("sqlalchemy.url", normalise_url(database_url).replace("%", "%%"))
    cfg.attributes["embed_dim"] = embed_dim
    return cfg


def upgrade_to_head(database_url: str, *, embed_dim: int | None = None) -> None:
    """Apply every pending revision."""
    command.upgrade(alembic_config(database_url, embed_dim=embed_dim), "head")


@functools.cache
def head_revision() -> str | None:
    """The newest revision shipped with this code (read once: ``/health/deep`` asks on every probe)."""
    cfg = alembic_config("postgresql://localhost/unused")
    return ScriptDirectory.from_config(cfg).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()
