"""Progress: the one interface jobs report to (``brain_core.progress``) and the CLI's reporter on stderr."""

from __future__ import annotations

import io

from brain_cli.progress import reporter
from brain_core.progress import SILENT, Prefixed
from tests.support.progress_recorder import ProgressRecorder


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_takes_steps_and_lines_and_does_nothing() -> None:
    SILENT.step(1, 2)
    SILENT.say("nothing")


def test_prefixed_names_its_lines_and_passes_steps_through() -> None:
    inner = ProgressRecorder()
    job = Prefixed(Prefixed(inner, "drain"), "--no-ai")
    job.say("scanning the vault")
    job.step(3, 4)
    assert inner.said == ["drain: --no-ai: scanning the vault"] and inner.steps == [(3, 4)]


def test_off_a_terminal_steps_are_about_ten_lines_and_messages_one_line_each() -> None:
    out = io.StringIO()
    progress = reporter("reindex", out)
    for done in range(1, 101):
        progress.step(done, 100)
    progress.say("done")
    lines = out.getvalue().splitlines()
    assert lines[0] == "reindex: 1/100" and lines[-2] == "reindex: 100/100" and lines[-1] == "reindex: done"
    assert len(lines) == 12  # 0/10 .. 10/10 of the way, and the message


def test_on_a_terminal_steps_draw_a_bar_and_a_message_starts_its_own_line() -> None:
    out = _Terminal()
    progress = reporter("embed", out)
    progress.step(1, 4)
    progress.say("halfway")
    progress.step(4, 4)
    assert out.getvalue() == f"\rembed [{'#' * 7}{'.' * 23}] 1/4\nembed: halfway\n\rembed [{'#' * 30}] 4/4\n"


def test_a_job_with_nothing_to_do_draws_nothing() -> None:
    out = _Terminal()
    reporter("scrub", out).step(0, 0)
    assert out.getvalue() == ""
