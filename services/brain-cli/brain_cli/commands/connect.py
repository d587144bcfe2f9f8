"""``brain connect`` and ``brain disconnect``: install (remove exactly) the kernel's hooks and MCP server in an agent's own configuration.

The edits themselves are plain functions in ``brain_cli.agent_config``; this
module reads and writes the files. Every file it changes is backed up first
(``<file>.brain-backup-<stamp>``) and written atomically; a file whose edit
changes nothing is not written, so a rerun is byte for byte a no-op. The
kernel's URL and token go to the per-user client file (mode 0600), never into
the agent's files: where the hook reads it (``brain_cli.hook.kernel.config_dir``),
or under ``--config-dir``, which every command connect writes then names
(``--client-file``). The MCP server it registers is ``brain mcp --remote URL``,
the kernel the hooks use (ADR 0043).

The token: ``--token-file``, else the client file's, else a prompt, but only
when the kernel says it needs one (``GET /signal`` without a token answers
401) and stdin is a terminal; otherwise it is left empty and the summary says
why (``token_note``).

Byte-for-byte disconnect: ``connect-state.json`` beside the client file keeps,
per file connect changed, the backup of the file as it was (or that there was
none) and the SHA-256 of what connect wrote. When the file still has those
bytes, and the backup is exactly the file without our entries, disconnect puts
the backup's bytes back (or deletes a file connect created); otherwise it
removes our entries and keeps everything else.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from brain_cli import agent_config
from brain_cli.common import load_settings, operator_errors
from brain_cli.hook.kernel import config_dir as default_config_dir
from brain_kernel.errors import ConfigError
from brain_kernel.settings import Settings

AGENTS = ("claude", "codex")
SCOPES = ("user", "project")
CLIENT_FILE = "client.json"
STATE_FILE = "connect-state.json"
DEFAULT_URL = "http://127.0.0.1:8080"
PROBE_PATH = "/signal"  # authenticated, and reads one file: no database, no embedder
PROBE_TIMEOUT_S = 2.0
AUTH_ON, AUTH_OFF, NO_ANSWER = "on", "off", "no answer"


@dataclass(frozen=True)
class Target:
    """One agent file and the edits that install and remove our entries in it."""

    path: Path
    install: Callable[[str], str]
    remove: Callable[[str], str]
    same: Callable[[str, str], bool]  # whether two texts of this file hold the same configuration


def client_dir(config_dir: Path | None) -> Path:
    """The per-user client folder: --config-dir, else the hook's (``$XDG_CONFIG_HOME/brain``, default ``~/.config/brain``)."""
    return config_dir.expanduser() if config_dir is not None else default_config_dir()


def named_client_file(folder: Path) -> str | None:
    """The client file's absolute path when it is not where the hook looks by itself (the commands must name it), else None."""
    path = (folder / CLIENT_FILE).absolute()
    return None if path == (default_config_dir() / CLIENT_FILE).absolute() else str(path)


def auth_probe(url: str) -> str:
    """Whether the kernel at ``url`` wants a token: ``GET /signal`` without one, within 2 s (ADR 0043).

    401 or 403: on; a success: off (no tokens configured); anything else, or no answer: cannot tell.
    """
    import httpx

    try:
        answer = httpx.get(url.rstrip("/") + PROBE_PATH, timeout=PROBE_TIMEOUT_S, follow_redirects=False)
    except httpx.HTTPError:
        return NO_ANSWER
    if answer.status_code in (401, 403):
        return AUTH_ON
    return AUTH_OFF if answer.is_success else NO_ANSWER


def brain_executable() -> str:
    """The absolute path of the ``brain`` command running now (the one beside this interpreter when run in process)."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "brain" and argv0.exists():
        return os.path.abspath(argv0)
    beside = Path(sys.executable).parent / "brain"
    if beside.exists():
        return os.path.abspath(beside)
    found = shutil.which("brain")
    if found:
        return os.path.abspath(found)
    raise ConfigError("cannot find the brain executable; pass --brain PATH")


def _load_json(text: str, path: Path) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc}); fix it first, nothing was changed") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a JSON object; nothing was changed")
    return data


def _json_target(path: Path, install: Callable[[dict[str, Any]], dict[str, Any]], remove: Callable[[dict[str, Any]], dict[str, Any]]) -> Target:
    def edit(change: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[str], str]:
        def apply(text: str) -> str:
            data = _load_json(text, path)
            new = change(data)
            return text if new == data else agent_config.dump_json(new, text or None)

        return apply

    return Target(path, edit(install), edit(remove), lambda a, b: _load_json(a, path) == _load_json(b, path))


def _toml_target(path: Path, agent: str, brain: str, url: str, client_file: str | None) -> Target:
    block = agent_config.toml_block(agent, brain, url, client_file)

    def load(text: str) -> dict[str, Any]:
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML ({exc}); nothing was changed") from None

    def install(text: str) -> str:
        servers = load(text).get("mcp_servers", {})
        if isinstance(servers, dict) and agent_config.SERVER_NAME in servers and not agent_config.has_toml_block(text):
            raise ConfigError(f"{path}: [mcp_servers.{agent_config.SERVER_NAME}] is there but brain connect did not write it; remove it or pass --no-mcp")
        new = agent_config.with_toml_block(text, block)
        load(new)  # appending a table can clash with an inline mcp_servers table: refuse rather than break the file
        return new

    return Target(path, install, agent_config.without_toml_block, lambda a, b: load(a) == load(b))


def targets(
    agent: str, scope: str, settings: Settings, project: Path, brain: str, mcp: bool, url: str = DEFAULT_URL, client_file: str | None = None
) -> list[Target]:
    """The files of ``agent`` at ``scope``: where its hooks and its MCP servers live, per its documentation.

    The hooks and the MCP server get ``--client-file`` when ``client_file`` is given; the server serves ``url``'s kernel.
    """

    def hooks(path: Path) -> Target:
        return _json_target(path, lambda d: agent_config.with_hooks(d, agent, brain, str(path), client_file), lambda d: agent_config.without_hooks(d, agent))

    if agent == "claude":
        hooks_file = (settings.resolved_claude_dir.parent if scope == "user" else project / ".claude") / "settings.json"
        mcp_file = settings.user_home / ".claude.json" if scope == "user" else project / ".mcp.json"
        out = [hooks(hooks_file)]
        if mcp:
            out.append(
                _json_target(mcp_file, lambda d: agent_config.with_mcp_server(d, brain, url, str(mcp_file), client_file), agent_config.without_mcp_server)
            )
        return out
    folder = settings.resolved_codex_dir if scope == "user" else project / ".codex"
    out = [hooks(folder / "hooks.json")]
    if mcp:
        out.append(_toml_target(folder / "config.toml", agent, brain, url, client_file))
    return out


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


def _write_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Write through a temporary file and a rename; keep the old file's mode (or use ``mode``).

    A symlinked file (a dotfiles checkout) is written where the link points, so the link stays.
    """
    path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    keep = mode if mode is not None else (path.stat().st_mode & 0o777 if path.exists() else None)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        if keep is not None:
            os.chmod(tmp, keep)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _backup(path: Path, stamp: str) -> str | None:
    if not path.exists():
        return None
    copy = path.with_name(f"{path.name}.brain-backup-{stamp}")
    shutil.copy2(path, copy)
    return str(copy)


def _missing_folders(path: Path) -> list[str]:
    """The folders above ``path`` that do not exist yet, innermost first: what writing it creates."""
    missing = []
    folder = path.resolve().parent
    while not folder.exists() and folder != folder.parent:
        missing.append(str(folder))
        folder = folder.parent
    return missing


def _remove_empty(folders: list[str]) -> None:
    """Remove each of ``folders`` (innermost first) that is empty again: anything put there since stays."""
    for name in folders:
        with contextlib.suppress(OSError):
            Path(name).rmdir()


def _diff(path: Path, before: str | None, after: str | None) -> str:
    return "".join(
        difflib.unified_diff(
            (before or "").splitlines(keepends=True),
            (after or "").splitlines(keepends=True),
            fromfile=str(path) if before is not None else "/dev/null",
            tofile=str(path) if after is not None else "/dev/null",
        )
    )


def _json_object(path: Path) -> dict[str, Any]:
    """A JSON file's object; a missing, unreadable or non-object file reads as empty."""
    text = _read(path)
    try:
        data = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _load_state(folder: Path) -> dict[str, Any]:
    return _json_object(folder / STATE_FILE)


def _save_state(folder: Path, state: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    _write_atomic(folder / STATE_FILE, json.dumps(state, indent=2, sort_keys=True) + "\n", mode=0o600)


def write_client_file(folder: Path, url: str, token: str) -> Path:
    """``client.json`` with the kernel's URL and token (other keys kept), mode 0600 from the first byte."""
    path = folder / CLIENT_FILE
    current = _read(path)
    data = _json_object(path)
    data.update(url=url, token=token)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(OSError):  # another's folder (a shared --config-dir): the file's own 0600 still holds
        folder.chmod(0o700)  # a folder made before (0755 by a umask) holds a token from now on
    text = json.dumps(data, indent=2) + "\n"
    if current != text or (path.stat().st_mode & 0o777) != 0o600:
        _write_atomic(path, text, mode=0o600)
    return path


def _existing_client(folder: Path) -> dict[str, Any]:
    return _json_object(folder / CLIENT_FILE)


def _check(agent: str, scope: str) -> None:
    if agent not in AGENTS:
        raise ConfigError(f"unknown agent {agent!r}: use one of {', '.join(AGENTS)}")
    if scope not in SCOPES:
        raise ConfigError(f"unknown scope {scope!r}: use one of {', '.join(SCOPES)}")


def _stamp() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")


def _token(url: str, token_file: Path | None, existing: dict[str, Any], dry_run: bool) -> tuple[str, str]:
    """(the token, where it came from): never prompted for a kernel that does not ask for one, nor without a terminal."""
    if token_file is not None:
        token = token_file.expanduser().read_text().strip()
        if not token:
            raise ConfigError(f"--token-file {token_file}: the file is empty; it holds the kernel's token")
        return token, "from --token-file"
    kept = existing.get("token")
    # The kept token is the kernel's at the file's URL: a new URL asks afresh rather than hand it to another host.
    if isinstance(kept, str) and kept and str(existing.get("url") or "").rstrip("/") == url:
        return kept, "kept from the client file"
    if dry_run:
        return "", "none: a dry run asks nothing"
    auth = auth_probe(url)
    if auth == AUTH_OFF:
        return "", f"none: {url} answers without a token (auth off)"
    if auth == NO_ANSWER:
        return "", f"none: {url} did not answer; if it needs a token, run connect again with --token-file"
    if not sys.stdin.isatty():
        return "", f"none: {url} needs a token and stdin is not a terminal; run connect again with --token-file"
    typed = typer.prompt(f"Token for {url}", default="", hide_input=True, show_default=False)
    return typed.strip(), "typed at the prompt" if typed.strip() else "none: nothing typed"


AgentArgument = typer.Argument(..., help="The agent whose configuration to edit: claude or codex. Example: claude")
ScopeOption = typer.Option(
    "user", "--scope", help="user (~/.claude, ~/.claude.json, ~/.codex) or project (./.claude, ./.mcp.json, ./.codex). Example: --scope project"
)
ProjectOption = typer.Option(None, "--project-dir", help="The repository --scope project edits (default: the working folder). Example: --project-dir ~/dev/api")
DryRunOption = typer.Option(False, "--dry-run", help="Print a unified diff of every change and write nothing. Example: --dry-run")
ConfigDirOption = typer.Option(
    None,
    "--config-dir",
    help="The per-user brain folder holding client.json (default $XDG_CONFIG_HOME/brain, else ~/.config/brain; another folder is named "
    "on every command connect writes, as --client-file). Example: --config-dir ~/.config/brain",
)
BrainOption = typer.Option(
    None, "--brain", help="The brain executable the agent runs (default: this one's absolute path). Example: --brain /usr/local/bin/brain"
)


@operator_errors
def connect(
    agent: str = AgentArgument,
    url: str | None = typer.Option(
        None, "--url", help=f"The kernel's URL (default: the client file's, else {DEFAULT_URL}). Example: --url https://brain.internal"
    ),
    token_file: Path | None = typer.Option(
        None,
        "--token-file",
        help="A file holding the kernel token (default: the client file's; else a prompt, only when the kernel answers 401 and stdin is a "
        "terminal; else none). Example: --token-file ~/.brain-token",
    ),
    scope: str = ScopeOption,
    mcp: bool = typer.Option(True, "--mcp/--no-mcp", help="Also register `brain mcp --remote URL` as the agent's MCP server (default on). Example: --no-mcp"),
    dry_run: bool = DryRunOption,
    project_dir: Path | None = ProjectOption,
    config_dir: Path | None = ConfigDirOption,
    brain: str | None = BrainOption,
) -> None:
    """Install the kernel's hooks and MCP server in Claude Code's or Codex's own configuration.

    Hooks for session start, prompt submit, stop and subagent stop run
    `<brain> hook <agent> <event>` with a timeout; the MCP server runs
    `<brain> mcp --remote <url>`, the same kernel, so one memory. Every hook
    and server already there is kept, a rerun changes nothing, and each
    changed file is backed up as <file>.brain-backup-<stamp>. The URL and
    token go to the client file ($XDG_CONFIG_HOME/brain/client.json, default
    ~/.config/brain/client.json, mode 0600), never into the agent's files.
    With no token given or kept, connect asks the kernel (GET /signal, 2 s)
    whether it needs one and prompts only then, on a terminal; otherwise the
    token is empty and token_note in the summary says why. The last stdout
    line is a JSON summary.

    Example: brain connect claude --url https://brain.internal --token-file ~/.brain-token
    """
    _check(agent, scope)
    settings = load_settings()
    folder = client_dir(config_dir)
    executable = os.path.abspath(os.path.expanduser(brain)) if brain else brain_executable()
    project = (project_dir or Path.cwd()).expanduser().resolve()
    existing = _existing_client(folder)
    chosen_url = str(url or existing.get("url") or DEFAULT_URL).rstrip("/")
    if not chosen_url.startswith(("http://", "https://")):
        raise ConfigError(f"--url {chosen_url!r}: the kernel's URL starts with http:// or https://")
    token, note = _token(chosen_url, token_file, existing, dry_run)
    client_file = named_client_file(folder)

    stamp = _stamp()
    state = _load_state(folder)
    summary: dict[str, Any] = {"agent": agent, "scope": scope, "changed": [], "unchanged": [], "backups": [], "dry_run": dry_run}
    edits = []
    for target in targets(agent, scope, settings, project, executable, mcp, chosen_url, client_file):
        before = _read(target.path)
        after = target.install(before or "")
        edits.append((target, before, after))  # every file is checked before any is written
    for target, before, after in edits:
        if after == (before or "") and before is not None:
            summary["unchanged"].append(str(target.path))
            continue
        summary["changed"].append(str(target.path))
        if dry_run:
            typer.echo(_diff(target.path, before, after), nl=False)
            continue
        key = str(target.path)
        entry = state.get(key)
        ours = bool(entry and before is not None and _sha(before) == entry.get("written"))
        # connect's own bytes need no backup: the original's, from the first connect, stands (and disconnect removes it)
        backup = None if ours else _backup(target.path, stamp)
        if backup:
            summary["backups"].append(backup)
        made = _missing_folders(target.path)
        _write_atomic(target.path, after)
        if ours:
            entry["written"] = _sha(after)
        elif before is None or target.same(target.remove(before), before):
            state[key] = {"existed": before is not None, "backup": backup, "written": _sha(after), "folders": made}
        else:
            state.pop(key, None)  # the file already held entries of ours: no clean original to restore
    if dry_run:
        summary["client_file"] = str(folder / CLIENT_FILE)
    else:
        if summary["changed"]:
            _save_state(folder, state)
        summary["client_file"] = str(write_client_file(folder, chosen_url, token))
    summary["url"] = chosen_url
    summary["token_note"] = note
    if note.startswith("none"):
        typer.echo(f"token: {note}", err=True)
    if agent == "codex" and summary["changed"] and not dry_run:
        typer.echo("codex: review and trust the new hooks with /hooks in Codex before they run", err=True)
    previous = str(existing.get("url") or "").rstrip("/")
    if previous and previous != chosen_url and not dry_run:
        # One client file serves every agent's hooks; each MCP server entry names its URL: they must not part.
        other = next(a for a in AGENTS if a != agent)
        typer.echo(
            f"url: the client file now names {chosen_url} (was {previous}): every connected agent's hooks use it; "
            f"run brain connect {other} again if it is connected, so its MCP server does too",
            err=True,
        )
        summary["url_changed_from"] = previous
    typer.echo(json.dumps(summary))


@operator_errors
def disconnect(
    agent: str = AgentArgument,
    scope: str = ScopeOption,
    dry_run: bool = DryRunOption,
    project_dir: Path | None = ProjectOption,
    config_dir: Path | None = ConfigDirOption,
) -> None:
    """Remove exactly the hooks and MCP server `brain connect` installed for an agent.

    Entries are recognised by what they run (`brain hook <agent> ...`,
    `brain mcp`, the marked [mcp_servers.brain] block); everything else stays.
    A file nothing else changed since connect gets its old bytes back (a file
    connect created is deleted, and the folders made for it once empty) and
    connect's backup of it is removed; any other changed file is backed up
    first. The client file is kept: other agents may use it.

    Example: brain disconnect codex --dry-run
    """
    _check(agent, scope)
    settings = load_settings()
    folder = client_dir(config_dir)
    project = (project_dir or Path.cwd()).expanduser().resolve()
    stamp = _stamp()
    state = _load_state(folder)
    summary: dict[str, Any] = {"agent": agent, "scope": scope, "changed": [], "restored": [], "unchanged": [], "backups": [], "dry_run": dry_run}
    made: list[str] = []
    for target in targets(agent, scope, settings, project, "brain", mcp=True):
        before = _read(target.path)
        if before is None:
            continue
        key = str(target.path)
        after: str | None = target.remove(before)
        entry = state.get(key) or {}
        restored = False  # the file goes back to what it was before connect: gone if connect made it, else its bytes
        if entry and _sha(before) == entry.get("written"):
            original = _read(Path(entry["backup"])) if entry.get("backup") else None
            if not entry.get("existed") and (target.same(after or "", "") or not (after or "").strip()):
                after, restored = None, True
            elif entry.get("existed") and original is not None and target.same(original, after or ""):
                after, restored = original, True
        if after == before:
            summary["unchanged"].append(key)
            continue
        summary["changed"].append(key)
        if restored:
            summary["restored"].append(key)
        if dry_run:
            typer.echo(_diff(target.path, before, after), nl=False)
            continue
        # Back to its state before connect: nothing of ours is left to keep, and connect's copy of the original
        # is the file itself again, so no backup stays behind (in a repository, one `git add -A` would commit it).
        backup = None if restored else _backup(target.path, stamp)
        if backup:
            summary["backups"].append(backup)
        if after is None:
            target.path.unlink()
        else:
            _write_atomic(target.path, after)
        if restored:
            if entry.get("backup"):
                with contextlib.suppress(OSError):
                    Path(entry["backup"]).unlink()
            made.extend(entry.get("folders") or [])
        state.pop(key, None)
    _remove_empty(sorted(set(made), key=len, reverse=True))  # after every file: two files may share a folder connect made
    if not dry_run and summary["changed"]:
        _save_state(folder, state)
    typer.echo(json.dumps(summary))
