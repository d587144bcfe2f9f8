"""The amygdala (``brain amygdala [--continuous]``): event-bus alarms to the alert file and incident arcs (UPSTREAM.md 5.7).

Each cycle reads the bus (Redis Streams) as consumer ``AMYGDALA_CONSUMER``
(default ``amygdala-<host name>``) of group ``amygdala`` on every stream of
``AMYGDALA_STREAMS``, then:

- events that count (``brain_core.amygdala.classify``): write
  ``brain-feed/amygdala-active.md`` for the worst of them (the file
  ``GET /signal`` reports), file an incident arc ``amygdala/<stamp>-<event>.md``
  for each nuclear or critical one that is not a keeper tick's (created
  exclusively, so a redelivered event files nothing twice), and set the Redis
  key ``amygdala:last_event_ts`` (expiring after twice the clear window);
- no such events: once ``AMYGDALA_CLEAR_WINDOW`` (900 s) has passed since
  the key's time, or with no key since the alert file was written, delete
  the file (all clear) and the key.

Events are acknowledged after the vault writes, so an event whose cycle
failed stays pending for this consumer and is read again (the first cycle
and the one after a failure read the pending ones first). One pass reads
what is waiting without blocking (up to 1000 events); ``--continuous``
blocks up to ``AMYGDALA_POLL_INTERVAL`` seconds per read (upstream never
used its poll interval; ADR 0018), waits 30 s after a failure, and stops
cleanly on SIGTERM or SIGINT after the cycle it is in. Time comes from the
clock passed in, so tests move it instead of sleeping.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from brain_core.amygdala import LAST_EVENT_KEY, BusEvent, alarms, classify, clear_due, incident_arc, makes_incident, render_alert
from brain_core.jsonable import JobSummary
from brain_core.progress import SILENT, Progress
from brain_core.redact import scrub
from brain_core.times import iso
from brain_kernel.clock import Clock, utc_now
from brain_kernel.errors import BrainError
from brain_kernel.settings import Settings
from brain_kernel.ticks.events import EventBus, host_name
from brain_kernel.vault_store import Vault
from brain_ops.loop import stop_on_signals

BATCH = 50  # upstream's XREADGROUP count
MAX_BATCHES = 20  # one cycle reads at most BATCH * MAX_BATCHES events; the rest wait for the next
RETRY_SECONDS = 30.0  # upstream's pause after a failed cycle


@dataclass
class AmygdalaSummary(JobSummary):
    """What a run did (printed as JSON by ``brain amygdala``)."""

    mode: str
    consumer: str
    streams: list[str]
    cycles: int = 0
    events_read: int = 0
    acknowledged: int = 0
    alarms: Counter = field(default_factory=Counter)
    alert: str | None = None  # the last cycle's outcome: raised, updated, cleared, or None (nothing to do)
    alert_writes: int = 0
    clears: int = 0
    incident_arcs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stopped_by: str | None = None
    dry_run: bool = False


def consumer_name(settings: Settings) -> str:
    """``AMYGDALA_CONSUMER``, else one per machine, so a one-shot and a continuous amygdala never share one."""
    return settings.amygdala_consumer or f"amygdala-{host_name()}"


def _read(bus: EventBus, settings: Settings, consumer: str, *, block_ms: int | None, pending: bool) -> list[BusEvent]:
    events: list[BusEvent] = []
    for n in range(MAX_BATCHES):
        got = bus.read_group(settings.amygdala_streams, settings.amygdala_group, consumer, count=BATCH, block_ms=block_ms if n == 0 else None, pending=pending)
        events += got
        if len(got) < BATCH:
            break
    return events


def run_cycle(
    bus: EventBus, vault: Vault, settings: Settings, summary: AmygdalaSummary, *, now: dt.datetime, block_ms: int | None, recover: bool, dry_run: bool = False
) -> None:
    """One cycle (module docstring): read, write the alert and incident arcs or clear, acknowledge.

    A dry run peeks at the events the group has not been given (``EventBus.peek``)
    and says what it would write, remove and file; it writes, sets, deletes and
    acknowledges nothing, so the next real pass reads the same events.
    """
    consumer = summary.consumer
    if dry_run:
        events = bus.peek(settings.amygdala_streams, settings.amygdala_group, count=BATCH * MAX_BATCHES)
    else:
        events = _read(bus, settings, consumer, block_ms=None, pending=True) if recover else []
        events += _read(bus, settings, consumer, block_ms=block_ms, pending=False)
    summary.cycles += 1
    summary.events_read += len(events)
    found = alarms(events)
    alert = settings.amygdala_signal_path.lstrip("/")
    window = settings.amygdala_clear_window
    if found:
        summary.alert = "updated" if vault.exists(alert) else "raised"
        if not dry_run:
            vault.write_atomic(alert, scrub(render_alert(found)))  # event text is anyone's: secrets never reach the vault
        summary.alert_writes += 1
        summary.alarms.update(a.severity for a in found)
        for alarm in found:
            if not makes_incident(alarm):
                continue
            path, text = incident_arc(alarm)
            if dry_run:
                if not vault.exists(path):
                    summary.incident_arcs.append(path)
                continue
            try:
                vault.create_exclusive(path, scrub(text))
            except FileExistsError:  # this event (redelivered) or its twin in the same second: filed already
                continue
            summary.incident_arcs.append(path)
        if not dry_run:
            bus.set_value(LAST_EVENT_KEY, f"{now.timestamp():.3f}", expire_s=int(2 * window))
    else:
        summary.alert = None
        last = bus.get_float(LAST_EVENT_KEY)
        try:
            modified = dt.datetime.fromtimestamp(vault.mtime(alert), dt.timezone.utc) if vault.exists(alert) else None
        except OSError:
            modified = None
        if clear_due(now, last, modified, window):
            if vault.exists(alert) and (dry_run or vault.remove(alert)):
                summary.alert, summary.clears = "cleared", summary.clears + 1
            if last is not None and not dry_run:
                bus.delete(LAST_EVENT_KEY)
    if events and not dry_run:
        summary.acknowledged += bus.ack(settings.amygdala_group, events)


def replay(bus: EventBus, settings: Settings, *, last: int, severity: str | None = None) -> dict[str, Any]:
    """``brain amygdala --replay``: the last ``last`` events on the streams as the amygdala classifies them, read only.

    Upstream's ``--replay --last N [--severity]`` report (``XREVRANGE``): each
    event newest first with the severity it would count as (null: ignored);
    ``severity`` keeps only the events counted at that severity.
    """
    rows = []
    for event in bus.recent(settings.amygdala_streams, count=last):
        counted = classify(event)
        if severity is not None and counted != severity:
            continue
        fields = event.fields
        rows.append(
            {
                "stream": event.stream,
                "id": event.id,
                "event": fields.get("event"),
                "severity": counted,
                "title": scrub(fields.get("title") or "") or None,
                "source": fields.get("source"),
                "ts": fields.get("ts"),
            }
        )
    return {"mode": "replay", "streams": list(settings.amygdala_streams), "last": last, "severity": severity, "count": len(rows), "events": rows}


def run_amygdala(
    bus: EventBus,
    vault: Vault,
    settings: Settings,
    *,
    continuous: bool = False,
    clock: Clock = utc_now,
    stop: threading.Event | None = None,
    sleep: Callable[[float], None] | None = None,
    progress: Progress = SILENT,
    handle_signals: bool = True,
    max_cycles: int | None = None,
    dry_run: bool = False,
) -> AmygdalaSummary:
    """One pass (a bus failure raises ``EventBusError``), or with ``continuous`` cycles until stopped.

    In continuous mode a failed cycle is reported and retried after
    ``RETRY_SECONDS`` (``sleep``, default: waiting on ``stop``, so a signal
    ends the wait); SIGTERM and SIGINT end the loop after its cycle.
    """
    say = progress.say
    summary = AmygdalaSummary(
        mode="continuous" if continuous else "once", consumer=consumer_name(settings), streams=list(settings.amygdala_streams), dry_run=dry_run
    )
    if dry_run:  # one look, changing nothing (not even the consumer group)
        run_cycle(bus, vault, settings, summary, now=clock(), block_ms=None, recover=False, dry_run=True)
        _report(summary, say)
        return summary
    if not continuous:
        bus.ensure_groups(settings.amygdala_streams, settings.amygdala_group)
        run_cycle(bus, vault, settings, summary, now=clock(), block_ms=None, recover=True)
        _report(summary, say)
        return summary

    flag = stop if stop is not None else threading.Event()
    wait = sleep or (lambda seconds: flag.wait(seconds))
    received: list[str] = []
    block_ms = max(1, int(settings.amygdala_poll_interval * 1000))
    ready, recover, attempts = False, True, 0
    say(f"consumer {summary.consumer} of group {settings.amygdala_group} on {', '.join(settings.amygdala_streams)} at {bus.where}")
    with stop_on_signals(flag, received) if handle_signals else contextlib.nullcontext():
        while not flag.is_set() and (max_cycles is None or attempts < max_cycles):
            attempts += 1
            try:
                if not ready:
                    bus.ensure_groups(settings.amygdala_streams, settings.amygdala_group)
                    ready = True
                run_cycle(bus, vault, settings, summary, now=clock(), block_ms=block_ms, recover=recover)
                recover = False
            except (BrainError, OSError) as exc:  # Redis or the vault is away: report, wait, try again
                error = f"{iso(clock())} {type(exc).__name__}: {exc}".replace("\n", " ")
                summary.errors = [*summary.errors[-19:], error]  # the last 20
                say(f"cycle failed: {error}; retrying in {RETRY_SECONDS:g}s")
                ready, recover = False, True
                wait(RETRY_SECONDS)
                continue
            _report(summary, say)
    summary.stopped_by = received[0] if received else ("stop" if flag.is_set() else None)
    if summary.stopped_by:
        say(f"{summary.stopped_by}: stopped after {summary.cycles} cycle(s)")
    return summary


def _report(summary: AmygdalaSummary, say: Callable[[str], None]) -> None:
    if summary.alert is not None:
        say(f"alert {summary.alert}; {summary.events_read} event(s) read so far, {len(summary.incident_arcs)} incident arc(s)")
