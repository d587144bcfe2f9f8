"""The embedded Postgres: its shared buffers (ADR 0025) sized once, kept across starts, a bad size refused; and its holders."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import psycopg
import pytest
from pydantic import ValidationError

from brain_kernel.db.embedded import EmbeddedPostgres, auto_shared_buffers, holders, memory_limit
from brain_kernel.settings import Settings
from tests.support.harness import make_settings, serve_brain, settings_env
from tests.support.servers import stop

GIB = 1 << 30


def test_auto_buffers_are_a_quarter_of_memory_in_128_mb_steps_within_bounds() -> None:
    assert auto_shared_buffers(24 * GIB) == "6144MB"
    assert auto_shared_buffers(3 * GIB + 5) == "768MB"
    assert auto_shared_buffers(GIB // 4) == "128MB"  # at least Postgres's default
    assert auto_shared_buffers(256 * GIB) == "8192MB"  # at most 8 GB
    assert auto_shared_buffers(None) == "128MB"  # memory unknown


def test_memory_limit_is_this_machines_or_less() -> None:
    limit = memory_limit()
    assert limit is not None and 0 < limit <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_the_settings_take_auto_or_a_size_with_its_unit() -> None:
    assert Settings.explicit().embedded_shared_buffers == "auto"
    assert Settings.explicit(embedded_shared_buffers="512MB").embedded_shared_buffers == "512MB"
    for bad in ("512", "lots", "0MB", "1 GB"):
        with pytest.raises(ValidationError):
            Settings.explicit(embedded_shared_buffers=bad)


def _until(condition: Callable[[], bool], seconds: float = 30) -> bool:
    """Poll ``condition`` until it holds or ``seconds`` pass (another process's progress, no fixed wait)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _running(proc: psutil.Process) -> bool:
    """Whether the process runs: Postgres is nobody's child once pg_ctl has started it, so after it stops it stays
    a zombie until init reaps it (a second or more on some machines), and a zombie has stopped."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _buffers(server: EmbeddedPostgres) -> str:
    with psycopg.connect(server._server.get_uri()) as conn:
        row = conn.execute("SELECT current_setting('shared_buffers')").fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.slow
def test_a_server_starts_with_the_buffers_asked_and_restarts_only_when_they_change(caplog: pytest.LogCaptureFixture, embedded_home: Path) -> None:
    data = embedded_home / "pgdata"  # initialised, never started
    caplog.set_level(logging.INFO, logger="brain_kernel.db.embedded")
    for asked, restarts in (("160MB", 1), ("160MB", 0), (None, 0), ("192MB", 1)):
        caplog.clear()
        server = EmbeddedPostgres(data, shared_buffers=asked)
        server.start()
        try:
            assert _buffers(server) == (asked or "160MB")  # no size asked: the server keeps what it was given
        finally:
            server.stop()
        assert sum("restarting once" in r.getMessage() for r in caplog.records) == restarts, (asked, caplog.text)


@pytest.mark.slow
@pytest.mark.skipif(Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "1", reason="this kernel maps any size (overcommit 1)")
def test_buffers_the_machine_cannot_give_or_postgres_refuses_leave_the_server_as_it_was(caplog: pytest.LogCaptureFixture, embedded_home: Path) -> None:
    data = embedded_home / "pgdata"  # initialised, never started
    caplog.set_level(logging.INFO, logger="brain_kernel.db.embedded")
    # 1TB: more than this machine's memory and swap (the start fails); 16TB: above Postgres's maximum (refused).
    for asked, said in (("1TB", "did not start with shared_buffers = 1TB"), ("16TB", "refused shared_buffers = 16TB")):
        caplog.clear()
        server = EmbeddedPostgres(data, shared_buffers=asked)
        server.start()
        try:
            assert _buffers(server) == "128MB"
        finally:
            server.stop()
        assert said in caplog.text
        assert "shared_buffers" not in (data / "postgresql.auto.conf").read_text()  # the next start is not refused either


@pytest.mark.slow
def test_serve_stops_the_database_it_shared_with_an_mcp_killed_outright(tmp_path: Path, embedded_home: Path) -> None:
    """A holder killed with SIGKILL never lets go of the server: the last live holder's clean stop still stops it."""
    settings = make_settings(tmp_path, None, home=embedded_home)  # no database URL: one embedded Postgres under BRAIN_HOME for both
    data = settings.home / "pgdata"
    serve, _base = serve_brain(settings, workers=1)
    mcp: subprocess.Popen[bytes] | None = None
    postmaster: int | None = None
    try:
        postmaster = int((data / "postmaster.pid").read_text().split()[0])
        database = psutil.Process(postmaster)
        with (tmp_path / "mcp.err").open("wb") as errlog:
            mcp = subprocess.Popen(
                [sys.executable, "-m", "brain_cli", "mcp"], env=settings_env(settings), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errlog
            )
        assert _until(lambda: mcp.pid in holders(data) or mcp.poll() is not None), "brain mcp never joined the server"
        assert mcp.poll() is None, (tmp_path / "mcp.err").read_text()
        assert sorted(holders(data)) == sorted([serve.pid, mcp.pid])
        mcp.kill()
        mcp.wait(10)
    finally:
        if mcp is not None and mcp.poll() is None:
            mcp.kill()
            mcp.wait(10)
        assert stop(serve) == 0, (settings.home / "serve.log").read_text()[-2000:]
    stopped = _until(lambda: not _running(database))
    if not stopped:  # leave nothing running when the test fails
        os.kill(postmaster, signal.SIGINT)
        _until(lambda: not _running(database))
    assert stopped, "serve's clean stop left the embedded Postgres running for a dead holder"
    assert not (data / "postmaster.pid").exists()
