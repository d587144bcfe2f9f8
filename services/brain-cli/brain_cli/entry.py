"""The ``brain`` console script: ``brain hook`` goes to the lean hook module before Typer is imported.

A hook runs on every prompt and every stop; importing the Typer app and the
kernel costs about a second, the hook module (standard library and the pure
marker parser) a few tens of milliseconds (ADR 0042, docs/performance.md).
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console entry point."""
    args = sys.argv[1:]
    if args[:1] == ["hook"] and "--help" not in args and "-h" not in args:
        from brain_cli.hook.run import main as hook_main

        sys.exit(hook_main(args[1:]))
    from brain_cli.cli import main as cli_main

    cli_main()
