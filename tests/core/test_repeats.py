"""Repeated lessons (pure): exact after normalising, or near by vector; one line with a count, the newest shown."""

from __future__ import annotations

import datetime as dt

from brain_core.entries import EntryRecord, entry_id
from brain_core.feed.repeats import counted, repeat_of, times
from brain_core.feed.sections import lessons_markdown

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)


def _lesson(n: int, content: str, title: str = "") -> EntryRecord:
    path = f"left/reference/lessons-2026-12-0{n % 9 + 1}.md"
    return EntryRecord(
        id=entry_id("lesson", path, f"id:{n}"), kind="lesson", vault_path=path, title=title, content=content, occurred_at=NOW - dt.timedelta(hours=n)
    )


def test_the_same_text_after_normalising_is_one_lesson_shown_once_as_its_newest() -> None:
    newest, again, other = _lesson(0, "Pin the clock in auth tests."), _lesson(1, "  pin the CLOCK in auth-tests!"), _lesson(2, "Tag after the changelog.")
    repeats = repeat_of([newest, again, other])
    assert repeats == {again.id: newest.id}
    assert counted([newest, again, other], repeats) == [(newest, 2), (other, 1)]
    assert lessons_markdown([newest, again, other], repeats=repeats).splitlines() == [
        "- 2026-12-01 Pin the clock in auth tests. (recorded 2 times)",
        "- 2026-11-30 Tag after the changelog.",
    ]


def test_near_pairs_join_transitively_and_the_newest_heads_the_group() -> None:
    lessons = [_lesson(n, f"wording {word}") for n, word in enumerate(("one", "two", "three", "four", "five", "six"))]
    ids = [r.id for r in lessons]
    repeats = repeat_of(lessons, [(ids[3], ids[1]), (ids[4], ids[3]), (ids[0], ids[4]), (ids[2], "lesson:elsewhere")])
    assert repeats == {ids[1]: ids[0], ids[3]: ids[0], ids[4]: ids[0]}
    assert [(r.id, n) for r, n in counted(lessons, repeats)] == [(ids[0], 4), (ids[2], 1), (ids[5], 1)]
    assert times(1) == "" and times(4) == " (recorded 4 times)"


def test_near_lessons_naming_different_identifiers_stay_apart() -> None:
    a, b, c = (
        _lesson(0, "Bump tk1aaadb38 to 2.0 before the release."),
        _lesson(1, "Bump tk2bbbc49 to 2.0 before the release."),
        _lesson(2, "Before the release bump tk1aaadb38 to 2.0."),
    )
    assert repeat_of([a, b, c], [(a.id, b.id), (a.id, c.id)]) == {c.id: a.id}
