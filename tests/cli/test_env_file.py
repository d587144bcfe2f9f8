"""``.env``: the commands read the working folder's, under the environment; the hook and ``brain mcp`` never do (ADR 0058).

Each test runs the real ``brain`` process in a folder holding a ``.env``, with
no kernel variable in its environment but those the test sets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from brain_kernel.settings import KERNEL_VARIABLES
from tests.support.gitrepo import make_repo
from tests.support.harness import HTTP
from tests.support.hook_kernel import stub_kernel
from tests.support.servers import free_port, stop

UNREACHABLE = "postgresql://brain@127.0.0.1:1/brain"  # nothing listens on port 1
SAMPLES = Path(__file__).resolve().parent.parent / "data" / "hooks"  # the agents' documented payloads


def _env(**extra: str) -> dict[str, str]:
    """This process's environment without any kernel variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(KERNEL_VARIABLES)}
    env.update(extra)
    return env


def _brain(folder: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "brain_cli", *args], cwd=folder, env=_env(**extra), capture_output=True, text=True, timeout=60)


def test_a_command_reads_the_working_folders_env_file(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"# written by brain init\nPOSTGRES_PASSWORD=unused-here\nDATABASE_URL='{UNREACHABLE}'\n")
    result = _brain(tmp_path, "migrate")
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error: cannot reach the database at postgresql+psycopg://brain@127.0.0.1:1/brain")


def test_an_environment_variable_wins_over_the_env_file(tmp_path: Path, database_url: str) -> None:
    (tmp_path / ".env").write_text(f"DATABASE_URL={UNREACHABLE}\n")
    result = _brain(tmp_path, "migrate", DATABASE_URL=database_url)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["migrated"] is True


def test_brain_env_file_names_another_file_and_empty_names_none(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("BRAIN_WORKERS=0\n")  # refused when read: the message tells which file was read
    elsewhere = tmp_path / "conf" / "brain.env"
    elsewhere.parent.mkdir()
    elsewhere.write_text(f"DATABASE_URL={UNREACHABLE}\n")
    read = _brain(tmp_path, "migrate")
    assert (read.returncode, read.stderr.strip()) == (2, "error: invalid setting BRAIN_WORKERS: Input should be greater than or equal to 1")
    named = _brain(tmp_path, "migrate", BRAIN_ENV_FILE=str(elsewhere))
    assert named.returncode == 1 and "127.0.0.1:1" in named.stderr
    missing = _brain(tmp_path, "migrate", BRAIN_ENV_FILE=str(tmp_path / "nope.env"))
    assert (missing.returncode, missing.stderr.strip()) == (2, f"error: BRAIN_ENV_FILE names {tmp_path / 'nope.env'}, which is not a file")
    none = _brain(tmp_path, "migrate", "--database-url", "mysql://x@y/z", BRAIN_ENV_FILE="")
    assert (none.returncode, none.stderr.strip()) == (2, "error: DATABASE_URL must point at PostgreSQL, not mysql")


def test_brain_serve_listens_where_the_env_file_says(tmp_path: Path, database_url: str) -> None:
    port = free_port()
    (tmp_path / ".env").write_text(f"BRAIN_PORT={port}\nDATABASE_URL={database_url}\nBRAIN_VAULT=./vault\nBRAIN_HOME=./.brain\nHOST_UID=1000\n")
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "brain_cli", "serve"], cwd=tmp_path, env=_env(), stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 60
        status = 0
        while not status and time.monotonic() < deadline and proc.poll() is None:  # polling a starting process
            try:
                status = HTTP.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code
            except httpx.HTTPError:
                time.sleep(0.05)
        assert status == 200, log.read_text()
        assert (tmp_path / "vault" / "brain-feed").is_dir()  # the .env's relative vault, scaffolded in the working folder
    finally:
        stop(proc)


def test_the_hook_never_reads_a_repositorys_env_file(tmp_path: Path) -> None:
    """The agent runs the hook in the user's repository: that ``.env`` is the user's application's, not the kernel's."""
    repo = make_repo(tmp_path / "dev" / "widget", remote="git@github.com:acme/widget.git")
    home = tmp_path / "home"
    with stub_kernel() as ours, stub_kernel() as theirs:
        for config, url in ((home / ".config", ours.url), (tmp_path / "their-config", theirs.url)):
            (config / "brain").mkdir(parents=True)
            (config / "brain" / "client.json").write_text(json.dumps({"url": url, "token": None}))
        (repo / ".env").write_text(f"XDG_CONFIG_HOME={tmp_path / 'their-config'}\n")
        payload = {**json.loads((SAMPLES / "claude-session-start.json").read_text()), "cwd": str(repo)}
        env = _env(HOME=str(home))
        env.pop("XDG_CONFIG_HOME", None)
        env.pop("XDG_STATE_HOME", None)
        result = subprocess.run(
            [sys.executable, "-c", "from brain_cli.entry import main; main()", "hook", "claude", "SessionStart"],
            cwd=repo,
            env=env,
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 0, result.stderr
    assert ours.requests and not theirs.requests


def test_brain_mcp_never_reads_a_repositorys_env_file(tmp_path: Path) -> None:
    """An agent starts ``brain mcp`` in the user's repository too: a setting there is the user's application's."""
    (tmp_path / ".env").write_text("BRAIN_WORKERS=0\n")  # refused, were it read
    result = _brain(tmp_path, "mcp", "--vault", str(tmp_path / "vault"), "--database-url", "mysql://x@y/z", HOME=str(tmp_path))
    assert (result.returncode, result.stderr.strip()) == (2, "error: DATABASE_URL must point at PostgreSQL, not mysql")
