"""Repeated lessons (pure): exact after normalising, or near by vector; one line with a count, the newest shown.

A near pair is what the vectors say (the caller passes the pairs at or above
``NEAR_DUPLICATE``); vectors read a sentence with one word changed as the
same sentence (0.86 to 0.99 for the pairs below with the shipped model,
bench/bench_duplicates.py), so each pair here is passed as near.
"""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

from brain_core.entries import EntryRecord, entry_id
from brain_core.feed.repeats import content_words, counted, edited, repeat_of, times
from brain_core.feed.sections import lessons_markdown

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
REWORDINGS = [  # the five of tests/ops/test_repeated_lessons.py
    "Freeze time in auth tests; a moving clock makes them flake.",
    "Flaky auth tests: the clock advances mid-test. Fix by pinning the clock.",
    "Pin the clock in the auth tests, otherwise they flake as time moves on.",
    "Auth tests are flaky because the clock moves between calls: freeze the clock in those tests.",
    "The auth tests flake when the clock moves; pin the clock in every auth test.",
]
MINIMAL_PAIRS = [  # one sentence, two facts: a word substituted, a number changed, a negation or a word added
    ("The session cookie name must be the one the gateway sets, or logins loop.", "The session cookie domain must be the one the gateway sets, or logins loop."),
    ("Raise the read timeout of the orders client; exports time out under load.", "Raise the write timeout of the orders client; exports time out under load."),
    ("Run the schema migrations on staging before the release is tagged.", "Run the schema migrations on production before the release is tagged."),
    ("Clear the CDN cache before the deploy, not from the deploy script.", "Clear the CDN cache after the deploy, not from the deploy script."),
    ("Enable the feature flag for the new checkout in the admin console.", "Disable the feature flag for the new checkout in the admin console."),
    ("The pool's min size decides how many connections idle between bursts.", "The pool's max size decides how many connections idle between bursts."),
    ("The upload speed limit comes from the tenant's plan, not from the server.", "The download speed limit comes from the tenant's plan, not from the server."),
    ("Run two replicas of the search indexer so a deploy never stops indexing.", "Run three replicas of the search indexer so a deploy never stops indexing."),
    ("Sessions expire after two weeks without a visit.", "Sessions expire after two days without a visit."),
    ("Do not retry failed uploads; the client resumes them itself.", "Retry failed uploads; the client resumes them itself."),
    ("The CI cache is shared between branches.", "The CI cache isn't shared between branches."),
    ("Clear the cache after each deploy of the storefront.", "Clear the CDN cache after each deploy of the storefront."),
    ("Deleting a project removes its webhooks too.", "Deleting a project removes its webhooks and its API keys too."),
]  # fmt: skip


def _lesson(n: int, content: str, title: str = "") -> EntryRecord:
    path = f"left/reference/lessons-2026-12-0{n % 9 + 1}.md"
    return EntryRecord(
        id=entry_id("lesson", path, f"id:{n}"), kind="lesson", vault_path=path, title=title, content=content, occurred_at=NOW - dt.timedelta(hours=n)
    )


def _all_near(lessons: list[EntryRecord]) -> list[tuple[str, str]]:
    return [(a.id, b.id) for a, b in itertools.combinations(lessons, 2)]


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
    texts = [REWORDINGS[0], REWORDINGS[1], "Tag after the changelog.", REWORDINGS[2], REWORDINGS[3], "Pin psycopg to 3.1 in the loader."]
    lessons = [_lesson(n, text) for n, text in enumerate(texts)]
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


@pytest.mark.parametrize(("first", "second"), MINIMAL_PAIRS, ids=[f"pair{n}" for n in range(len(MINIMAL_PAIRS))])
def test_a_sentence_with_one_word_changed_is_another_lesson_on_its_own_line(first: str, second: str) -> None:
    newest, older = _lesson(0, first), _lesson(1, second)
    repeats = repeat_of([newest, older], [(newest.id, older.id)])
    assert repeats == {}
    assert lessons_markdown([newest, older], repeats=repeats).splitlines() == [f"- 2026-12-01 {first}", f"- 2026-11-30 {second}"]


def test_five_rewordings_of_one_lesson_still_fold_into_one_line() -> None:
    lessons = [_lesson(n, text) for n, text in enumerate(REWORDINGS)]
    repeats = repeat_of(lessons, _all_near(lessons))
    assert counted(lessons, repeats) == [(lessons[0], 5)]


def test_a_rewording_does_not_carry_a_changed_fact_into_the_group() -> None:
    # the write timeout is near every wording of the read timeout; joined through them it would hide
    read = [
        "Raise the read timeout of the orders client; exports time out under load.",
        "Exports time out under load because the orders client's read timeout is too low; raise it.",
        "Under load the exports timed out: the orders client needs a higher read timeout.",
    ]
    write = "Raise the write timeout of the orders client; exports time out under load."
    for texts in ([write, *read], [*read, write]):
        lessons = [_lesson(n, text) for n, text in enumerate(texts)]
        shown = counted(lessons, repeat_of(lessons, _all_near(lessons)))
        assert [r.content for r, _ in shown if r.content == write] == [write]
        assert sum(n for _, n in shown) == 4 and len(shown) == 2


def test_a_number_in_words_is_named_like_one_in_digits() -> None:
    seven, thirty = (
        _lesson(0, "The runner keeps backups for seven days, then prunes them."),
        _lesson(1, "Backups are kept for thirty days and then pruned by the runner."),
    )
    assert repeat_of([seven, thirty], [(seven.id, thirty.id)]) == {}


def test_an_edit_is_a_changed_word_not_an_order_an_inflection_or_a_grammar_word() -> None:
    pin = content_words("Pin the clock in the auth tests.")
    assert content_words("pin THE clock in auth-tests!") == pin == ("pin", "clock", "auth", "test")
    assert not edited(pin, content_words("In auth tests, pin the clock."))
    assert not edited(pin, content_words("Always pin the clocks in every auth test."))
    assert edited(pin, content_words("Pin the clock in the billing tests."))
    assert edited(pin, content_words("Don't pin the clock in the auth tests."))
    assert content_words("We can't retry") == content_words("we cannot retry") == ("not", "retr")
