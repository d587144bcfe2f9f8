"""The ``brain`` Typer app: every subcommand registered in one place, and the console entry point.

The command modules define plain functions and import nothing from here, so
the app is assembled without an import loop (ADR 0011).
"""

from __future__ import annotations

import sys

import typer

from brain_cli.commands import amygdala, apply, backfill, cluster, drain, embed, extract, init, loop, mcp, reindex, server, tick, whereis

app = typer.Typer(
    name="brain",
    help="The brain kernel: project-scoped memory for a fleet of coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for command in (server.serve, server.migrate, whereis.whereis, extract.extract, cluster.cluster, tick.tick, reindex.reindex, embed.embed):
    app.command()(command)
app.command("tick-drain")(drain.tick_drain)
app.command("ops-loop")(loop.ops_loop)
app.command("mcp")(mcp.mcp)
app.command("apply")(apply.apply)
app.command("init")(init.init)
app.command("amygdala")(amygdala.amygdala)
app.command("backfill")(backfill.backfill)


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
