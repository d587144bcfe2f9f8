"""A ``brain`` command's exit status: 2 when the command line or the configuration is wrong, 1 when the work failed.

One meaning per code (ADR 0058, docs/cli.md), so a script or an orchestrator
can tell "fix the invocation" from "try again later": a bad option, a bad
setting or a missing file the operator named exits 2, as click exits on a bad
option; a database that does not answer, a job that failed, a kernel that
refused or cannot be reached exits 1. Every exit goes through ``ExitCode``.
"""

from __future__ import annotations

import errno
from enum import IntEnum
from typing import NoReturn

import typer

from brain_kernel.errors import BrainError


class ExitCode(IntEnum):
    """What a ``brain`` command's exit status says (module docstring; 0 is success, 130 an interrupt)."""

    FAILED = 1  # the work failed: rerunning the same command may succeed once the database, job or kernel is back
    USAGE = 2  # the command line or the configuration is wrong (click's own code for a bad option)
    INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + the signal's number, as a shell reports it


class Failure(BrainError):
    """A runtime failure: the command and its configuration were right, the work failed (exit code 1)."""


# A path the operator named that cannot be used is theirs to fix; a full disk or an I/O error is a failure.
OPERATOR_PATH_ERRORS = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR, errno.EROFS, errno.ENAMETOOLONG, errno.EEXIST}


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> NoReturn:
    """Print one error line and exit with ``code``."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(int(code))
