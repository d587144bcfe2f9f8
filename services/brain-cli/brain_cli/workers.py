"""``brain serve --workers N``: gunicorn's arbiter with uvicorn's worker class, every worker forked from the parent.

gunicorn is driven through its documented custom-application interface
(``BaseApplication``: ``load_config`` and ``load``) with the worker class the
uvicorn project maintains for it (``uvicorn_worker.UvicornWorker``); the
arbiter binds the socket, forks the workers, replaces one that dies and stops
them all on SIGTERM or SIGINT (ADR 0031). The parent has imported the app's
modules before ``run`` and holds no connection, thread or open session
(``open_database`` has disposed of its engines); each worker builds its own
app, engine and pools after the fork (``load``), so gunicorn's
``preload_app``, which would build the app in the parent, stays off.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading
import time
from typing import Any, NoReturn

from fastapi import FastAPI
from gunicorn.app.base import BaseApplication
from gunicorn.errors import HaltServer

from brain_kernel.log_format import logging_config
from brain_kernel.settings import Settings

log = logging.getLogger(__name__)


def run(settings: Settings) -> None:
    """Serve with ``settings.workers`` forked workers until SIGTERM or SIGINT; returns once every worker has stopped.

    A worker leaves gunicorn's loop by raising ``SystemExit`` up the parent's
    stack, which it shares after the fork; it ends here with ``os._exit``, so
    the parent's ``finally`` blocks (the embedded database's stop) never run
    in a worker.
    """
    parent = os.getpid()
    try:
        _Workers(settings).run()
    except BaseException as exc:
        if os.getpid() != parent:
            _end_worker(exc)
        if isinstance(exc, HaltServer):  # a second worker's boot failure, raised out of gunicorn's own halt
            raise SystemExit(exc.exit_status) from None
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            return  # the arbiter stopped cleanly
        raise


class _Workers(BaseApplication):  # type: ignore[misc]
    """gunicorn configured from the settings alone (no gunicorn.conf.py, no GUNICORN_CMD_ARGS)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        super().__init__()

    def load_config(self) -> None:
        """The address and worker count of ``settings``; the rest as a single uvicorn server has it."""
        host, port = self.settings.host, self.settings.port
        options: dict[str, Any] = {
            "bind": f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
            "workers": self.settings.workers,
            "worker_class": "uvicorn_worker.UvicornWorker",
            "preload_app": False,  # each worker builds its own app: engines and pools are never shared
            "keepalive": 5,  # uvicorn's keep-alive timeout (gunicorn's default is 2 s)
            "loglevel": "info",
            # uvicorn's access lines on stdout, as a single worker prints them; in JSON the app writes its own.
            "accesslog": None if self.settings.log_format == "json" else "-",
            "logconfig_dict": logging_config(self.settings.log_format),
            "control_socket_disable": True,  # its default path is one per user: two servers would clash
            "post_fork": _worker_started,
        }
        for name, value in options.items():
            self.cfg.set(name, value)

    def load(self) -> FastAPI:
        """A worker's app, built in the worker after the fork from the settings the parent exported."""
        from brain_api.app import create_app_from_env

        return create_app_from_env()


def _worker_started(_arbiter: Any, worker: Any) -> None:
    """gunicorn's ``post_fork``: default signal dispositions, then SIGTERM when the parent dies.

    The fork inherits the arbiter's handlers, which only queue a signal for
    the arbiter's loop: a SIGTERM (``die_with_parent``'s too) arriving before
    the worker installs its own would be lost.
    """
    for sig in worker.SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    die_with_parent(worker.ppid)


def _end_worker(exc: BaseException) -> NoReturn:
    """A worker's last step: its exit status, with buffered output flushed and none of the parent's cleanup."""
    code = exc.code if isinstance(exc, SystemExit) else 1
    if isinstance(code, str):
        print(code, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int) -> None:
    """Have this process sent SIGTERM when its parent ``parent`` dies, however it dies (``kill -9`` too).

    Linux: ``prctl(PR_SET_PDEATHSIG)``, enforced by the kernel (the arbiter
    forks from its main thread, the one the setting follows). Elsewhere a
    daemon thread polls the parent pid. A parent already gone by the time
    this runs is caught by comparing the parent pid afterwards.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            log.warning("prctl(PR_SET_PDEATHSIG) failed: %s", os.strerror(ctypes.get_errno()))
    else:  # pragma: no cover - the suite runs on Linux

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1)
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, name="brain-parent-watch", daemon=True).start()
    if os.getppid() != parent:  # the parent died before the setting took effect
        os.kill(os.getpid(), signal.SIGTERM)
