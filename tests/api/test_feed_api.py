"""GET /feed?project=: the scope contract, rebuild equivalence, unknown/ambiguous/malformed projects.

Data is planted through the real writers: POST /marker for lessons, decisions,
signals and milestones; arc files rendered by ``brain_core.arcs`` (the
``brain cluster`` format); then ``brain tick --no-ai`` scores the arcs, writes
intents and refreshes the index, exactly as in production.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from brain_core.vault import frontmatter
from brain_kernel.settings import Settings
from tests.support.harness import PlantedImage, cloned_database, make_settings
from tests.support.planting import PLANTED_AT, PROJECTS, Planted, run_cli, stable

NOW = PLANTED_AT


@dataclass(frozen=True)
class World:
    """The module's planted memory behind its own app, built once: for tests that only read it."""

    client: object
    settings: Settings
    planted: Planted


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, _planted_image: PlantedImage) -> Iterator[World]:
    from fastapi.testclient import TestClient

    from brain_api.app import create_app

    with cloned_database(pg_admin_url, _planted_image.database_url) as url:
        settings = make_settings(tmp_path_factory.mktemp("world"), url)
        planted = _planted_image.restore(settings)
        with TestClient(create_app(settings)) as client:
            yield World(client, settings, planted)


def _feed(client, project: str, **params: object) -> dict:
    r = client.get("/feed", params={"project": project, **params})
    assert r.status_code == 200, r.text
    return r.json()


def test_each_project_feed_holds_its_memory_and_nothing_unrelated(world: World) -> None:
    client, planted = world.client, world.planted
    everything = planted.everything()
    for pid in PROJECTS:
        feed = _feed(client, pid)
        body = json.dumps(feed)
        allowed = planted.owned[pid] | planted.fleet | planted.inject_all | planted.inject_for[pid] | planted.out_of_range[pid]
        missing = [t for t in planted.owned[pid] if t not in body]
        assert not missing, f"{pid} feed lacks its own tokens {missing}"
        leaked = [t for t in everything - allowed if t in body]
        assert not leaked, f"{pid} feed leaks {leaked}"
        assert not [t for t in planted.out_of_range[pid] if t in body], "a lesson outside lesson_days came back"
        assert feed["scope"] == "project"
        assert feed["project"]["known"] is True
        assert feed["project"]["repo"] == (None if pid == "infra" else pid)
        assert feed["project"]["last_active"] is not None
        for fleet_token in planted.fleet:
            entry = next(e for e in feed["entries"] if fleet_token in e["title"] or fleet_token in e["content"])
            assert entry["metadata"]["scope"] == "fleet"
        for entry in feed["hot_arcs"] + feed["inject_blocks"] + feed["entries"]:
            assert entry["metadata"]["scope"] in ("project", "fleet")
            if entry["metadata"]["scope"] == "project":
                assert entry["metadata"]["project"] == pid
        assert [e["title"] for e in feed["hot_arcs"]] == ["Active Hot Arcs"]  # upstream's bucket, by id
        hot = feed["hot_arcs"][0]
        assert hot["content"].splitlines()[0] == "| Arc ID | Heat | Region | Status | Project | What it is |"
        intent = next(e for e in feed["entries"] if e["id"] == "project-intent")
        assert intent["content"].startswith("Focus: ")
        # P's own signal comes before the fleet-wide ones.
        kinds = [e["metadata"]["scope"] for e in feed["entries"] if e["id"].startswith("signal:")]
        assert kinds == sorted(kinds, key=lambda s: s != "project")


def test_unique_short_keys_and_slugs_give_the_same_feed(world: World) -> None:
    client = world.client
    assert stable(_feed(client, "web"))["project"] == stable(_feed(client, "acme/web"))["project"]
    assert stable(_feed(client, "web"))["entries"] == stable(_feed(client, "ACME/Web"))["entries"]


def test_top_n_and_lesson_days_bound_the_feed(world: World) -> None:
    client, planted = world.client, world.planted
    feed = _feed(client, "acme/web", top_n=1)
    assert len(feed["arcs"]) == 1 and [e["id"] for e in feed["hot_arcs"]] == ["hot-arcs"]
    wide = json.dumps(_feed(client, "org1/api", lesson_days=60))
    assert all(t in wide for t in planted.out_of_range["org1/api"])


def test_after_a_reindex_of_a_wiped_index_the_same_feeds_come_back(client, planted: Planted, settings: Settings, db: Session) -> None:
    refs = [*PROJECTS, "web", "nobody-here"]
    before = {ref: stable(_feed(client, ref)) for ref in refs}
    global_before = stable(client.get("/feed").json())
    projects_before = client.get("/projects").json()
    db.execute(text("DELETE FROM entries"))
    db.execute(text("DELETE FROM projects"))
    db.commit()
    assert _feed(client, "acme/web")["project"]["known"] is False
    summary = run_cli(settings, "reindex")
    assert summary["entries"] > 0 and summary["projects"] >= len(PROJECTS)
    after = {ref: stable(_feed(client, ref)) for ref in refs}
    for ref in refs:
        assert after[ref] == before[ref], ref
    assert stable(client.get("/feed").json()) == global_before
    assert client.get("/projects").json() == projects_before


def test_unknown_project_is_known_false_with_fleet_signals_only(world: World) -> None:
    client, planted = world.client, world.planted
    feed = _feed(client, "nobody-here")
    assert feed["project"] == {"key": "nobody-here", "repo": None, "known": False, "last_active": None}
    body = json.dumps(feed)
    assert "No project memory yet" in body
    assert all(t in body for t in planted.fleet)
    assert not [t for t in planted.everything() - planted.fleet - planted.inject_all if t in body]
    assert feed["hot_arcs"] == [] and feed["arcs"] == []


def test_ambiguous_short_key_is_409_with_candidates(world: World) -> None:
    client = world.client
    r = client.get("/feed", params={"project": "api"})
    assert r.status_code == 409
    assert r.json()["candidates"] == ["org1/api", "org2/api"]
    assert "detail" in r.json()


@pytest.mark.parametrize("ref", ["../etc", "a/../b", "/abs/path", "has space", "x\x01y", "a//b"])
def test_malformed_project_is_422(client, ref: str) -> None:
    r = client.get("/feed", params={"project": ref})
    assert r.status_code == 422, (ref, r.text)
    assert "detail" in r.json()


def test_global_feed_keeps_its_shape_and_reads_the_keeper_files(world: World) -> None:
    client, settings = world.client, world.settings
    feed = client.get("/feed").json()
    assert set(feed) == {"hot_arcs", "inject_blocks", "entries", "generated_at", "hash", "entry_count", "vault_root", "arcs", "blocks"}
    ids = {e["id"] for e in feed["entries"]}
    assert {"signals", "lessons", "operator-intent", "last-tick-diff"} <= ids and not any(i.startswith("hot-arcs") for i in ids)  # each entry in one bucket
    hot = next(e for e in feed["hot_arcs"] if e["id"].startswith("hot-arcs-"))
    assert hot["title"] == "Active Hot Arcs" and hot["priority"] == 10 and hot["ttl"] == 3600
    assert "| Arc ID | Heat | Region | Status | Project | What it is |" in hot["content"]
    assert len(feed["arcs"]) == 10 and [e["title"] for e in feed["hot_arcs"]] == ["Active Hot Arcs"]
    assert [b["id"] for b in feed["blocks"]] == ["inject-all"] and [e["id"] for e in feed["inject_blocks"]] == ["inject"]
    assert feed["vault_root"] == str(Path(settings.vault).resolve())
    for path in ("hot-arcs", "signals", "lessons", "inject", "intent", "last-tick-diff"):
        doc = frontmatter.parse((settings.vault / "brain-feed" / f"{path}.md").read_text())
        assert {"id", "title", "priority", "ttl", "severity"} <= set(doc.meta)


def test_per_project_intents_are_written_for_active_projects(world: World) -> None:
    settings = world.settings
    for pid in PROJECTS:
        path = settings.vault / "brain-feed" / "projects" / pid / "intent.md"
        doc = frontmatter.parse(path.read_text())
        assert doc.meta["source"] == "derived"
        assert doc.meta["focus"].startswith("Focus: ")
        assert doc.body.strip().endswith((".", "!", "?"))


def test_the_feed_reads_no_vault_file(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    client, settings = world.client, world.settings
    import builtins
    import io
    import pathlib

    opened: list[str] = []
    real_open, real_read = builtins.open, pathlib.Path.read_text
    root = str(Path(settings.vault).resolve())

    def spy_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(file).startswith(root):
            opened.append(str(file))
        return real_open(file, *args, **kwargs)

    def spy_read(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(self.resolve()).startswith(root):
            opened.append(str(self))
        return real_read(self, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(io, "open", spy_open)
    monkeypatch.setattr(pathlib.Path, "read_text", spy_read)
    for pid in PROJECTS:
        _feed(client, pid)
    _feed(client, "nobody-here")
    assert opened == []


def test_the_feed_statement_is_one_fixed_text_with_only_request_values_bound() -> None:
    """The same for every request, and short enough for psycopg's query cache (4096)."""
    import re

    from brain_kernel.feed.feed_repo import PROJECT_SQL

    for with_repo, sql in PROJECT_SQL.items():
        assert set(re.findall(r"%\((\w+)\)s", sql)) == {"key", "keys", "since", "top_n", "now"} | ({"repo"} if with_repo else set())
        assert len(sql) < 4096


def test_a_flood_of_lessons_leaves_the_decisions_and_milestones_in_the_feed(client, db: Session) -> None:
    """Recent lessons, decisions and milestones each have their own budget (800 newer lessons used to push the others out)."""
    from brain_core.entries import EntryRecord
    from brain_kernel.index.entries import touch_project, upsert_entries

    def row(kind: str, n: int, hours_ago: float) -> EntryRecord:
        path = f"left/reference/lessons-flood.md#{n}" if kind == "lesson" else f"left/{kind}/{n}.md"
        return EntryRecord(
            id=f"{kind}:{path}",
            kind=kind,
            vault_path=path,
            title=f"{kind} {n}",
            content=f"{kind} {n} body",
            project="api",
            repo="org1/api",
            occurred_at=NOW - dt.timedelta(hours=hours_ago),
        )

    upsert_entries(db, [row("decision", 1, 48), row("milestone", 1, 47)] + [row("lesson", n, 1 + n / 1000) for n in range(800)])
    touch_project(db, "api", "org1/api", at=NOW)
    db.commit()
    feed = _feed(client, "org1/api")
    by_id = {e["id"]: e for e in feed["entries"]}
    assert "decision 1" in by_id["decisions"]["content"] and "milestone 1" in by_id["milestones"]["content"]
    assert by_id["lessons"]["metadata"]["count"] == 200  # each kind keeps its own 200
