"""The kernel's version, as its installed distribution names it (``brain --version``, ``GET /health``)."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as distribution_version

DISTRIBUTION = "brain-kernel"


@cache
def version() -> str:
    """The installed ``brain-kernel`` version; ``0+unknown`` when run from a tree that was never installed."""
    try:
        return distribution_version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"
