"""What the operator pages compute from rows they read (pure): heat by week, shares, age buckets, the stored dry run.

Nothing here reads the database or the vault; the page handlers hand in
rows and text and render what comes back.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from brain_core.entries import EntryRecord
from brain_core.heat import HeatRules, arc_activity, heat_of, status_of
from brain_core.times import parse_time

HEAT_WEEKS = 8
SHARE_WEEKS = 12
SEVERITIES = ("critical", "alert", "warning", "info")
AGE_BUCKETS = (("under 1 day", 1), ("1–7 days", 7), ("7–30 days", 30), ("over 30 days", None))


def week_start(moment: dt.datetime) -> dt.date:
    """The Monday of ``moment``'s week in UTC (Postgres's ``date_trunc('week', ...)``)."""
    day = moment.astimezone(dt.timezone.utc).date()
    return day - dt.timedelta(days=day.weekday())


def heat_by_week(meta: Mapping[str, Any], *, now: dt.datetime, rules: HeatRules, weeks: int = HEAT_WEEKS) -> list[int]:
    """The keeper's heat of an arc at the end of each of the last ``weeks`` weeks, oldest first, the last at ``now``.

    The index keeps an arc's current facts only, so a past week is replayed
    from them: before the arc was created its heat is 0; between its creation
    and its last activity it counts as worked on at that moment (age 0); after
    that it ages as the keeper ages it. The last value is the heat a tick
    would write now.
    """
    activity = arc_activity(meta)
    created = parse_time(meta.get("created")) or activity.last_active
    out: list[int] = []
    for back in range(weeks - 1, -1, -1):
        at = now - dt.timedelta(weeks=back)
        if created is None or at < created:
            out.append(0)
            continue
        last = activity.last_active
        then = dataclasses.replace(activity, last_active=min(last, at) if last is not None else at)
        out.append(heat_of(then, at, rules, status=status_of(then, at)))
    return out


@dataclass(frozen=True)
class ShareRow:
    """One week of the attribution chart: each kind's (total, attributed), None for a week with none."""

    week: dt.date
    cells: dict[str, tuple[int, int]]

    def share(self, kind: str) -> float | None:
        total, attributed = self.cells.get(kind, (0, 0))
        return round(100.0 * attributed / total, 1) if total else None


def share_rows(series: Mapping[str, Iterable[Any]], *, now: dt.datetime, weeks: int = SHARE_WEEKS) -> list[ShareRow]:
    """The last ``weeks`` weeks, oldest first, each with every kind's (total, attributed) from ``WeekShare`` rows."""
    first = week_start(now) - dt.timedelta(weeks=weeks - 1)
    days = [first + dt.timedelta(weeks=i) for i in range(weeks)]
    cells: dict[dt.date, dict[str, tuple[int, int]]] = {d: {} for d in days}
    for kind, rows in series.items():
        for row in rows:
            if row.week in cells:
                cells[row.week][kind] = (row.total, row.attributed)
    return [ShareRow(d, cells[d]) for d in days]


def severity_of(record: EntryRecord) -> str:
    """A signal's severity as the page groups it: lower case, ``info`` when it has none."""
    return (record.severity or "info").strip().lower() or "info"


@dataclass
class SignalTable:
    """Active signals counted by severity and age bucket."""

    severities: list[str] = field(default_factory=list)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)  # (severity, bucket) -> n
    by_severity: dict[str, int] = field(default_factory=dict)


def signal_tables(counts: Iterable[tuple[bool, str, int, int]]) -> dict[str, SignalTable]:
    """The severity-by-age tables of ``(fleet-wide, severity, age bucket index, n)`` counts: fleet-wide, projects, all.

    Known severities come first in their order of urgency, any others after by name.
    """
    tables = {"fleet-wide": SignalTable(), "projects": SignalTable(), "all": SignalTable()}
    for fleet, severity, bucket, n in counts:
        name = AGE_BUCKETS[min(bucket, len(AGE_BUCKETS) - 1)][0]
        for table in (tables["fleet-wide" if fleet else "projects"], tables["all"]):
            table.counts[(severity, name)] = table.counts.get((severity, name), 0) + n
            table.by_severity[severity] = table.by_severity.get(severity, 0) + n
    for table in tables.values():
        others = sorted(s for s in table.by_severity if s not in SEVERITIES)
        table.severities = [s for s in SEVERITIES if s in table.by_severity] + others
    return tables


@dataclass(frozen=True)
class DryRun:
    """A stored ``brain backfill --dry-run``: its summary (the last line) and the changes it planned."""

    summary: dict[str, Any]
    changes: list[dict[str, Any]]
    planned: int


def parse_dry_run(lines: Iterable[str], *, keep: int = 100) -> DryRun | None:
    """The stdout of ``brain backfill --dry-run``: plan lines (one JSON object each), then the summary; None when there is no summary."""
    summary: dict[str, Any] | None = None
    changes: list[dict[str, Any]] = []
    planned = 0
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        if "scanned" in item and "changed" in item:
            summary = item
        elif "path" in item:
            planned += 1
            if len(changes) < keep:
                changes.append(item)
    return DryRun(summary, changes, planned) if summary is not None else None
