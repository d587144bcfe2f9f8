"""Alembic environment: targets the kernel's models, URL from the settings object."""

from __future__ import annotations

from alembic import context
from pgvector.sqlalchemy import Vector

from brain_kernel.db.engine import make_engine, normalise_url
from brain_kernel.db.models import Base

config = context.config
target_metadata = Base.metadata
if "embed_dim" not in config.attributes:  # `alembic` by hand: the dimension comes from the settings too
    from brain_kernel.settings import Settings

    config.attributes["embed_dim"] = Settings().embed_dim


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        from brain_kernel.settings import Settings

        url = Settings().database_url
    if not url:
        raise SystemExit("alembic: set DATABASE_URL (or run `brain migrate`, which starts the embedded database)")
    return normalise_url(url)


def _compare_type(ctx, _inspected_column, _metadata_column, inspected_type, metadata_type):
    # The vector dimension is a deployment setting (BRAIN_EMBED_DIM), not model drift.
    if isinstance(metadata_type, Vector):
        return not isinstance(inspected_type, Vector)
    return None


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, compare_type=_compare_type)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, compare_type=_compare_type)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_url(), pooled=False)
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, compare_type=_compare_type)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
