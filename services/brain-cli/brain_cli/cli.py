"""The ``brain`` Typer app: every subcommand registered in one place, and the console entry point.

The command modules define plain functions and import nothing from here, so
the app is assembled without an import loop (ADR 0011).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

import typer

from brain_cli.commands import (
    amygdala,
    apply,
    backfill,
    cluster,
    connect,
    drain,
    embed,
    extract,
    hook,
    init,
    loop,
    mcp,
    reindex,
    remote,
    repair,
    scrub,
    server,
    sync,
    tick,
    whereis,
)
from brain_cli.commands.trial import export as trial_export
from brain_cli.commands.trial import report as trial_report

app = typer.Typer(
    name="brain",
    help="The brain kernel: project-scoped memory for a fleet of coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _help(command: Callable[..., Any]) -> str:
    """A command's docstring with each paragraph on one line: the terminal wraps it at its own width."""
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(command.__doc__ or "").split("\n\n"))


for name, command in (
    ("serve", server.serve),
    ("migrate", server.migrate),
    ("whereis", whereis.whereis),
    ("extract", extract.extract),
    ("cluster", cluster.cluster),
    ("tick", tick.tick),
    ("reindex", reindex.reindex),
    ("embed", embed.embed),
    ("tick-drain", drain.tick_drain),
    ("ops-loop", loop.ops_loop),
    ("mcp", mcp.mcp),
    ("apply", apply.apply),
    ("init", init.init),
    ("amygdala", amygdala.amygdala),
    ("backfill", backfill.backfill),
    ("scrub", scrub.scrub),
    ("repair", repair.repair),
    ("sync", sync.sync),
    ("connect", connect.connect),
    ("disconnect", connect.disconnect),
    ("hook", hook.hook),
    ("status", remote.status),
    ("feed", remote.feed),
    ("marker", remote.marker),
    ("search", remote.search),
    ("projects", remote.projects),
):
    app.command(name, help=_help(command))(command)


def _show_version(value: bool) -> None:
    if value:
        from brain_kernel.release import version

        typer.echo(f"brain {version()}")
        raise typer.Exit()


def _options(
    version: bool = typer.Option(False, "--version", callback=_show_version, is_eager=True, help="Print the version and exit. Example: brain --version"),
) -> None:
    """The brain kernel: project-scoped memory for a fleet of coding agents."""


app.callback()(_options)


trial_app = typer.Typer(name="trial", help="The holdout trial: does memory help? (docs/trial.md)", no_args_is_help=True)
for name, command in (("report", trial_report), ("export", trial_export)):
    trial_app.command(name, help=_help(command))(command)
app.add_typer(trial_app)


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
