"""``python -m brain_kernel`` runs the ``brain`` command."""

from brain_kernel.cli import main

main()
