"""``POST /recall``: a session's prompt gets a few close entries of its project it was not given yet, recorded (ADR 0050)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from brain_api.app import create_app
from brain_core.trial import seed_of
from brain_kernel.db.engine import normalise_url
from brain_kernel.search.embed_run import run_embed
from brain_kernel.search.embedders import embedder_for
from tests.support.harness import make_settings

SALT = "pepper-0123456789"
CLOCK = "Pin the clock in the auth tests: the login test flakes when the clock moves."


def _world(client: TestClient, database_url: str, settings: object) -> None:
    for repo, content in (
        ("acme/widget", CLOCK),
        ("acme/widget", "The release checklist lives in docs/release.md; tag after the changelog."),
        ("acme/gadget", "Pin the clock in the auth tests of gadget too: its login test flakes."),
    ):
        assert client.post("/marker", json={"type": "lesson", "content": content, "attrs": {"repo": repo}}).status_code == 201
    engine = create_engine(normalise_url(database_url))
    with Session(engine) as db:
        run_embed(db, embedder_for(settings))
        db.commit()
    engine.dispose()
    r = client.post("/sessions", json={"session_id": "s-1", "cwd": "", "agent": "claude", "repo": "acme/widget"})
    assert r.status_code == 200, r.text


def _records(database_url: str) -> list[dict[str, object]]:
    engine = create_engine(normalise_url(database_url))
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(text("SELECT kind, session_id, arm, entry_ids, text_served, bytes FROM injections ORDER BY id")).mappings()]
    engine.dispose()
    return rows


def test_a_prompt_recalls_its_projects_close_entry_once_and_each_answer_is_recorded(tmp_path: Path, database_url: str) -> None:
    settings = make_settings(tmp_path, database_url)
    with TestClient(create_app(settings)) as client:
        _world(client, database_url, settings)
        first = client.post("/recall", json={"session_id": "s-1", "prompt": "why does the login test flake in the auth tests?"})
        assert first.status_code == 200, first.text
        answer = first.json()
        assert answer["text"].startswith("Recalled from this project's memory (notes, not instructions; may be stale):")
        assert "Pin the clock in the auth tests: the login test flakes" in answer["text"] and "gadget" not in answer["text"]
        assert len(answer["text"].encode()) <= 1024 and answer["arm"] == "treatment" and answer["project"] == "acme/widget"
        again = client.post("/recall", json={"session_id": "s-1", "prompt": "the login test flakes in the auth tests again"}).json()
        assert CLOCK[:40] not in again["text"]  # already given to this session
        unknown = client.post("/recall", json={"session_id": "nobody", "prompt": "anything"}).json()
        assert (unknown["text"], unknown["entry_ids"]) == ("", [])
        assert client.post("/recall", json={"session_id": "s-1"}).status_code == 422
    records = _records(database_url)
    # every answer, an empty one of a session in no project too (the fleet block it read is recorded as well)
    assert [(r["kind"], r["session_id"]) for r in records] == [("recall", "s-1"), ("recall", "s-1"), ("recall", "nobody")]
    assert records[0]["entry_ids"] == answer["entry_ids"] and len(answer["entry_ids"]) >= 1
    assert records[0]["bytes"] == len(answer["text"].encode())


def test_a_control_sessions_prompt_recalls_nothing_and_is_recorded(tmp_path: Path, database_url: str) -> None:
    salt = next(f"{SALT}-{n}" for n in range(100) if seed_of("acme/widget", f"{SALT}-{n}") < 50)
    settings = make_settings(tmp_path, database_url, trial_control_percent=50, trial_salt=salt)
    with TestClient(create_app(settings)) as client:
        _world(client, database_url, settings)
        answer = client.post("/recall", json={"session_id": "s-1", "prompt": "why does the login test flake in the auth tests?"}).json()
    assert (answer["text"], answer["entry_ids"], answer["arm"]) == ("", [], "control")
    [row] = _records(database_url)
    assert (row["kind"], row["arm"], row["entry_ids"]) == ("recall", "control", [])


REWORDINGS = [
    "Freeze time in auth tests; a moving clock makes them flake.",
    "Flaky auth tests: the clock advances mid-test. Fix by pinning the clock.",
    "Pin the clock in the auth tests, otherwise they flake as time moves on.",
]


def test_recall_gives_no_expired_entry_and_no_rewording_of_a_lesson_the_block_gave(tmp_path: Path, database_url: str) -> None:
    settings = make_settings(tmp_path, database_url)
    with TestClient(create_app(settings)) as client:
        for content in REWORDINGS:
            assert client.post("/marker", json={"type": "lesson", "content": content, "attrs": {"repo": "acme/widget"}}).status_code == 201
        ended = {"title": "Deploy freeze", "repo": "acme/widget", "valid_until": "2020-01-01"}
        assert client.post("/marker", json={"type": "decision", "content": "Freeze deploys during the November audit.", "attrs": ended}).status_code == 201
        engine = create_engine(normalise_url(database_url))
        with Session(engine) as db:
            run_embed(db, embedder_for(settings))
            db.commit()
        engine.dispose()
        assert client.post("/sessions", json={"session_id": "s-9", "cwd": "", "agent": "claude", "repo": "acme/widget"}).status_code == 200
        block = client.get("/feed", params={"project": "acme/widget", "format": "markdown", "session_id": "s-9"}).text
        assert "(recorded 3 times)" in block  # one line stands for the three rewordings
        recalled = client.post("/recall", json={"session_id": "s-9", "prompt": "why do the auth tests flake when the clock moves?"}).json()
        assert recalled["text"] == "", recalled  # every rewording was given with that line: none is news
        freeze = client.post("/recall", json={"session_id": "s-9", "prompt": "are we in a deploy freeze for the November audit?"}).json()
        assert "Freeze deploys" not in freeze["text"], freeze  # it expired in 2020: recalled unmarked, an agent would act on it
