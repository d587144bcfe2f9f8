"""``python -m brain_cli`` runs the ``brain`` command."""

from brain_cli.cli import main

main()
