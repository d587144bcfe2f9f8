"""``brain hook claude|codex <event>``: the process an agent's hook runs (DESIGN 4 and 9, ADR 0042).

It runs on every prompt and every stop, so it imports only the standard
library and ``brain_core.vault.inline`` (the pure marker parser): never typer,
pydantic or the kernel. ``brain_cli.entry`` sends ``brain hook`` here before
the Typer app is imported. It reads the agent's hook JSON on stdin, always
exits 0, prints only the agent's documented output and gives up within its
budget; markers it could not send wait in a per-user outbox for the next hook.
"""
