"""The amygdala's rules (pure; UPSTREAM.md 5.7): event-bus events to an alert file and incident arcs.

The amygdala reads events from the Redis Streams event bus; this module
decides what they mean. ``classify`` gives an event its severity (nuclear,
critical, warning) or None; ``render_alert`` is the text of
``brain-feed/amygdala-active.md`` that ``GET /signal`` reports;
``incident_arc`` is the arc a nuclear or critical event leaves in
``amygdala/``; ``clear_due`` says when the alert has been quiet for the clear
window. ``tick_event`` is the other direction: the ``brain.tick.complete``
event a keeper tick publishes (UPSTREAM.md 5.3).

Two of upstream's defects are fixed here (ADR 0018): keywords match whole words (``down``
is not found in ``download``), and the keeper's own tick events (sources
``brain-cron``, ``brain-drain`` and this kernel's tick sources) never become
incident arcs, so a bad tick raises the alert without filing an incident
that the next tick would score.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from brain_core.text import clip_words, one_line, slugify
from brain_core.vault import frontmatter
from brain_core.vault.layout import SIGNALS_DIR

NUCLEAR, CRITICAL, WARNING = "nuclear", "critical", "warning"
RANK = {WARNING: 1, CRITICAL: 2, NUCLEAR: 3}
ALERT_ID = "amygdala-active"
ALERT_TITLE = "AMYGDALA ALERT"
ALERT_PRIORITY = 100
ALERT_TTL = 300
LAST_EVENT_KEY = "amygdala:last_event_ts"  # upstream's Redis key: when the last counted event was seen (epoch s)
TICK_EVENT = "brain.tick.complete"
MESSAGE_CHARS = 500
_TITLE_CHARS = 200

# Sources of keeper ticks: upstream's cron and drain, and this kernel's ``brain tick``
# (brain-cli) and ``brain ops-loop`` (brain-ops-loop). Their events raise the alert only.
TICK_SOURCES = frozenset({"brain-cron", "brain-drain", "brain-cli", "brain-ops-loop"})

# Upstream's keywords as whole words, with the inflections its substring test also caught
# (``crashed``, ``timeouts``) but not the unrelated words it caught (``download``, ``slowly``).
_WORDS = {
    NUCLEAR: ("down", "offline", "fatal", "data loss", "nuclear"),
    CRITICAL: ("failed", "crash", "crashed", "crashes", "crashing", "timeout", "timeouts", "timed out", "unreachable"),
    WARNING: ("warning", "warnings", "threshold", "thresholds", "degraded", "slow", "slower"),
}
_PATTERNS = {
    severity: re.compile(r"(?<![a-z0-9])(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in words) + r")(?![a-z0-9])")
    for severity, words in _WORDS.items()
}
_ACTIONS = {
    NUCLEAR: "**ACTION REQUIRED: Halt non-critical operations. Operator notified.**",
    CRITICAL: "**CAUTION: Monitor closely. Escalation possible.**",
}


@dataclass(frozen=True)
class BusEvent:
    """One stream entry: the stream, its id (``<ms>-<seq>``) and its string fields."""

    stream: str
    id: str
    fields: Mapping[str, str]

    def field(self, name: str) -> str:
        return one_line(self.fields.get(name) or "")

    @property
    def event(self) -> str:
        return self.field("event")

    @property
    def source(self) -> str:
        return self.field("source")

    @property
    def title(self) -> str:
        """What the event is called: its title, else its message, else its event name."""
        return clip_words(self.field("title") or self.field("message") or self.event or "event", _TITLE_CHARS)

    @property
    def at(self) -> dt.datetime:
        """When it happened: its ``ts`` field (epoch seconds) when plausible, else the time in its stream id."""
        try:
            seconds = float(self.fields.get("ts") or "")
            if 0 < seconds < 32503680000:  # before the year 3000
                return dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
        except ValueError:
            pass
        try:
            return dt.datetime.fromtimestamp(int(self.id.split("-", 1)[0]) / 1000, dt.timezone.utc)
        except (ValueError, OverflowError):
            return dt.datetime.fromtimestamp(0, dt.timezone.utc)


@dataclass(frozen=True)
class Alarm:
    """An event the amygdala counts, with its severity."""

    event: BusEvent
    severity: str


def classify(event: BusEvent) -> str | None:
    """The event's severity (nuclear, critical, warning), or None when it is not an alarm.

    A ``brain.*`` event says its severity itself (only nuclear, critical and
    warning count); other events: priority ``urgent`` or a nuclear word,
    priority ``high`` or a critical word, a warning word; whole words of the
    event name, message and title, case-insensitive.
    """
    if event.event.startswith("brain."):
        severity = event.field("severity").lower()
        return severity if severity in RANK else None
    priority = event.field("priority").lower()
    text = " ".join((event.event, event.field("message"), event.field("title"))).lower()
    if priority == "urgent" or _PATTERNS[NUCLEAR].search(text):
        return NUCLEAR
    if priority == "high" or _PATTERNS[CRITICAL].search(text):
        return CRITICAL
    if _PATTERNS[WARNING].search(text):
        return WARNING
    return None


def alarms(events: Iterable[BusEvent]) -> list[Alarm]:
    """The events that count, in stream order."""
    return [Alarm(e, s) for e in events if (s := classify(e)) is not None]


def worst(found: Sequence[Alarm]) -> Alarm:
    """The most severe alarm; of equals, the latest."""
    return max(reversed(found), key=lambda a: (RANK[a.severity], a.event.at))


def render_alert(found: Sequence[Alarm]) -> str:
    """``brain-feed/amygdala-active.md`` for a non-empty list of alarms (UPSTREAM.md 1.5, 5.7).

    Severity in the frontmatter is ``critical`` (nuclear or critical) or
    ``warning``, the title always ``AMYGDALA ALERT``, as upstream's only
    writer did: clients read the true severity from the heading.
    """
    top = worst(found)
    event = top.event
    meta = {
        "id": ALERT_ID,
        "title": ALERT_TITLE,
        "priority": ALERT_PRIORITY,
        "ttl": ALERT_TTL,
        "severity": CRITICAL if top.severity in (NUCLEAR, CRITICAL) else WARNING,
    }
    lines = [
        f"## [{top.severity.upper()}] {event.title}",
        "",
        f"Source: {one_line(event.stream)} | event: {event.event or 'unknown'}",
        f"Time: {event.at.strftime('%Y-%m-%d %H:%M UTC')}",
        f"Affected: {event.source or 'unknown'}",
    ]
    if top.severity in _ACTIONS:
        lines += ["", _ACTIONS[top.severity]]
    if len(found) > 1:
        lines += ["", f"### Active signals ({len(found)} total)", ""]
        lines += [f"- [{a.severity}] {a.event.title} ({one_line(a.event.stream)})" for a in found]
    return frontmatter.render(meta, "\n" + "\n".join(lines) + "\n")


def makes_incident(alarm: Alarm) -> bool:
    """Nuclear and critical events make incident arcs, except the keeper's own tick events (ADR 0018)."""
    return alarm.severity in (NUCLEAR, CRITICAL) and alarm.event.source not in TICK_SOURCES


def incident_arc(alarm: Alarm) -> tuple[str, str]:
    """(vault path, text) of the incident arc for a nuclear or critical event.

    The name comes from the event's time and name, so a redelivered event
    names the same file (the writer creates it exclusively: once).
    """
    event = alarm.event
    stamp = event.at.strftime("%Y-%m-%dT%H-%M-%SZ")
    slug = slugify(event.event or "event")
    source = slugify(event.source) if event.source else "event-bus"
    message = (event.fields.get("message") or "").strip() or event.title
    message = message.replace("<!--", "&lt;!--")  # the message must not open or close a marker
    meta = {
        "cluster_id": f"amygdala-{stamp}-{slug}",
        "title": event.title,
        "region": "amygdala",
        "status": "active",
        "heat": 10,
        "severity": alarm.severity,
        "source_event": event.event or "unknown",
        "source_stream": one_line(event.stream),
        "created": event.at.strftime("%Y-%m-%d"),
    }
    body = (
        f"\n# {event.title}\n\n"
        f"<!-- @signal severity={alarm.severity} source={source} -->\n{message}\n<!-- @/signal -->\n\n"
        f"## Timeline\n\n- **{event.at.strftime('%Y-%m-%dT%H:%M:%SZ')}** — Signal detected from {one_line(event.stream)}\n\n"
        "## Resolution\n\n(pending)\n"
    )
    return f"{SIGNALS_DIR}/{stamp}-{slug}.md", frontmatter.render(meta, body)


def clear_due(now: dt.datetime, last_event_at: float | None, alert_modified: dt.datetime | None, window_s: float) -> bool:
    """Whether a quiet pass clears the alert: the window has passed since the last counted event
    (the Redis key), or, with no key, since the alert file was written."""
    if last_event_at is not None:
        return now.timestamp() - last_event_at >= window_s
    if alert_modified is not None:
        return (now - alert_modified).total_seconds() >= window_s
    return False


def tick_severity(score: int | None, *, ai_error: bool, reason: str = "") -> str:
    """Upstream's severity of a tick event: warning when the AI errored or its answer was unparseable,
    nuclear at score 0, warning at 3 or less, otherwise info (a tick without a health score: info)."""
    if ai_error or reason.strip().lower() == "unparseable":
        return WARNING
    if score is None:
        return "info"
    if score <= 0:
        return NUCLEAR
    return WARNING if score <= 3 else "info"


def tick_event(
    stats: Mapping[str, Any],
    *,
    source: str,
    host: str,
    topic: str,
    now: dt.datetime,
    total_ms: int,
    score: int | None = None,
    reason: str = "",
    ai_error: bool = False,
) -> dict[str, str]:
    """The fields of a ``brain.tick.complete`` event (UPSTREAM.md 5.3), all strings.

    ``score`` is the tick's health score out of 10 when an LLM gave one; a
    deterministic tick has none, so ``score`` is empty and the title says so.
    """

    def count(key: str) -> str:
        value = stats.get(key)
        return str(int(value)) if isinstance(value, int | float) and not isinstance(value, bool) else "0"

    message = clip_words(reason, MESSAGE_CHARS) if reason else ("tick failed to reach the LLM" if ai_error else "deterministic tick")
    return {
        "v": "1",
        "domain": "brain",
        "event": TICK_EVENT,
        "source": source,
        "severity": tick_severity(score, ai_error=ai_error, reason=reason),
        "host": host,
        "ts": str(int(now.timestamp())),
        "title": f"brain tick (score={score if score is not None else 'n/a'})",
        "message": message,
        "priority": "low",
        "tags": "brain",
        "topic": topic,
        "score": "" if score is None else str(score),
        "arcs_scanned": count("arcs_scanned"),
        "signals_collected": count("signals_collected"),
        "lessons_collected": count("lessons_collected"),
        "promotions": count("promotions"),
        "demotions": count("demotions"),
        "graduations": count("graduations"),
        "total_ms": str(max(0, int(total_ms))),
    }
