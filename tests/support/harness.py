"""The test harness every layer's tests share: settings under a temporary folder, the CLI in process, the clock.

Fixtures live in tests/conftest.py; the plain helpers they and the tests
(and the benchmarks) call live here, so importing them never imports a
fixture module. Nothing here imports from ``bench``.
"""

from __future__ import annotations

import copy
import datetime as dt
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from brain_kernel.settings import KERNEL_VARIABLES, Settings, child_environment
from tests.support.servers import start_server

REPO_ROOT = Path(__file__).resolve().parents[2]
# One client for the tests' plain requests (a new httpx.Client() loads a TLS context: about 20 ms of CPU).
# It keeps no connection alive: each request has its own, closed by the client as httpx.get closes it,
# so a server the test kills leaves its port free, and concurrent requests spread over a server's workers.
HTTP = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))


def db_url(admin_url: str, name: str) -> str:
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def admin_exec(admin_url: str, *statements: str) -> None:
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


def make_settings(tmp_path: Path, database_url: str | None, **overrides: object) -> Settings:
    """Settings for a test: everything under tmp_path, nothing from the environment."""
    values: dict[str, object] = {
        "vault": tmp_path / "vault",
        "home": tmp_path / ".brain",
        "database_url": database_url,
        "user_home": tmp_path / "home",
        "claude_dir": tmp_path / "home" / ".claude" / "projects",
        "codex_dir": tmp_path / "home" / ".codex",
        # Off unless a test is about it: a pass a moment after each marker would race what tests count as pending.
        "embed_follow_seconds": 0,
    }
    values.update(overrides)
    (tmp_path / "home").mkdir(exist_ok=True)
    return Settings.explicit(**values)


class ManualClock:
    """The app's clock in tests: the real time plus an offset the test moves forward."""

    def __init__(self) -> None:
        self.offset = dt.timedelta()

    def __call__(self) -> dt.datetime:
        return dt.datetime.now(dt.timezone.utc) + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += dt.timedelta(seconds=seconds)


def settings_env(settings: Settings) -> dict[str, str]:
    """A child-process environment carrying ``settings`` (and nothing brain-related from ours)."""
    return child_environment(settings)


@dataclass(frozen=True)
class CliResult:
    """What a ``brain`` invocation printed and returned."""

    exit_code: int
    stdout: str
    stderr: str


def brain(settings: Settings, *args: str, cwd: Path | None = None, input: str | None = None) -> CliResult:
    """Run ``brain ARGS`` in this process (typer's runner) with exactly ``settings`` in its environment.

    The same code path as the installed command, minus the interpreter start:
    the environment holds ``settings`` and none of the caller's kernel
    variables, and ``cwd`` is the working folder for relative paths.
    """
    from typer.testing import CliRunner

    from brain_cli.cli import app

    wanted = settings.to_environ()
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith(KERNEL_VARIABLES) and k not in wanted}
    env.update(wanted)
    previous = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        result = CliRunner().invoke(app, list(args), env=env, input=input)
    finally:
        os.chdir(previous)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return CliResult(result.exit_code, result.stdout, result.stderr)


@dataclass
class Served:
    """A running multi-worker ``brain serve``: its URL, its settings and a session on its database."""

    base: str
    settings: Settings
    db: Session


@contextmanager
def cloned_database(pg_admin_url: str, template_url: str) -> Iterator[str]:
    """A database of its own, cloned from the migrated template and dropped afterwards (about 0.3 s)."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin_exec(pg_admin_url, f'CREATE DATABASE "{name}" TEMPLATE "{make_url(template_url).database}"')
    try:
        yield db_url(pg_admin_url, name)
    finally:
        admin_exec(pg_admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def serve_in_thread(settings: Settings) -> Iterator[str]:
    """The app of ``settings`` served by uvicorn on a 127.0.0.1 port in a thread of this process: its base URL.

    Real HTTP to the real app, for a test whose subject is a client of the
    kernel (its token, its prompts), not the ``brain serve`` process: that
    costs a new interpreter importing the app (about 1.5 s) and its exit.
    """
    import uvicorn

    from brain_api.app import create_app
    from brain_kernel.vault_store import Vault

    Vault(settings.vault).scaffold()  # as ``brain serve`` does before it listens
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # bound here, so no other process can take the port before the server listens
    # log_config None: uvicorn leaves this process's logging as the tests configured it.
    server = uvicorn.Server(uvicorn.Config(create_app(settings), log_config=None, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:  # polling a starting server, not waiting on the code under test
            assert thread.is_alive() and time.monotonic() < deadline, "the in-process server did not start"
            time.sleep(0.005)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def serve_brain(settings: Settings, workers: int) -> tuple[subprocess.Popen[bytes], str]:
    """``brain serve`` in a subprocess, once ``/health`` answers: (process, base URL); its output in ``serve.log`` under its home."""
    return start_server(settings, workers, settings.home / "serve.log", timeout=60)


@dataclass(frozen=True)
class PlantedImage:
    """The run's planted memory, made once: a template database, the vault beside it, and what was planted."""

    database_url: str
    vault: Path
    planted: object

    def restore(self, settings: Settings) -> object:
        """This memory in ``settings``'s vault (its database is cloned by ``database_url``): a fresh copy of the record.

        ``copytree`` keeps every file's mtime, so the file stats find the
        files exactly as the planting tick recorded them.
        """
        if settings.vault.exists():
            shutil.rmtree(settings.vault)
        shutil.copytree(self.vault, settings.vault, symlinks=True)
        return copy.deepcopy(self.planted)
