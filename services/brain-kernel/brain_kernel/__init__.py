"""Adapters of the brain kernel: settings, database, embedded Postgres, vault store, git, CLI.

Everything here does I/O on behalf of the pure ``brain_core`` package; the
HTTP app (``brain_api``) and the batch jobs (``brain_ops``) both build on it.
"""

# The one place the version is written: pyproject.toml reads it (dynamic version), and `brain --version`,
# GET /health, the OpenAPI document, the serve banner and brain_build_info read it through brain_kernel.release.
__version__ = "0.1.0"
