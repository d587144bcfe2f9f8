"""How a long job reports while it runs: one interface for counted steps and for status lines.

A job walking a known list (a rebuild's files, a scrub's candidates) calls
``step(done, total)``; a job of phases (a tick, an apply, a loop) calls
``say(message)``. Jobs take a ``Progress`` and stay free of terminal concerns:
the CLI's reporter (``brain_cli.progress``) draws both on stderr, and
``SILENT``, every job's default, drops both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Progress(Protocol):
    """What a job reports to: counted steps and status lines."""

    def step(self, done: int, total: int) -> None:
        """``done`` of ``total`` items are through."""

    def say(self, message: str) -> None:
        """One status line (a phase begun, a failure survived)."""


class _Silent:
    def step(self, done: int, total: int) -> None:
        pass

    def say(self, message: str) -> None:
        pass


SILENT: Progress = _Silent()


@dataclass(frozen=True)
class Prefixed:
    """``inner`` with every line said under ``prefix`` (a loop's job, a drain's bucket); steps pass through."""

    inner: Progress
    prefix: str

    def step(self, done: int, total: int) -> None:
        self.inner.step(done, total)

    def say(self, message: str) -> None:
        self.inner.say(f"{self.prefix}: {message}")
