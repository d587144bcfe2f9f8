"""Progress reporting for long CLI jobs: a bar on a terminal, plain lines otherwise (always stderr).

Jobs take a ``progress(done, total)`` callback so they stay free of terminal
concerns; the CLI builds one here. Plain-line mode prints about ten lines per
run so logs of a cron job stay short.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


def reporter(label: str, stream: TextIO | None = None) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` callback writing to ``stream`` (default stderr)."""
    out = stream or sys.stderr
    tty = bool(getattr(out, "isatty", lambda: False)())
    state = {"last_step": -1, "last_draw": 0.0}

    def report(done: int, total: int) -> None:
        if total <= 0:
            return
        if tty:
            now = time.monotonic()
            if done < total and now - state["last_draw"] < 0.1:
                return
            state["last_draw"] = now
            width = 30
            filled = int(width * done / total)
            out.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
            if done >= total:
                out.write("\n")
            out.flush()
            return
        step = int(10 * done / total)
        if step != state["last_step"] and (step > state["last_step"]):
            state["last_step"] = step
            out.write(f"{label}: {done}/{total}\n")
            out.flush()

    return report
