"""Adapters of the brain kernel: settings, database, embedded Postgres, vault store, git, CLI.

Everything here does I/O on behalf of the pure ``brain_core`` package; the
HTTP app (``brain_api``) and the batch jobs (``brain_ops``) both build on it.
"""
