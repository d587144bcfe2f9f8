"""``brain mcp``: the MCP server for agents (``brain_mcp``), over stdio or streamable HTTP."""

from __future__ import annotations

from pathlib import Path

import typer

from brain_cli.common import DatabaseOption, load_settings, operator_errors


@operator_errors
def mcp(
    http: bool = typer.Option(False, "--http", help="Serve streamable HTTP on --host/--port (POST /mcp) instead of stdio. Example: --http"),
    host: str = typer.Option("127.0.0.1", help="Interface to bind with --http. Example: --host 0.0.0.0"),
    port: int = typer.Option(8104, help="Port to listen on with --http. Example: --port 8104"),
    vault: Path | None = typer.Option(
        None, "--vault", help="Vault folder (default BRAIN_VAULT, else vault/ in the per-user data folder). Example: --vault ~/brain/vault"
    ),
    database_url: DatabaseOption = None,
) -> None:
    """Run the MCP server (stdio, or streamable HTTP with --http).

    Its tools: kb_search, kb_brief, brain_search_arcs, brain_get_arc,
    brain_ingest, brain_tick, brain_feed and brain_marker, answered in-process
    from the index and the vault.

    Over stdio by default (an agent starts it as a command). With --http it
    serves streamable HTTP at /mcp; when BRAIN_TOKENS is set every request
    needs Authorization: Bearer <token>, except GET /ping (answers pong).
    Without a database URL an embedded Postgres starts under BRAIN_HOME;
    migrations run and the vault is scaffolded first.

    It never writes to its working folder (an agent starts it in the user's
    repository): unless BRAIN_VAULT / --vault and BRAIN_HOME name them, the
    vault and the embedded database are vault/ and .brain/ in the per-user
    data folder, $XDG_DATA_HOME/brain (default ~/.local/share/brain).

    Example: brain mcp --http --port 8104 --vault ./vault
    """
    from brain_cli.runtime import open_database
    from brain_kernel.vault_store import Vault
    from brain_mcp.server import run

    # The per-user folder before the flags: a --vault given wins, and only the environment's choices are kept.
    settings = load_settings().in_user_data_dir().with_overrides(vault=vault, database_url=database_url)
    Vault(settings.vault).scaffold()
    with open_database(settings, migrate=True) as ready:
        run(ready, http=http, host=host, port=port)
