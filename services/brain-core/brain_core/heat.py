"""Heat and status of arcs (pure): upstream's keeper formula (UPSTREAM.md 5.4), for arcs only.

Heat is a whole number from 0 to 10, the sum of:

- the replay boost (+1 per newer arc that says ``replayed_from: <this arc>``);
- +3 when the arc's age is at most 24 hours, +1 when at most 72 hours;
- ``min(4, (tools // 1000) * 2)`` for the tool calls its sessions made;
- ``min(3, sessions)`` for its source sessions (+1 for a single session id written as text);
- +1 when its sessions ended on a joy marker;
- +2 while its status is ``active``;
- minus ``(age_days - DECAY_START) // DECAY_INTERVAL`` once the age passes ``DECAY_START`` days;

clamped to 0..10. The age counts from the arc's last recorded activity
(``brain_core.arcs.arc_last_active``: the session signals, else ``updated`` or
``created``), else the file's mtime; an upstream arc has only ``created``, so
it scores as upstream scored it.

Status: ``active`` lasts while the arc was touched within ``ACTIVE_HOURS``;
after that an ``active`` arc becomes ``complete`` (touched within
``COMPLETE_HOURS``) or ``stalled``, the thresholds upstream's clustering used;
fresh activity makes a ``complete`` or ``stalled`` arc ``active`` again.
Statuses set by people or later steps (``graduated``, ``resolved``,
``merged``, ``abandoned``) are kept. Everything is a function of the arc's
frontmatter and the clock, so a rerun writes the same values.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from brain_core.arcs import arc_last_active
from brain_core.times import parse_time
from brain_core.vault.regions import GRADUATED, place

ACTIVE_HOURS = 6
COMPLETE_HOURS = 48
DERIVED_STATUSES = ("active", "complete", "stalled")
REPLAY_MAX_AGE_DAYS = 14


@dataclass(frozen=True)
class HeatRules:
    """The keeper's thresholds (``BRAIN_PROMOTE_HEAT`` ... in the settings)."""

    promote: int = 5
    demote: int = 3
    graduate: int = 1
    graduate_age_days: int = 14
    decay_start_days: int = 7
    decay_interval_days: int = 4


@dataclass(frozen=True)
class ArcActivity:
    """The evidence heat is computed from, taken from an arc's frontmatter."""

    last_active: dt.datetime | None
    sessions: int = 0
    tool_calls: int = 0
    joy_markers: int = 0
    status: str | None = None


def _count(value: Any) -> int:
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, (int, float)):
        return max(0, int(value))
    try:
        return max(0, int(str(value).strip()))
    except ValueError:
        return 0


def _signal_figure(signals: Any, *names: str) -> int:
    """A figure of an arc's ``signals``: a mapping (ours or upstream's flow map) or upstream's text."""
    if isinstance(signals, Mapping):
        return next((_count(signals[n]) for n in names if n in signals), 0)
    if isinstance(signals, str):
        for name in names:
            match = re.search(rf"\b{re.escape(name)}\s*:\s*(\d+)", signals)
            if match:
                return int(match.group(1))
    return 0


def arc_activity(meta: Mapping[str, Any], *, mtime: dt.datetime | None = None) -> ArcActivity:
    """The heat evidence of one arc (ours or upstream's frontmatter)."""
    signals = meta.get("signals")
    raw_sessions = meta.get("source_sessions")
    if isinstance(raw_sessions, int) and not isinstance(raw_sessions, bool):  # a count (``arc_facts``)
        sessions = max(0, raw_sessions)
    elif isinstance(raw_sessions, (list, tuple)):
        sessions = len([s for s in raw_sessions if s])
    elif isinstance(raw_sessions, str) and raw_sessions.strip():
        sessions = 1
    else:
        sessions = 0
    status = meta.get("status")
    return ArcActivity(
        last_active=arc_last_active(meta) or mtime,
        sessions=sessions,
        tool_calls=_signal_figure(signals, "tool_calls", "tools", "num_tool_calls"),
        joy_markers=_signal_figure(signals, "joy_markers", "joy"),
        status=str(status).strip().lower() if status else None,
    )


def age_hours(activity: ArcActivity, now: dt.datetime) -> float | None:
    """Hours since the arc's last activity (None when nothing dates it)."""
    if activity.last_active is None:
        return None
    return max(0.0, (now - activity.last_active).total_seconds() / 3600.0)


def status_of(activity: ArcActivity, now: dt.datetime) -> str | None:
    """The arc's status at ``now`` (None: leave what the file says)."""
    current = activity.status
    if current not in (None, *DERIVED_STATUSES):
        return current  # graduated, resolved, merged, abandoned, or a person's own word
    hours = age_hours(activity, now)
    if hours is None:
        return current
    if hours <= ACTIVE_HOURS:
        return "active"
    if current == "complete":
        return "complete"
    if current in (None, "active"):
        return "complete" if hours <= COMPLETE_HOURS else "stalled"
    return current


def heat_of(activity: ArcActivity, now: dt.datetime, rules: HeatRules, *, replay_boost: int = 0, status: str | None = None) -> int:
    """Upstream's heat (module docstring) of one arc at ``now``, with ``status`` the one it will carry."""
    heat = replay_boost
    hours = age_hours(activity, now)
    if hours is not None:
        if hours <= 24:
            heat += 3
        elif hours <= 72:
            heat += 1
    heat += min(4, (activity.tool_calls // 1000) * 2)
    heat += min(3, activity.sessions)
    if activity.joy_markers > 0:
        heat += 1
    if (status or activity.status) == "active":
        heat += 2
    if hours is not None:
        age_days = int(hours // 24)
        if age_days > rules.decay_start_days:
            heat -= (age_days - rules.decay_start_days) // max(1, rules.decay_interval_days)
    return max(0, min(10, heat))


def age_days(activity: ArcActivity, now: dt.datetime) -> int | None:
    """Whole days since the arc's last activity (None when nothing dates it)."""
    hours = age_hours(activity, now)
    return None if hours is None else int(hours // 24)


# -- the facts of an arc a tick keeps between runs (the file stats) -----------------------------

# Frontmatter keys heat, status, moves, the replay boost and the mitigation set read.
FACT_KEYS = (
    "cluster_id",
    "title",
    "status",
    "heat",
    "created",
    "region",
    "replayed_from",
    "mitigates",
    "type",
    "signals",
    "last_active",
    "last_activity",
    "end",
    "last_seen",
    "ended",
    "updated",
)
_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})")


def arc_facts(meta: Mapping[str, Any], *, mtime: dt.datetime | None) -> dict[str, Any]:
    """What a tick needs of an arc without reading its file again (JSON-ready)."""
    facts = {k: meta[k] for k in FACT_KEYS if k in meta}
    signals = facts.get("signals")
    if isinstance(signals, Mapping):  # only the figures heat and activity read
        facts["signals"] = {k: v for k, v in signals.items() if k not in ("top_tools", "agents")}
    raw = meta.get("source_sessions")
    facts["source_sessions"] = len([s for s in raw if s]) if isinstance(raw, (list, tuple)) else (raw if isinstance(raw, str) else 0)
    return facts_at(facts, mtime)


def facts_at(facts: Mapping[str, Any], mtime: dt.datetime | None) -> dict[str, Any]:
    """An arc's facts with its file's mtime, as they record it (a tick that rewrote the file gives the new one)."""
    return {**facts, "mtime": mtime.isoformat() if mtime else None}


def backfilled_created(facts: Mapping[str, Any], vault_path: str) -> str | None:
    """``created: YYYY-MM-DD`` for an arc without a valid one: the date in its id, its name, else its mtime."""
    if parse_time(facts.get("created")) is not None:
        return None
    for source in (str(facts.get("cluster_id") or ""), vault_path.rsplit("/", 1)[-1]):
        match = _DATE.search(source)
        if match and parse_time(match.group(1)) is not None:
            return match.group(1)
    mtime = parse_time(facts.get("mtime"))
    return mtime.date().isoformat() if mtime else None


@dataclass(frozen=True)
class ArcChange:
    """What a tick does to one arc: frontmatter edits, its heat and status, and its move (if any)."""

    changes: dict[str, Any]
    heat: int
    status: str | None
    move_to: str | None = None
    action: str | None = None  # promote, demote, graduate
    graduated: bool = False


def _number(raw: Any) -> float | None:
    try:
        return float(raw)
    except (TypeError, ValueError):
        return None


def plan_arc(facts: Mapping[str, Any], vault_path: str, now: dt.datetime, rules: HeatRules, *, replay_boost: int = 0) -> ArcChange:
    """Steps 3, 4 and 6 of the tick for one arc, from its facts alone (UPSTREAM.md 5.4)."""
    changes: dict[str, Any] = {}
    created = backfilled_created(facts, vault_path)
    if created is not None:
        changes["created"] = created
    activity = arc_activity({**facts, **changes}, mtime=parse_time(facts.get("mtime")))
    status = status_of(activity, now)
    heat = heat_of(activity, now, rules, replay_boost=replay_boost, status=status)
    if _number(facts.get("heat")) != heat:
        changes["heat"] = heat
    placement = place(
        vault_path,
        heat=heat,
        status=status,
        age_days=age_days(activity, now),
        region=facts.get("region"),
        promote=rules.promote,
        demote=rules.demote,
        graduate=rules.graduate,
        graduate_age_days=rules.graduate_age_days,
    )
    if placement.graduate:
        status = GRADUATED
    current = str(facts.get("status")).strip().lower() if facts.get("status") else None
    if status is not None and status != current:
        changes["status"] = status
    moved = placement.path if placement.path not in (None, vault_path) else None
    return ArcChange(changes, heat, status, moved, placement.action if (moved or placement.graduate) else None, placement.graduate)
