"""The ``brain`` command: help everywhere, one-line errors for bad configuration, a real server."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner

from brain_cli.cli import app
from tests.support.harness import HTTP, REPO_ROOT, brain, make_settings
from tests.support.servers import free_port

runner = CliRunner()


def _commands() -> dict:
    group = typer.main.get_command(app)
    return dict(group.commands)  # type: ignore[attr-defined]


def test_every_command_has_help_text() -> None:
    commands = _commands()
    assert {"serve", "migrate"} <= set(commands)
    for name, command in commands.items():
        assert command.help and command.help.strip(), f"brain {name} has no help text"
        summary = command.help.strip().split("\n\n")[0]  # what `brain --help` lists beside the name
        assert "\n" not in summary and len(summary) <= 100, f"brain {name}: the summary is not one short line: {summary!r}"
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, result.output
        assert "Usage" in result.output
        for param in command.params:
            if getattr(param, "param_type_name", "") == "option" and param.name != "help":
                assert param.help, f"brain {name} option {param.name} has no help"


def test_every_command_and_group_help_shows_an_example() -> None:
    """docs/cli.md: every command's --help has an example, a group's (brain trial) and its commands' included."""
    for name, command in _commands().items():
        subcommands = dict(getattr(command, "commands", {}))
        for path, each in [([name], command), *(([name, sub], subcommand) for sub, subcommand in subcommands.items())]:
            shown = runner.invoke(app, [*path, "--help"])
            assert shown.exit_code == 0, shown.output
            assert "Example: " in shown.output, f"brain {' '.join(path)} --help shows no example"
            assert "Example: " in (each.help or "")


def test_top_level_help_lists_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in _commands():
        assert name in result.output


_LOADED = """
import sys
from brain_cli.cli import main
try:
    main()
except SystemExit:
    pass
print(" ".join(sorted(m.rsplit(".", 1)[1] for m in sys.modules if m.startswith("brain_cli.commands."))))
"""


@pytest.mark.parametrize(
    ("args", "loaded"),
    [(["--version"], set()), (["status", "--help"], {"remote", "mcp"}), (["serve", "--help"], {"server"}), (["trial", "report", "--help"], {"trial"})],
)
def test_a_command_imports_its_own_module_and_no_other(args: list[str], loaded: set[str]) -> None:
    """A command costs its own imports only; ``brain --help`` is the one that looks every command up (ADR 0063)."""
    result = subprocess.run([sys.executable, "-c", _LOADED, *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.splitlines()[-1].split()) == loaded  # remote's client reads mcp's client file


_HEAVY = """
import sys
from brain_cli.cli import main
try:
    main()
except SystemExit as exc:
    print("exit", exc.code)
print(" ".join(sorted(m for m in ("brain_ops", "brain_mcp.server", "brain_mcp.remote", "brain_api", "brain_cli.runtime", "alembic") if m in sys.modules)))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["tick-drain", "--vault", "/no-such-vault"],
        ["reindex", "--vault", "/no-such-vault"],
        ["repair", "--dry-run", "--vault", "/no-such-vault"],
        ["serve", "--port", "99999"],
        ["mcp", "--http", "--port", "99999"],
        ["mcp", "--remote", "ftp://kernel"],
        ["migrate", "--to", "0001"],
    ],
)
def test_a_bad_setting_fails_before_the_commands_own_modules_load(args: list[str], tmp_path: Path) -> None:
    """A mistyped flag or setting costs the settings' check only, not the server's or the job's imports (ADR 0063)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRAIN_", "DATABASE_URL", "POSTGRES_URL"))}
    env.update({"BRAIN_ENV_FILE": "", "BRAIN_PORT": "eighty"} if args[0] == "migrate" else {"BRAIN_ENV_FILE": ""})
    result = subprocess.run([sys.executable, "-c", _HEAVY, *args], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    exit_line, loaded = result.stdout.splitlines()[-2:]
    assert exit_line == "exit 2", result.stderr
    assert loaded == "", result.stderr


def _run_brain(args: list[str], env_extra: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRAIN_", "DATABASE_URL", "POSTGRES_URL"))}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "brain_cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


# In this process, the same code path as the installed command: tests/cli/test_exit_codes.py runs these command
# lines as real processes (exit status and the one error line), so here a process start would only add its cost.
def test_unreachable_database_is_one_clear_line(tmp_path: Path) -> None:
    result = brain(make_settings(tmp_path, "postgresql://brain@127.0.0.1:1/brain"), "migrate", cwd=tmp_path)
    assert result.exit_code != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: cannot reach the database")
    assert "Traceback" not in result.stderr


def test_unwritable_vault_is_one_clear_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = _run_brain(["serve", "--vault", str(blocker / "vault"), "--database-url", "postgresql://x@127.0.0.1:1/x"], {}, tmp_path)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: vault folder")


def test_malformed_database_url_is_one_clear_line(tmp_path: Path) -> None:
    result = brain(make_settings(tmp_path, None), "migrate", "--database-url", "mysql://x@y/z", cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: DATABASE_URL must point at PostgreSQL")


@pytest.mark.slow
def test_serve_on_the_embedded_default_is_healthy_and_stops_cleanly(tmp_path: Path) -> None:
    home = REPO_ROOT / ".brain" / f"serve-test-{os.getpid()}"
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "brain_cli", "serve", "--port", str(port), "--vault", str(tmp_path / "vault")],
        env={**{k: v for k, v in os.environ.items() if not k.startswith(("BRAIN_", "DATABASE_URL", "POSTGRES_URL"))}, "BRAIN_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        healthy = False
        while time.monotonic() < deadline and not healthy:
            try:
                healthy = HTTP.get(f"{base}/health", timeout=1).status_code == 200
            except httpx.HTTPError:
                time.sleep(0.05)
        assert healthy, "GET /health did not answer within 30 s"
        deep = HTTP.get(f"{base}/health/deep", timeout=5).json()
        assert deep["status"] == "ok", deep
        for folder in ("clusters", "left/reference", "left/decisions", "left/projects", "amygdala", "daily", "brain-feed", "raw/inbox"):
            assert (tmp_path / "vault" / folder).is_dir(), folder
    finally:
        proc.terminate()
        proc.wait(30)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    pid_file = home / "pgdata" / "postmaster.pid"
    assert not pid_file.exists(), "embedded Postgres still running after SIGTERM"
    import shutil

    shutil.rmtree(home, ignore_errors=True)


def test_an_unusable_path_given_to_a_command_is_one_clear_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    bundle = '{"sessions": [{"session_id": "s1", "project": "api", "start": "2026-11-29T10:00:00Z", "end": "2026-11-29T11:00:00Z"}]}'
    result = runner.invoke(app, ["cluster", "--out-dir", str(blocker / "clusters")], input=bundle, env={"HOME": str(tmp_path)})
    errors = [line for line in result.stderr.splitlines() if not line.startswith("cluster: ")]  # progress lines
    assert result.exit_code == 2 and len(errors) == 1, result.stderr
    assert errors[0].startswith("error: ") and "a-file" in errors[0] and "is not a folder" in errors[0]  # refused before it writes


def test_settings_survive_the_trip_to_a_worker_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from brain_kernel.settings import Settings

    original = Settings.explicit(
        vault=tmp_path / "v",
        home=tmp_path / "h",
        user_home=tmp_path,
        database_url="postgresql://u@db/brain",
        tokens=["a", "b"],
        layout_patterns=["~/x/{project}/*"],
        catalog_path=tmp_path / "c.yaml",
        workers=3,
        embed_dim=384,
        llm_base_url="http://llm.local/v1",
        marker_max_chars=100,
    )
    for name in list(os.environ):
        monkeypatch.delenv(name)
    for name, value in original.to_environ().items():
        monkeypatch.setenv(name, value)
    assert Settings().model_dump() == original.model_dump()


def test_the_hooks_help_lists_every_option_the_hook_process_takes() -> None:
    """The console script runs the hook without Typer; its Typer face must still show what connect writes."""
    import re

    from brain_cli.hook.run import USAGE

    taken = set(re.findall(r"--[a-z][a-z-]+", USAGE))
    shown = {opt for param in _commands()["hook"].params for opt in getattr(param, "opts", ())}
    assert taken and taken <= shown, taken - shown
