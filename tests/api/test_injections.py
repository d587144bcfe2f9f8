"""Injection records and the holdout trial over the real app: every served block is recorded with its arm (ADR 0050)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from brain_api.app import create_app
from brain_core.trial import CONTROL, TREATMENT, TrialConfig, seed_of
from tests.support.harness import make_settings

SALT = "pepper-0123456789"


def _records(database_url: str) -> list[dict[str, object]]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT * FROM injections ORDER BY id")).mappings().all()
            return [dict(r) for r in rows]
    finally:
        engine.dispose()


def _lesson(client: TestClient, repo: str, content: str) -> None:
    r = client.post("/marker", json={"type": "lesson", "content": content, "attrs": {"repo": repo}})
    assert r.status_code == 201, r.text


def _block(client: TestClient, **params: object) -> str:
    r = client.get("/feed", params={"format": "markdown", **params})
    assert r.status_code == 200, r.text
    return r.text


def test_a_block_served_to_a_session_is_recorded_and_percent_0_changes_nothing(tmp_path: Path, database_url: str) -> None:
    settings = make_settings(tmp_path, database_url, trial_salt=SALT)  # a salt, no percentage: no trial
    with TestClient(create_app(settings)) as client:
        _lesson(client, "acme/widget", "Pin the clock in the auth tests.")
        plain = _block(client, project="acme/widget")
        assert _records(database_url) == []  # no session: nothing served to anyone
        served = _block(client, project="acme/widget", session_id="s-1")
        assert served == plain
        fleet = _block(client, session_id="s-2")
    first, second = _records(database_url)
    assert (first["kind"], first["session_id"], first["project"], first["repo"], first["arm"]) == ("block", "s-1", "widget", "acme/widget", TREATMENT)
    assert first["bytes"] == len(served.encode()) and first["cut"] is False and len(first["feed_hash"]) == 16
    assert [e.split(":")[0] for e in first["entry_ids"]] == ["lesson"]
    assert (first["control_percent"], first["salt_id"], first["basis"]) == (0, TrialConfig(0, SALT).salt_id, "repo")
    assert first["seed"] == seed_of("acme/widget", SALT) and first["text_served"] is None
    assert (second["project"], second["basis"], second["bytes"]) == (None, "session", len(fleet.encode()))


def test_a_trial_keeps_every_session_of_a_project_in_one_arm_and_control_reads_the_neutral_block(tmp_path: Path, database_url: str) -> None:
    settings = make_settings(tmp_path, database_url, trial_control_percent=50, trial_salt=SALT)
    repos = [f"org{n}/p{n}" for n in range(40)]
    with TestClient(create_app(settings)) as client:
        for repo in repos:
            _lesson(client, repo, f"Lesson of {repo}: keep the build green.")
        blocks = {(repo, s): _block(client, project=repo, session_id=f"{repo}-{s}") for repo in repos for s in range(3)}
        # a control project asked by its short key: the same frame (and record text) as by owner/name
        control = next(repo for repo in repos if seed_of(repo, SALT) < 50)
        by_key = _block(client, project=control.split("/")[1], session_id="by-key")
    assert by_key == blocks[(control, 0)], (by_key, blocks[(control, 0)])
    records = [r for r in _records(database_url) if r["session_id"] != "by-key"]
    assert len(records) == 120
    expected = {repo: CONTROL if seed_of(repo, SALT) < 50 else TREATMENT for repo in repos}
    for repo in repos:
        arms = {r["arm"] for r in records if r["repo"] == repo}
        assert arms == {expected[repo]}, repo
        for s in range(3):
            text_ = blocks[(repo, s)]
            if expected[repo] == CONTROL:
                assert "No memory is shown in this block." in text_ and f"Lesson of {repo}" not in text_
            else:
                assert f"Lesson of {repo}" in text_
    assert sum(arm == CONTROL for arm in expected.values()) == sum(seed_of(r, SALT) < 50 for r in repos)
    for r in records:
        assert r["control_percent"] == 50 and r["salt_id"] == TrialConfig(50, SALT).salt_id and r["seed"] == seed_of(str(r["repo"]), SALT)
        assert (r["text_served"] is not None) == (r["arm"] == CONTROL) and (r["entry_ids"] == []) == (r["arm"] == CONTROL)


def test_a_trial_without_a_salt_is_refused_at_start(tmp_path: Path) -> None:
    import pytest

    with pytest.raises(ValueError, match="BRAIN_TRIAL_SALT"):
        make_settings(tmp_path, None, trial_control_percent=20)
