"""Errors the entry points turn into one clear line (CLI) or a 4xx/503 (HTTP)."""


class BrainError(Exception):
    """A failure with a message meant for the operator, not a traceback."""


class ConfigError(BrainError):
    """The configuration cannot work: unreachable database, unwritable vault, bad value."""
