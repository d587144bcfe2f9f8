"""The ``brain`` subcommands, one module per concern; ``brain_cli.cli`` registers them on the app."""
