"""Process-level wiring for CLI commands: the database (embedded or external) and the server.

Every way ``brain serve`` ends leaves nothing running (issue 18, defect 6): a
worker of ``--workers N`` asks the kernel for SIGTERM when its parent dies
(``die_with_parent``), so ``kill -9`` of the parent takes the workers and the
port with it; the embedded database is stopped on every clean exit, and one
left running by a parent killed outright is reused by the next start, which
then stops it (``brain_kernel.db.embedded``).
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from brain_kernel.db.embedded import EmbeddedPostgres, raise_on_sigterm
from brain_kernel.db.engine import check_reachable, make_engine
from brain_kernel.errors import ConfigError
from brain_kernel.identity import pins
from brain_kernel.settings import Settings, export_to_environ
from brain_kernel.vault_store import Vault
from brain_migrations.runner import upgrade_to_head

if TYPE_CHECKING:
    import uvicorn
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
            _run_workers(
                uvicorn.Config("brain_cli.runtime:worker_app", factory=True, host=ready.host, port=ready.port, workers=ready.workers, log_level="info")
            )
        else:
            from brain_api.app import create_app

            uvicorn.run(create_app(ready), host=ready.host, port=ready.port, log_level="info")


def _run_workers(config: uvicorn.Config) -> None:
    """uvicorn's supervisor for ``--workers N`` (ADR 0031): on Linux its workers are forked, not spawned.

    The parent imports the app's modules once and every worker, restarts
    included, is forked from it: a spawned worker started a new interpreter
    and imported them again (about 1.2 s of CPU each). Each worker still
    builds its own app, engine and pools after the fork, and the parent holds
    no connection, thread or open session when it forks (``open_database``
    has disposed of its engines). Elsewhere uvicorn spawns them, as before.
    """
    from uvicorn.supervisors import Multiprocess, multiprocess

    if sys.platform.startswith("linux"):
        from brain_api.app import preload

        preload()
        multiprocess.get_subprocess = _forked_worker  # the one place uvicorn makes a worker (uvicorn is pinned)
    sock = config.bind_socket()
    try:
        Multiprocess(config, sockets=[sock]).run()
    except KeyboardInterrupt:  # as uvicorn.run: a second Ctrl-C while stopping
        pass
    finally:
        sock.close()


def _forked_worker(config: uvicorn.Config, target: Callable[..., None], sockets: list[socket.socket]) -> multiprocessing.process.BaseProcess:
    """uvicorn's ``get_subprocess``, forked: the worker starts with the parent's imported modules."""
    return multiprocessing.get_context("fork").Process(target=_forked_started, kwargs={"config": config, "target": target, "sockets": sockets})


def _forked_started(config: uvicorn.Config, target: Callable[..., None], sockets: list[socket.socket]) -> None:
    """A forked worker's first step: the signal dispositions a new interpreter has, then uvicorn's own start.

    The supervisor's handlers, inherited by the fork, only queue a signal in
    the supervisor's list: a SIGTERM (from ``die_with_parent`` too) arriving
    before the worker's server installs its own would be lost.
    """
    from uvicorn._subprocess import subprocess_started
    from uvicorn.supervisors.multiprocess import SIGNALS

    for sig in SIGNALS:
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    subprocess_started(config, target, sockets, stdin_fileno=None)  # the fork kept stdin as it was


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
