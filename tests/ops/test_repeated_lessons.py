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
