"""The tick drain (``brain tick-drain``): run the keeper ticks requested through ``POST /tick``, coalesced.

Every ``POST /tick`` queues a row (``brain_kernel.ticks.tick_queue``); a drain
claims every pending row at once, buckets them by their flags and runs one
keeper tick per non-empty bucket, in upstream's order: full, ``--no-ai``,
``--dry-run``, ``--dry-run --no-ai``. Ten agents asking for a tick while one
runs therefore cost one more tick, not ten. Each bucket's requests end
``completed`` with the tick summary as their result, or ``failed`` with the
error when the tick raised; a failing tick does not stop the buckets after it.
A tick here is exactly ``brain tick``'s: ``run_tick_and_warm`` is the one
sequence both commands run. Claiming, each tick and each outcome are their own
transactions, so a request is visible as ``running`` while its tick runs and
two drains never run the same request.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from brain_core.jsonable import JobSummary
from brain_core.progress import SILENT, Prefixed, Progress
from brain_kernel.clock import utc_now
from brain_kernel.db.engine import read_session_factory, session_factory, unit_of_work
from brain_kernel.feed.answers import warm
from brain_kernel.search.embed_run import TICK_LOCK_WAIT_S, embed_pending
from brain_kernel.search.pending import pending
from brain_kernel.settings import Settings
from brain_kernel.ticks import tick_queue
from brain_kernel.ticks.tick_queue import TickJob
from brain_kernel.vault_store import Vault
from brain_ops.keeper.events import publish_tick
from brain_ops.keeper.tick import TickSummary, run_tick

# (dry_run, no_ai) in upstream's order, with the flags ``brain tick`` takes for each.
BUCKETS: tuple[tuple[bool, bool, str], ...] = (
    (False, False, "full"),
    (False, True, "--no-ai"),
    (True, False, "--dry-run"),
    (True, True, "--dry-run --no-ai"),
)


@dataclass
class DrainSummary(JobSummary):
    """What a drain did: requests claimed, ticks run, ticks that succeeded and failed, and each bucket."""

    total: int = 0
    ticks: int = 0
    ok: int = 0
    failed: int = 0
    buckets: list[dict[str, Any]] = field(default_factory=list)

    def log_line(self) -> str:
        """Upstream's log line; ``stuck`` (a request file that could not be moved) cannot happen with rows."""
        return f"drain-summary: total={self.total} ticks={self.ticks} ok={self.ok} failed={self.failed} stuck=0"


def run_tick_and_warm(
    engine: Engine,
    vault: Vault,
    settings: Settings,
    *,
    use_ai: bool,
    dry_run: bool,
    now: dt.datetime | None = None,
    progress: Progress = SILENT,
    source: str = "brain-cli",
) -> TickSummary:
    """One keeper tick in its own transaction, then (unless a dry run) the active projects' feed answers stored
    and the entries the search index lags embedded (``brain_kernel.search.embed_run.embed_pending``, in its own transaction).

    Its health (timing, outcome, arcs scanned, the keeper's stats) is recorded
    in ``tick_runs`` afterwards, in a short transaction of its own, whether the
    tick succeeded or raised (then the error is recorded and re-raised).
    Recording never fails a tick: its own error only reaches ``progress``.
    With ``REDIS_URL`` set, a tick that is not a dry run then publishes
    ``brain.tick.complete`` (``brain_ops.keeper.events``; a bus failure is a note).
    """
    from brain_kernel.ticks.health import record_tick
    from brain_kernel.trial.records import prune as prune_injections

    def record(*, ok: bool, error: str | None, tick: TickSummary | None) -> None:
        try:
            with unit_of_work(session_factory(engine)) as health:
                record_tick(
                    health,
                    started_at=started_at,
                    finished_at=utc_now(),
                    source=source,
                    dry_run=dry_run,
                    use_ai=use_ai,
                    ok=ok,
                    error=error,
                    arcs_scanned=tick.arcs_scanned if tick is not None else 0,
                    stats=tick.stats if tick is not None else {},
                )
                if not dry_run:  # injection records are telemetry kept BRAIN_INJECTION_RETENTION_DAYS (ADR 0050)
                    gone = prune_injections(health, now=utc_now(), retention_days=settings.injection_retention_days)
                    if gone:
                        progress.say(f"{gone} injection records past their retention deleted")
        except Exception as exc:  # the tick's outcome stands; its health row is lost
            progress.say(f"could not record the tick's health: {type(exc).__name__}: {exc}")

    started_at = utc_now()
    summary: TickSummary | None = None
    try:
        with unit_of_work(session_factory(engine)) as session:
            summary = run_tick(session, vault, settings, now=now, use_ai=use_ai, dry_run=dry_run, progress=progress)
            waiting = 0 if dry_run else pending(session)  # on this connection: the step opens its own only when some wait
        if not dry_run:  # after the commit: an answer read inside the tick's transaction is stale at once
            # Never raises: a failure is reported, retried next tick. Before the feed answers are stored, since a
            # lesson's vector groups it with its repeats in the feed (ADR 0048), which no entry column shows.
            progress.say("embedding the entries written since the last tick")
            summary.embeddings = embed_pending(engine, settings, waiting=waiting, lock_wait_s=TICK_LOCK_WAIT_S, progress=progress)
            progress.say("storing the project feed answers")
            with read_session_factory(engine)() as session:
                summary.feed_answers = warm(session, summary.active_projects, vault_root=str(vault.root), now=now or utc_now())
    except BaseException as exc:
        record(ok=False, error=f"{type(exc).__name__}: {exc}", tick=summary)
        raise
    record(ok=True, error=None, tick=summary)
    total_ms = round((utc_now() - started_at).total_seconds() * 1000)
    publish_tick(settings, summary, source=source, now=now or utc_now(), total_ms=total_ms)  # after the commit; never fails the tick
    return summary


def _finish(engine: Engine, jobs: list[TickJob], *, status: str, result: dict[str, Any] | None = None, error: str | None = None) -> None:
    with unit_of_work(session_factory(engine)) as session:
        tick_queue.finish(session, [job.job_id for job in jobs], status=status, result=result, error=error)


def drain(engine: Engine, vault: Vault, settings: Settings, *, now: dt.datetime | None = None, progress: Progress = SILENT) -> DrainSummary:
    """Claim every pending tick request and run one tick per (dry_run, no_ai) bucket; see the module docstring."""
    say = progress.say
    with unit_of_work(session_factory(engine)) as session:
        # Committed before any tick runs: another drain sees these rows running and leaves them.
        claimed = tick_queue.claim_pending(session)
    summary = DrainSummary(total=len(claimed))
    say(f"claimed {len(claimed)} pending request(s)")
    unfinished = list(claimed)
    try:
        for dry_run, no_ai, flags in BUCKETS:
            jobs = [job for job in claimed if job.dry_run == dry_run and job.no_ai == no_ai]
            if not jobs:
                continue
            summary.ticks += 1
            say(f"{flags}: one tick for {len(jobs)} request(s)")
            bucket: dict[str, Any] = {"flags": flags, "dry_run": dry_run, "no_ai": no_ai, "jobs": [job.job_id for job in jobs]}
            try:
                tick = run_tick_and_warm(
                    engine,
                    vault,
                    settings,
                    use_ai=not no_ai,
                    dry_run=dry_run,
                    now=now,
                    progress=Prefixed(progress, flags),
                    source="brain-drain",
                )
            except Exception as exc:  # one failing tick must not stop the other buckets
                error = f"{type(exc).__name__}: {exc}"
                say(f"{flags}: tick failed: {error}")
                _finish(engine, jobs, status=tick_queue.FAILED, error=error)
                summary.failed += 1
                summary.buckets.append(bucket | {"status": tick_queue.FAILED, "error": error})
            else:
                _finish(engine, jobs, status=tick_queue.COMPLETED, result=tick.as_dict())
                summary.ok += 1
                summary.buckets.append(bucket | {"status": tick_queue.COMPLETED, "error": None})
            unfinished = [job for job in unfinished if job not in jobs]
    except BaseException as exc:
        # Interrupted (or the database went away): claimed rows must not stay "running" forever,
        # where a polling client would wait out its timeout. Best effort, then the original error.
        with contextlib.suppress(Exception):
            _finish(engine, unfinished, status=tick_queue.FAILED, error=f"drain interrupted: {type(exc).__name__}: {exc}")
        raise
    return summary
