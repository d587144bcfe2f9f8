"""Progress reporting for long CLI jobs: a bar on a terminal, plain lines otherwise (always stderr).

Jobs take a ``brain_core.progress.Progress`` so they stay free of terminal
concerns; the CLI builds one here. Steps draw a bar on a terminal; elsewhere
they print about ten lines per run so logs of a cron job stay short. Each
message is one line ``<label>: <message>``.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR_WIDTH = 30


class Reporter:
    """A ``Progress`` writing to ``stream`` under ``label``."""

    def __init__(self, label: str, stream: TextIO) -> None:
        self.label, self.out = label, stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.last_step, self.last_draw = -1, 0.0
        self.bar_open = False  # a bar is drawn without its line end: a message starts a line of its own

    def step(self, done: int, total: int) -> None:
        if total <= 0:
            return
        if self.tty:
            now = time.monotonic()
            if done < total and now - self.last_draw < 0.1:
                return
            self.last_draw = now
            filled = int(BAR_WIDTH * done / total)
            self.out.write(f"\r{self.label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total}")
            self.bar_open = done < total
            if not self.bar_open:
                self.out.write("\n")
            self.out.flush()
            return
        step = int(10 * done / total)
        if step > self.last_step:
            self.last_step = step
            self.out.write(f"{self.label}: {done}/{total}\n")
            self.out.flush()

    def say(self, message: str) -> None:
        if self.bar_open:
            self.out.write("\n")
            self.bar_open = False
        self.out.write(f"{self.label}: {message}\n")
        self.out.flush()


def reporter(label: str, stream: TextIO | None = None) -> Reporter:
    """The CLI's ``Progress`` for a job: steps and messages under ``label`` on ``stream`` (default stderr)."""
    return Reporter(label, stream or sys.stderr)
