"""A keeper tick's ``brain.tick.complete`` event on the event bus (UPSTREAM.md 5.3), best effort.

``run_tick_and_warm`` calls ``publish_tick`` once a tick has committed, so
the fleet never hears of a tick that rolled back. Nothing is published
without ``REDIS_URL`` or for a dry run (upstream's rule). Unlike upstream, a
tick without an LLM answer publishes too (an info event with an empty
score), since a deterministic deployment's ticks are still ticks. A bus that
cannot be reached never fails the tick: it becomes one of the summary's notes.
"""

from __future__ import annotations

import datetime as dt

from brain_core.amygdala import tick_event
from brain_kernel.settings import Settings
from brain_kernel.ticks.events import EventBus, EventBusError, host_name
from brain_ops.keeper.tick import TickSummary


def publish_tick(
    settings: Settings,
    summary: TickSummary,
    *,
    source: str,
    now: dt.datetime,
    total_ms: int,
    score: int | None = None,
    reason: str = "",
) -> str | None:
    """Publish the tick's event when the bus is configured; its stream id, or None (not configured, dry run, or failed: noted)."""
    if not settings.redis_url or summary.dry_run:
        return None
    fields = tick_event(
        summary.stats,
        source=source,
        host=host_name(),
        topic=settings.event_bus_topic,
        now=now,
        total_ms=total_ms,
        score=score,
        reason=reason,
        ai_error=summary.llm_error is not None,
    )
    bus = EventBus.from_settings(settings)
    try:
        return bus.publish(settings.event_bus_stream, fields)
    except EventBusError as exc:
        summary.notes.append(f"{fields['event']} not published: {exc}")
        return None
    finally:
        bus.close()
