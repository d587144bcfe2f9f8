"""Tick health in Postgres and the store's metric families of ``GET /metrics``.

Every keeper tick (``brain tick``, ``brain tick-drain``, the ops loop) is
recorded as one row of ``tick_runs``: its timing, flags, outcome, the arcs it
scanned and the keeper's stats. Upstream pushed the same facts to ClickHouse
with a 90-day TTL; here recording a tick deletes the rows past 90 days and
bumps the tick count in ``event_counts``, which outlives them (ADR 0054).

``StoreCollector`` reads what every process of the kernel did and holds from
Postgres at scrape time: the event counters (ticks by outcome, markers by
type, injections by kind, embedding chunks written), the last tick's health,
and gauges of state (the tick queue, entries by kind, entries awaiting
embedding, projects). prometheus_client renders and escapes them. Nothing
from the vault's content is exposed except counts (no titles, no paths).
Functions take a session and never commit: the entry point owns the
transaction.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from brain_kernel import event_counts
from brain_kernel.db.models import Entry, TickRun
from brain_kernel.feed import feed_repo
from brain_kernel.ticks import tick_queue

# Upstream's ClickHouse TTL on tick health.
RETENTION = dt.timedelta(days=90)
OUTCOMES = ("ok", "failed")
QUEUE_STATUSES = (tick_queue.PENDING, tick_queue.RUNNING, tick_queue.COMPLETED, tick_queue.FAILED)

_RUNS = TickRun.__table__


def _stat_value(value: Any) -> int | float | bool | None:
    """A stats value as stored and exposed: numbers and booleans; anything else is left out."""
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


def numeric_stats(stats: Mapping[str, Any] | None) -> dict[str, int | float | bool]:
    """The numeric and boolean entries of a tick's stats, keyed by string."""
    out: dict[str, int | float | bool] = {}
    for key, value in (stats or {}).items():
        number = _stat_value(value)
        if number is not None:
            out[str(key)] = number
    return out


def record_tick(
    session: Session,
    *,
    started_at: dt.datetime,
    finished_at: dt.datetime,
    source: str,
    dry_run: bool,
    use_ai: bool,
    ok: bool,
    error: str | None,
    arcs_scanned: int,
    stats: Mapping[str, Any] | None,
) -> None:
    """Insert one tick's row and delete the rows that finished more than ``RETENTION`` before it."""
    duration_ms = max(0, round((finished_at - started_at).total_seconds() * 1000))
    session.execute(
        insert(_RUNS).values(
            started_at=started_at,
            finished_at=finished_at,
            duration_ms=duration_ms,
            source=source,
            dry_run=dry_run,
            use_ai=use_ai,
            ok=ok,
            error=error,
            arcs_scanned=int(arcs_scanned or 0),
            stats=numeric_stats(stats),
        )
    )
    event_counts.bump(session, event_counts.TICK_RUNS, "ok" if ok else "failed")  # outlives the rows' retention
    session.execute(delete(_RUNS).where(_RUNS.c.finished_at < finished_at - RETENTION))


# -- the store's metric families ----------------------------------------------------

# Each event total of ``event_counts``: its metric name (``_total`` added), help and label key.
_COUNTERS = (
    (event_counts.TICK_RUNS, "brain_tick_runs", "Keeper ticks run by any process, by outcome.", "outcome", OUTCOMES),
    (event_counts.MARKERS, "brain_markers", "Markers written (through the API or the MCP server), by marker type.", "type", ()),
    (event_counts.INJECTIONS, "brain_injections", "Memory blocks, recalls and MCP pulls served to sessions, by kind.", "kind", ()),
    (event_counts.EMBEDDINGS_WRITTEN, "brain_embedding_chunks_written", "Embedding chunks written to the search index.", "", ()),
)
# Always-false for the last non-dry-run tick that the stats gauge reads: a constant series says nothing.
_CONSTANT_STATS = frozenset({"dry_run"})


def _latest(session: Session, *conditions: Any) -> Any:
    query = select(*_RUNS.c).where(*conditions).order_by(_RUNS.c.finished_at.desc(), _RUNS.c.id.desc()).limit(1)
    return session.execute(query).first()


class StoreCollector(Collector):
    """The families read from Postgres at each scrape (the module docstring); one collector per scrape's session."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def collect(self) -> Iterator[Metric]:
        session = self.session
        totals = event_counts.totals(session)
        for name, metric, help_text, label, known in _COUNTERS:
            counts = totals.get(name, {})
            if not label:
                yield CounterMetricFamily(metric, help_text, value=counts.get("", 0))
                continue
            family = CounterMetricFamily(metric, help_text, labels=[label])
            for value in [*known, *sorted(set(counts) - set(known))]:
                family.add_metric([value], counts.get(value, 0))
            yield family

        last = _latest(session)
        last_success = _latest(session, _RUNS.c.ok.is_(True), _RUNS.c.dry_run.is_(False))
        last_real = _latest(session, _RUNS.c.dry_run.is_(False))
        yield _single(
            "brain_tick_last_success_timestamp_seconds",
            "Unix time the last successful keeper tick that was not a dry run finished.",
            last_success and last_success.finished_at.timestamp(),
        )
        yield _single("brain_tick_last_duration_seconds", "How long the last keeper tick took, in seconds.", last and last.duration_ms / 1000)
        yield _single("brain_tick_last_arcs_scanned", "Arcs the last keeper tick scanned.", last and int(last.arcs_scanned))
        stats = numeric_stats(last_real.stats) if last_real is not None else {}
        family = GaugeMetricFamily(
            "brain_tick_last_stat", "Each numeric stat of the last keeper tick that was not a dry run (booleans as 0/1).", labels=["key"]
        )
        for key in sorted(set(stats) - _CONSTANT_STATS):
            family.add_metric([key], float(stats[key]))
        yield family

        queue = dict.fromkeys(QUEUE_STATUSES, 0) | tick_queue.counts(session)  # from tick_requests
        family = GaugeMetricFamily("brain_tick_queue_requests", "Tick requests queued through POST /tick, by status.", labels=["status"])
        for status in [*QUEUE_STATUSES, *sorted(set(queue) - set(QUEUE_STATUSES))]:
            family.add_metric([status], queue[status])
        yield family
        kinds = {str(kind): int(n) for kind, n in session.execute(select(Entry.kind, func.count()).group_by(Entry.kind))}
        family = GaugeMetricFamily("brain_entries", "Entries in the index, by kind.", labels=["kind"])
        for kind in sorted(kinds):
            family.add_metric([kind], kinds[kind])
        yield family
        pending = session.execute(select(func.count()).select_from(Entry).where(Entry.embed_pending)).scalar_one()
        yield GaugeMetricFamily(
            "brain_entries_embed_pending", "Entries whose text the search index does not hold yet (brain embed's work).", value=int(pending)
        )
        projects = feed_repo.count_projects(session)  # the projects GET /projects lists
        yield GaugeMetricFamily("brain_projects", "Known projects.", value=int(projects))


def _single(name: str, help_text: str, value: float | None) -> GaugeMetricFamily:
    """A gauge with one sample, or none when there is nothing to measure yet (no tick recorded)."""
    family = GaugeMetricFamily(name, help_text)
    if value is not None:
        family.add_metric([], value)
    return family
