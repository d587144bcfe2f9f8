"""CLI command modules; each imports ``brain_kernel.cli.app`` and registers its commands on it."""
