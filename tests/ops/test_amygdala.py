"""The amygdala and the event bus: pure rules, then a real Redis (tests/conftest.py ``redis_server``) and the real app."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
from pathlib import Path

import pytest
import redis

from brain_core.amygdala import (
    CRITICAL,
    NUCLEAR,
    WARNING,
    Alarm,
    BusEvent,
    alarms,
    classify,
    clear_due,
    incident_arc,
    makes_incident,
    render_alert,
    tick_event,
    tick_severity,
)
from brain_core.feed.alert import alert_state
from brain_core.vault import frontmatter
from brain_core.vault.inline import parse_markers
from brain_kernel.settings import Settings
from brain_kernel.ticks.events import EventBus, bus_url
from brain_kernel.vault_store import Vault
from brain_ops.amygdala_watch import run_amygdala
from tests.support.harness import ManualClock, brain
from tests.support.progress_recorder import ProgressRecorder
from tests.support.servers import free_port

T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc)


def _event(event: str = "", *, message: str = "", title: str = "", stream: str = "events:health", **fields: str) -> BusEvent:
    values = {"event": event, "message": message, "title": title, "ts": str(int(T0.timestamp())), **fields}
    return BusEvent(stream, f"{int(T0.timestamp() * 1000)}-0", {k: v for k, v in values.items() if v})


# -- the rules (pure) ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (_event("service.status", message="api is down"), NUCLEAR),
        (_event("host.down"), NUCLEAR),
        (_event("service_down"), NUCLEAR),
        (_event("backup", message="possible DATA  LOSS on shard 3"), NUCLEAR),
        (_event("deploy", message="all fine", priority="urgent"), NUCLEAR),
        (_event("ci", message="download finished"), None),  # upstream's substring test said nuclear (ADR 0018)
        (_event("ci", message="shutdown of the old pods complete"), None),
        (_event("worker", message="worker crashed twice"), CRITICAL),
        (_event("probe", title="Request timeouts on /feed"), CRITICAL),
        (_event("deploy", message="ok", priority="high"), CRITICAL),
        (_event("db", message="replication degraded"), WARNING),
        (_event("db", message="queries run slowly"), None),
        (_event("brain.tick.complete", severity="info", message="host down"), None),  # brain events say their own severity
        (_event("brain.tick.complete", severity="nuclear"), NUCLEAR),
        (_event("brain.tick.complete", severity="Warning"), WARNING),
        (_event("deploy.finished", message="rolled out v2"), None),
    ],
)
def test_classification_matches_whole_words(event: BusEvent, expected: str | None) -> None:
    assert classify(event) == expected


def test_keeper_tick_events_raise_the_alert_but_file_no_incident() -> None:
    """Upstream excluded brain-cron only, so every bad drain tick filed an incident arc (ADR 0018)."""
    for source in ("brain-cron", "brain-drain", "brain-cli", "brain-ops-loop"):
        alarm = Alarm(_event("brain.tick.complete", severity="nuclear", source=source), NUCLEAR)
        assert not makes_incident(alarm)
    assert makes_incident(Alarm(_event("host.down", source="node-7"), NUCLEAR))
    assert not makes_incident(Alarm(_event("db", message="degraded", source="node-7"), WARNING))


def test_alert_file_is_what_signal_reports() -> None:
    found = alarms([_event("db", message="replication degraded", source="pg-1"), _event("api.down", title="API down", source="api-1")])
    text = render_alert(found)
    meta = frontmatter.parse(text).meta
    assert meta == {"id": "amygdala-active", "title": "AMYGDALA ALERT", "priority": 100, "ttl": 300, "severity": "critical"}
    state = alert_state(text, T0, "brain-feed/amygdala-active.md")
    assert (state["active"], state["severity"], state["title"]) == (True, "critical", "AMYGDALA ALERT")
    assert state["content"].splitlines() == [
        "## [NUCLEAR] API down",
        "",
        "Source: events:health | event: api.down",
        "Time: 2026-11-30 12:00 UTC",
        "Affected: api-1",
        "",
        "**ACTION REQUIRED: Halt non-critical operations. Operator notified.**",
        "",
        "### Active signals (2 total)",
        "",
        "- [warning] replication degraded (events:health)",
        "- [nuclear] API down (events:health)",
    ]
    only_warning = frontmatter.parse(render_alert(alarms([_event("db", message="slow queries")]))).meta
    assert only_warning["severity"] == "warning"


def test_incident_arc_is_an_upstream_arc_with_a_signal() -> None:
    path, text = incident_arc(Alarm(_event("host.down", title='Disk: "sda" gone', message="sda1 <!-- @/signal --> vanished", source="node 7"), NUCLEAR))
    assert path == "amygdala/2026-11-30T12-00-00Z-host-down.md"
    doc = frontmatter.parse(text)
    assert doc.meta == {
        "cluster_id": "amygdala-2026-11-30T12-00-00Z-host-down",
        "title": 'Disk: "sda" gone',
        "region": "amygdala",
        "status": "active",
        "heat": 10,
        "severity": "nuclear",
        "source_event": "host.down",
        "source_stream": "events:health",
        "created": "2026-11-30",
    }
    [marker] = [m for m in parse_markers(doc.body) if m.type == "signal"]
    assert marker.attrs == {"severity": "nuclear", "source": "node-7"}
    assert "vanished" in marker.content
    assert "## Timeline\n\n- **2026-11-30T12:00:00Z** — Signal detected from events:health" in doc.body
    assert doc.body.rstrip().endswith("## Resolution\n\n(pending)")


def test_clear_window() -> None:
    window = 900.0
    assert not clear_due(T0, (T0 - dt.timedelta(seconds=899)).timestamp(), None, window)
    assert clear_due(T0, (T0 - dt.timedelta(seconds=900)).timestamp(), T0, window)  # the key decides when it exists
    assert not clear_due(T0, None, T0 - dt.timedelta(seconds=10), window)
    assert clear_due(T0, None, T0 - dt.timedelta(seconds=901), window)  # no key (expired): the file's age
    assert not clear_due(T0, None, None, window)


def test_tick_event_fields_and_severity() -> None:
    assert [tick_severity(s, ai_error=False) for s in (0, 3, 4, 10, None)] == ["nuclear", "warning", "info", "info", "info"]
    assert tick_severity(9, ai_error=True) == "warning" and tick_severity(9, ai_error=False, reason="unparseable") == "warning"
    fields = tick_event({"arcs_scanned": 7, "promotions": 1, "dry_run": False}, source="brain-cli", host="h", topic="agentibrain-system", now=T0, total_ms=12)
    assert fields["event"] == "brain.tick.complete" and fields["title"] == "brain tick (score=n/a)" and fields["score"] == ""
    assert (fields["arcs_scanned"], fields["promotions"], fields["graduations"], fields["ts"]) == ("7", "1", "0", str(int(T0.timestamp())))
    assert all(isinstance(v, str) for v in fields.values())
    assert bus_url("redis://:pw@redis:6379/0", 11) == "redis://:pw@redis:6379/11" and bus_url("redis://redis", 11) == "redis://redis/11"


# -- a real Redis, the real app ---------------------------------------------------------------


def _bus_settings(settings: Settings, redis_url: str, **overrides: object) -> Settings:
    return settings.with_overrides(redis_url=redis_url, amygdala_consumer="amygdala-test", **overrides)


def _stream(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(bus_url(settings.redis_url or "", settings.event_bus_db), decode_responses=True)


def test_events_on_the_bus_raise_and_later_clear_signal(client, settings: Settings, clock: ManualClock, redis_url: str) -> None:
    """Events on a real Redis stream raise /signal; a quiet clear window clears it (ADR 0018)."""
    s = _bus_settings(settings, redis_url)
    vault, bus, r = Vault(s.vault), EventBus.from_settings(s), _stream(s)
    try:
        assert client.get("/signal").json()["active"] is False
        r.xadd("events:health", {"event": "api.down", "title": "API down", "message": "502 from every replica", "source": "api-1"})
        r.xadd("events:deploy", {"event": "deploy.finished", "message": "download of the image finished"})  # not an alarm
        r.xadd("events:brain", {"event": "brain.tick.complete", "severity": "nuclear", "source": "brain-drain", "title": "brain tick (score=0)"})
        first = run_amygdala(bus, vault, s, clock=clock)
        assert (first.events_read, first.acknowledged, dict(first.alarms), first.alert) == (3, 3, {"nuclear": 2}, "raised")
        raised = client.get("/signal").json()
        assert (raised["active"], raised["severity"], raised["title"]) == (True, "critical", "AMYGDALA ALERT")
        assert raised["content"].startswith("## [NUCLEAR] ") and "### Active signals (2 total)" in raised["content"]
        [arc] = first.incident_arcs  # the drain tick's event files none
        assert arc.startswith("amygdala/") and arc.endswith("-api-down.md")
        assert frontmatter.parse(vault.read_text(arc)).meta["source_stream"] == "events:health"
        assert r.xpending("events:health", "amygdala")["pending"] == 0  # acknowledged after the writes

        clock.advance(600)
        quiet = run_amygdala(bus, vault, s, clock=clock)
        assert (quiet.events_read, quiet.alert) == (0, None) and client.get("/signal").json()["active"] is True  # inside the window
        clock.advance(300)
        cleared = run_amygdala(bus, vault, s, clock=clock)
        assert cleared.alert == "cleared" and client.get("/signal").json()["active"] is False
        assert r.get("amygdala:last_event_ts") is None
        assert vault.exists(arc)  # the incident stays: the keeper scores and graduates it
    finally:
        bus.close()
        r.close()


def test_a_tick_publishes_tick_complete_and_survives_a_dead_bus(settings: Settings, redis_url: str) -> None:
    s = _bus_settings(settings, redis_url)
    r = _stream(s)
    try:
        result = brain(s, "tick", "--no-ai")
        assert result.exit_code == 0, result.stderr
        [(_id, fields)] = r.xrange("events:brain")
        assert fields["event"] == "brain.tick.complete" and fields["source"] == "brain-cli" and fields["severity"] == "info"
        assert fields["topic"] == "agentibrain-system" and fields["arcs_scanned"] == "0" and int(fields["total_ms"]) >= 0
        assert brain(s, "tick", "--dry-run").exit_code == 0
        assert r.xlen("events:brain") == 1  # a dry run publishes nothing
        amygdala = brain(s, "amygdala")  # the info event is read and ignored
        assert amygdala.exit_code == 0, amygdala.stderr
        summary = json.loads(amygdala.stdout)
        assert (summary["events_read"], summary["alarms"], summary["alert"]) == (1, {}, None)
    finally:
        r.close()
    dead = s.with_overrides(redis_url=f"redis://127.0.0.1:{free_port()}")
    down = brain(dead, "tick", "--no-ai")
    assert down.exit_code == 0, down.stderr
    assert "brain.tick.complete not published: event bus at 127.0.0.1" in down.stderr


def test_amygdala_without_redis_is_one_clear_error(tmp_path: Path) -> None:
    from tests.support.harness import make_settings

    s = make_settings(tmp_path, None)
    Vault(s.vault).scaffold()
    result = brain(s, "amygdala")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: REDIS_URL is not set: the event bus (Redis Streams) is off; set REDIS_URL=redis://host:6379 to use it"
    ]


def test_continuous_stops_cleanly_on_sigterm_and_outlives_a_dead_bus(settings: Settings, clock: ManualClock, redis_url: str) -> None:
    s = _bus_settings(settings, redis_url, amygdala_poll_interval=0.01)
    vault, bus, r = Vault(s.vault), EventBus.from_settings(s), _stream(s)

    def terminate_once_raised(message: str) -> None:
        if message.startswith("alert raised"):
            os.kill(os.getpid(), signal.SIGTERM)  # the loop ends after this cycle

    before = signal.getsignal(signal.SIGTERM)
    try:
        r.xadd("events:system", {"event": "node.offline", "source": "node-3"})
        summary = run_amygdala(bus, vault, s, continuous=True, clock=clock, progress=ProgressRecorder(on_say=terminate_once_raised))
        assert (summary.stopped_by, summary.cycles, summary.alert) == ("SIGTERM", 1, "raised")
        assert signal.getsignal(signal.SIGTERM) is before and vault.exists("brain-feed/amygdala-active.md")
    finally:
        bus.close()
        r.close()

    dead = EventBus.from_settings(s.with_overrides(redis_url=f"redis://127.0.0.1:{free_port()}"))
    waits: list[float] = []
    try:
        report = run_amygdala(dead, vault, s, continuous=True, clock=clock, sleep=waits.append, max_cycles=2, handle_signals=False)
    finally:
        dead.close()
    assert waits == [30.0, 30.0] and len(report.errors) == 2 and "EventBusError" in report.errors[0] and report.cycles == 0


def test_dry_run_says_what_a_pass_would_do_and_replay_reads_the_last_events(settings: Settings, redis_url: str) -> None:
    """Upstream's --dry-run and --replay --last N [--severity]: both change nothing on the bus or in the vault."""
    s = _bus_settings(settings, redis_url)
    vault, r = Vault(s.vault), _stream(s)
    vault.scaffold()
    try:
        ms = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)  # one millisecond apart: streams order only by id
        r.xadd("events:health", {"event": "api.down", "title": "API down", "message": "502 from every replica", "source": "api-1"}, id=f"{ms}-0")
        r.xadd("events:deploy", {"event": "deploy.finished", "message": "download of the image finished"}, id=f"{ms + 1}-0")
        r.xadd("events:host", {"event": "disk.slow", "title": "disk slow", "message": "latency over threshold"}, id=f"{ms + 2}-0")
        before = sorted(p.relative_to(s.vault).as_posix() for p in s.vault.rglob("*") if p.is_file())

        dry = brain(s, "amygdala", "--dry-run")
        assert dry.exit_code == 0, dry.stderr
        plan = json.loads(dry.stdout)
        assert plan["dry_run"] is True and (plan["events_read"], plan["alert"], plan["acknowledged"]) == (3, "raised", 0)
        assert plan["alarms"] == {"nuclear": 1, "warning": 1}
        [arc] = plan["incident_arcs"]
        assert arc.endswith("-api-down.md") and not vault.exists(arc)
        assert sorted(p.relative_to(s.vault).as_posix() for p in s.vault.rglob("*") if p.is_file()) == before
        assert r.get("amygdala:last_event_ts") is None

        replayed = brain(s, "amygdala", "--replay", "--last", "2")
        assert replayed.exit_code == 0, replayed.stderr
        report = json.loads(replayed.stdout)
        assert [(e["event"], e["severity"]) for e in report["events"]] == [("disk.slow", "warning"), ("deploy.finished", None)]  # newest first
        nuclear = json.loads(brain(s, "amygdala", "--replay", "--severity", "nuclear").stdout)
        assert [e["event"] for e in nuclear["events"]] == ["api.down"] and nuclear["count"] == 1

        real = json.loads(brain(s, "amygdala").stdout)  # the dry run and the replay left the events for a real pass
        assert (real["events_read"], real["alert"], real["incident_arcs"]) == (3, "raised", [arc])
        assert brain(s, "amygdala", "--replay", "--continuous").exit_code == 2
    finally:
        r.close()
