"""GET /feed?project=: the scope contract, rebuild equivalence, unknown/ambiguous/malformed projects.

Data is planted through the real writers: POST /marker for lessons, decisions,
signals and milestones; arc files rendered by ``brain_core.arcs`` (the
``brain cluster`` format); then ``brain tick --no-ai`` scores the arcs, writes
intents and refreshes the index, exactly as in production.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from brain_core.vault import frontmatter
from brain_core.arcs import ArcSession, build_plan, render_arc
from brain_core.markers import Attribution, parse_request
from brain_core.vault.logs import render_log_entry
from brain_cli.cli import app
from brain_kernel.settings import Settings
from brain_kernel.vault import Vault

runner = CliRunner()
NOW = dt.datetime.now(dt.timezone.utc)

# project id -> (attrs sent with markers, arc identity (key, repo))
PROJECTS: dict[str, tuple[dict[str, str], tuple[str, str | None]]] = {
    "org1/api": ({"repo": "org1/api"}, ("api", "org1/api")),
    "org2/api": ({"project": "org2/api"}, ("api", "org2/api")),
    "acme/web": ({"repo": "acme/web"}, ("web", "acme/web")),
    "acme/billing": ({"project": "billing", "repo": "acme/billing"}, ("billing", "acme/billing")),
    "tools/cli": ({"repo": "https://github.com/tools/cli.git"}, ("cli", "tools/cli")),
    "infra": ({"project": "infra"}, ("infra", None)),
}


def token() -> str:
    return "tk" + uuid.uuid4().hex[:14]


@dataclass
class Planted:
    owned: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # project id -> tokens in range
    out_of_range: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    unattributed: set[str] = field(default_factory=set)  # lessons, arcs, decisions, milestones of no project (or an ambiguous key)
    fleet: set[str] = field(default_factory=set)  # fleet-wide signals
    inject_all: set[str] = field(default_factory=set)
    inject_for: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    tombstoned: set[str] = field(default_factory=set)
    survivor: str = ""
    tombstone_id: str = ""

    def everything(self) -> set[str]:
        out = set(self.unattributed) | self.fleet | self.inject_all | self.tombstoned
        for group in (self.owned, self.out_of_range, self.inject_for):
            for tokens in group.values():
                out |= tokens
        return out


def _post(client, type_: str, content: str, **attrs: str) -> dict:
    r = client.post("/marker", json={"type": type_, "content": content, "attrs": attrs})
    assert r.status_code == 201, r.text
    return r.json()


def _session(sid: str, key: str | None, repo: str | None, prompt: str, hours_ago: float, tools: int = 20) -> ArcSession:
    start = NOW - dt.timedelta(hours=hours_ago)
    return ArcSession(
        session_id=sid,
        project=key,
        repo=repo,
        project_source="git" if key else "unresolved",
        cwd=f"/home/op/dev/{key}" if key else f"/tmp/scratch-{sid}",
        start=start,
        end=start + dt.timedelta(minutes=40),
        num_tool_calls=tools,
        num_user_turns=6,
        first_user_prompt=prompt,
    )


def _write_arc(vault: Vault, sessions: list[ArcSession]) -> str:
    plan = build_plan(sessions)
    vault.write_atomic(plan.vault_path, render_arc(plan))
    return plan.cluster_id


def plant(client, settings: Settings) -> Planted:
    vault = Vault(settings.vault)
    p = Planted()
    for pid, (attrs, (key, repo)) in PROJECTS.items():
        for i in range(2):
            t = token()
            _write_arc(vault, [_session(f"{pid}-s{i}", key, repo, f"Implement the {t} pipeline for users", hours_ago=2 + i)])
            p.owned[pid].add(t)
        for _ in range(2):
            t = token()
            _post(client, "lesson", f"Lesson learned: {t} matters here.", **attrs)
            p.owned[pid].add(t)
        t = token()
        _post(client, "decision", f"We decided on {t} because reasons.", title=f"Adopt {t}", **attrs)
        p.owned[pid].add(t)
        t = token()
        _post(client, "signal", f"Watch out for {t}.", title=f"Alert {t}", severity="alert", **attrs)
        p.owned[pid].add(t)
        t = token()
        _post(client, "milestone", f"Shipped {t} to production.", **attrs)
        p.owned[pid].add(t)
        # A lesson older than the lesson window (appended through the marker format).
        t = token()
        old = NOW - dt.timedelta(days=40)
        req = parse_request("lesson", f"Ancient lesson {t}.", attrs, max_chars=4096)
        who = Attribution(key, repo)
        vault.append(f"left/reference/lessons-{old.date().isoformat()}.md", render_log_entry("lesson", req, who, marker_id=uuid.uuid4().hex, at=old))
        p.out_of_range[pid].add(t)

    # A merged arc holding web (primary) and billing keeps both projects.
    t = token()
    _write_arc(
        vault,
        [
            _session("merge-w1", "web", "acme/web", "Unify the checkout flow", hours_ago=1),
            _session("merge-w2", "web", "acme/web", f"Unify the {t} checkout", hours_ago=1.5),
            _session("merge-b1", "billing", "acme/billing", "Unify the checkout flow", hours_ago=1.2),
        ],
    )
    p.owned["acme/web"].add(t)
    p.owned["acme/billing"].add(t)

    # A tombstone (merged into a live web arc) is not a live entry.
    t = token()
    p.survivor = _write_arc(vault, [_session("survivor", "web", "acme/web", "Refine the web survivor arc", hours_ago=3)])
    plan = build_plan([_session("gone", "cli", "tools/cli", f"Old {t} thread", hours_ago=4)])
    p.tombstone_id = plan.cluster_id
    vault.write_atomic(
        plan.vault_path.replace(".md", ".merged.md"),
        frontmatter.update(render_arc(plan), {"merged_into": p.survivor}),
    )
    p.tombstoned.add(t)

    # Unattributed lesson, arc, decision, milestone; and a lesson naming only the ambiguous key "api".
    for type_ in ("lesson", "decision", "milestone"):
        t = token()
        _post(client, type_, f"Nobody owns {t}.", title=f"Orphan {t}")
        p.unattributed.add(t)
    t = token()
    _write_arc(vault, [_session("orphan", None, None, f"Poke at the {t} script", hours_ago=2)])
    p.unattributed.add(t)
    t = token()
    _post(client, "lesson", f"Which api? {t}.", project="api")
    p.unattributed.add(t)

    # Fleet-wide signals: explicit scope fleet, and a signal with no project at all.
    t = token()
    _post(client, "signal", f"Fleet-wide {t}.", title=f"Fleet {t}", severity="critical", scope="fleet")
    p.fleet.add(t)
    t = token()
    _post(client, "signal", f"Nobody in particular {t}.", title=f"Loose {t}")
    p.fleet.add(t)

    # Inject blocks: one for everyone, one targeted at org1/api.
    t = token()
    vault.write_atomic("brain-feed/inject/all.md", frontmatter.render({"id": "inject-all", "title": f"Everyone {t}", "priority": 9, "target": "all"}, f"Read {t} first.\n"))
    p.inject_all.add(t)
    t = token()
    vault.write_atomic("brain-feed/inject/org1.md", frontmatter.render({"id": "inject-org1", "title": f"Org1 {t}", "target": "org1/api"}, f"Only org1 {t}.\n"))
    p.inject_for["org1/api"].add(t)
    return p


def run_cli(settings: Settings, *args: str) -> dict:
    result = runner.invoke(app, [*args, "--vault", str(settings.vault), "--database-url", str(settings.database_url)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def planted(client, settings: Settings) -> Planted:
    p = plant(client, settings)
    summary = run_cli(settings, "tick", "--no-ai")
    assert summary["index"]["refreshed"] is True
    assert set(PROJECTS) <= set(summary["active_projects"])
    return p


def _feed(client, project: str, **params: object) -> dict:
    r = client.get("/feed", params={"project": project, **params})
    assert r.status_code == 200, r.text
    return r.json()


def _stable(feed: dict) -> dict:
    return {k: v for k, v in feed.items() if k != "generated_at"}


def test_each_project_feed_holds_its_memory_and_nothing_unrelated(client, planted: Planted) -> None:
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
        for entry in feed["entries"]:
            assert entry["metadata"]["scope"] in ("project", "fleet")
            if entry["metadata"]["scope"] == "project":
                assert entry["metadata"]["project"] == pid
        titles = [e["title"] for e in feed["entries"]]
        assert "Active Hot Arcs" in titles
        hot = next(e for e in feed["entries"] if e["title"] == "Active Hot Arcs")
        assert hot["content"].splitlines()[0] == "| Arc ID | Heat | Region | Status | Project | What it is |"
        intent = next(e for e in feed["entries"] if e["id"] == "project-intent")
        assert intent["content"].startswith("Focus: ")
        # P's own signal comes before the fleet-wide ones.
        kinds = [e["metadata"]["scope"] for e in feed["entries"] if e["id"].startswith("signal:")]
        assert kinds == sorted(kinds, key=lambda s: s != "project")


def test_unique_short_keys_and_slugs_give_the_same_feed(client, planted: Planted) -> None:
    assert _stable(_feed(client, "web")) ["project"] == _stable(_feed(client, "acme/web"))["project"]
    assert _stable(_feed(client, "web"))["entries"] == _stable(_feed(client, "ACME/Web"))["entries"]


def test_top_n_and_lesson_days_bound_the_feed(client, planted: Planted) -> None:
    feed = _feed(client, "acme/web", top_n=1)
    assert len(feed["hot_arcs"]) == 1
    wide = json.dumps(_feed(client, "org1/api", lesson_days=60))
    assert all(t in wide for t in planted.out_of_range["org1/api"])


def test_after_a_reindex_of_a_wiped_index_the_same_feeds_come_back(client, planted: Planted, settings: Settings, db: Session) -> None:
    refs = [*PROJECTS, "web", "nobody-here"]
    before = {ref: _stable(_feed(client, ref)) for ref in refs}
    global_before = _stable(client.get("/feed").json())
    projects_before = client.get("/projects").json()
    db.execute(text("DELETE FROM entries"))
    db.execute(text("DELETE FROM projects"))
    db.commit()
    assert _feed(client, "acme/web")["project"]["known"] is False
    summary = run_cli(settings, "reindex")
    assert summary["entries"] > 0 and summary["projects"] >= len(PROJECTS)
    after = {ref: _stable(_feed(client, ref)) for ref in refs}
    for ref in refs:
        assert after[ref] == before[ref], ref
    assert _stable(client.get("/feed").json()) == global_before
    assert client.get("/projects").json() == projects_before


def test_unknown_project_is_known_false_with_fleet_signals_only(client, planted: Planted) -> None:
    feed = _feed(client, "nobody-here")
    assert feed["project"] == {"key": "nobody-here", "repo": None, "known": False, "last_active": None}
    body = json.dumps(feed)
    assert "No project memory yet" in body
    assert all(t in body for t in planted.fleet)
    assert not [t for t in planted.everything() - planted.fleet - planted.inject_all if t in body]
    assert feed["hot_arcs"] == []


def test_ambiguous_short_key_is_409_with_candidates(client, planted: Planted) -> None:
    r = client.get("/feed", params={"project": "api"})
    assert r.status_code == 409
    assert r.json()["candidates"] == ["org1/api", "org2/api"]
    assert "detail" in r.json()


@pytest.mark.parametrize("ref", ["../etc", "a/../b", "/abs/path", "has space", "x\x01y", "a//b"])
def test_malformed_project_is_422(client, ref: str) -> None:
    r = client.get("/feed", params={"project": ref})
    assert r.status_code == 422, (ref, r.text)
    assert "detail" in r.json()


def test_global_feed_keeps_its_shape_and_reads_the_keeper_files(client, planted: Planted, settings: Settings) -> None:
    feed = client.get("/feed").json()
    assert set(feed) == {"hot_arcs", "inject_blocks", "entries", "generated_at", "hash", "entry_count", "vault_root"}
    ids = {e["id"] for e in feed["entries"]}
    assert {"hot-arcs", "signals", "lessons", "operator-intent"} <= ids
    hot = next(e for e in feed["entries"] if e["id"] == "hot-arcs")
    assert hot["title"] == "Active Hot Arcs" and hot["priority"] == 10 and hot["ttl"] == 3600
    assert "| Arc ID | Heat | Region | Status | Project | What it is |" in hot["content"]
    assert len(feed["hot_arcs"]) == 10
    assert [b["id"] for b in feed["inject_blocks"]] == ["inject-all"]
    assert feed["vault_root"] == str(Path(settings.vault).resolve())
    for path in ("hot-arcs", "signals", "lessons", "inject-blocks", "intent"):
        doc = frontmatter.parse((settings.vault / "brain-feed" / f"{path}.md").read_text())
        assert {"id", "title", "priority", "ttl", "severity"} <= set(doc.meta)


def test_per_project_intents_are_written_for_active_projects(planted: Planted, settings: Settings) -> None:
    for pid in PROJECTS:
        path = settings.vault / "brain-feed" / "projects" / pid / "intent.md"
        doc = frontmatter.parse(path.read_text())
        assert doc.meta["source"] == "derived"
        assert doc.meta["focus"].startswith("Focus: ")
        assert doc.body.strip().endswith((".", "!", "?"))


def test_the_feed_reads_no_vault_file(client, planted: Planted, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
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
    """Rendered once, the same for every request, and short enough for psycopg's query cache (4096)."""
    import re

    from sqlalchemy.dialects.postgresql import psycopg

    from brain_kernel.feed_repo import _project_sql

    for with_repo in (True, False):
        sql = _project_sql(psycopg.dialect(), with_repo)
        assert set(re.findall(r"%\((\w+)\)s", sql)) == {"key", "keys", "since", "top_n"} | ({"repo"} if with_repo else set())
        assert "POSTCOMPILE" not in sql
        assert len(sql) < 4096


def test_a_flood_of_lessons_leaves_the_decisions_and_milestones_in_the_feed(client, db: Session) -> None:
    """Recent lessons, decisions and milestones each have their own budget (800 newer lessons used to push the others out)."""
    from brain_core.entries import EntryRecord
    from brain_kernel.index import touch_project, upsert_entries

    def row(kind: str, n: int, hours_ago: float) -> EntryRecord:
        path = f"left/reference/lessons-flood.md#{n}" if kind == "lesson" else f"left/{kind}/{n}.md"
        return EntryRecord(id=f"{kind}:{path}", kind=kind, vault_path=path, title=f"{kind} {n}", content=f"{kind} {n} body",
                           project="api", repo="org1/api", occurred_at=NOW - dt.timedelta(hours=hours_ago))

    upsert_entries(db, [row("decision", 1, 48), row("milestone", 1, 47)] + [row("lesson", n, 1 + n / 1000) for n in range(800)])
    touch_project(db, "api", "org1/api", at=NOW)
    db.commit()
    feed = _feed(client, "org1/api")
    by_id = {e["id"]: e for e in feed["entries"]}
    assert "decision 1" in by_id["decisions"]["content"] and "milestone 1" in by_id["milestones"]["content"]
    assert by_id["lessons"]["metadata"]["count"] == 200  # each kind keeps its own 200
