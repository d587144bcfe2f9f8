"""Process-level wiring for CLI commands: the database (embedded or external) and the server."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from brain_kernel.db import check_reachable, make_engine
from brain_kernel.embedded import EmbeddedPostgres, raise_on_sigterm
from brain_kernel.errors import ConfigError
from brain_kernel.settings import Settings, export_to_environ
from brain_kernel.vault import Vault
from brain_migrations.runner import upgrade_to_head

log = logging.getLogger(__name__)


@contextmanager
def open_database(settings: Settings, *, migrate: bool = True) -> Iterator[Settings]:
    """Yield settings whose ``database_url`` answers (and is migrated when asked).

    With no DATABASE_URL, an embedded Postgres starts under BRAIN_HOME and is
    stopped when the block exits, also on Ctrl-C and SIGTERM.
    """
    raise_on_sigterm()
    embedded: EmbeddedPostgres | None = None
    try:
        if settings.database_url is None:
            embedded = EmbeddedPostgres(settings.home / "pgdata")
            settings = settings.with_overrides(database_url=embedded.start())
        assert settings.database_url is not None
        engine = make_engine(settings.database_url, pool_size=1)
        try:
            check_reachable(engine)
        finally:
            engine.dispose()
        if migrate:
            try:
                upgrade_to_head(settings.database_url, embed_dim=settings.embed_dim)
            except ConfigError:
                raise
            except Exception as exc:
                raise ConfigError(f"migration failed: {str(exc).splitlines()[0]}") from None
        yield settings
    finally:
        if embedded is not None:
            embedded.stop()


def serve(settings: Settings) -> None:
    """Scaffold the vault, open the database, run uvicorn until interrupted."""
    import uvicorn

    Vault(settings.vault).scaffold()
    with open_database(settings, migrate=True) as ready:
        if ready.workers > 1:
            export_to_environ(ready)
            uvicorn.run(
                "brain_api.app:create_app_from_env",
                factory=True,
                host=ready.host,
                port=ready.port,
                workers=ready.workers,
                log_level="info",
            )
        else:
            from brain_api.app import create_app

            uvicorn.run(create_app(ready), host=ready.host, port=ready.port, log_level="info")
