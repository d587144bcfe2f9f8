"""What the benchmarks share: a fresh database, a ``brain serve`` subprocess, percentiles."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from brain_kernel.db import normalise_url
from brain_kernel.embedded import EmbeddedPostgres
from brain_kernel.settings import Settings, child_environment, environ_snapshot

REPO_ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def admin(url: str, statement: str) -> None:
    """Run one statement outside a transaction (CREATE/DROP DATABASE)."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(statement))
    finally:
        engine.dispose()


@contextmanager
def fresh_database(label: str) -> Iterator[str]:
    """A new empty database: on BRAIN_TEST_DATABASE_URL's server, else on an embedded Postgres under .brain/."""
    external = environ_snapshot().get("BRAIN_TEST_DATABASE_URL")
    embedded: EmbeddedPostgres | None = None
    if external:
        admin_url = normalise_url(external)
    else:
        (REPO_ROOT / ".brain").mkdir(exist_ok=True)
        embedded = EmbeddedPostgres(REPO_ROOT / ".brain" / f"{label}-pg-{uuid.uuid4().hex[:8]}", cleanup="delete")
        admin_url = normalise_url(embedded.start())
    name = f"{label.replace('-', '_')}_{uuid.uuid4().hex[:8]}"
    admin(admin_url, f'CREATE DATABASE "{name}"')
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if embedded is not None:
            embedded.stop()
            shutil.rmtree(embedded.data_dir, ignore_errors=True)


def start_server(settings: Settings, workers: int = 1) -> tuple[subprocess.Popen[bytes], str]:
    """``brain serve`` in a subprocess; returns it and its base URL once healthy."""
    port = free_port()
    cmd = [sys.executable, "-m", "brain_cli", "serve", "--port", str(port), "--workers", str(workers)]
    proc = subprocess.Popen(cmd, env=child_environment(settings), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("brain serve exited during start-up")
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.terminate()
    raise SystemExit("brain serve did not become healthy in 90 s")


def pct(values: list[float], p: float) -> float:
    """The p-th percentile of durations in seconds, in milliseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000
