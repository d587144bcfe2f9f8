"""The brain-ops loop (``brain ops-loop``): upstream's compose ``tick-cron`` and ``tick-drain`` in one process.

Jobs, each run from the same functions the one-shot commands call:

- **extract** once a day, in the UTC hour ``EXTRACT_HOUR`` (the first cycle of
  that hour on each UTC date): ``brain extract --since EXTRACT_SINCE
  --min-turns EXTRACT_MIN_TURNS`` piped into ``brain cluster`` on the vault,
  which writes ``clusters/<date>/<cluster_id>.md`` (today's folder for
  today's sessions) and indexes the arcs. An extract that wrote arcs makes
  the tick due at once, upstream's extract -> cluster -> tick order.
- **tick** every ``TICK_INTERVAL_SECONDS``: ``brain tick``, with the LLM when
  ``BRAIN_LLM_BASE_URL`` is set and deterministic otherwise.
- **drain** every ``TICK_DRAIN_INTERVAL_SECONDS``: ``brain tick-drain``.
- **embed** (``brain embed --prune``) after each successful tick and after a
  drain that ran at least one successful tick (UPSTREAM.md 5.9, 5.10).
- **sync** (``brain sync``) after each successful scheduled tick and its
  embed, when ``BRAIN_SYNC_REMOTE`` names the vault's git remote.

Upstream's intervals never reached its containers; here they are
settings, and the flags of ``brain ops-loop`` override them. Ticks and drains
keep a fixed grid (start, start + interval, ...): a slot missed while another
job ran is skipped, never caught up in a burst. The scheduler is pure
(``LoopState``, ``due_jobs``, ``mark_ran``, ``next_due``) and ``run_loop`` takes
its clock and its sleep, so tests run days of schedule without sleeping.

Every job runs in its own ``try``: a failure is one line on the progress
callback and a JSON outcome with ``ok: false``, and the loop goes on (the
service must outlive a database restart or a bad transcript). SIGTERM and
SIGINT set a flag checked before each job and during the sleep, so the loop
stops after the job it is running; a second signal interrupts that job too.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from sqlalchemy import Engine

from brain_core.jsonable import JobSummary
from brain_core.progress import SILENT, Prefixed, Progress
from brain_core.times import iso
from brain_kernel.clock import Clock, utc_now
from brain_kernel.db.engine import session_factory, unit_of_work
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault

Emit = Callable[[dict[str, Any]], None]

EXTRACT, TICK, DRAIN, EMBED, SYNC = "extract", "tick", "drain", "embed", "sync"
SOURCE = "brain-ops-loop"  # the source of the loop's own ticks in tick_runs (the drain's are brain-drain)
# The longest sleep between checks: a clock that jumps (or a missed signal) is noticed within a minute.
MAX_SLEEP_SECONDS = 60.0
_STRING_CAP = 300


# -- the schedule (pure) -------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """The loop's timing, read from the settings."""

    extract_hour: int
    tick_interval: dt.timedelta
    drain_interval: dt.timedelta

    @classmethod
    def of(cls, settings: Settings) -> Schedule:
        return cls(
            extract_hour=settings.extract_hour,
            tick_interval=dt.timedelta(seconds=settings.tick_interval_seconds),
            drain_interval=dt.timedelta(seconds=settings.tick_drain_interval_seconds),
        )

    def describe(self, settings: Settings) -> str:
        """One line for the log: what runs when."""
        return (
            f"tick every {self.tick_interval.total_seconds():g}s, drain every {self.drain_interval.total_seconds():g}s, "
            f"extract at {self.extract_hour:02d}:00 UTC (since {settings.extract_since}, min {settings.extract_min_turns} turns)"
        )


@dataclass
class LoopState:
    """What the scheduler remembers: when the tick and the drain are next due (None = now), the last extract's UTC date."""

    next_tick: dt.datetime | None = None
    next_drain: dt.datetime | None = None
    extracted_on: dt.date | None = None


def _utc(now: dt.datetime) -> dt.datetime:
    return now.astimezone(dt.timezone.utc) if now.tzinfo else now.replace(tzinfo=dt.timezone.utc)


def due_jobs(state: LoopState, now: dt.datetime, settings: Settings) -> list[str]:
    """The scheduled jobs due at ``now``, in running order.

    extract: the UTC hour is ``extract_hour`` and it has not run on this UTC
    date; tick and drain: never run, or their next slot has come (or lies
    more than an interval ahead: the clock went back).
    """
    now = _utc(now)
    schedule = Schedule.of(settings)
    due = []
    if now.hour == schedule.extract_hour and state.extracted_on != now.date():
        due.append(EXTRACT)
    if _slot_due(state.next_tick, schedule.tick_interval, now):
        due.append(TICK)
    if _slot_due(state.next_drain, schedule.drain_interval, now):
        due.append(DRAIN)
    return due


def _slot_due(slot: dt.datetime | None, interval: dt.timedelta, now: dt.datetime) -> bool:
    """Never run, its slot has come, or the clock went back by more than an interval (the slot is then now)."""
    return slot is None or now >= slot or slot - now > interval


def _next_slot(slot: dt.datetime | None, interval: dt.timedelta, now: dt.datetime) -> dt.datetime:
    """The first slot of the grid ``slot + k * interval`` after ``now`` (missed slots are skipped)."""
    if slot is None or slot > now:
        slot = now
    missed = (now - slot) // interval
    return slot + (missed + 1) * interval


def mark_ran(state: LoopState, job: str, now: dt.datetime, settings: Settings) -> None:
    """Record that ``job`` ran (or was attempted: a failing job waits for its next slot too) at ``now``."""
    now = _utc(now)
    schedule = Schedule.of(settings)
    if job == EXTRACT:
        state.extracted_on = now.date()
    elif job == TICK:
        state.next_tick = _next_slot(state.next_tick, schedule.tick_interval, now)
    elif job == DRAIN:
        state.next_drain = _next_slot(state.next_drain, schedule.drain_interval, now)


def next_due(state: LoopState, now: dt.datetime, settings: Settings) -> dt.datetime:
    """The earliest moment a scheduled job is due (``now`` when one is due already)."""
    now = _utc(now)
    schedule = Schedule.of(settings)
    today_at = now.replace(hour=schedule.extract_hour, minute=0, second=0, microsecond=0)
    if now.hour == schedule.extract_hour and state.extracted_on != now.date():
        extract_at = now
    else:
        extract_at = today_at if today_at > now else today_at + dt.timedelta(days=1)
    tick_at = now if _slot_due(state.next_tick, schedule.tick_interval, now) else state.next_tick
    drain_at = now if _slot_due(state.next_drain, schedule.drain_interval, now) else state.next_drain
    return max(now, min(extract_at, tick_at or now, drain_at or now))


# -- the jobs ------------------------------------------------------------------


@dataclass(frozen=True)
class JobContext:
    """What a job gets: the database, the vault, the settings, the loop's time and its progress (lines under its name)."""

    engine: Engine
    vault: Vault
    settings: Settings
    now: dt.datetime
    progress: Progress


Job = Callable[[JobContext], dict[str, Any]]


def counts_of(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A summary trimmed to its counts: numbers, flags and short strings kept, lists as their lengths, maps likewise."""
    out: dict[str, Any] = {}
    for key, value in summary.items():
        if value is None or isinstance(value, bool | int | float):
            out[key] = value
        elif isinstance(value, str):
            out[key] = value if len(value) <= _STRING_CAP else value[:_STRING_CAP] + "..."
        elif isinstance(value, Mapping):
            out[key] = counts_of(value)
        elif isinstance(value, list | tuple | set | frozenset):
            out[key] = len(value)
    return out


def extract_job(ctx: JobContext) -> dict[str, Any]:
    """``brain extract --since EXTRACT_SINCE --min-turns EXTRACT_MIN_TURNS | brain cluster --out-dir <vault>``."""
    from brain_ops.cluster import run_cluster
    from brain_ops.extract import parse_when, run_extract

    since = parse_when(ctx.settings.extract_since, ctx.now)
    with unit_of_work(session_factory(ctx.engine)) as session:  # the session rows commit as brain extract's do
        bundle = run_extract(ctx.settings, since=since, min_turns=ctx.settings.extract_min_turns, db=session)
    ctx.progress.say(f"{bundle['sessions_returned']} session(s) since {iso(since)}, clustering")
    with unit_of_work(session_factory(ctx.engine)) as session:
        clustered = run_cluster(bundle, ctx.vault.root, db=session)
    ctx.progress.say(f"{clustered['created']} arc(s) created, {clustered['updated']} updated, {clustered['unchanged']} unchanged")
    written = [arc["vault_path"] for arc in clustered["arcs"] if arc["action"] != "unchanged"]
    return {"extract": counts_of(bundle), "cluster": counts_of(clustered) | {"written": written}}


def tick_job(ctx: JobContext) -> dict[str, Any]:
    """``brain tick`` (``--no-ai`` unless an LLM endpoint is configured); the summary trimmed to its counts."""
    from brain_ops.keeper.drain import run_tick_and_warm

    use_ai = bool(ctx.settings.llm_base_url)
    summary = run_tick_and_warm(ctx.engine, ctx.vault, ctx.settings, use_ai=use_ai, dry_run=False, now=ctx.now, progress=ctx.progress, source=SOURCE)
    return counts_of(summary.as_dict())


def drain_job(ctx: JobContext) -> dict[str, Any]:
    """``brain tick-drain``: the ticks queued by ``POST /tick``; its JSON summary."""
    from brain_ops.keeper.drain import drain

    summary = drain(ctx.engine, ctx.vault, ctx.settings, now=ctx.now, progress=ctx.progress)
    ctx.progress.say(summary.log_line())
    return summary.as_dict()


def embed_job(ctx: JobContext) -> dict[str, Any]:
    """``brain embed --prune``: only new and changed entries; chunks of entries gone are dropped."""
    from brain_kernel.search.embed_run import run_embed
    from brain_kernel.search.embedders import embedder_for

    with unit_of_work(session_factory(ctx.engine)) as session:
        summary = run_embed(session, embedder_for(ctx.settings), prune=True, force_dim=ctx.settings.embed_dim_force_migrate)
    return summary.as_dict()


def sync_job(ctx: JobContext) -> dict[str, Any]:
    """``brain sync --remote BRAIN_SYNC_REMOTE``: a conflict or a refused push fails the job (the next tick's sync retries)."""
    from brain_ops.vault_sync import sync_vault

    summary = sync_vault(ctx.vault, remote=ctx.settings.sync_remote or "origin")
    if not summary.ok:
        raise RuntimeError("; ".join(summary.notes))
    return counts_of(summary.as_dict())


DEFAULT_JOBS: dict[str, Job] = {EXTRACT: extract_job, TICK: tick_job, DRAIN: drain_job, EMBED: embed_job, SYNC: sync_job}


def _embed_follows(job: str, summary: dict[str, Any]) -> bool:
    if job == TICK:
        return True
    if job == DRAIN:
        return int(summary.get("ok") or 0) > 0
    return False


def _tick_follows(job: str, summary: dict[str, Any]) -> bool:
    if job != EXTRACT:
        return False
    cluster = summary.get("cluster") or {}
    return int(cluster.get("created") or 0) + int(cluster.get("updated") or 0) > 0


def _drain_error(summary: dict[str, Any]) -> str | None:
    failed = int(summary.get("failed") or 0)
    return f"{failed} of {summary.get('ticks')} queued tick(s) failed" if failed else None


# -- the loop ------------------------------------------------------------------


@dataclass
class LoopReport(JobSummary):
    """What a run of the loop did: cycles, and runs and failures per job."""

    cycles: int = 0
    runs: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)
    stopped_by: str | None = None


@contextmanager
def stop_on_signals(stop: threading.Event, received: list[str]) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` (the loop ends after its current job); a second one interrupts the job.

    Only the main thread can install handlers; elsewhere this does nothing.
    The previous handlers are restored on exit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        received.append(signal.Signals(signum).name)  # logged by the loop: no writes inside a handler
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _print_json(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def run_loop(
    engine: Engine,
    vault: Vault,
    settings: Settings,
    *,
    clock: Clock = utc_now,
    sleep: Callable[[float], None] | None = None,
    max_cycles: int | None = None,
    progress: Progress = SILENT,
    emit: Emit | None = None,
    stop: threading.Event | None = None,
    jobs: Mapping[str, Job] | None = None,
    handle_signals: bool = True,
    state: LoopState | None = None,
) -> LoopReport:
    """Run the due jobs, sleep until the next is due, repeat; until ``stop`` is set (or a signal) or ``max_cycles``.

    A cycle runs every job due at its start (extract, tick, drain, each
    followed by its embed); ``max_cycles=1`` is ``brain ops-loop --once``.
    ``sleep(seconds)`` defaults to waiting on ``stop``, so a signal ends the
    sleep at once; each sleep lasts until the next job is due, at most
    ``MAX_SLEEP_SECONDS``. Each outcome goes to ``emit`` as one JSON-ready
    line ``{job, ok, started_at, duration_ms, summary, error}`` (default:
    printed on stdout); progress lines go to ``progress``.
    """
    from brain_ops.extract import parse_when

    parse_when(settings.extract_since)  # a malformed EXTRACT_SINCE fails now (ConfigError), not at 04:00
    say = progress.say
    out = emit or _print_json
    flag = stop if stop is not None else threading.Event()
    wait = sleep or (lambda seconds: flag.wait(seconds))
    table = {**DEFAULT_JOBS, **(jobs or {})}
    state = state or LoopState()
    report = LoopReport()
    received: list[str] = []

    def stopping() -> bool:
        if flag.is_set() and report.stopped_by is None:
            report.stopped_by = received[0] if received else "stop"
            say(f"{report.stopped_by}: stopping")
        return flag.is_set()

    def run(job: str) -> dict[str, Any] | None:
        started = _utc(clock())
        began = time.perf_counter()
        ctx = JobContext(engine, vault, settings, started, Prefixed(progress, job))
        report.runs[job] += 1
        try:
            summary = table[job](ctx)
        except Exception as exc:  # one failing job must not stop the service
            error = f"{type(exc).__name__}: {exc}".replace("\n", " ")
            report.failures[job] += 1
            say(f"{job} failed: {error}")
            out({"job": job, "ok": False, "started_at": iso(started), "duration_ms": _ms(began), "summary": None, "error": error})
            return None
        error = _drain_error(summary) if job == DRAIN else None
        if error:
            report.failures[job] += 1
        out({"job": job, "ok": error is None, "started_at": iso(started), "duration_ms": _ms(began), "summary": summary, "error": error})
        return summary

    with stop_on_signals(flag, received) if handle_signals else _nothing():
        say(Schedule.of(settings).describe(settings))
        while not stopping():
            now = _utc(clock())
            queue = due_jobs(state, now, settings)
            while queue and not stopping():
                job = queue.pop(0)
                mark_ran(state, job, now, settings)
                summary = run(job)
                if summary is None:
                    continue
                if _embed_follows(job, summary):
                    queue.insert(0, EMBED)
                    if job == TICK and settings.sync_remote:
                        queue.insert(1, SYNC)  # the tick's edits shared, the others' pulled for the next tick to index
                elif _tick_follows(job, summary) and TICK not in queue:
                    queue.insert(0, TICK)  # new arcs: scored now, upstream's extract -> cluster -> tick order
            report.cycles += 1
            if max_cycles is not None and report.cycles >= max_cycles:
                break
            if stopping():
                break
            now = _utc(clock())
            pause = (next_due(state, now, settings) - now).total_seconds()
            if pause > 0:
                wait(min(pause, MAX_SLEEP_SECONDS))
    return report


def _ms(began: float) -> int:
    return round((time.perf_counter() - began) * 1000)


@contextmanager
def _nothing() -> Iterator[None]:
    yield
