"""``brain connect`` / ``brain disconnect`` through the real CLI, over agent files that already hold other hooks and servers."""

from __future__ import annotations

import json
import os
import pty
import select
import stat
import subprocess
import sys
import termios
import time
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from brain_cli import agent_config
from brain_kernel.settings import KERNEL_VARIABLES, Settings
from tests.support.harness import Served, brain, make_settings, serve_in_thread
from tests.support.servers import free_port

BRAIN = "/opt/brain env/bin/brain"  # a space: the hook command must quote it
TOKEN = "s3cret-token-value"

CLAUDE_SETTINGS = """{
  "model": "opus",
  "hooks": {
    "SessionStart": [
      {
        "matcher": "startup",
        "hooks": [
          {
            "type": "command",
            "command": "echo hello"
          }
        ]
      }
    ],
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "~/bin/guard.sh",
            "timeout": 5
          }
        ]
      }
    ]
  },
  "permissions": {
    "allow": [
      "Bash(git log:*)"
    ]
  }
}
"""
CLAUDE_JSON = """{
  "numStartups": 12,
  "mcpServers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-github"
      ],
      "env": {}
    }
  },
  "projects": {}
}
"""
CODEX_HOOKS = """{
  "hooks": {
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "python3 ~/.codex/stop.py",
            "timeout": 30
          }
        ]
      }
    ]
  }
}
"""
CODEX_CONFIG = """model = "gpt-5-codex"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]

[profiles.fast]
model = "gpt-5-mini"
"""


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings under tmp_path, and HOME there too: the client file goes where the hook reads it (``config_dir()``)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return make_settings(tmp_path, None)


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def _claude_files(settings: Settings) -> tuple[Path, Path]:
    home = settings.user_home
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    (home / ".claude" / "settings.json").write_text(CLAUDE_SETTINGS)
    (home / ".claude.json").write_text(CLAUDE_JSON)
    return home / ".claude" / "settings.json", home / ".claude.json"


def _codex_files(settings: Settings) -> tuple[Path, Path]:
    folder = settings.resolved_codex_dir
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hooks.json").write_text(CODEX_HOOKS)
    (folder / "config.toml").write_text(CODEX_CONFIG)
    return folder / "hooks.json", folder / "config.toml"


def _connect(settings: Settings, agent: str, token_file: Path, *extra: str) -> dict:
    result = brain(settings, "connect", agent, "--brain", BRAIN, "--token-file", str(token_file), "--url", "http://kernel:8080", *extra)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def _snapshot(*paths: Path) -> dict[Path, bytes | None]:
    return {p: p.read_bytes() if p.exists() else None for p in paths}


def _commands(hooks: dict, event: str) -> list[str]:
    return [h["command"] for group in hooks["hooks"].get(event, []) for h in group["hooks"]]


def test_connect_claude_adds_hooks_and_server_and_keeps_the_others(settings: Settings, token_file: Path) -> None:
    hooks_file, mcp_file = _claude_files(settings)
    summary = _connect(settings, "claude", token_file)
    assert sorted(summary["changed"]) == sorted([str(hooks_file), str(mcp_file)])
    data = json.loads(hooks_file.read_text())
    assert data["model"] == "opus" and data["permissions"] == {"allow": ["Bash(git log:*)"]}
    assert list(data) == ["model", "hooks", "permissions"]  # key order kept
    assert _commands(data, "SessionStart") == ["echo hello", "'/opt/brain env/bin/brain' hook claude session-start"]
    assert data["hooks"]["SessionStart"][1]["matcher"] == "startup|resume|clear|compact"
    assert data["hooks"]["SessionStart"][1]["hooks"][0]["timeout"] == 10
    assert _commands(data, "PreToolUse") == ["~/bin/guard.sh"]
    assert _commands(data, "UserPromptSubmit") == ["'/opt/brain env/bin/brain' hook claude prompt-submit"]
    assert _commands(data, "Stop") == ["'/opt/brain env/bin/brain' hook claude stop"]
    assert _commands(data, "SubagentStop") == ["'/opt/brain env/bin/brain' hook claude subagent-stop"]
    assert "matcher" not in data["hooks"]["Stop"][0]
    assert hooks_file.read_text().startswith('{\n  "model": "opus",\n  "hooks": {\n    "SessionStart": [\n')  # two-space indent
    servers = json.loads(mcp_file.read_text())["mcpServers"]
    assert list(servers) == ["github", "brain"]
    assert servers["brain"] == {"type": "stdio", "command": BRAIN, "args": ["mcp", "--remote", "http://kernel:8080"]}  # the hooks' kernel
    backups = sorted(p.name for p in hooks_file.parent.glob("settings.json.brain-backup-*"))
    assert len(backups) == 1 and (hooks_file.parent / backups[0]).read_text() == CLAUDE_SETTINGS


def test_a_second_connect_changes_nothing_byte_for_byte(settings: Settings, token_file: Path) -> None:
    files = [*_claude_files(settings), *_codex_files(settings)]
    _connect(settings, "claude", token_file)
    _connect(settings, "codex", token_file)
    first = _snapshot(*files, *settings.user_home.rglob("*.brain-backup-*"))
    assert _connect(settings, "claude", token_file)["changed"] == []
    assert _connect(settings, "codex", token_file)["changed"] == []
    assert _snapshot(*files, *settings.user_home.rglob("*.brain-backup-*")) == first  # no new backups either


def test_dry_run_prints_a_diff_and_writes_nothing(settings: Settings, token_file: Path) -> None:
    files = _claude_files(settings)
    before = sorted(p for p in settings.user_home.rglob("*"))
    result = brain(settings, "connect", "claude", "--brain", BRAIN, "--token-file", str(token_file), "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert f"--- {files[0]}" in result.stdout and f"+++ {files[1]}" in result.stdout
    added = [line for line in result.stdout.splitlines() if line.startswith("+") and "hook claude session-start" in line]
    assert added == ['+            "command": "\'/opt/brain env/bin/brain\' hook claude session-start",']
    assert TOKEN not in result.stdout
    assert sorted(p for p in settings.user_home.rglob("*")) == before  # no client file, no backup
    assert files[0].read_text() == CLAUDE_SETTINGS and files[1].read_text() == CLAUDE_JSON


def test_disconnect_restores_the_files_byte_for_byte(settings: Settings, token_file: Path) -> None:
    claude = _claude_files(settings)
    codex = _codex_files(settings)
    _connect(settings, "claude", token_file)
    _connect(settings, "codex", token_file)
    _connect(settings, "claude", token_file)  # a rerun keeps the original as the one to restore
    assert brain(settings, "disconnect", "claude").exit_code == 0
    assert brain(settings, "disconnect", "codex").exit_code == 0
    assert claude[0].read_text() == CLAUDE_SETTINGS and claude[1].read_text() == CLAUDE_JSON
    assert codex[0].read_text() == CODEX_HOOKS and codex[1].read_text() == CODEX_CONFIG
    assert json.loads(brain(settings, "disconnect", "claude").stdout)["changed"] == []  # nothing left to remove


def test_disconnect_deletes_the_files_connect_created(settings: Settings, token_file: Path) -> None:
    _connect(settings, "codex", token_file)
    folder = settings.resolved_codex_dir
    assert (folder / "hooks.json").exists() and (folder / "config.toml").exists()
    assert brain(settings, "disconnect", "codex").exit_code == 0
    assert not (folder / "hooks.json").exists() and not (folder / "config.toml").exists()


def test_disconnect_after_other_edits_removes_only_our_entries(settings: Settings, token_file: Path) -> None:
    hooks_file, mcp_file = _claude_files(settings)
    _connect(settings, "claude", token_file)
    data = json.loads(hooks_file.read_text())
    data["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "notify-send done"}]})
    data["theme"] = "dark"
    hooks_file.write_text(json.dumps(data, indent=2) + "\n")
    assert brain(settings, "disconnect", "claude").exit_code == 0
    after = json.loads(hooks_file.read_text())
    expected = json.loads(CLAUDE_SETTINGS)
    expected["hooks"]["Stop"] = [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
    expected["theme"] = "dark"
    assert after == expected
    assert mcp_file.read_text() == CLAUDE_JSON  # untouched since connect: its bytes back


def test_codex_gets_hooks_json_and_a_toml_block(settings: Settings, token_file: Path) -> None:
    hooks_file, config = _codex_files(settings)
    _connect(settings, "codex", token_file)
    data = json.loads(hooks_file.read_text())
    assert _commands(data, "Stop") == ["python3 ~/.codex/stop.py", "'/opt/brain env/bin/brain' hook codex stop"]
    assert data["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"  # the block again after a compaction
    text = config.read_text()
    assert text.startswith(CODEX_CONFIG + "\n" + agent_config.TOML_BEGIN)  # appended, the rest untouched
    parsed = tomllib.loads(text)
    assert parsed["mcp_servers"]["brain"] == {"command": BRAIN, "args": ["mcp", "--remote", "http://kernel:8080"]}
    assert parsed["mcp_servers"]["docs"]["command"] == "npx" and parsed["profiles"]["fast"]["model"] == "gpt-5-mini"


def test_the_token_goes_to_the_client_file_only(settings: Settings, token_file: Path) -> None:
    _claude_files(settings)
    _codex_files(settings)
    (settings.user_home / ".config" / "brain").mkdir(parents=True, mode=0o755)  # made before, by another umask
    summary = _connect(settings, "claude", token_file)
    _connect(settings, "codex", token_file)
    client = Path(summary["client_file"])
    assert client == settings.user_home / ".config" / "brain" / "client.json"
    assert stat.S_IMODE(client.stat().st_mode) == 0o600 and stat.S_IMODE(client.parent.stat().st_mode) == 0o700
    assert json.loads(client.read_text()) == {"url": "http://kernel:8080", "token": TOKEN}
    for path in settings.user_home.rglob("*"):
        if path.is_file() and path != client:
            assert TOKEN not in path.read_text(), path


def test_no_token_is_asked_of_a_kernel_that_does_not_answer_and_the_summary_says_so(settings: Settings) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    result = brain(settings, "connect", "claude", "--brain", BRAIN, "--no-mcp", "--url", down, input="typed-token\n")
    assert result.exit_code == 0, result.stderr
    assert "Token for" not in result.stdout + result.stderr  # no prompt
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["token_note"].startswith(f"none: {down} did not answer") and "--token-file" in result.stderr
    client = json.loads((settings.user_home / ".config" / "brain" / "client.json").read_text())
    assert client == {"url": down, "token": ""}
    assert not (settings.user_home / ".claude.json").exists()  # --no-mcp


def test_the_kept_token_stays_with_its_url(settings: Settings, token_file: Path) -> None:
    _connect(settings, "claude", token_file)  # http://kernel:8080 with TOKEN
    again = brain(settings, "connect", "codex", "--brain", BRAIN)  # the same kernel: its token is kept
    assert json.loads(again.stdout.strip().splitlines()[-1])["token_note"] == "kept from the client file"
    down = f"http://127.0.0.1:{free_port()}"
    moved = brain(settings, "connect", "claude", "--brain", BRAIN, "--url", down)
    assert moved.exit_code == 0, moved.stderr
    assert json.loads(moved.stdout.strip().splitlines()[-1])["token_note"].startswith(f"none: {down} did not answer")
    assert json.loads((settings.user_home / ".config" / "brain" / "client.json").read_text()) == {"url": down, "token": ""}


def test_a_kernel_with_auth_off_gets_an_empty_token_without_a_prompt(served: Served, settings: Settings) -> None:
    result = brain(settings, "connect", "codex", "--brain", BRAIN, "--url", served.base, input="typed-token\n")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["token_note"] == f"none: {served.base} answers without a token (auth off)"
    assert json.loads(Path(summary["client_file"]).read_text()) == {"url": served.base, "token": ""}


def test_project_scope_writes_the_repository_files(settings: Settings, token_file: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _connect(settings, "claude", token_file, "--scope", "project", "--project-dir", str(repo))
    assert "SessionStart" in json.loads((repo / ".claude" / "settings.json").read_text())["hooks"]
    assert json.loads((repo / ".mcp.json").read_text())["mcpServers"]["brain"]["args"] == ["mcp", "--remote", "http://kernel:8080"]
    assert not (settings.user_home / ".claude" / "settings.json").exists()


def test_disconnect_in_a_repository_leaves_it_as_connect_found_it(settings: Settings, token_file: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".claude").mkdir(parents=True)
    (repo / ".claude" / "settings.json").write_text(CLAUDE_SETTINGS)  # the user's own; .codex/ and .mcp.json are not there
    before = sorted(str(p.relative_to(repo)) for p in repo.rglob("*"))
    for agent in ("claude", "codex"):
        _connect(settings, agent, token_file, "--scope", "project", "--project-dir", str(repo))
        again = brain(
            settings,
            "connect",
            agent,
            "--brain",
            BRAIN,
            "--token-file",
            str(token_file),
            "--url",
            "http://other:8080",
            "--scope",
            "project",
            "--project-dir",
            str(repo),
        )
        assert again.exit_code == 0, again.stderr  # a second connect (another kernel) rewrites connect's own bytes: no backup
        # the client file serves both agents' hooks: a new URL says the other agent's MCP server still names the old one
        assert "run brain connect" in again.stderr and json.loads(again.stdout.splitlines()[-1])["url_changed_from"] == "http://kernel:8080"
        _connect(settings, agent, token_file, "--scope", "project", "--project-dir", str(repo))  # and back
    for agent in ("claude", "codex"):
        summary = json.loads(brain(settings, "disconnect", agent, "--scope", "project", "--project-dir", str(repo)).stdout)
        assert summary["restored"] == summary["changed"] and summary["backups"] == [], summary
    # No backup, no folder connect made: a `git add -A` after it commits nothing of brain's.
    assert sorted(str(p.relative_to(repo)) for p in repo.rglob("*")) == before
    assert (repo / ".claude" / "settings.json").read_text() == CLAUDE_SETTINGS


def test_an_empty_token_file_is_refused_before_anything_is_written(settings: Settings, tmp_path: Path) -> None:
    empty = tmp_path / "empty-token"
    empty.write_text("\n")
    result = brain(settings, "connect", "claude", "--brain", BRAIN, "--token-file", str(empty), "--url", "http://kernel:8080")
    assert result.exit_code == 2 and "the file is empty" in result.stderr, result.stderr
    assert not (settings.user_home / ".claude").exists() and not (settings.user_home / ".config" / "brain" / "client.json").exists()


def test_a_foreign_server_named_brain_is_refused(settings: Settings, token_file: Path) -> None:
    _, config = _codex_files(settings)
    config.write_text(CODEX_CONFIG + '\n[mcp_servers.brain]\ncommand = "other"\n')
    result = brain(settings, "connect", "codex", "--brain", BRAIN, "--token-file", str(token_file))
    assert result.exit_code == 2 and "did not write it" in result.stderr
    assert (settings.resolved_codex_dir / "hooks.json").read_text() == CODEX_HOOKS  # nothing written


def test_a_moved_brain_replaces_the_stale_entries(settings: Settings, token_file: Path) -> None:
    hooks_file, _ = _claude_files(settings)
    _connect(settings, "claude", token_file)
    result = brain(settings, "connect", "claude", "--brain", "/usr/local/bin/brain", "--token-file", str(token_file))
    assert result.exit_code == 0, result.stderr
    data = json.loads(hooks_file.read_text())
    assert _commands(data, "SessionStart") == ["echo hello", "/usr/local/bin/brain hook claude session-start"]
    assert _commands(data, "Stop") == ["/usr/local/bin/brain hook claude stop"]


def test_codex_config_edited_since_keeps_the_edit_and_loses_only_our_block(settings: Settings, token_file: Path) -> None:
    _, config = _codex_files(settings)
    config.write_text(CODEX_CONFIG.rstrip("\n"))  # no final newline
    _connect(settings, "codex", token_file)
    config.write_text('approval_policy = "on-request"\n' + config.read_text())
    assert brain(settings, "disconnect", "codex").exit_code == 0
    assert config.read_text() == 'approval_policy = "on-request"\n' + CODEX_CONFIG.rstrip("\n") + "\n"
    assert "brain" not in tomllib.loads(config.read_text())["mcp_servers"]


def test_codex_config_appended_to_since_loses_our_block_and_its_separator(settings: Settings, token_file: Path) -> None:
    _, config = _codex_files(settings)
    _connect(settings, "codex", token_file)
    config.write_text(config.read_text() + '\n[profiles.slow]\nmodel = "o3"\n')
    assert brain(settings, "disconnect", "codex").exit_code == 0
    assert config.read_text() == CODEX_CONFIG + '\n[profiles.slow]\nmodel = "o3"\n'  # one blank line, as the user wrote it


def test_a_symlinked_settings_file_stays_a_symlink(settings: Settings, token_file: Path, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "settings.json").write_text(CLAUDE_SETTINGS)
    (settings.user_home / ".claude").mkdir(parents=True)
    link = settings.user_home / ".claude" / "settings.json"
    link.symlink_to(dotfiles / "settings.json")
    _connect(settings, "claude", token_file, "--no-mcp")
    assert link.is_symlink() and "hook claude stop" in (dotfiles / "settings.json").read_text()
    assert brain(settings, "disconnect", "claude").exit_code == 0
    assert link.is_symlink() and (dotfiles / "settings.json").read_text() == CLAUDE_SETTINGS


def test_the_client_file_goes_to_xdg_config_home_as_the_hook_reads_it(
    settings: Settings, token_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    hooks_file, mcp_file = _claude_files(settings)
    summary = _connect(settings, "claude", token_file)
    assert summary["client_file"] == str(tmp_path / "xdg" / "brain" / "client.json")
    assert json.loads((tmp_path / "xdg" / "brain" / "client.json").read_text())["token"] == TOKEN
    assert not (settings.user_home / ".config").exists()
    # The hook finds it there by itself: no command names it.
    assert "--client-file" not in hooks_file.read_text() + mcp_file.read_text()


def test_a_config_dir_elsewhere_is_named_on_every_command(settings: Settings, token_file: Path, tmp_path: Path) -> None:
    hooks_file, mcp_file = _claude_files(settings)
    _, config = _codex_files(settings)
    elsewhere = tmp_path / "elsewhere"
    client = str(elsewhere / "client.json")
    _connect(settings, "claude", token_file, "--config-dir", str(elsewhere))
    _connect(settings, "codex", token_file, "--config-dir", str(elsewhere))
    assert json.loads(Path(client).read_text()) == {"url": "http://kernel:8080", "token": TOKEN}
    assert not (settings.user_home / ".config").exists()
    data = json.loads(hooks_file.read_text())
    for event, name in (("SessionStart", "session-start"), ("UserPromptSubmit", "prompt-submit"), ("Stop", "stop"), ("SubagentStop", "subagent-stop")):
        assert _commands(data, event)[-1] == f"'/opt/brain env/bin/brain' hook claude {name} --client-file {client}"
    args = ["mcp", "--remote", "http://kernel:8080", "--client-file", client]
    assert json.loads(mcp_file.read_text())["mcpServers"]["brain"]["args"] == args
    assert tomllib.loads(config.read_text())["mcp_servers"]["brain"]["args"] == args
    assert _connect(settings, "claude", token_file, "--config-dir", str(elsewhere))["changed"] == []
    assert brain(settings, "disconnect", "claude", "--config-dir", str(elsewhere)).exit_code == 0
    assert brain(settings, "disconnect", "codex", "--config-dir", str(elsewhere)).exit_code == 0
    assert hooks_file.read_text() == CLAUDE_SETTINGS and mcp_file.read_text() == CLAUDE_JSON and config.read_text() == CODEX_CONFIG


def test_the_registered_mcp_server_serves_the_kernel_the_hooks_use(served: Served, settings: Settings, tmp_path: Path) -> None:
    _claude_files(settings)
    result = brain(settings, "connect", "claude", "--url", served.base)  # this brain, by its absolute path
    assert result.exit_code == 0, result.stderr
    entry = json.loads((settings.user_home / ".claude.json").read_text())["mcpServers"]["brain"]
    assert Path(entry["command"]).is_absolute() and entry["args"] == ["mcp", "--remote", served.base]
    env = {k: v for k, v in os.environ.items() if not k.startswith(KERNEL_VARIABLES) and not k.startswith("XDG_")}
    env["HOME"] = str(settings.user_home)
    work = tmp_path / "work"
    work.mkdir()
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env, cwd=str(work))
    answers: dict[str, Any] = {}

    async def session() -> None:
        async with Client(stdio_client(params), read_timeout_seconds=30) as client:
            lesson = {"type": "lesson", "content": "Lesson: one memory for the hooks and the tools.", "attrs": {"source": "connect-test"}}
            answers["marker"] = await client.call_tool("brain_marker", lesson)

    anyio.run(session)
    marker = answers["marker"]
    assert not marker.is_error, marker.content
    assert (served.settings.vault / marker.structured_content["vault_path"]).is_file()  # written by the kernel in the client file
    assert list(work.iterdir()) == []


def _connect_on_a_terminal(settings: Settings, url: str, typed: str) -> tuple[int, str]:
    """``brain connect claude`` with a pseudo-terminal as stdin (a person at a shell): (exit code, what it showed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(KERNEL_VARIABLES)}
    env.update(settings.to_environ())
    env["HOME"] = str(settings.user_home)
    main, side = pty.openpty()
    command = [sys.executable, "-m", "brain_cli", "connect", "claude", "--brain", BRAIN, "--no-mcp", "--url", url]
    # A session of its own: no controlling terminal to open as /dev/tty, so the hidden prompt reads the pty.
    proc = subprocess.Popen(command, stdin=side, stdout=side, stderr=side, env=env, start_new_session=True)
    os.close(side)
    shown, sent = b"", False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            # A short wait: the prompt shows before echo goes off, and then nothing more comes until we type.
            ready, _, _ = select.select([main], [], [], 0.02)
            if ready:
                try:
                    chunk = os.read(main, 4096)
                except OSError:
                    break  # the other side closed: the process ended
                if not chunk:
                    break
                shown += chunk
            # Type once the prompt has turned echo off: getpass flushes what was typed before.
            if not sent and b"Token for" in shown and not termios.tcgetattr(main)[3] & termios.ECHO:
                os.write(main, typed.encode() + b"\n")
                sent = True
            elif proc.poll() is not None:
                break
        return proc.wait(10), shown.decode(errors="replace")
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_a_kernel_that_wants_a_token_is_prompted_for_on_a_terminal_only(settings: Settings, database_url: str, tmp_path: Path) -> None:
    from brain_kernel.vault_store import Vault

    (tmp_path / "kernel").mkdir()
    kernel = make_settings(tmp_path / "kernel", database_url, tokens=[TOKEN])
    Vault(kernel.vault).scaffold()
    with serve_in_thread(kernel) as base:  # the prompt is the subject: the kernel runs in this process
        piped = brain(settings, "connect", "claude", "--brain", BRAIN, "--no-mcp", "--url", base, input="typed\n")
        code, shown = _connect_on_a_terminal(settings, base, TOKEN)
    assert piped.exit_code == 0, piped.stderr
    assert "Token for" not in piped.stdout + piped.stderr
    assert json.loads(piped.stdout.strip().splitlines()[-1])["token_note"].startswith(f"none: {base} needs a token and stdin is not a terminal")
    assert code == 0, shown
    assert f"Token for {base}" in shown and TOKEN not in shown  # hidden as typed
    summary = json.loads(shown.strip().splitlines()[-1])
    assert summary["token_note"] == "typed at the prompt"
    assert json.loads((settings.user_home / ".config" / "brain" / "client.json").read_text()) == {"url": base, "token": TOKEN}
