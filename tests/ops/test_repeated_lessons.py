"""Rewordings of one lesson, posted and ticked, read as one line with a count in the feed and the block (ADR 0048);
one sentence with a word changed stays a lesson of its own (ADR 0065).

Real pieces: POST /marker, the tick (which embeds with the shipped offline
model and logs the projects whose lessons it embedded), GET /feed as JSON
(a stored answer) and as the memory block.
"""

from __future__ import annotations

from typing import Any

import pytest

from brain_kernel.db.engine import make_engine
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_ops.keeper.drain import run_tick_and_warm

REWORDINGS = [
    "Freeze time in auth tests; a moving clock makes them flake.",
    "Flaky auth tests: the clock advances mid-test. Fix by pinning the clock.",
    "Pin the clock in the auth tests, otherwise they flake as time moves on.",
    "Auth tests are flaky because the clock moves between calls: freeze the clock in those tests.",
    "The auth tests flake when the clock moves; pin the clock in every auth test.",
]
OTHERS = ["The release checklist lives in docs/release.md; tag after the changelog.", "Pin the driver version: psycopg 3.2 broke COPY in the loader."]
MINIMAL_PAIRS = [  # the shipped model puts each pair at 0.90 to 0.97 in cosine: above the near-duplicate threshold
    ("The session cookie name must be the one the gateway sets, or logins loop.", "The session cookie domain must be the one the gateway sets, or logins loop."),
    ("Raise the read timeout of the orders client; exports time out under load.", "Raise the write timeout of the orders client; exports time out under load."),
    ("Run the schema migrations on staging before the release is tagged.", "Run the schema migrations on production before the release is tagged."),
    ("Do not retry failed uploads; the client resumes them itself.", "Retry failed uploads; the client resumes them itself."),
]  # fmt: skip


def _post(client: Any, contents: list[str]) -> None:
    for content in contents:
        assert client.post("/marker", json={"type": "lesson", "content": content, "attrs": {"repo": "acme/web"}}).status_code == 201


def _tick(settings: Settings) -> dict[str, Any]:
    """The tick's embed report (``embed_pending``): what a failed count of lines is read with."""
    engine = make_engine(settings.database_url or "", pooled=False)
    try:
        summary = run_tick_and_warm(engine, Vault(settings.vault), settings, use_ai=False, dry_run=False)
    finally:
        engine.dispose()
    assert summary.embeddings["ok"] is True, summary.embeddings
    return summary.embeddings


def _lesson_lines(client: Any) -> list[str]:
    feed = client.get("/feed", params={"project": "acme/web"}).json()
    [lessons] = [e for e in feed["entries"] if e["id"] == "lessons"]
    return lessons["content"].splitlines()


@pytest.mark.own_database  # the vector column takes the offline model's width
def test_five_rewordings_of_one_lesson_are_one_line_with_a_count(client: Any, settings: Settings) -> None:
    _post(client, [*REWORDINGS, *OTHERS])
    before = client.get("/feed", params={"project": "acme/web"}).json()  # stored, before any vector exists
    embedded = _tick(settings)
    lines = _lesson_lines(client)
    assert len(lines) == 3, (lines, embedded)
    [grouped] = [line for line in lines if "recorded" in line]
    assert grouped.endswith("(recorded 5 times)") and any(wording[:40] in grouped for wording in REWORDINGS)
    [was] = [e for e in before["entries"] if e["id"] == "lessons"]
    assert len(was["content"].splitlines()) == 7  # the stored answer did not outlive the vectors
    block = client.get("/feed", params={"project": "acme/web", "format": "markdown"}).text
    lesson_lines = [line for line in block.split("### Lessons\n")[1].split("\n\n")[0].splitlines() if line.startswith("- ")]
    assert len(lesson_lines) == 3 and [line for line in lesson_lines if line.endswith("(recorded 5 times)")]


@pytest.mark.own_database
def test_a_lesson_with_one_word_changed_keeps_its_own_line_beside_folded_rewordings(client: Any, settings: Settings) -> None:
    _post(client, [*REWORDINGS, *(sentence for pair in MINIMAL_PAIRS for sentence in pair)])
    embedded = _tick(settings)
    lines = _lesson_lines(client)
    assert len(lines) == 1 + 2 * len(MINIMAL_PAIRS), (lines, embedded)
    [grouped] = [line for line in lines if "recorded" in line]
    assert grouped.endswith("(recorded 5 times)")
    for sentence in (sentence for pair in MINIMAL_PAIRS for sentence in pair):
        assert [line for line in lines if sentence in line and "recorded" not in line], sentence
    block = client.get("/feed", params={"project": "acme/web", "format": "markdown"}).text
    assert "(recorded 2 times)" not in block and "(recorded 5 times)" in block, (block, lines, embedded)


@pytest.mark.own_database
def test_curating_the_line_of_a_repeated_lesson_curates_every_wording_of_it(client: Any, settings: Settings) -> None:
    """The block shows five rewordings as one line: superseding that line (by the id it names) replaces the fact, and
    retracting a line withdraws it, instead of leaving another wording of it in the block (ADR 0071)."""
    from urllib.parse import quote

    _post(client, [*REWORDINGS, *OTHERS])
    _tick(settings)
    lessons = client.get("/entries", params={"project": "acme/web", "kind": "lesson"}).json()["entries"]
    shown = next(e for e in lessons if e["content"] == REWORDINGS[-1])  # the group's newest: the id its line names
    successor = "Auth tests no longer depend on the wall clock: the fixture injects a fake one."
    r = client.post("/marker", json={"type": "lesson", "content": successor, "attrs": {"repo": "acme/web", "supersedes": shown["entry_id"]}})
    assert r.status_code == 201, r.text
    assert len(r.json()["supersedes"]) == len(REWORDINGS)  # every wording, named on the successor (a retraction of it reinstates them)
    _tick(settings)
    block = client.get("/feed", params={"project": "acme/web", "format": "markdown"}).text
    assert successor in block and not [w for w in REWORDINGS if w[:40] in block], block
    other = next(e for e in lessons if e["content"] == OTHERS[1])
    assert client.post(f"/entries/{quote(other['entry_id'], safe='/:')}/retract", json={"reason": "psycopg fixed it"}).status_code == 200
    assert OTHERS[1][:30] not in client.get("/feed", params={"project": "acme/web", "format": "markdown"}).text
    withdrawn = client.post(f"/entries/{quote(r.json()['entry_id'], safe='/:')}/retract", json={"reason": "not yet true"})
    assert withdrawn.status_code == 200  # the successor retracted: the five wordings are the project's memory again
    states = {e["entry_id"]: e["state"] for e in client.get("/entries", params={"project": "acme/web", "kind": "lesson", "state": "all"}).json()["entries"]}
    assert [states[e["entry_id"]] for e in lessons if e["content"] in REWORDINGS] == ["live"] * len(REWORDINGS)
    assert client.post(f"/entries/{quote(shown['entry_id'], safe='/:')}/retract", json={"reason": "wrong"}).status_code == 200
    states = {e["entry_id"]: e["state"] for e in client.get("/entries", params={"project": "acme/web", "kind": "lesson", "state": "all"}).json()["entries"]}
    assert [states[e["entry_id"]] for e in lessons if e["content"] in REWORDINGS] == ["retracted"] * len(REWORDINGS)
    assert states[next(e for e in lessons if e["content"] == OTHERS[0])["entry_id"]] == "live"  # another fact stays
