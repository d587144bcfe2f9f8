"""Tick health in ``tick_runs`` and ``GET /metrics`` in the Prometheus text format (replacing upstream's ClickHouse push)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from brain_kernel.db.engine import make_engine
from brain_kernel.db.models import Entry, Project, TickRun
from brain_kernel.settings import Settings
from brain_kernel.ticks import tick_queue
from brain_kernel.ticks.health import StoreCollector, record_tick
from brain_kernel.vault_store import Vault
from brain_ops.keeper.drain import run_tick_and_warm
from tests.support.harness import HTTP, Served, brain, serve_in_thread
from tests.support.planting import arc_session, write_arc
from tests.support.progress_recorder import ProgressRecorder

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TOKEN = "m3trics-t0ken"
FAMILIES = {
    "brain_tick_runs_total": "counter",
    "brain_markers_total": "counter",
    "brain_injections_total": "counter",
    "brain_embedding_chunks_written_total": "counter",
    "brain_tick_last_success_timestamp_seconds": "gauge",
    "brain_tick_last_duration_seconds": "gauge",
    "brain_tick_last_arcs_scanned": "gauge",
    "brain_tick_last_stat": "gauge",
    "brain_tick_queue_requests": "gauge",
    "brain_entries": "gauge",
    "brain_entries_embed_pending": "gauge",
    "brain_projects": "gauge",
}


# -- the exposition, read by prometheus_client's own parser ----------------------------


@dataclass
class Family:
    kind: str
    help: str
    samples: dict[tuple[tuple[str, str], ...], float] = field(default_factory=dict)


def parse(exposition: str) -> dict[str, Family]:
    """Families by sample name (``brain_tick_runs_total``, a histogram's ``_bucket``...), through the library's parser."""
    families: dict[str, Family] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            found = families.setdefault(sample.name, Family(family.type, family.documentation))
            labels = tuple(sorted(sample.labels.items()))
            assert labels not in found.samples, f"{sample.name}{labels} twice"
            found.samples[labels] = sample.value
    return families


def metrics_text(session: Session) -> str:
    """The store's families alone, as GET /metrics writes them."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(session))
    return generate_latest(registry).decode("utf-8")


def by_label(families: dict[str, Family], name: str, key: str) -> dict[str, float]:
    samples = families[name].samples
    assert all(len(labels) == 1 and labels[0][0] == key for labels in samples), samples
    return {labels[0][1]: value for labels, value in samples.items()}


def single(families: dict[str, Family], name: str) -> float | None:
    """The one sample of an unlabelled family; None when it has none (the parser lists only families with samples)."""
    samples = families[name].samples if name in families else {}
    assert set(samples) <= {()}, samples
    return samples.get(())


# -- helpers --------------------------------------------------------------------------


def _record(session: Session, *, finished: dt.datetime, seconds: float, ok: bool = True, dry_run: bool = False, **extra: object) -> None:
    values: dict[str, object] = {"source": "test", "use_ai": False, "error": None if ok else "RuntimeError: boom", "arcs_scanned": 0, "stats": {}}
    values.update(extra)
    record_tick(session, started_at=finished - dt.timedelta(seconds=seconds), finished_at=finished, dry_run=dry_run, ok=ok, **values)


def _runs(db: Session) -> list[TickRun]:
    db.rollback()  # a fresh snapshot: the rows other connections committed
    return list(db.scalars(select(TickRun).order_by(TickRun.finished_at, TickRun.id)))


def _arcs(settings: Settings) -> Vault:
    vault = Vault(settings.vault)
    write_arc(vault, [arc_session("a1", "api", "org1/api", "Rewrite the request router", 2)])
    write_arc(vault, [arc_session("w1", "web", "acme/web", "Fix the flaky login test", 5)])
    write_arc(vault, [arc_session("old", "legacy", "acme/legacy", "Migrate the old cron jobs", 24 * 10)])
    return vault


def _numeric(stats: dict) -> dict:
    return {k: v for k, v in stats.items() if isinstance(v, bool | int | float)}


@contextmanager
def _serving(settings: Settings) -> Iterator[str]:
    """The app of ``settings`` over real HTTP: its base URL.

    The token guard and the scrape's content are the subject, not a ``brain serve``
    process (the worker tests below start those): the app runs in a thread here.
    """
    with serve_in_thread(settings) as base:
        yield base


# -- record_tick and metrics_text -------------------------------------------------------


def test_recorded_ticks_queue_and_index_counts_are_exposed(tx: Session) -> None:
    _record(tx, finished=NOW - dt.timedelta(days=100), seconds=1)  # past the 90 days: pruned by the next record
    _record(tx, finished=NOW - dt.timedelta(hours=3), seconds=4, ok=False)
    odd = 'we"ird\\key\nline'
    stats = {"inbox_drained": 2, "arcs_scanned": 7, "promotions": 1, "dry_run": False, "hot_arcs_written": True, "ratio": 0.5, "note": "text", odd: 3}
    _record(tx, finished=NOW - dt.timedelta(hours=2), seconds=2.5, arcs_scanned=7, stats=stats)
    _record(tx, finished=NOW - dt.timedelta(hours=1), seconds=1.25, dry_run=True, arcs_scanned=9, stats={"arcs_scanned": 9, "dry_run": True})

    rows = list(tx.scalars(select(TickRun).order_by(TickRun.finished_at)))
    assert [(r.ok, r.dry_run, r.duration_ms, r.arcs_scanned) for r in rows] == [(False, False, 4000, 0), (True, False, 2500, 7), (True, True, 1250, 9)]
    assert rows[0].error == "RuntimeError: boom" and rows[1].error is None
    assert rows[1].stats == {k: v for k, v in stats.items() if k != "note"}  # numbers and booleans only

    done = tick_queue.enqueue(tx, dry_run=False, no_ai=False)
    tick_queue.claim_pending(tx)
    tick_queue.finish(tx, [done.job_id], status=tick_queue.COMPLETED, result={})
    tick_queue.enqueue(tx, dry_run=True, no_ai=False)
    tick_queue.claim_pending(tx)
    tick_queue.enqueue(tx, dry_run=False, no_ai=True)
    tick_queue.enqueue(tx, dry_run=False, no_ai=True)
    tx.add_all([Entry(id=f"arc-{i}", kind="arc", title="Secret title", vault_path=f"clusters/secret-{i}.md") for i in range(2)])
    tx.add(Entry(id="lesson-1", kind="lesson", title="Secret lesson", vault_path="left/lessons.md"))
    tx.add_all([Project(id="acme/web", key="web", repo="acme/web"), Project(id="api", key="api")])
    tx.flush()

    exposition = metrics_text(tx)
    families = parse(exposition)
    unlabelled_yet = {"brain_markers_total", "brain_injections_total"}  # no marker written, nothing served: no series
    assert {name: f.kind for name, f in families.items()} == {n: k for n, k in FAMILIES.items() if n not in unlabelled_yet}
    assert all(f.help for f in families.values())
    # Every tick ever recorded, the one past the 90 days included: a counter never loses what it counted.
    assert by_label(families, "brain_tick_runs_total", "outcome") == {"ok": 3, "failed": 1}
    last_real = (NOW - dt.timedelta(hours=2)).timestamp()  # the dry run after it does not count as a success
    assert single(families, "brain_tick_last_success_timestamp_seconds") == last_real
    assert single(families, "brain_tick_last_duration_seconds") == 1.25  # the last tick, dry run or not
    assert single(families, "brain_tick_last_arcs_scanned") == 9
    assert by_label(families, "brain_tick_last_stat", "key") == {
        "inbox_drained": 2,
        "arcs_scanned": 7,
        "promotions": 1,
        "hot_arcs_written": 1,
        "ratio": 0.5,
        odd: 3,
    }
    assert 'brain_tick_last_stat{key="we\\"ird\\\\key\\nline"} 3.0\n' in exposition  # escaped on the wire
    assert by_label(families, "brain_tick_queue_requests", "status") == {"pending": 2, "running": 1, "completed": 1, "failed": 0}
    assert by_label(families, "brain_entries", "kind") == {"arc": 2, "lesson": 1}
    assert single(families, "brain_projects") == 2 and single(families, "brain_entries_embed_pending") == 0
    assert "Secret" not in exposition and "clusters/" not in exposition and "acme" not in exposition  # counts, never content
    assert len(list(tx.scalars(select(TickRun)))) == 3  # the rows are pruned; the count is not


def test_an_empty_database_exposes_every_family_with_zeros_and_no_last_tick(tx: Session) -> None:
    families = parse(metrics_text(tx))
    empty = {"brain_markers_total", "brain_injections_total", "brain_entries", "brain_tick_last_stat"}
    assert {name: f.kind for name, f in families.items()} == {n: k for n, k in FAMILIES.items() if n not in empty and not n.startswith("brain_tick_last_")}
    assert by_label(families, "brain_tick_runs_total", "outcome") == {"ok": 0, "failed": 0}
    assert single(families, "brain_embedding_chunks_written_total") == 0
    assert by_label(families, "brain_tick_queue_requests", "status") == {"pending": 0, "running": 0, "completed": 0, "failed": 0}
    assert single(families, "brain_projects") == 0


# -- GET /metrics over HTTP ---------------------------------------------------------------


def test_metrics_over_http_need_the_token_unless_public(tmp_path: Path, settings: Settings, db: Session) -> None:
    _record(db, finished=dt.datetime.now(UTC), seconds=3, arcs_scanned=5, stats={"promotions": 2})
    db.commit()
    secured = settings.with_overrides(tokens=[TOKEN])
    with _serving(secured) as base:
        bare = HTTP.get(f"{base}/metrics")
        assert bare.status_code == 401 and bare.json() == {"detail": "missing bearer token"}
        assert HTTP.get(f"{base}/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
        answer = HTTP.get(f"{base}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == CONTENT_TYPE_LATEST
        families = parse(answer.text)
        assert by_label(families, "brain_tick_runs_total", "outcome") == {"ok": 1, "failed": 0}
        assert single(families, "brain_tick_last_arcs_scanned") == 5 and single(families, "brain_tick_last_duration_seconds") == 3
        assert by_label(families, "brain_tick_last_stat", "key") == {"promotions": 2}

    with _serving(secured.with_overrides(metrics_public=True)) as base:
        public = HTTP.get(f"{base}/metrics")
        assert public.status_code == 200 and parse(public.text)["brain_tick_runs_total"].samples
        assert HTTP.get(f"{base}/projects").status_code == 401  # only the metrics are public


def test_metrics_answer_503_when_the_database_is_gone(tmp_path: Path) -> None:
    from brain_api.app import create_app
    from tests.support.harness import make_settings

    settings = make_settings(tmp_path, "postgresql://brain@127.0.0.1:1/brain", metrics_public=True)
    Vault(settings.vault).scaffold()
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        response = client.get("/metrics")
        assert response.status_code == 503 and response.json()["detail"].startswith("database unavailable: ")


def _counters(families: dict[str, Family]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample that must never go down: counters' totals, histograms' buckets, counts and sums."""
    out = {}
    for name, family in families.items():
        if (family.kind == "counter" and name.endswith("_total")) or (family.kind == "histogram" and not name.endswith("_created")):
            out.update({(name, labels): value for labels, value in family.samples.items()})
    return out


def test_every_counter_is_monotonic_across_a_tick_and_requests_are_counted_by_route(settings: Settings, client: TestClient) -> None:
    _arcs(settings)
    assert client.post("/marker", json={"type": "lesson", "content": "Pin the parser version", "attrs": {"project": "api"}}).status_code == 201
    before = parse(client.get("/metrics").text)
    [(labels, value)] = before["brain_build_info"].samples.items()
    assert value == 1 and dict(labels)["version"] == "0.1.0" and "process_resident_memory_bytes" in before
    assert by_label(before, "brain_markers_total", "type") == {"lesson": 1}

    assert brain(settings, "tick", "--no-ai").exit_code == 0
    assert client.get("/entries/no-such-entry").status_code == 404
    assert client.get("/feed", params={"project": "api"}).status_code == 200
    after = parse(client.get("/metrics").text)

    old, new = _counters(before), _counters(after)
    assert old and all(new.get(key, -1) >= value for key, value in old.items()), [k for k, v in old.items() if new.get(k, -1) < v]
    ticks_before, ticks_after = by_label(before, "brain_tick_runs_total", "outcome"), by_label(after, "brain_tick_runs_total", "outcome")
    assert ticks_after["ok"] == ticks_before["ok"] + 1, (ticks_before, ticks_after)

    # The process's counters hold every app this process served (the tests' too): compare with before.
    def added(name: str) -> dict[tuple[tuple[str, str], ...], float]:
        return {
            k: v - before.get(name, Family("", "")).samples.get(k, 0)
            for k, v in after[name].samples.items()
            if v != before.get(name, Family("", "")).samples.get(k, 0)
        }

    assert added("brain_http_requests_total")[(("method", "GET"), ("route", "/entries/{entry_id:path}"), ("status", "404"))] == 1  # the template
    assert "no-such-entry" not in client.get("/metrics").text  # never the path
    assert added("brain_http_request_duration_seconds_count")[(("method", "GET"), ("route", "/feed"))] == 1
    assert sum(added("brain_feed_answers_total").values()) == 1


def test_several_workers_sum_their_counters_in_every_scrape(served: Served) -> None:
    """A request reaches one worker and the scrape maybe another: every scrape counts every worker's requests."""
    headers = {"Authorization": f"Bearer {served.settings.tokens[0]}"} if served.settings.tokens else {}

    def health_requests() -> float:
        families = parse(HTTP.get(f"{served.base}/metrics", headers=headers).text)
        assert "brain_build_info" in families
        samples = families["brain_http_requests_total"].samples
        return sum(v for labels, v in samples.items() if dict(labels)["route"] == "/health")

    start = health_requests()
    for _ in range(12):
        assert HTTP.get(f"{served.base}/health").status_code == 200
    assert [health_requests() for _ in range(4)] == [start + 12] * 4


# -- recording real ticks -------------------------------------------------------------


def test_brain_tick_records_one_successful_run(settings: Settings, db: Session, client: TestClient) -> None:
    _arcs(settings)
    before = dt.datetime.now(UTC)
    result = brain(settings, "tick", "--no-ai")
    after = dt.datetime.now(UTC)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    [run] = _runs(db)
    assert (run.source, run.ok, run.error, run.dry_run, run.use_ai) == ("brain-cli", True, None, False, False)
    assert before <= run.started_at <= run.finished_at <= after
    assert run.duration_ms == round((run.finished_at - run.started_at).total_seconds() * 1000)
    assert run.arcs_scanned == summary["arcs_scanned"] == 3
    assert run.stats == _numeric(summary["stats"])

    families = parse(client.get("/metrics").text)
    assert by_label(families, "brain_tick_runs_total", "outcome") == {"ok": 1, "failed": 0}
    assert single(families, "brain_tick_last_success_timestamp_seconds") == run.finished_at.timestamp()
    assert single(families, "brain_tick_last_duration_seconds") == run.duration_ms / 1000
    assert single(families, "brain_tick_last_arcs_scanned") == 3
    assert by_label(families, "brain_tick_last_stat", "key") == {k: float(v) for k, v in _numeric(summary["stats"]).items() if k != "dry_run"}
    assert by_label(families, "brain_entries", "kind")["arc"] == 3


def test_a_tick_that_raises_records_a_failed_run_and_reraises(settings: Settings, db: Session, client: TestClient) -> None:
    vault = _arcs(settings)
    # A real failure: a folder where the tick writes hot-arcs.md.
    (Path(settings.vault) / "brain-feed" / "hot-arcs.md").mkdir()
    engine = make_engine(settings.database_url or "", pooled=False)
    try:
        with pytest.raises(IsADirectoryError):
            run_tick_and_warm(engine, vault, settings, use_ai=False, dry_run=False, source="brain-ops-loop")
    finally:
        engine.dispose()
    [run] = _runs(db)
    assert (run.source, run.ok, run.dry_run, run.arcs_scanned, run.stats) == ("brain-ops-loop", False, False, 0, {})
    assert run.error.startswith("IsADirectoryError: ") and "hot-arcs.md" in run.error
    assert run.duration_ms >= 0 and run.finished_at >= run.started_at

    families = parse(client.get("/metrics").text)
    assert by_label(families, "brain_tick_runs_total", "outcome") == {"ok": 0, "failed": 1}
    assert single(families, "brain_tick_last_success_timestamp_seconds") is None


def test_the_drain_records_each_bucket_as_brain_drain(settings: Settings, db: Session, client: TestClient) -> None:
    _arcs(settings)
    assert client.post("/tick").status_code == 202
    assert client.post("/tick", params={"dry_run": "true", "no_ai": "true"}).status_code == 202
    (Path(settings.vault) / "brain-feed" / "hot-arcs.md").mkdir()  # the full tick fails, the dry run writes nothing
    result = brain(settings, "tick-drain")
    assert result.exit_code == 1, result.stderr
    runs = _runs(db)
    assert sorted((r.source, r.dry_run, r.use_ai, r.ok) for r in runs) == [("brain-drain", False, True, False), ("brain-drain", True, False, True)]
    dry = next(r for r in runs if r.dry_run)
    assert dry.arcs_scanned == 3 and dry.error is None


@pytest.mark.own_database
def test_a_tick_whose_health_cannot_be_recorded_still_succeeds(settings: Settings, db: Session) -> None:
    vault = _arcs(settings)
    db.execute(text("DROP TABLE tick_runs"))  # a real failure of the recording, on a database of this test's own
    db.commit()
    progress = ProgressRecorder()
    engine = make_engine(settings.database_url or "", pooled=False)
    try:
        summary = run_tick_and_warm(engine, vault, settings, use_ai=False, dry_run=False, progress=progress)
    finally:
        engine.dispose()
    assert summary.arcs_scanned == 3
    assert any(m.startswith("could not record the tick's health: ProgrammingError: ") and "tick_runs" in m for m in progress.said), progress.said


def test_the_projects_gauge_counts_what_get_projects_lists(client) -> None:
    """A marker naming the bare key of a repository already known records a mention, not a second project."""
    for attrs in ({"repo": "acme/gadget"}, {"project": "gadget"}, {"project": "loose"}):
        assert client.post("/marker", json={"type": "lesson", "content": f"about {attrs}", "attrs": attrs}).status_code == 201
    listed = client.get("/projects").json()["count"]
    assert listed == 2  # acme/gadget and loose
    assert single(parse(client.get("/metrics").text), "brain_projects") == listed
