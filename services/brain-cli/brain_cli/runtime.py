"""Process-level wiring for CLI commands: the database (embedded or external) and the server.

Every way ``brain serve`` ends leaves nothing running (issue 18, defect 6): a
worker of ``--workers N`` asks the kernel for SIGTERM when its parent dies
(``brain_cli.workers.die_with_parent``), so ``kill -9`` of the parent takes the
workers and the port with it; the embedded database is stopped on every clean
exit, and one left running by a parent killed outright is reused by the next
start, which then stops it (``brain_kernel.db.embedded``).
"""

from __future__ import annotations

import logging
import logging.config
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from brain_cli.exits import Failure
from brain_cli.ports import check_listen
from brain_kernel.db.embedded import EmbeddedPostgres, raise_on_sigterm
from brain_kernel.db.engine import check_reachable, make_engine
from brain_kernel.errors import ConfigError
from brain_kernel.identity import pins
from brain_kernel.log_format import logging_config, masked_url
from brain_kernel.release import version
from brain_kernel.settings import Settings, export_to_environ
from brain_kernel.vault_store import Vault
from brain_migrations.runner import upgrade_to_head

log = logging.getLogger("brain.serve")


@contextmanager
def open_database(settings: Settings, *, migrate: bool = True) -> Iterator[Settings]:
    """Yield settings whose ``database_url`` answers (and is migrated when asked).

    With no DATABASE_URL, an embedded Postgres starts under BRAIN_HOME and is
    stopped when the block exits, also on Ctrl-C and SIGTERM. A malformed URL
    is a ConfigError (exit code 2); a database that does not answer or start,
    or a migration that fails, is a Failure (exit code 1, ADR 0058).
    """
    raise_on_sigterm()
    embedded: EmbeddedPostgres | None = None
    try:
        if settings.database_url is None:
            embedded = EmbeddedPostgres(settings.home / "pgdata", shared_buffers=settings.embedded_shared_buffers)
            try:
                settings = settings.with_overrides(database_url=embedded.start())
            except ConfigError as exc:
                raise Failure(str(exc)) from None
        assert settings.database_url is not None
        engine = make_engine(settings.database_url, pool_size=1)
        try:
            check_reachable(engine)
        except ConfigError as exc:
            raise Failure(str(exc)) from None
        finally:
            engine.dispose()
        if migrate:
            if embedded is not None or settings.migrate_on_start:  # the embedded default has no migration job of its own
                try:
                    upgrade_to_head(settings.database_url, embed_dim=settings.embed_dim)
                except ConfigError:
                    raise  # the index refuses this configuration (an embedding dimension that does not fit)
                except Exception as exc:
                    raise Failure(f"migration failed: {str(exc).splitlines()[0]}") from None
            engine = make_engine(settings.database_url, pool_size=1)
            try:
                pins.refresh(engine, settings)  # the catalog's key pins, before anything reads a feed
            finally:
                engine.dispose()
        yield settings
    finally:
        if embedded is not None:
            embedded.stop()


def serve(settings: Settings) -> None:
    """Scaffold the vault, open the database, run the server until interrupted."""
    logging.config.dictConfig(logging_config(settings.log_format))
    check_listen(settings.host, settings.port, "--port or BRAIN_PORT")  # before the database starts and migrates
    Vault(settings.vault).scaffold()
    with open_database(settings, migrate=True) as ready:
        _banner(ready)
        if ready.workers > 1:
            export_to_environ(ready)
            _run_workers(ready)
        else:
            import uvicorn

            from brain_api.app import create_app

            uvicorn.run(create_app(ready), host=ready.host, port=ready.port, log_config=logging_config(ready.log_format))


def _banner(settings: Settings) -> None:
    """Where this server listens, reads and writes, and whether it asks for a token: said once at start."""
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    auth = f"on ({len(settings.token_entries)} tokens)" if settings.token_entries else "OFF: every request is served without a token"
    fields = {
        "url": f"http://{host}:{settings.port}",
        "vault": str(settings.vault.resolve()),
        "database": masked_url(settings.database_url),
        "auth": auth,
        "version": version(),
        "workers": settings.workers,
    }
    log.info("brain serve: %s", ", ".join(f"{key} {value}" for key, value in fields.items()), extra=fields)


def _run_workers(settings: Settings) -> None:
    """``--workers N`` under gunicorn, every worker forked from this process once it has imported the app (ADR 0031)."""
    from brain_api.app import preload
    from brain_cli import workers

    # A fresh folder for the workers' metric files (ADR 0054): a previous run's would add to the counts.
    shutil.rmtree(settings.metrics_dir, ignore_errors=True)
    settings.metrics_dir.mkdir(parents=True)
    preload()
    workers.run(settings)
