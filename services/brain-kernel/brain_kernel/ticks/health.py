"""Tick health in Postgres and ``GET /metrics`` in the Prometheus text format.

Every keeper tick (``brain tick``, ``brain tick-drain``, the ops loop) is
recorded as one row of ``tick_runs``: its timing, flags, outcome, the arcs it
scanned and the keeper's stats. Upstream pushed the same facts to ClickHouse
with a 90-day TTL; here recording a tick deletes the rows past 90 days, and
``metrics_text`` renders them, with the tick queue and index counts, as
Prometheus text exposition format 0.0.4.

Metric names and label keys are fixed. Label values are the outcome, a queue
status, an entry kind or a stats key, escaped as the format requires; nothing
from the vault's content is exposed except counts (no titles, no paths).
Functions take a session and never commit: the entry point owns the
transaction.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from brain_kernel.db.models import Entry, Project, TickRun
from brain_kernel.ticks import tick_queue

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
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
    session.execute(delete(_RUNS).where(_RUNS.c.finished_at < finished_at - RETENTION))


# -- the exposition format ---------------------------------------------------------


def escape_label_value(value: str) -> str:
    """A label value as the text format writes it: backslash, double quote and line feed escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float | bool) -> str:
    """A sample value: booleans as 0/1, integers exactly, floats in Go's spelling of the specials."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class _Exposition:
    """Metric families in order, each with its HELP and TYPE lines before its samples."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: Iterable[tuple[dict[str, str], float | bool]]) -> None:
        self.lines.append(f"# HELP {name} {_escape_help(help_text)}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            rendered = ",".join(f'{key}="{escape_label_value(val)}"' for key, val in labels.items())
            self.lines.append(f"{name}{{{rendered}}} {format_value(value)}" if rendered else f"{name} {format_value(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _latest(session: Session, *conditions: Any) -> Any:
    query = select(*_RUNS.c).where(*conditions).order_by(_RUNS.c.finished_at.desc(), _RUNS.c.id.desc()).limit(1)
    return session.execute(query).first()


def metrics_text(session: Session, now: dt.datetime) -> str:
    """Every metric of ``GET /metrics`` in Prometheus text format 0.0.4 (see the module docstring)."""
    retained = _RUNS.c.finished_at >= now - RETENTION
    outcomes = {"ok": 0, "failed": 0}
    for ok, n in session.execute(select(_RUNS.c.ok, func.count()).where(retained).group_by(_RUNS.c.ok)):
        outcomes["ok" if ok else "failed"] += int(n)
    last = _latest(session)
    last_success = _latest(session, _RUNS.c.ok.is_(True), _RUNS.c.dry_run.is_(False))
    last_real = _latest(session, _RUNS.c.dry_run.is_(False))
    queue = dict.fromkeys(QUEUE_STATUSES, 0) | tick_queue.counts(session)  # from tick_requests
    kinds = {str(kind): int(n) for kind, n in session.execute(select(Entry.kind, func.count()).group_by(Entry.kind))}
    projects = int(session.execute(select(func.count()).select_from(Project)).scalar_one())

    out = _Exposition()
    out.family(
        "brain_tick_runs_total",
        "counter",
        f"Keeper ticks recorded in the last {RETENTION.days} days, by outcome.",
        [({"outcome": outcome}, outcomes[outcome]) for outcome in OUTCOMES],
    )
    out.family(
        "brain_tick_last_success_timestamp_seconds",
        "gauge",
        "Unix time the last successful keeper tick that was not a dry run finished.",
        [] if last_success is None else [({}, last_success.finished_at.timestamp())],
    )
    out.family(
        "brain_tick_last_duration_seconds",
        "gauge",
        "How long the last keeper tick took, in seconds.",
        [] if last is None else [({}, last.duration_ms / 1000)],
    )
    out.family(
        "brain_tick_last_arcs_scanned",
        "gauge",
        "Arcs the last keeper tick scanned.",
        [] if last is None else [({}, int(last.arcs_scanned))],
    )
    stats = numeric_stats(last_real.stats) if last_real is not None else {}
    out.family(
        "brain_tick_last_stat",
        "gauge",
        "Each numeric stat of the last keeper tick that was not a dry run (booleans as 0/1).",
        [({"key": key}, stats[key]) for key in sorted(stats)],
    )
    out.family(
        "brain_tick_queue_requests",
        "gauge",
        "Tick requests queued through POST /tick, by status.",
        [({"status": status}, queue[status]) for status in [*QUEUE_STATUSES, *sorted(set(queue) - set(QUEUE_STATUSES))]],
    )
    out.family("brain_entries", "gauge", "Entries in the index, by kind.", [({"kind": kind}, kinds[kind]) for kind in sorted(kinds)])
    out.family("brain_projects", "gauge", "Known projects.", [({}, projects)])
    return out.text()
