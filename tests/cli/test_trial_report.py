"""``brain trial report`` on simulated trials, through the real tables: a planted effect is recovered, none is found where none was planted.

Each simulation serves 40 projects of 3 sessions a block (an injection record,
arm by the real assignment), writes each session's transcript with a known
number of failing commands, runs ``brain extract`` against the database, and
reads the report as the operator would (``--json``). Both simulations are the
same draw of projects and noise (``DRAW``), with and without the effect: a 95%
interval misses the truth in one draw in twenty, so the draw is fixed rather
than left to chance on every run (the bootstrap's coverage over many draws is
``brain_core.trial``'s to show).
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from brain_core.trial import CONTROL, TREATMENT, TrialConfig, control_block, seed_of
from brain_kernel.db.engine import make_engine, session_factory, unit_of_work
from brain_kernel.settings import Settings
from brain_kernel.trial.records import BLOCK, Served, arm_of, record
from tests.support.harness import brain, make_settings
from tests.support.transcript_factory import write_claude

SALT = "pepper-0123456789"
NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
PROJECTS, SESSIONS = 40, 3
DRAW = 7


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    """Sessions on the test's database from one pooled engine, as the feed route's app holds one
    (an engine and a connection per record cost 13 ms, 3.5 s of the module)."""
    engine = make_engine(database_url)
    try:
        yield session_factory(engine)
    finally:
        engine.dispose()


def _serve(sessions: sessionmaker[Session], settings: Settings, repo: str, session_id: str, *, config: Settings | None = None) -> str:
    """Record the block a session was served, as the feed route does; its arm."""
    key = repo.split("/")[1]
    assignment = arm_of(config or settings, repo=repo, project=key, session_id=session_id)
    text = control_block(key) if assignment.arm == CONTROL else f"## Project memory: {key}\n- lesson:{key} pin the clock\n"
    entry_ids = () if assignment.arm == CONTROL else (f"lesson:{key}",)
    record(
        lambda: unit_of_work(sessions),
        kind=BLOCK,
        assignment=assignment,
        served=Served(text, entry_ids),
        session_id=session_id,
        project=key,
        repo=repo,
    )
    return assignment.arm


def simulate(tmp_path: Path, database_url: str, sessions: sessionmaker[Session], *, effect: int, seed: int) -> tuple[Settings, dict[str, str]]:
    """40 projects x 3 sessions; a control session fails ``effect`` more commands than its project's level.

    Each project has its own level of failures (0-4) and each session some noise (0-2); every failing
    command is the same, so a session with n failures has n - 1 repeated failures. A treated session
    names its served entry once, so recall used is 1 in treatment and 0 in control.
    """
    settings = make_settings(tmp_path, database_url, trial_control_percent=50, trial_salt=SALT)
    rng = random.Random(seed)
    arms: dict[str, str] = {}
    start = NOW - dt.timedelta(hours=6)
    for p in range(PROJECTS):
        repo, level = f"org{p}/proj{p}", rng.randint(0, 4)
        for s in range(SESSIONS):
            sid = f"sim-{p:02d}-{s}"
            arm = _serve(sessions, settings, repo, sid)
            assert arms.setdefault(repo, arm) == arm  # every session of a project in its arm
            failures = level + rng.randint(0, 2) + (effect if arm == CONTROL else 0)
            said = [f"Following lesson:proj{p}, the clock is pinned."] if arm == TREATMENT else ["Pinned the clock."]
            write_claude(
                settings.resolved_claude_dir,
                sid,
                f"/srv/sim/proj{p}",
                start + dt.timedelta(minutes=p),
                ["Fix the flaky test", "Run it again"],
                failures=["pytest -x tests/test_login.py"] * failures,
                said=said,
            )
    result = brain(settings, "extract", "--since", "2d", "--min-turns", "5")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["trial_sessions"] == PROJECTS * SESSIONS
    return settings, arms


def _report(settings: Settings, *args: str) -> dict:
    result = brain(settings, "trial", "report", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _by_outcome(data: dict) -> dict[str, dict]:
    return {c["outcome"]: c for c in data["outcomes"]}


def _expected_control(repos: list[str]) -> int:
    return sum(seed_of(repo, SALT) < 50 for repo in repos)


def test_a_planted_effect_is_recovered_within_its_interval(tmp_path: Path, database_url: str, sessions: sessionmaker[Session]) -> None:
    settings, arms = simulate(tmp_path, database_url, sessions, effect=2, seed=DRAW)
    control = _expected_control(list(arms))
    assert sum(arm == CONTROL for arm in arms.values()) == control  # the arm is the formula's, per project
    data = _report(settings)
    assert data["period"] == {"control_percent": 50, "salt_id": TrialConfig(50, SALT).salt_id, "current": True}
    assert data["arms"][CONTROL] == {"projects": control, "sessions": control * SESSIONS, "without_outcomes": 0}
    assert data["arms"][TREATMENT] == {"projects": PROJECTS - control, "sessions": (PROJECTS - control) * SESSIONS, "without_outcomes": 0}
    found = _by_outcome(data)
    for name in ("failed_tool_calls", "repeated_failures"):  # both planted +2 per control session
        c = found[name]
        assert c["how"] == "measured"
        assert c["low"] <= 2 <= c["high"], (name, c)
        assert c["low"] > 0, (name, c)  # the effect is told apart from no effect
        assert abs(c["difference"] - 2) < 1.0, (name, c)
    recall = found["recall_used"]
    assert (recall["how"], recall["treatment_mean"], recall["control_mean"], recall["difference"]) == ("estimated", 1.0, 0.0, -1.0)
    assert data["statement"].startswith(f"{min(control, PROJECTS - control)} projects in the smaller arm")

    table = brain(settings, "trial", "report")
    assert table.exit_code == 0, table.stderr
    assert "failed_tool_calls" in table.stdout and "control minus treatment" in table.stdout and "recall_used*" in table.stdout


def test_no_planted_effect_gives_intervals_that_cover_zero(tmp_path: Path, database_url: str, sessions: sessionmaker[Session]) -> None:
    settings, _ = simulate(tmp_path, database_url, sessions, effect=0, seed=DRAW)
    found = _by_outcome(_report(settings))
    for name in ("failed_tool_calls", "repeated_failures", "turns", "tool_calls", "lessons"):
        c = found[name]
        assert c["low"] <= 0 <= c["high"], (name, c)


def test_only_the_current_period_is_read_and_sessions_without_outcomes_are_counted_apart(
    tmp_path: Path, database_url: str, sessions: sessionmaker[Session]
) -> None:
    settings = make_settings(tmp_path, database_url, trial_control_percent=50, trial_salt=SALT)
    earlier = make_settings(tmp_path, database_url, trial_control_percent=20, trial_salt="another-salt-456")
    repos = [f"org{p}/proj{p}" for p in range(6)]
    for p, repo in enumerate(repos):
        _serve(sessions, settings, repo, f"cur-{p}")
        _serve(sessions, settings, repo, f"cur-{p}")  # a second block of the same session: still one session
        _serve(sessions, settings, repo, f"old-{p}", config=earlier)
        write_claude(settings.resolved_claude_dir, f"cur-{p}", f"/srv/p{p}", NOW - dt.timedelta(hours=1), ["Go on", "Again"])
        write_claude(settings.resolved_claude_dir, f"old-{p}", f"/srv/p{p}", NOW - dt.timedelta(hours=1), ["Go on", "Again"])
    _serve(sessions, settings, repos[0], "no-transcript")  # served, never extracted: counted apart
    _serve(sessions, settings, repos[1], "old-1")  # resumed after the change: still the earlier period's session
    write_claude(settings.resolved_claude_dir, "never-served", "/srv/p0", NOW - dt.timedelta(hours=1), ["Go on"])  # no record: not in the trial
    assert brain(settings, "extract", "--since", "2d", "--min-turns", "1").exit_code == 0

    data = _report(settings)
    arms = data["arms"]
    control = _expected_control(repos)
    assert arms[CONTROL]["sessions"] + arms[TREATMENT]["sessions"] == 6  # the current period's sessions only
    assert arms[CONTROL]["projects"] == control
    assert arms[CONTROL]["without_outcomes"] + arms[TREATMENT]["without_outcomes"] == 1
    assert any("no outcomes yet" in note for note in data["notes"])
    # each period counts the sessions whose first block it holds, as its arms do
    assert {(p["control_percent"], p["sessions"]) for p in data["periods"]} == {(20, 6), (50, 7)}

    old = _report(settings, "--control-percent", "20", "--salt-id", TrialConfig(20, "another-salt-456").salt_id or "")
    assert old["period"]["current"] is False
    assert old["arms"][CONTROL]["sessions"] + old["arms"][TREATMENT]["sessions"] == 6
    assert old["arms"][CONTROL]["projects"] == sum(seed_of(r, "another-salt-456") < 20 for r in repos)
    assert _report(settings, "--since", "2026-01-01T00:00:00+00:00")["arms"] == arms
    assert _report(settings, "--since", (NOW + dt.timedelta(days=1)).isoformat())["arms"][TREATMENT]["sessions"] == 0


def test_export_writes_every_record_as_json_lines(tmp_path: Path, database_url: str, sessions: sessionmaker[Session]) -> None:
    settings = make_settings(tmp_path, database_url, trial_control_percent=50, trial_salt=SALT)
    for p in range(3):
        _serve(sessions, settings, f"org{p}/proj{p}", f"s-{p}")
    out = tmp_path / "injections.jsonl"
    result = brain(settings, "trial", "export", "--out", str(out))
    assert result.exit_code == 0 and "3 records" in result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["session_id"] for r in rows] == ["s-0", "s-1", "s-2"]
    assert all(r["salt_id"] == TrialConfig(50, SALT).salt_id and r["control_percent"] == 50 for r in rows)
    stdout = brain(settings, "trial", "export", "--since", "1h")
    assert stdout.exit_code == 0 and len(stdout.stdout.splitlines()) == 3


def test_with_no_trial_every_served_session_is_treated_and_nothing_is_compared(tmp_path: Path, database_url: str, sessions: sessionmaker[Session]) -> None:
    settings = make_settings(tmp_path, database_url)  # no percentage, no salt: the records' period is (0, none)
    for p in range(3):
        _serve(sessions, settings, f"org{p}/proj{p}", f"s-{p}")
        write_claude(settings.resolved_claude_dir, f"s-{p}", f"/srv/p{p}", NOW - dt.timedelta(hours=1), ["Go on", "Again"])
    assert brain(settings, "extract", "--since", "2d", "--min-turns", "1").exit_code == 0
    data = _report(settings)
    assert data["period"] == {"control_percent": 0, "salt_id": None, "current": True}
    assert data["arms"][TREATMENT]["sessions"] == 3 and data["arms"][CONTROL]["sessions"] == 0
    assert all(c["difference"] is None and c["control_mean"] is None for c in data["outcomes"])
    assert data["statement"].startswith("Not enough projects in both arms")
    table = brain(settings, "trial", "report")
    assert "salt id none" in table.stdout and "Not enough projects" in table.stdout
