"""Process-level wiring for CLI commands: the database (embedded or external) and the server.

Every way ``brain serve`` ends leaves nothing running (issue 18, defect 6): a
worker of ``--workers N`` asks the kernel for SIGTERM when its parent dies
(``die_with_parent``), so ``kill -9`` of the parent takes the workers and the
port with it; the embedded database is stopped on every clean exit, and one
left running by a parent killed outright is reused by the next start, which
then stops it (``brain_kernel.embedded``).
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from brain_kernel import pins
from brain_kernel.db import check_reachable, make_engine
from brain_kernel.embedded import EmbeddedPostgres, raise_on_sigterm
from brain_kernel.errors import ConfigError
from brain_kernel.settings import Settings, export_to_environ
from brain_kernel.vault import Vault
from brain_migrations.runner import upgrade_to_head

if TYPE_CHECKING:
    from fastapi import FastAPI

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
            embedded = EmbeddedPostgres(settings.home / "pgdata", shared_buffers=settings.embedded_shared_buffers)
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
    """Scaffold the vault, open the database, run uvicorn until interrupted."""
    import uvicorn

    Vault(settings.vault).scaffold()
    with open_database(settings, migrate=True) as ready:
        if ready.workers > 1:
            export_to_environ(ready)
            uvicorn.run(
                "brain_cli.runtime:worker_app",
                factory=True,
                host=ready.host,
                port=ready.port,
                workers=ready.workers,
                log_level="info",
            )
        else:
            from brain_api.app import create_app

            uvicorn.run(create_app(ready), host=ready.host, port=ready.port, log_level="info")


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """Have this process sent SIGTERM when the process that started it dies, however it dies (``kill -9`` too).

    Linux: ``prctl(PR_SET_PDEATHSIG)``, enforced by the kernel (uvicorn starts
    its workers from its main thread, the one the setting follows). Elsewhere a
    daemon thread waits on the parent's sentinel. A parent already gone by the
    time this runs is caught by comparing the parent pid afterwards.
    """
    parent = multiprocessing.parent_process()
    if parent is None or parent.pid is None:
        return
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            log.warning("prctl(PR_SET_PDEATHSIG) failed: %s", os.strerror(ctypes.get_errno()))
    else:  # pragma: no cover - the suite runs on Linux

        def watch() -> None:
            from multiprocessing.connection import wait

            wait([parent.sentinel])
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, name="brain-parent-watch", daemon=True).start()
    if os.getppid() != parent.pid:  # the parent died before the setting took effect
        os.kill(os.getpid(), signal.SIGTERM)


def worker_app() -> FastAPI:
    """The app of one ``brain serve --workers N`` worker (uvicorn's factory, run in each worker): dies with its parent."""
    from brain_api.app import create_app_from_env

    die_with_parent()
    return create_app_from_env()
