"""Markers are embedded a moment after they are written, by the process that wrote them: no tick, no job (ADR 0067).

Real pieces: the app over ASGI (``POST /marker``, ``POST /search``,
``GET /feed``) and the in-process MCP kernel, each with its embed follower,
the shipped offline model, and a second database connection holding the
embed lock as a ``brain embed`` run beside them would.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from brain_api.app import create_app
from brain_kernel.db.engine import make_engine
from brain_kernel.search import embed_run
from brain_kernel.search.embed_run import embed_follow, embed_pending
from brain_kernel.search.embedders import embedder_for
from brain_kernel.search.pending import pending
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_mcp import tools
from tests.support.harness import HTTP, make_settings, serve_brain
from tests.support.servers import stop

LESSON = "Pin the payments sandbox to API version 2024-06: the newer one renames refund_id and breaks the webhook parser."
REWORDINGS = [
    "Freeze time in auth tests; a moving clock makes them flake.",
    "Flaky auth tests: the clock advances mid-test. Fix by pinning the clock.",
    "Pin the clock in the auth tests, otherwise they flake as time moves on.",
]


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    made = make_engine(settings.database_url or "", pooled=False)
    yield made
    made.dispose()


def _following(settings: Settings) -> Settings:
    return settings.model_copy(update={"embed_follow_seconds": 0.05})


def _post(client: Any, content: str) -> None:
    response = client.post("/marker", json={"type": "lesson", "content": content, "attrs": {"repo": "acme/pay"}})
    assert response.status_code == 201, response.text


def _lesson_lines(client: Any) -> list[str]:
    feed = client.get("/feed", params={"project": "acme/pay"}).json()
    return [line for e in feed["entries"] if e["id"] == "lessons" for line in e["content"].splitlines()]


@pytest.mark.own_database  # the vector column takes the offline model's width
def test_a_posted_lesson_is_searchable_a_moment_later_with_no_tick(settings: Settings, db: Session) -> None:
    with TestClient(create_app(_following(settings))) as client:
        _post(client, LESSON)
        assert client.app.state.embed_follower.flush(timeout=60)
        answer = client.post("/search", json={"query": "refund_id webhook parser", "project": "acme/pay", "limit": 3}).json()
        assert answer["pending"] == 0 and answer["results"], answer
        assert answer["results"][0]["text_preview"].startswith(LESSON[:40]) and answer["results"][0]["scores"]["words"] is not None
        assert pending(db) == 0
        for content in REWORDINGS:  # a burst: its lessons embedded, and the feed groups them, with no tick
            _post(client, content)
        assert client.app.state.embed_follower.flush(timeout=60)
        assert [line for line in _lesson_lines(client) if line.endswith("(recorded 3 times)")], _lesson_lines(client)
    assert pending(db) == 0


@pytest.mark.own_database
def test_a_stored_feed_answer_goes_when_its_lessons_are_embedded(client: Any, settings: Settings, engine: Engine) -> None:
    for content in REWORDINGS:
        _post(client, content)
    assert len(_lesson_lines(client)) == 3  # stored, before any vector exists
    report = embed_pending(engine, settings)  # no tick, so no feed answer is stored again after it
    assert report["ok"] and report["embedded"] == 3, report
    [line] = _lesson_lines(client)
    assert line.endswith("(recorded 3 times)")


@pytest.mark.own_database
def test_a_marker_posted_through_the_mcp_kernel_is_searchable_a_moment_later(settings: Settings) -> None:
    k = tools.Kernel.open(_following(settings))
    try:
        assert "error" not in tools.brain_marker(k, "lesson", LESSON, {"repo": "acme/pay"})
        assert k.embed_follower is not None and k.embed_follower.flush(timeout=60)
        found = tools.kb_search(k, "refund_id webhook parser", project="acme/pay", include_obsidian=False)
        assert [r for r in found["results"] if r["source"] == "artifact"], found
    finally:
        k.close()


@pytest.mark.own_database
def test_a_pass_that_finds_the_lock_held_asks_again_and_the_next_one_embeds(client: Any, settings: Settings, engine: Engine, db: Session) -> None:
    _post(client, LESSON)
    follow = embed_follow(engine, settings, embedder_for(settings))
    with engine.connect() as other:  # a ``brain embed`` beside this process
        other.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": embed_run._EMBED_LOCK})
        assert follow([]) is True  # it may have read the pending rows before this write: try again
        report = embed_pending(engine, settings, lock_wait_s=0.1)
        assert report["skipped"] and report["pending"] == 1, report
        other.rollback()
    assert follow([]) is False  # embedded, nothing left
    assert pending(db) == 0


def test_a_follower_that_is_off_is_not_made(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        assert client.app.state.embed_follower is None  # the suite's default: 0 seconds
    k = tools.Kernel.open(settings)
    try:
        assert k.embed_follower is None
    finally:
        k.close()


@pytest.mark.own_database
def test_forked_workers_of_brain_serve_embed_the_markers_they_were_posted(tmp_path: Path, database_url: str) -> None:
    """The follower runs in each forked worker (its thread starts on the first marker there, after the fork)."""
    settings = make_settings(tmp_path, database_url, embed_follow_seconds=0.1)
    Vault(settings.vault).scaffold()
    proc, base = serve_brain(settings, workers=2)
    try:
        for content in (LESSON, *REWORDINGS):
            posted = HTTP.post(f"{base}/marker", json={"type": "lesson", "content": content, "attrs": {"repo": "acme/pay"}}, timeout=30)
            assert posted.status_code == 201, posted.text

        def found() -> dict[str, Any]:
            return HTTP.post(f"{base}/search", json={"query": "refund_id webhook parser", "project": "acme/pay"}, timeout=30).json()

        deadline = time.monotonic() + 60  # bounded polling of another process, no fixed wait
        while found()["pending"] and time.monotonic() < deadline:
            time.sleep(0.05)
        answer = found()
        assert answer["pending"] == 0 and answer["results"][0]["text_preview"].startswith(LESSON[:40]), answer
    finally:
        stop(proc, 15)


@pytest.mark.own_database
def test_a_pass_that_cannot_mark_what_the_index_holds_does_not_run_again_and_again(client: Any, settings: Settings, engine: Engine, db: Session) -> None:
    """A row hashed by an earlier version stays pending though the index holds its text (an upgrade): the follower
    made a pass every second, forever, until a tick or a reindex wrote the row again."""
    _post(client, LESSON)
    follow = embed_follow(engine, settings, embedder_for(settings))
    assert follow([]) is False and pending(db) == 0  # embedded
    db.execute(text("UPDATE entries SET embed_hash = 'hashed-by-an-earlier-version', embedded_hash = NULL WHERE kind = 'lesson'"))
    db.commit()
    assert [follow([]) for _ in range(3)] == [True, False, False]
