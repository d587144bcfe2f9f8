"""``brain extract`` with a database stores each session's outcomes, labelled measured or estimated (ADR 0050)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from sqlalchemy import insert, select, text
from sqlalchemy.orm import Session

from brain_core.trial import TrialConfig, assign
from brain_kernel.db.engine import make_engine, session_factory, unit_of_work
from brain_kernel.db.models import Entry, SessionRow
from brain_kernel.trial.records import BLOCK, Served, record
from brain_ops.extract import run_extract
from tests.support.harness import make_settings
from tests.support.transcript_factory import write_claude, write_codex

NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
T0 = NOW - dt.timedelta(hours=3)
PROMPTS = ["Fix the flaky login test", "Run the suite", "Commit it"]
TREATED, CONTROL_SID, CODEX_SID, SHORT, PLAIN = "s-treated", "s-control", "019a0000-0000-7000-8000-000000000001", "s-short", "s-plain"


def _serve(database_url: str, session_id: str, entry_ids: tuple[str, ...], *, arm_percent: int) -> None:
    engine = make_engine(database_url, pooled=False)
    try:
        config = TrialConfig(arm_percent, "pepper-0123456789" if arm_percent else None)
        assignment = assign(config, repo="acme/api", project="api", session_id=session_id)
        record(
            lambda: unit_of_work(session_factory(engine)),
            kind=BLOCK,
            assignment=assignment,
            served=Served("## Project memory: api\n", entry_ids),
            session_id=session_id,
            project="api",
            repo="acme/api",
        )
    finally:
        engine.dispose()


def _entry(entry_id: str, kind: str, title: str, content: str, session_id: str | None = None, severity: str | None = None) -> dict[str, object]:
    meta = {"session_id": session_id} if session_id else {}
    return {
        "id": entry_id,
        "kind": kind,
        "title": title,
        "content": content,
        "project": "api",
        "projects": ["api"],
        "vault_path": f"{kind}s/{entry_id}.md",
        "severity": severity,
        "meta": meta,
    }


def test_extract_stores_measured_and_estimated_outcomes_and_an_unchanged_rerun_writes_none(tmp_path: Path, database_url: str, db: Session) -> None:
    settings = make_settings(tmp_path, database_url)
    claude, codex = settings.resolved_claude_dir, settings.resolved_codex_dir
    cwd = str(settings.user_home / "dev" / "api")
    said = ["Per the lesson, pin the clock in auth tests before asserting expiry.", "lesson:uploader-retry applies here too."]
    write_claude(claude, TREATED, cwd, T0, PROMPTS, failures=["pytest -x", "pytest -x", "pytest -x", "make lint"], said=said)
    write_claude(claude, CONTROL_SID, cwd, T0, PROMPTS, failures=["pytest -x"], said=said)
    write_codex(codex, CODEX_SID, cwd, T0, PROMPTS, failures=["cargo test", "cargo test"], said=["Nothing recalled."])
    write_claude(claude, SHORT, cwd, T0, ["One prompt"])  # 4 turns: below --min-turns 5, yet served a block
    write_claude(claude, PLAIN, cwd, T0, PROMPTS)  # never served memory: no recall used
    db.execute(
        insert(Entry),
        [
            _entry("lesson:clock", "lesson", "Pin the clock in auth tests", "Pin the clock in auth tests before asserting expiry; the token straddles."),
            _entry("lesson:uploader-retry", "lesson", "Retry", "Back off with jitter."),
            _entry("lesson:unused", "lesson", "Vendored code is read only", "Never edit the vendored folder by hand."),
            _entry("lesson:l1", "lesson", "A lesson the session posted", "x", session_id=TREATED),
            _entry("decision:d1", "decision", "Use httpx", "y", session_id=TREATED),
            _entry("signal:s1", "signal", "Build broken", "z", session_id=TREATED),  # no severity: the default warning
            _entry("signal:s2", "signal", "Prod down", "z", session_id=TREATED, severity="critical"),
            _entry("signal:s3", "signal", "FYI", "z", session_id=TREATED, severity="info"),
        ],
    )
    db.commit()
    _serve(database_url, TREATED, ("lesson:clock", "lesson:uploader-retry", "lesson:unused"), arm_percent=0)
    _serve(database_url, TREATED, ("lesson:clock",), arm_percent=0)  # a second block of the same entry: counted once
    _serve(database_url, CODEX_SID, ("lesson:unused",), arm_percent=0)
    _serve(database_url, CONTROL_SID, (), arm_percent=100)
    _serve(database_url, SHORT, ("lesson:clock",), arm_percent=0)

    bundle = run_extract(settings, since=None, min_turns=5, db=db)
    db.commit()
    assert sorted(s["session_id"] for s in bundle["sessions"]) == sorted([TREATED, CONTROL_SID, CODEX_SID, PLAIN])  # the short one stays out
    assert bundle["skipped_by_reason"]["below_min_turns"] == 1
    assert (bundle["outcomes_recorded"], bundle["trial_sessions"]) == (5, 4)
    rows = {r.session_id: r for r in db.scalars(select(SessionRow))}
    assert set(rows) == {TREATED, CONTROL_SID, CODEX_SID, SHORT, PLAIN}  # the short session is recorded with its outcomes

    treated = rows[TREATED].outcomes
    assert treated["failed_tool_calls"] == {"value": 4, "how": "measured"}
    assert treated["repeated_failures"] == {"value": 2, "how": "measured"}
    assert treated["recall_used"] == {"value": 2, "how": "estimated"}  # by a six-word phrase and by id; lesson:unused never named
    assert {k: treated[k]["value"] for k in ("lessons", "decisions", "error_signals", "critical_signals")} == {
        "lessons": 1,
        "decisions": 1,
        "error_signals": 2,
        "critical_signals": 1,
    }
    assert treated["turns"]["value"] == 3 + 3 * 3 + 4 + 2 and treated["tool_calls"]["value"] == 6 + 4
    assert treated["duration_minutes"]["how"] == "measured" and treated["duration_minutes"]["value"] > 0
    assert rows[CONTROL_SID].outcomes["recall_used"]["value"] == 0  # served no entry
    assert (rows[CONTROL_SID].outcomes["failed_tool_calls"]["value"], rows[CONTROL_SID].outcomes["repeated_failures"]["value"]) == (1, 0)
    codex_outcomes = rows[CODEX_SID].outcomes
    assert (codex_outcomes["failed_tool_calls"]["value"], codex_outcomes["repeated_failures"]["value"], codex_outcomes["recall_used"]["value"]) == (2, 1, 0)
    assert rows[SHORT].outcomes["turns"]["value"] == 4
    assert "recall_used" not in rows[PLAIN].outcomes and rows[PLAIN].outcomes["lessons"]["value"] == 0
    assert all(v["how"] in ("measured", "estimated") for r in rows.values() for v in r.outcomes.values())

    versions = dict(db.execute(text("SELECT session_id, xmin::text FROM sessions")).all())
    again = run_extract(settings, since=None, min_turns=5, db=db)
    db.commit()
    assert (again["sessions_recorded"], again["outcomes_recorded"]) == (0, 0)
    assert dict(db.execute(text("SELECT session_id, xmin::text FROM sessions")).all()) == versions


def test_without_a_database_nothing_is_stored_and_the_bundle_counts_failures(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, None)
    write_claude(settings.resolved_claude_dir, "s-1", "/srv/api", T0, PROMPTS, failures=["npm test", "npm test"])
    bundle = run_extract(settings, since=None, min_turns=1)
    (session,) = bundle["sessions"]
    assert (session["failed_tool_calls"], session["repeated_failures"]) == (2, 1)
    assert (bundle["outcomes_recorded"], bundle["trial_sessions"]) == (0, 0)
