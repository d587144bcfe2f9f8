"""The kernel's version (``brain --version``, ``GET /health``, the OpenAPI document, ``brain_build_info``).

``brain_kernel.__version__`` is the one place it is written; the package's
metadata takes it from there at build time (pyproject.toml, dynamic version),
so the running code and the installed distribution say the same.
"""

from __future__ import annotations

from brain_kernel import __version__


def version() -> str:
    """The kernel's version, as ``brain_kernel.__version__`` says."""
    return __version__
