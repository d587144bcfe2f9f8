"""The embedded Postgres's shared buffers (ADR 0025): sized once, kept across starts, and a bad size refused."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path

import psycopg
import pytest
from pydantic import ValidationError

from brain_kernel.embedded import EmbeddedPostgres, auto_shared_buffers, memory_limit
from brain_kernel.settings import Settings
from tests.conftest import REPO_ROOT

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


def _buffers(server: EmbeddedPostgres) -> str:
    with psycopg.connect(server._server.get_uri()) as conn:
        row = conn.execute("SELECT current_setting('shared_buffers')").fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.slow
def test_a_server_starts_with_the_buffers_asked_and_restarts_only_when_they_change(caplog: pytest.LogCaptureFixture) -> None:
    data = REPO_ROOT / ".brain" / f"buffers-test-{uuid.uuid4().hex[:8]}"
    caplog.set_level(logging.INFO, logger="brain_kernel.embedded")
    try:
        for asked, restarts in (("160MB", 1), ("160MB", 0), (None, 0), ("192MB", 1)):
            caplog.clear()
            server = EmbeddedPostgres(data, shared_buffers=asked)
            server.start()
            try:
                assert _buffers(server) == (asked or "160MB")  # no size asked: the server keeps what it was given
            finally:
                server.stop()
            assert sum("restarting once" in r.getMessage() for r in caplog.records) == restarts, (asked, caplog.text)
    finally:
        shutil.rmtree(data, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "1", reason="this kernel maps any size (overcommit 1)")
def test_buffers_the_machine_cannot_give_or_postgres_refuses_leave_the_server_as_it_was(caplog: pytest.LogCaptureFixture) -> None:
    data = REPO_ROOT / ".brain" / f"buffers-test-{uuid.uuid4().hex[:8]}"
    caplog.set_level(logging.INFO, logger="brain_kernel.embedded")
    try:
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
    finally:
        shutil.rmtree(data, ignore_errors=True)
