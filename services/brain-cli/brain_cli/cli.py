"""The ``brain`` Typer app: every subcommand registered in one place, and the console entry point.

The command modules define plain functions and import nothing from here, so
the app is assembled without an import loop (ADR 0011). A command's module is
imported when that command is looked up, not when the app is (ADR 0063): the
table below names each command's module and function, and ``brain --help``
looks every one up to list it with its help text.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import typer
from typer._click import Context
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperGroup
from typer.main import get_command_from_info
from typer.models import CommandInfo

Loader = Callable[[], Callable[..., Any]]


def _module(name: str) -> Any:
    """The module ``brain_cli.commands.<name>``, imported now."""
    return importlib.import_module(f"brain_cli.commands.{name}")


# Each command's name and how to load its function, in the order `brain --help` lists them.
COMMANDS: dict[str, Loader] = {
    "serve": lambda: _module("server").serve,
    "migrate": lambda: _module("server").migrate,
    "whereis": lambda: _module("whereis").whereis,
    "extract": lambda: _module("extract").extract,
    "cluster": lambda: _module("cluster").cluster,
    "tick": lambda: _module("tick").tick,
    "reindex": lambda: _module("reindex").reindex,
    "embed": lambda: _module("embed").embed,
    "tick-drain": lambda: _module("drain").tick_drain,
    "ops-loop": lambda: _module("loop").ops_loop,
    "mcp": lambda: _module("mcp").mcp,
    "apply": lambda: _module("apply").apply,
    "init": lambda: _module("init").init,
    "amygdala": lambda: _module("amygdala").amygdala,
    "backfill": lambda: _module("backfill").backfill,
    "scrub": lambda: _module("scrub").scrub,
    "repair": lambda: _module("repair").repair,
    "sync": lambda: _module("sync").sync,
    "connect": lambda: _module("connect").connect,
    "disconnect": lambda: _module("connect").disconnect,
    "hook": lambda: _module("hook").hook,
    "status": lambda: _module("remote").status,
    "feed": lambda: _module("remote").feed,
    "marker": lambda: _module("remote").marker,
    "search": lambda: _module("remote").search,
    "projects": lambda: _module("remote").projects,
}
TRIAL_COMMANDS: dict[str, Loader] = {"report": lambda: _module("trial").report, "export": lambda: _module("trial").export}


def _help(command: Callable[..., Any]) -> str:
    """A command's docstring with each paragraph on one line: the terminal wraps it at its own width."""
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(command.__doc__ or "").split("\n\n"))


class _Commands(dict):  # type: ignore[type-arg]
    """A group's commands: every name from the start, each click command built (its module imported) when looked up.

    A dict, as Typer and click keep a group's commands; every way of reading a
    value goes through ``__getitem__`` (``__iter__`` is overridden so that
    ``dict(commands)`` does too, not CPython's copy of the raw values).
    """

    def __init__(self, table: dict[str, Loader], build: Callable[[str, Callable[..., Any]], Any]) -> None:
        super().__init__(dict.fromkeys(table))
        self._table = table
        self._build = build

    def __getitem__(self, name: str) -> Any:
        command = super().__getitem__(name)
        if command is None:
            command = self._build(name, self._table[name]())
            super().__setitem__(name, command)
        return command

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def __iter__(self) -> Iterator[str]:
        return super().__iter__()

    def items(self) -> list[tuple[str, Any]]:  # type: ignore[override]
        return [(name, self[name]) for name in self]

    def values(self) -> list[Any]:  # type: ignore[override]
        return [self[name] for name in self]


@contextmanager
def _usage_in_one_line() -> Iterator[None]:
    """A command line click refuses: one ``error:`` line, a ``try:`` line and exit 2 (ADR 0058, docs/cli.md).

    Typer (which carries its own click, hence ``typer._click``) would draw a box of five or six lines around click's message; the
    help that ``brain`` or a group prints when given no command passes through.
    """
    try:
        yield
    except NoArgsIsHelpError:
        raise
    except UsageError as refused:
        where = refused.ctx.command_path if refused.ctx is not None else "brain"
        message = " ".join(refused.format_message().split())
        typer.echo(f"error: {message}\ntry: {where} --help", err=True)
        raise typer.Exit(refused.exit_code) from None


class _LazyGroup(TyperGroup):
    """A Typer group whose commands come from ``table``, each built on first use (ADR 0063)."""

    table: ClassVar[dict[str, Loader]] = {}

    def make_context(self, info_name: str | None, args: list[str], parent: Context | None = None, **extra: Any) -> Context:
        with _usage_in_one_line():
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: Context) -> Any:
        with _usage_in_one_line():  # an unknown command, or a bad option of the command it runs
            return super().invoke(ctx)

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        eager = self.commands  # what Typer registered itself: sub-groups
        self.commands = _Commands(self.table, self._command)
        self.commands.update(eager)

    def _command(self, name: str, callback: Callable[..., Any]) -> Any:
        """The click command of ``callback``, built as Typer builds a registered one."""
        info = CommandInfo(name=name, callback=callback, help=_help(callback))
        return get_command_from_info(info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=self.rich_markup_mode)


class _BrainGroup(_LazyGroup):
    table = COMMANDS


class _TrialGroup(_LazyGroup):
    table = TRIAL_COMMANDS


app = typer.Typer(
    name="brain",
    cls=_BrainGroup,
    help="The brain kernel: project-scoped memory for a fleet of coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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


trial_app = typer.Typer(
    name="trial",
    cls=_TrialGroup,
    help="The holdout trial: does memory help? (docs/trial.md)\n\nExample: brain trial report --since 30d",
    no_args_is_help=True,
)
app.add_typer(trial_app)


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    finally:
        # The interpreter's last collection would walk every object the imports made and free none of them:
        # 0.1 to 0.3 s of a short command (docs/performance.md). Frozen, they are left to the process's end.
        gc.freeze()
