"""``brain ops-loop``: the schedule, the jobs it runs on the real database and vault, failures, signals, the CLI.

The loop gets a simulated clock and a ``sleep`` that advances it, so a day
of schedule runs in well under a second of real time; every job is the real
one (extract, cluster, tick, drain, embed) on the test's Postgres.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from brain_core.times import iso
from brain_kernel.db.engine import make_engine
from brain_kernel.settings import Settings
from brain_kernel.ticks import tick_queue
from brain_kernel.vault_store import Vault
from brain_ops.loop import MAX_SLEEP_SECONDS, JobContext, LoopReport, LoopState, due_jobs, mark_ran, next_due, run_loop, tick_job
from tests.support.harness import brain, settings_env
from tests.support.planting import arc_session, write_arc
from tests.support.progress_recorder import ProgressRecorder
from tests.support.transcript_factory import make_repo, write_claude

NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
AWAY = (NOW.hour + 12) % 24  # an extract hour no simulated half minute from NOW reaches


class SimClock:
    """Simulated UTC time: stands still while jobs run, moves only when the loop sleeps."""

    def __init__(self, start: dt.datetime) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> dt.datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += dt.timedelta(seconds=seconds)


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    engine = make_engine(settings.database_url or "", pooled=False)
    try:
        yield engine
    finally:
        engine.dispose()


def loop(
    engine: Engine, settings: Settings, clock: SimClock, *, until: dt.datetime | None = None, **kwargs: Any
) -> tuple[list[dict[str, Any]], list[str], LoopReport]:
    """Run the loop on the simulated clock until ``until`` (or ``max_cycles``): its JSON lines, progress lines, report."""
    lines: list[dict[str, Any]] = []
    progress = ProgressRecorder()
    stop = threading.Event()

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if until is not None and clock.now >= until:
            stop.set()

    report = run_loop(engine, Vault(settings.vault), settings, clock=clock, sleep=sleep, emit=lines.append, progress=progress, stop=stop, **kwargs)
    return lines, progress.said, report


def jobs_of(lines: list[dict[str, Any]]) -> list[str]:
    return [line["job"] for line in lines]


def no_lists(value: Any) -> bool:
    if isinstance(value, dict):
        return all(no_lists(v) for v in value.values())
    return not isinstance(value, list)


# -- the schedule ----------------------------------------------------------------


def test_the_schedule_decides_what_is_due(settings: Settings) -> None:
    s = settings.with_overrides(extract_hour=4, tick_interval_seconds=7200, tick_drain_interval_seconds=30)
    day = dt.datetime(2026, 3, 1, 3, 59, 30, tzinfo=dt.timezone.utc)
    state = LoopState()
    assert due_jobs(state, day, s) == ["tick", "drain"]  # never run: due at once; 03:59 is not the extract hour
    for job in ("tick", "drain"):
        mark_ran(state, job, day, s)
    assert due_jobs(state, day + dt.timedelta(seconds=29), s) == []
    assert next_due(state, day, s) == day + dt.timedelta(seconds=30)
    at_four = day.replace(hour=4, minute=0, second=0)
    assert due_jobs(state, at_four, s) == ["extract", "drain"]
    mark_ran(state, "extract", at_four, s)
    assert "extract" not in due_jobs(state, at_four.replace(minute=59), s)  # once per UTC date
    assert "extract" not in due_jobs(LoopState(), at_four.replace(hour=5), s)  # not at other hours
    assert "extract" in due_jobs(state, at_four + dt.timedelta(days=1, minutes=10), s)
    # Nothing else due: the next wake is tomorrow's extract, whatever the loop's sleep cap makes of it.
    weekly = s.with_overrides(tick_interval_seconds=7 * 86400, tick_drain_interval_seconds=7 * 86400)
    quiet = LoopState(next_tick=at_four + dt.timedelta(days=5), next_drain=at_four + dt.timedelta(days=5), extracted_on=at_four.date())
    assert next_due(quiet, at_four.replace(hour=5), weekly) == at_four + dt.timedelta(days=1)
    # A slot missed while another job ran is skipped, not caught up: the grid is kept.
    late = LoopState(next_drain=day)
    mark_ran(late, "drain", day + dt.timedelta(seconds=95), s)
    assert late.next_drain == day + dt.timedelta(seconds=120)
    # A clock set back by more than an interval does not stall the job until the old slot.
    assert due_jobs(LoopState(next_tick=day + dt.timedelta(hours=5), next_drain=day + dt.timedelta(seconds=10)), day, s) == ["tick"]


# -- the loop on the real jobs -------------------------------------------------------


def test_ticks_drains_and_embeds_on_their_intervals(settings: Settings, engine: Engine) -> None:
    s = settings.with_overrides(tick_interval_seconds=10, tick_drain_interval_seconds=3, extract_hour=AWAY)
    write_arc(Vault(s.vault), [arc_session("s-loop-1", "api", "acme/api", "Rewrite the request router", hours_ago=2)])
    clock = SimClock(NOW)
    lines, said, report = loop(engine, s, clock, until=NOW + dt.timedelta(seconds=30))

    tick, drain = ["tick", "embed"], ["drain"]
    assert jobs_of(lines) == tick + drain * 4 + tick + drain * 3 + tick + drain * 3
    assert [line["started_at"] for line in lines if line["job"] == "tick"] == [iso(NOW + dt.timedelta(seconds=n)) for n in (0, 10, 20)]
    assert [line["started_at"] for line in lines if line["job"] == "drain"] == [iso(NOW + dt.timedelta(seconds=3 * n)) for n in range(10)]
    assert all(line["ok"] and line["error"] is None and line["duration_ms"] >= 0 for line in lines), lines
    assert report.runs == {"tick": 3, "embed": 3, "drain": 10} and not report.failures and report.stopped_by == "stop"
    assert sum(clock.sleeps) == 30 and max(clock.sleeps) <= MAX_SLEEP_SECONDS

    ticks = [line["summary"] for line in lines if line["job"] == "tick"]
    assert all("stats" in t and no_lists(t) for t in ticks), ticks[0]  # trimmed to its counts
    embeds = [line["summary"] for line in lines if line["job"] == "embed"]
    assert ticks[0]["embeddings"]["embedded"] == 1 and ticks[1]["embeddings"]["embedded"] == 0  # the arc the first tick indexed, by it
    assert [(e["embedded"], e["unchanged"]) for e in embeds] == [(0, 1)] * 3  # the embed job after it compares and prunes
    drains = [line["summary"] for line in lines if line["job"] == "drain"]
    assert all(d == {"total": 0, "ticks": 0, "ok": 0, "failed": 0, "buckets": []} for d in drains)
    assert said[0] == f"tick every 10s, drain every 3s, extract at {AWAY:02d}:00 UTC (since 26h, min 5 turns)"


def test_extract_and_cluster_run_once_a_day_in_the_extract_hour(settings: Settings, engine: Engine, tmp_path: Path) -> None:
    s = settings.with_overrides(extract_hour=4, tick_interval_seconds=3 * 86400, tick_drain_interval_seconds=3 * 86400)
    start = NOW.replace(hour=3, minute=30, second=0)
    repo = make_repo(tmp_path / "home" / "dev" / "api", "git@github.com:acme/api.git")
    prompts = ["Add the upload endpoint", "Write its tests", "Fix the flaky one", "Document it"]
    for session, said, kw in (("sess-long", prompts, {}), ("sess-short", ["hi"], {"tools": ()})):
        path = write_claude(s.resolved_claude_dir, session, str(repo), start - dt.timedelta(hours=1), said, **kw)
        written_at = (start - dt.timedelta(minutes=30)).timestamp()  # on the loop's clock, not the real one: the window reads mtimes
        os.utime(path, (written_at, written_at))
    clock = SimClock(start)
    lines, _, report = loop(engine, s, clock, until=start + dt.timedelta(days=1, hours=1))

    # Day one: tick and drain at the start; at 04:00 the extract, and a tick for its new arc; day two: the extract only.
    assert jobs_of(lines) == ["tick", "embed", "drain", "extract", "tick", "embed", "extract"], lines
    four = start.replace(hour=4, minute=0)
    assert [line["started_at"] for line in lines if line["job"] == "extract"] == [iso(four), iso(four + dt.timedelta(days=1))]
    first, second = (line["summary"] for line in lines if line["job"] == "extract")
    assert first["extract"]["sessions_returned"] == 1 and first["extract"]["skipped_by_reason"] == {"below_min_turns": 1}  # EXTRACT_MIN_TURNS 5
    assert first["cluster"]["created"] == 1 and second["cluster"] == {**first["cluster"], "created": 0, "unchanged": 1, "written": []}
    [written] = first["cluster"]["written"]
    assert written.startswith(f"clusters/{four.date().isoformat()}/arc-"), written  # today's folder, as brain cluster writes it
    arc = [p for p in s.vault.rglob(Path(written).name) if "sess-long" in p.read_text()]
    assert arc, written  # the arc holds the session (where the tick after it left it)
    ticks = [line["summary"] for line in lines if line["job"] == "tick"]
    assert ticks[-1]["embeddings"]["embedded"] == 1  # the tick after the extract indexed the new arc and embedded it
    assert max(clock.sleeps) <= MAX_SLEEP_SECONDS and not report.failures


def test_a_failing_job_is_logged_and_the_loop_goes_on(settings: Settings, engine: Engine) -> None:
    s = settings.with_overrides(tick_interval_seconds=10, tick_drain_interval_seconds=4, extract_hour=AWAY)
    calls = []

    def flaky_tick(ctx: JobContext) -> dict[str, Any]:
        calls.append(ctx.now)
        if len(calls) == 1:
            raise RuntimeError("the vault went away\nfor a moment")
        return tick_job(ctx)

    lines, said, report = loop(engine, s, SimClock(NOW), until=NOW + dt.timedelta(seconds=12), jobs={"tick": flaky_tick})
    assert jobs_of(lines) == ["tick", "drain", "drain", "drain", "tick", "embed"]  # no embed after the failed tick
    failed = lines[0]
    assert failed["ok"] is False and failed["summary"] is None and failed["error"] == "RuntimeError: the vault went away for a moment"
    assert "tick failed: RuntimeError: the vault went away for a moment" in said
    assert all(line["ok"] for line in lines[1:])
    assert report.failures == {"tick": 1} and report.runs["tick"] == 2


def test_a_queued_tick_request_is_completed_by_the_loops_drain(settings: Settings, engine: Engine, db: Session) -> None:
    s = settings.with_overrides(extract_hour=AWAY)
    write_arc(Vault(s.vault), [arc_session("s-queue-1", "web", "acme/web", "Fix the flaky login test", hours_ago=3)])
    job = tick_queue.enqueue(db, dry_run=False, no_ai=True, source="mcp-agent")
    db.commit()
    lines, _, report = loop(engine, s, SimClock(NOW), max_cycles=1)

    assert jobs_of(lines) == ["tick", "embed", "drain", "embed"]  # a drain that ran a tick is followed by embed
    drained = lines[2]["summary"]
    assert (drained["total"], drained["ticks"], drained["ok"], drained["failed"]) == (1, 1, 1, 0)
    assert drained["buckets"][0]["jobs"] == [job.job_id] and drained["buckets"][0]["flags"] == "--no-ai"
    done = tick_queue.get(db, job.job_id)
    assert done is not None and done.status == tick_queue.COMPLETED and done.error is None
    assert done.result is not None and done.result["now"] == iso(NOW) and "stats" in done.result  # the tick's full summary
    assert report.cycles == 1
    sources = db.execute(text("SELECT source FROM tick_runs WHERE ok ORDER BY started_at")).scalars().all()
    assert sources == ["brain-ops-loop", "brain-drain"]  # each tick's health row names who ran it


def test_sigterm_stops_the_loop_after_the_current_job(settings: Settings, engine: Engine) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers need the main thread")
    s = settings.with_overrides(extract_hour=AWAY)
    before = signal.getsignal(signal.SIGTERM)

    def tick_then_terminated(ctx: JobContext) -> dict[str, Any]:
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while the tick runs: the tick still finishes
        return tick_job(ctx)

    lines, said, report = loop(engine, s, SimClock(NOW), until=NOW + dt.timedelta(hours=1), jobs={"tick": tick_then_terminated})
    assert jobs_of(lines) == ["tick"] and lines[0]["ok"]
    assert report.stopped_by == "SIGTERM" and "SIGTERM: stopping" in said
    assert signal.getsignal(signal.SIGTERM) is before


# -- the command -----------------------------------------------------------------


def test_ops_loop_once_through_the_cli(settings: Settings) -> None:
    s = settings.with_overrides(tick_interval_seconds=10, extract_hour=AWAY)  # the interval reaches it as TICK_INTERVAL_SECONDS
    result = brain(s, "ops-loop", "--once", "--drain-interval", "3")
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert jobs_of(lines) == ["tick", "embed", "drain"] and all(line["ok"] for line in lines)
    assert set(lines[0]) == {"job", "ok", "started_at", "duration_ms", "summary", "error"}
    assert "ops-loop: tick every 10s, drain every 3s" in result.stderr
    assert "ops-loop: drain: drain-summary: total=0 ticks=0 ok=0 failed=0 stuck=0" in result.stderr


def test_ctrl_c_stops_the_ops_loop_after_its_job_and_exits_130(settings: Settings) -> None:
    """Ctrl-C at a terminal signals the whole foreground group (here: the process's own session): the loop
    ends its job and stops, and says it was interrupted (SIGTERM, a service's stop, is exit 0)."""
    env = {**settings_env(settings), "EXTRACT_HOUR": str((dt.datetime.now(dt.timezone.utc).hour + 12) % 24)}
    args = [sys.executable, "-m", "brain_cli", "ops-loop", "--tick-interval", "3600", "--drain-interval", "3600"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        jobs = [json.loads(proc.stdout.readline())["job"] for _ in range(3)]  # the first cycle's jobs, then it sleeps
        os.killpg(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (jobs, proc.returncode) == (["tick", "embed", "drain"], 130), err
    assert "SIGINT: stopping" in err and "Traceback" not in err


@pytest.mark.parametrize("args", [["--extract-hour", "24"], ["--tick-interval", "0"]])
def test_ops_loop_refuses_a_bad_setting_in_one_line(settings: Settings, args: list[str]) -> None:
    result = brain(settings, "ops-loop", "--once", *args)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: invalid setting") and len(result.stderr.strip().splitlines()) == 1, result.stderr
