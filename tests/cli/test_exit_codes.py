"""Exit codes (ADR 0058, docs/cli.md): 2 when the command line or the configuration is wrong, 1 when the work failed.

Every case runs the real ``brain`` process and checks the one ``error:`` line
and its code; the last test reads the CLI's sources so that no command exits
with a number of its own.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from brain_kernel.settings import KERNEL_VARIABLES
from tests.support.harness import REPO_ROOT
from tests.support.servers import free_port

UNREACHABLE = "postgresql://brain@127.0.0.1:1/x"  # nothing listens on port 1


def _brain(folder: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(KERNEL_VARIABLES)}
    env.update({"BRAIN_ENV_FILE": "", "HOME": str(folder), **extra})
    return subprocess.run([sys.executable, "-m", "brain_cli", *args], cwd=folder, env=env, capture_output=True, text=True, timeout=60)


def _brain_script(folder: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """The installed ``brain`` console script, as an operator types it (``python -m brain_cli`` names itself so)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(KERNEL_VARIABLES)}
    env.update({"BRAIN_ENV_FILE": "", "HOME": str(folder), **extra})
    script = Path(sys.executable).parent / "brain"
    return subprocess.run([str(script), *args], cwd=folder, env=env, capture_output=True, text=True, timeout=60)


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize("command", ["migrate", "serve", "reindex"])
def test_an_unreachable_database_is_a_runtime_failure(tmp_path: Path, command: str) -> None:
    (tmp_path / "vault").mkdir()
    result = _brain(tmp_path, command, "--database-url", UNREACHABLE, **({} if command == "migrate" else {"BRAIN_VAULT": str(tmp_path / "vault")}))
    assert result.returncode == 1
    assert _one_error_line(result).startswith("error: cannot reach the database at postgresql+psycopg://brain@127.0.0.1:1/x: ")


def test_a_kernel_that_cannot_be_reached_is_a_runtime_failure(tmp_path: Path) -> None:
    result = _brain(tmp_path, "status", "--url", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert _one_error_line(result).startswith("error: kernel unavailable: cannot reach")


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["migrate", "--database-url", "mysql://x@y/z"], {}, "error: DATABASE_URL must point at PostgreSQL, not mysql"),
        (["migrate"], {"BRAIN_PORT": "eighty"}, "error: invalid setting BRAIN_PORT: Input should be a valid integer"),
        (["tick-drain", "--vault", "/no-such-vault"], {}, "error: vault folder /no-such-vault does not exist"),
        # a typo in the vault's path starts no new vault
        (["cluster", "--bundle", "-", "--out-dir", "{folder}/vaultt"], {}, "error: vault folder {folder}/vaultt does not exist"),
        (["cluster", "--bundle", "-"], {"BRAIN_VAULT": "{folder}/typo/v"}, "error: vault folder {folder}/typo/v does not exist"),
        (["reindex", "--vault", "a-file"], {}, "error: vault {folder}/a-file is not a folder"),
        (["status", "--url", "ftp://kernel"], {}, "error: --url 'ftp://kernel' is not an http:// or https:// URL"),
        (["migrate", "--database-url", UNREACHABLE], {"BRAIN_AUTH_REQUIRED": "true"}, "error: invalid settings: BRAIN_AUTH_REQUIRED is on but no token is set"),
        # refused before any kernel is asked (none listens here): a bad value, not the kernel's refusal
        (["search", "x", "--mode", "nope", "--url", "http://127.0.0.1:9"], {}, "error: --mode 'nope': one of hybrid, vector, words"),
        (["marker", "bogus", "x", "--url", "http://127.0.0.1:9"], {}, "error: 'bogus' is not a marker type: one of lesson, milestone"),
        (["backfill", "--vault", "vault", "--only", "nosuch/path"], {}, "error: --only nosuch/path: no such file or folder in the vault"),
        (["backfill", "--vault", "vault", "--only", "{folder}/a-file"], {}, "error: --only {folder}/a-file: not in the vault"),  # it exists
    ],
)
def test_a_bad_setting_or_value_is_a_usage_error(tmp_path: Path, args: list[str], env: dict[str, str], says: str) -> None:
    (tmp_path / "a-file").write_text("not a vault\n")
    (tmp_path / "vault").mkdir()
    result = _brain(tmp_path, *(a.format(folder=tmp_path) for a in args), **{k: v.format(folder=tmp_path) for k, v in env.items()})
    assert result.returncode == 2
    assert _one_error_line(result).startswith(says.format(folder=tmp_path))
    assert not (tmp_path / "vaultt").exists() and not (tmp_path / "typo").exists()


@pytest.mark.parametrize(
    ("args", "says", "help_of"),
    [
        (["serve", "--no-such-option"], "error: No such option: --no-such-option", "brain serve"),
        (["no-such-command"], "error: No such command 'no-such-command'.", "brain"),
        (["serv"], "error: No such command 'serv'. Did you mean 'serve', 'search'?", "brain"),
        (
            ["serve", "--port", "eighty"],
            "error: Invalid value for '--port': Input should be a valid integer, unable to parse string as an integer",
            "brain serve",
        ),
        (["whereis"], "error: Missing argument 'paths'.", "brain whereis"),
        (["trial", "nosuch"], "error: No such command 'nosuch'.", "brain trial"),
        (["trial", "report", "--bogus"], "error: No such option: --bogus", "brain trial report"),
    ],
)
def test_a_bad_command_line_is_one_error_line_and_exit_2(tmp_path: Path, args: list[str], says: str, help_of: str) -> None:
    """Click's message on one line (no box, however wide the terminal), then where the help is."""
    result = _brain_script(tmp_path, *args, COLUMNS="40")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [says, f"try: {help_of} --help"]
    assert result.stdout == ""


@pytest.mark.parametrize("args", [[], ["--help"], ["trial"]])
def test_help_and_a_bare_group_still_print_the_help(tmp_path: Path, args: list[str]) -> None:
    result = _brain_script(tmp_path, *args)
    assert result.returncode == (0 if args == ["--help"] else 2)
    assert "error:" not in result.stdout + result.stderr
    assert "Usage: brain" in result.stdout and "Commands" in result.stdout


def test_no_command_exits_with_a_number_of_its_own() -> None:
    """Every exit status is an ``ExitCode`` (brain_cli.common), so 1 and 2 keep one meaning each."""
    literal_exits = []
    for path in sorted((REPO_ROOT / "services" / "brain-cli" / "brain_cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and _name(node.func) in {"Exit", "exit", "SystemExit", "fail"}:
                values = [arg for arg in [*node.args, *(k.value for k in node.keywords)] if isinstance(arg, ast.Constant)]
                if any(type(arg.value) is int and arg.value not in (0, 130) for arg in values):  # 130: an interrupt, as shells say
                    literal_exits.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert literal_exits == []


def _name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
