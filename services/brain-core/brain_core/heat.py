"""Heat and status of arcs (pure).

The keeper ranks arcs by heat: how much attention a thread of work is getting
now. Heat is ``10 x recency x intensity``: recency halves every
``HALF_LIFE_DAYS`` since the arc's last activity and decays faster once an
arc is older than ``DECAY_AFTER_DAYS``; intensity grows with the arc's tool
volume, session count and joy markers and lies in [0.4, 1], so a quiet arc
touched an hour ago still outranks a busy one from last month.

Status follows from the same evidence: ``active`` while the arc was touched
within ``ACTIVE_DAYS``; after that ``complete`` when the work ended on a joy
marker (a success signal), else ``stalled``; and ``graduated`` once a complete
arc has been idle ``GRADUATE_DAYS`` (its knowledge now lives in lessons and
decisions). A status an operator set to ``complete`` or ``graduated`` is kept
(fresh activity on a complete arc makes it active again). Everything is a
function of the arc's frontmatter and the clock, so a rerun writes the same
values.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

from brain_core.arcs import arc_last_active

STATUSES = ("active", "complete", "stalled", "graduated")
HALF_LIFE_DAYS = 3.0
DECAY_AFTER_DAYS = 14.0
DECAY_HALF_LIFE_DAYS = 7.0
ACTIVE_DAYS = 3.0
GRADUATE_DAYS = 30.0
_DONE_WORDS = {"complete", "completed", "done", "shipped", "closed", "resolved"}


@dataclass(frozen=True)
class ArcActivity:
    """The evidence heat is computed from, taken from an arc's frontmatter."""

    last_active: dt.datetime | None
    sessions: int = 0
    tool_calls: int = 0
    joy_markers: int = 0
    error_markers: int = 0
    status: str | None = None


@dataclass(frozen=True)
class HeatResult:
    """Heat (0 to 10, two decimals) and status of one arc."""

    heat: float
    status: str


def _count(value: Any) -> int:
    """A count from an int, a numeric string or a list (its length)."""
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, (int, float)):
        return max(0, int(value))
    if isinstance(value, (list, tuple, set, dict)):
        return len(value)
    try:
        return max(0, int(str(value).strip()))
    except ValueError:
        return 0


def arc_activity(meta: dict[str, Any]) -> ArcActivity:
    """Read the heat evidence from arc frontmatter (tolerant of older and flat files)."""
    signals = meta.get("signals") if isinstance(meta.get("signals"), dict) else {}
    sessions = _count(meta.get("source_sessions")) or _count(signals.get("sessions"))
    tools = _count(signals.get("num_tool_calls", signals.get("tool_calls", meta.get("num_tool_calls"))))
    joy = _count(signals.get("joy_markers", meta.get("joy_markers")))
    errors = _count(signals.get("error_markers", meta.get("error_markers")))
    status = meta.get("status")
    return ArcActivity(
        last_active=arc_last_active(meta),
        sessions=sessions,
        tool_calls=tools,
        joy_markers=joy,
        error_markers=errors,
        status=str(status).strip().lower() if status else None,
    )


def intensity(activity: ArcActivity) -> float:
    """How much work went into the arc, in [0.4, 1]."""
    volume = 1.0 - math.exp(-activity.tool_calls / 50.0)
    sessions = 1.0 - math.exp(-activity.sessions / 3.0)
    joy = min(1.0, activity.joy_markers / 3.0)
    return 0.4 + 0.25 * volume + 0.25 * sessions + 0.1 * joy


def recency(age_days: float) -> float:
    """Halves every HALF_LIFE_DAYS; halves again every DECAY_HALF_LIFE_DAYS after DECAY_AFTER_DAYS."""
    age = max(0.0, age_days)
    factor = 0.5 ** (age / HALF_LIFE_DAYS)
    if age > DECAY_AFTER_DAYS:
        factor *= 0.5 ** ((age - DECAY_AFTER_DAYS) / DECAY_HALF_LIFE_DAYS)
    return factor


def status_of(activity: ArcActivity, age_days: float) -> str:
    """The arc's status from its idle time, joy markers and any status already set."""
    current = activity.status if activity.status in STATUSES or activity.status in _DONE_WORDS else None
    if current in _DONE_WORDS:
        current = "complete"
    if age_days <= ACTIVE_DAYS:
        return "active"
    if current == "graduated":
        return "graduated"
    finished = current == "complete" or activity.joy_markers > 0
    if finished:
        return "graduated" if age_days >= GRADUATE_DAYS else "complete"
    return "stalled"


def score(activity: ArcActivity, now: dt.datetime) -> HeatResult:
    """Heat and status of one arc at ``now``; an arc with no timestamp is cold and stalled."""
    if activity.last_active is None:
        return HeatResult(heat=0.0, status=status_of(activity, math.inf))
    age_days = (now - activity.last_active).total_seconds() / 86400.0
    heat = round(10.0 * recency(age_days) * intensity(activity), 2)
    return HeatResult(heat=heat, status=status_of(activity, age_days))
