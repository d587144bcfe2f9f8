"""What the benchmarks share: a fresh database, a ``brain serve`` subprocess, percentiles."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from brain_kernel.db.embedded import EmbeddedPostgres, raise_on_sigterm
from brain_kernel.db.engine import normalise_url
from brain_kernel.settings import Settings, child_environment, environ_snapshot
from brain_kernel.vault_store import Vault
from brain_migrations.runner import upgrade_to_head
from tests.support.servers import free_port, log_tail, start_server, stop  # noqa: F401  (the benches' one import)

REPO_ROOT = Path(__file__).resolve().parent.parent


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
    """A new empty database: on BRAIN_TEST_DATABASE_URL's server, else on an embedded Postgres under .brain/.

    While it is held, SIGTERM (in the main thread) unwinds like Ctrl-C, so a
    stopped bench still drops its database or stops and deletes its server.
    """
    external = environ_snapshot().get("BRAIN_TEST_DATABASE_URL")
    embedded: EmbeddedPostgres | None = None
    admin_url, name = None, f"{label.replace('-', '_')}_{uuid.uuid4().hex[:8]}"
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    if main:
        raise_on_sigterm()
    try:
        if external:
            admin_url = normalise_url(external)
        else:
            (REPO_ROOT / ".brain").mkdir(exist_ok=True)
            # sized as `brain serve` sizes its own (BRAIN_EMBEDDED_SHARED_BUFFERS's default): the no-setup default measured
            embedded = EmbeddedPostgres(REPO_ROOT / ".brain" / f"{label}-pg-{uuid.uuid4().hex[:8]}", cleanup="delete", shared_buffers="auto")
            admin_url = normalise_url(embedded.start())
        admin(admin_url, f'CREATE DATABASE "{name}"')
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        if embedded is not None:  # the whole server goes, its databases with it (a start cut short too)
            embedded.stop()
            shutil.rmtree(embedded.data_dir, ignore_errors=True)
        elif admin_url is not None:
            admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if main:
            signal.signal(signal.SIGTERM, previous)


@contextmanager
def scratch(label: str) -> Iterator[tuple[Path, str]]:
    """A temporary folder under .brain/ (with an empty user home, ``home/``) and a fresh empty database: (folder, URL)."""
    (REPO_ROOT / ".brain").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{label}-", dir=REPO_ROOT / ".brain") as tmp_name, fresh_database(label) as url:
        tmp = Path(tmp_name)
        (tmp / "home").mkdir()
        yield tmp, url


@contextmanager
def bench_home(label: str) -> Iterator[tuple[Path, str, Settings, Vault]]:
    """``scratch`` with the database migrated, settings on both and a scaffolded vault."""
    with scratch(label) as (tmp, url):
        upgrade_to_head(url)
        settings = Settings.explicit(vault=tmp / "vault", home=tmp / ".brain", user_home=tmp / "home", database_url=url)
        vault = Vault(settings.vault)
        vault.scaffold()
        yield tmp, url, settings, vault


def pct(values: list[float], p: float) -> float:
    """The p-th percentile of durations in seconds, in milliseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000


def run_brain(settings: Settings, *argv: str) -> dict[str, Any]:
    """``brain <argv>`` in a subprocess: its JSON summary (last stdout line), wall time, peak RSS and step times.

    A step is a ``<command>: <message>`` line on stderr (counting lines such as
    ``scored ...`` or ``N/M`` are not steps); it lasts until the next step.
    """
    script = Path(sys.executable).parent / "brain"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "brain_cli"]
    cmd += list(argv)
    if profile := os.environ.get("BENCH_PYSPY"):  # a folder: sample the run with py-spy (collapsed stacks, threads apart)
        Path(profile).mkdir(parents=True, exist_ok=True)
        out_file = Path(profile) / f"{argv[0]}-{time.strftime('%H%M%S')}.txt"
        cmd = [
            "py-spy",
            "record",
            "--format",
            "raw",
            "--threads",
            *([] if os.environ.get("BENCH_PYSPY_CPU") else ["--idle"]),
            "--rate",
            "200",
            "-o",
            str(out_file),
            "--",
            *cmd,
        ]
    prefix = f"{argv[0]}: "
    lines: list[tuple[float, str]] = []
    out: list[bytes] = []
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=child_environment(settings), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    stdout, stderr = proc.stdout, proc.stderr

    def read_stderr() -> None:
        for raw in stderr:
            lines.append((time.monotonic() - t0, raw.decode("utf-8", "replace").rstrip("\n")))

    readers = [threading.Thread(target=read_stderr), threading.Thread(target=lambda: out.append(stdout.read()))]
    for r in readers:
        r.start()
    _pid, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, not every child's maximum so far
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join()
    if proc.returncode != 0:
        sys.stderr.write("\n".join(line for _, line in lines[-40:]) + "\n")
        raise SystemExit(f"brain {argv[0]} exited with {proc.returncode}")

    def is_step(line: str) -> bool:
        return line.startswith(prefix) and not line.startswith(f"{prefix}scored ") and not re.match(r"\d+/\d+", line[len(prefix) :])

    steps: list[dict[str, Any]] = []
    for i, (at, line) in enumerate(lines):
        if is_step(line):
            ends = next((t for t, ln in lines[i + 1 :] if is_step(ln)), wall)
            steps.append({"step": line[len(prefix) :], "s": round(ends - at, 2)})
    return {
        "wall_s": round(wall, 1),
        "startup_s": round(lines[0][0], 2) if lines else None,  # interpreter, imports, migration check
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # kilobytes on Linux
        "user_cpu_s": round(usage.ru_utime, 1),
        "sys_cpu_s": round(usage.ru_stime, 1),
        "steps": steps,
        "summary": json.loads([ln for ln in b"".join(out).decode("utf-8").splitlines() if ln.startswith("{")][-1]),
    }
