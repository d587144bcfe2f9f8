"""``brain mcp``: the MCP server for agents (``brain_mcp``), over stdio or HTTP (streamable and SSE), in-process or through a running kernel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from brain_cli.common import DatabaseOption, load_settings, operator_errors
from brain_cli.hook.kernel import config_dir
from brain_kernel.errors import ConfigError

if TYPE_CHECKING:
    from brain_kernel.settings import Settings

CLIENT_FILE = "client.json"


def default_client_file() -> Path:
    """The per-user client file the hook reads (``brain connect`` writes it)."""
    return config_dir() / CLIENT_FILE


def read_client_file(path: Path) -> dict[str, Any]:
    """The client file's object; a missing file is empty, an unreadable one an operator error."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the client file ({exc.strerror or exc})") from None
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc}); run brain connect again") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a JSON object; run brain connect again")
    return data


def folder_project(settings: Settings) -> str | None:
    """The project of the folder this server serves, by git (ADR 0066): ``CLAUDE_PROJECT_DIR`` when the agent sets it
    (Claude Code names the session's project to the servers it starts), else the folder it was started in."""
    from brain_cli.hook.identity import local_identity

    found = local_identity(str(settings.agent_project_dir or Path.cwd()))
    return found.get("repo") or found.get("project")


def remote_kernel(remote: str, client_file: Path | None) -> tuple[str, str | None, Path]:
    """(URL, token, client file) of ``--remote``: the URL given, else the client file's; the client file's token, sent only to its own URL."""
    path = (client_file or default_client_file()).expanduser()
    client = read_client_file(path)
    own = str(client.get("url") or "").rstrip("/")
    url = remote.strip().rstrip("/") or own
    if not url:
        raise ConfigError(f"brain mcp --remote: no kernel URL; pass --remote URL or write one to {path} with brain connect")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"brain mcp --remote: {url!r} is not an http:// or https:// URL")
    token = client.get("token")
    # The token is the kernel's at the client file's URL: another URL never receives it.
    return url, token if isinstance(token, str) and token and url == own else None, path


@operator_errors
def mcp(
    http: bool = typer.Option(
        False, "--http", help="Serve HTTP on --host/--port instead of stdio: streamable HTTP (POST /mcp) and SSE (GET /sse). Example: --http"
    ),
    host: str = typer.Option("127.0.0.1", help="Interface to bind with --http. Example: --host 0.0.0.0"),
    port: int = typer.Option(8104, help="Port to listen on with --http. Example: --port 8104"),
    vault: Path | None = typer.Option(
        None, "--vault", help="Vault folder (default BRAIN_VAULT, else vault/ in the per-user data folder). Example: --vault ~/brain/vault"
    ),
    database_url: DatabaseOption = None,
    remote: bool = typer.Option(
        False,
        "--remote",
        help="Serve the tools over stdio through the running kernel at URL (default: the client file's url), with no local "
        "database or vault. Example: --remote https://brain.internal",
    ),
    url: str | None = typer.Argument(None, help="With --remote: the kernel's URL (default: the client file's url). Example: https://brain.internal"),
    client_file: Path | None = typer.Option(
        None,
        "--client-file",
        help="With --remote: the client file holding the kernel's url and token (default ~/.config/brain/client.json). "
        "Example: --client-file ~/.config/brain/client.json",
    ),
) -> None:
    """Run the MCP server (stdio, or streamable HTTP and SSE with --http).

    Its tools: kb_search, kb_brief, brain_search_arcs, brain_get_arc,
    brain_ingest, brain_tick, brain_feed, brain_marker, brain_retract,
    brain_expire and brain_supersede, answered in-process
    from the index and the vault, or with --remote through a running kernel's
    HTTP API.

    Over stdio by default (an agent starts it as a command). With --http it
    serves streamable HTTP at /mcp and the SSE transport at /sse (messages
    posted to /messages/), as upstream's client profiles expect; when
    BRAIN_TOKENS is set every request needs Authorization: Bearer <token> or
    x-api-key: <token>, except GET /ping (answers pong).
    Without a database URL an embedded Postgres starts under BRAIN_HOME;
    migrations run and the vault is scaffolded first.

    It never writes to its working folder (an agent starts it in the user's
    repository): unless BRAIN_VAULT / --vault and BRAIN_HOME name them, the
    vault and the embedded database are vault/ and .brain/ in the per-user
    data folder, $XDG_DATA_HOME/brain (default ~/.local/share/brain).

    With --remote [URL] the same tools (names, schemas, answers) are served
    over stdio through the kernel at URL (default: the client file's url),
    with the client file's token when URL is the file's own (brain connect
    writes it; another URL never gets the token); nothing local is
    opened or created, so it starts in a second or two. A failure (the kernel
    down, a refused token) is the tool's error, never a crash. brain connect
    registers this form.

    Example: brain mcp --remote http://127.0.0.1:8080
    """
    if remote:
        if http:
            raise ConfigError("--remote serves stdio only: run brain mcp --http on the kernel's host instead")
        if vault is not None or database_url is not None:
            raise ConfigError("--remote opens no vault or database: drop --vault and --database-url")
        base, token, path = remote_kernel(url or "", client_file)
        settings = load_settings(env_file=False)
        # Once the URL, the client file and the settings hold (ADR 0063).
        from brain_mcp.remote import Remote
        from brain_mcp.server import run_remote

        backend = Remote(base, token, token_source=str(path), settings=settings, folder=folder_project(settings))
        try:
            run_remote(settings, backend)
        finally:
            backend.close()
        return
    if client_file is not None or url is not None:
        raise ConfigError("a URL and --client-file go with --remote: brain mcp --remote URL")
    # The per-user folder before the flags: a --vault given wins, and only the environment's choices are kept.
    settings = load_settings(env_file=False).in_user_data_dir().with_overrides(vault=vault, database_url=database_url)
    if http:
        from brain_cli.ports import check_listen

        # One rule for a port (Settings.port, 1..65535), as brain serve's: uvicorn would listen on 99999 modulo 65536.
        port = settings.with_overrides(port=port).port
        check_listen(host, port, "--port")
    # Once the settings and the port hold: a bad one fails before these modules load (ADR 0063).
    from brain_cli.runtime import open_database
    from brain_kernel.vault_store import Vault
    from brain_mcp.server import run

    Vault(settings.vault).scaffold()
    with open_database(settings, migrate=True) as ready:
        run(ready, http=http, host=host, port=port, folder=None if http else folder_project(ready))
