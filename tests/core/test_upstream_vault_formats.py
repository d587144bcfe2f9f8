"""Upstream's vault formats (UPSTREAM.md section 4) as the kernel reads and writes them.

Each test pins one part of section 4 that no other test names: the scaffold
of ``brain init`` on a vault upstream made (real files in a tmp folder, the
real command), the folders the tick reads and the is-arc rule, an arc as
upstream's cluster.py wrote it, the frontmatter and bodies of the keeper's
feed files, and which inline markers become entries.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from sqlalchemy.orm import Session
from typer.testing import CliRunner

from brain_cli.cli import app
from brain_core.arcs import ArcSession, plan_clusters, render_arc
from brain_core.entries import EntryRecord
from brain_core.feed.keeper_files import (
    feed_file_entry,
    render_fleet_intent_file,
    render_inject_file,
    render_last_tick_diff,
    render_signals_file,
)
from brain_core.heat import arc_activity
from brain_core.membership import inject_targets
from brain_core.vault import frontmatter
from brain_core.vault.layout import SCAFFOLD, is_arc, kind_of_path
from brain_core.vault.records import arc_record_of, inline_records
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_ops.keeper.tick import run_tick
from tests.support.harness import brain

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)
REPO = Path(__file__).resolve().parents[2]

# Files upstream's scaffold left in a vault (UPSTREAM.md 4.1), with text an operator may have edited since.
UPSTREAM_FILES = {
    "README.md": "# My brain\n\nEdited by hand.\n",
    "CLAUDE.md": "# Rules for agents\n\nNever delete arcs.\n",
    ".brain-schema": '{"version":"1","schema":"agentibrain@0.4.2","created_at":"2026-04-10T12:00:00+00:00"}',
    "raw/inbox/README.md": "# Inbox\n\nDrop notes here.\n",
    "brain-feed/README.md": "# Feed\n",
    "identity/about-me.template.md": "# About me\n",
    "left/_index.md": "# Left\n",
    "templates/mubs/BLOCKS.md": "# BLOCKS\n",
    "clusters/2026-04-10/_dashboard.md": "# Cluster Dashboard — 2026-04-10\n",
}

# An arc as upstream's cluster.py wrote it (UPSTREAM.md 4.2): keys in its order, the title unquoted (its colon
# makes the line no YAML mapping a strict parser takes), heat as text, signals as a string, edges as JSON.
UPSTREAM_ARC = """---
cluster_id: 2026-04-10-fix-auth-3f2a9c1b
title: Fix auth: the token refresh loop
region: left-hemisphere
status: active
heat: 7
source_sessions: [s-1, s-2]
project: api
created: 2026-04-10T09:12:44.123456+00:00
signals: {errors: 2, joy: 1, tools: 2400}
edges: [{"sibling": "2026-04-10-docs-aa11bb22"}]
synthesized: true
summary: Token refresh looped - fixed by caching the expiry
mitigates: [auth-loop, token-expiry]
replayed_from: 2026-04-01-first-auth-cccccccc
---
# Fix auth

Body.
"""


def test_brain_init_scaffolds_its_folders_into_an_upstream_vault_and_overwrites_nothing(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    for rel, text in UPSTREAM_FILES.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(text, encoding="utf-8")
    args = ["init", "--env-file", str(tmp_path / ".env"), "--template", str(REPO / ".env.example"), "--vault", str(vault)]
    for _ in range(2):  # a rerun is as safe as the first run
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["vault"] == str(vault.resolve())
        for rel, text in UPSTREAM_FILES.items():
            assert (vault / rel).read_text(encoding="utf-8") == text, rel
        for rel in SCAFFOLD:
            assert (vault / rel).is_dir(), rel
    # Upstream's tick request folders are not made (UPSTREAM.md 0.23): the kernel's tick queue is a table.
    assert not (vault / "brain-feed" / "ticks").exists()


def test_the_tick_reads_the_region_folders_and_clusters_and_is_arc_is_a_cluster_id_or_a_dated_name() -> None:
    # Recursively the region folders and clusters/<date>/: dated names are arcs, others standing documents.
    for region in ("bridge", "left", "right", "frontal-lobe", "pineal", "amygdala"):
        assert kind_of_path(f"{region}/deep/2026-04-10-auth-loop.md") == "arc", region
        assert kind_of_path(f"{region}/deep/notes.md") == "region", region
    assert kind_of_path("clusters/2026-04-10/2026-04-10-fix-auth-3f2a9c1b.md") == "arc"
    # A standing document with a cluster_id is an arc too; a signal file never is.
    assert is_arc("region", {"cluster_id": "x"}) and not is_arc("region", {"title": "Notes"})
    assert not is_arc("signal", {"cluster_id": "x", "type": "signal"})
    # Not at all: identity, templates, raw (but the inbox drain), the feed folder, READMEs and _ files.
    for rel in ("identity/about-me.md", "templates/decision.md", "raw/articles/x.md", "raw/inbox/note.md", "brain-feed/signals.md"):
        assert kind_of_path(rel) is None, rel
    assert kind_of_path("left/README.md") is None and kind_of_path("left/_index.md") is None
    # Upstream's dated lesson logs counted as arcs and were moved (UPSTREAM.md 8 item 8): here they are lesson logs.
    assert kind_of_path("left/reference/lessons-2026-04-10.md") == "lesson"
    # The daily notes are read for milestones only (test_markers_core: daily notes yield only milestones).
    assert kind_of_path("daily/2026-04-10.md") == "milestone"


def test_an_arc_upstreams_cluster_py_wrote_reads_with_every_key() -> None:
    path = "clusters/2026-04-10/2026-04-10-fix-auth-3f2a9c1b.md"
    doc = frontmatter.parse(UPSTREAM_ARC)
    arc = arc_record_of(doc, path)
    assert arc is not None and kind_of_path(path) == "arc"
    assert arc.title == "Fix auth: the token refresh loop"
    assert (arc.status, arc.heat, arc.meta["region"]) == ("active", 7.0, "left-hemisphere")
    assert arc.meta["cluster_id"] == "2026-04-10-fix-auth-3f2a9c1b"
    assert arc.meta["source_sessions"] == ["s-1", "s-2"]
    assert arc.meta["summary"] == "Token refresh looped - fixed by caching the expiry"
    assert arc.meta["replayed_from"] == "2026-04-01-first-auth-cccccccc"
    assert arc.project is None and arc.meta["legacy_project"] == "api"  # a basename project is not trusted (ADR 0012)
    activity = arc_activity(doc.meta)  # the signals string and the full-ISO created feed heat
    assert (activity.tool_calls, activity.joy_markers, activity.sessions) == (2400, 1, 2)
    assert activity.last_active == dt.datetime(2026, 4, 10, 9, 12, 44, 123456, tzinfo=dt.timezone.utc)


def test_a_new_arc_keeps_upstreams_keys_in_order_and_writes_the_kernels_values() -> None:
    start = dt.datetime(2026, 11, 29, 9, 0, tzinfo=dt.timezone.utc)
    session = ArcSession(
        session_id="s-1", project="api", repo="acme/api", start=start, end=start + dt.timedelta(minutes=30), project_source="git",
        first_user_prompt="Fix auth: the token refresh loop",
    )  # fmt: skip
    (plan,) = plan_clusters([session])
    text = render_arc(plan)
    meta = frontmatter.parse(text).meta
    upstream_keys = ["cluster_id", "title", "region", "status", "heat", "source_sessions", "project", "created", "signals", "edges", "synthesized"]
    assert [k for k in meta if k in upstream_keys] == upstream_keys  # the kernel's own keys sit between them
    assert text.splitlines()[2] == "title: 'Fix auth: the token refresh loop'"  # quoted where YAML needs it (8 item 4)
    # The keeper places and scores a new arc (ADR 0014); counts are a map of the kernel's names; edges are @edge markers.
    assert (meta["region"], meta["status"], meta["heat"], meta["synthesized"], meta["edges"]) == ("frontal-lobe", "active", 0, False, [])
    assert isinstance(meta["signals"], dict) and meta["signals"]["sessions"] == 1


def _record(kind: str, content: str, **meta: object) -> EntryRecord:
    return EntryRecord(id=f"{kind}:left/x.md#{content[:8]}", kind=kind, vault_path="left/x.md", content=content, meta=dict(meta))


def test_the_keeper_feed_files_keep_upstreams_frontmatter_and_bodies() -> None:
    def head(text: str) -> tuple[object, ...]:
        meta = frontmatter.parse(text).meta
        return (meta["id"], meta["title"], meta["priority"], meta["ttl"], meta["severity"])

    inject = render_inject_file([_record("inject", "Run the tests first.", target="claude.md"), _record("inject", "Be brief.")], NOW)
    assert head(inject) == ("inject", "Brain Inject", 9, 3600, "info")
    assert frontmatter.parse(inject).body == "\n**[claude.md]** Run the tests first.\n\n**[all]** Be brief.\n"
    assert frontmatter.parse(render_inject_file([], NOW)).body.strip() == "No inject blocks."

    signal = EntryRecord(
        id="signal:left/x.md#1", kind="signal", vault_path="left/x.md", content="Disk 91% full\nmore", severity="warning", meta={"source": "df"}
    )
    signals = render_signals_file([signal], NOW)
    assert head(signals)[:4] == ("signals", "Active Signals", 8, 3600)
    lines = frontmatter.parse(signals).body.strip().splitlines()
    assert lines[0] == "## Signals — 2026-11-29" and lines[2].startswith("- **[warning]** (df) Disk 91% full")
    assert frontmatter.parse(render_signals_file([], NOW)).body.strip() == "No active signals."

    intent = render_fleet_intent_file("Shipping the login fix.", NOW, source="llm")
    assert head(intent) == ("operator-intent", "Operator Intent", 7, 1800, "info")
    assert frontmatter.parse(intent).body == "\n## What the operator is likely doing (2026-11-29 12:00 UTC)\n\nShipping the login fix.\n"

    diff = render_last_tick_diff(NOW, {"edges_added": 2, "signals_changed": 1, "merges_executed": 0}, health="7/10 — fine")
    assert head(diff) == ("last-tick-diff", "last-tick-diff", 5, 7200, "info")
    body = frontmatter.parse(diff).body.strip().splitlines()
    assert body[0] == "## Tick Diff — 2026-11-29T12:00:00Z"
    assert body[2:6] == ["Edges added: 2", "Signals changed: 1", "Merges executed: 0", "Health score: 7/10 — fine"]

    # The titles the client matches reach it through the feed's reader unchanged.
    titles = {feed_file_entry(f"brain-feed/{name}.md", text).title for name, text in (("intent", intent), ("last-tick-diff", diff), ("signals", signals))}
    assert titles == {"Operator Intent", "last-tick-diff", "Active Signals"}


def test_inline_markers_become_entries_by_type_with_upstreams_attributes() -> None:
    text = (
        "---\ntitle: Notes\ncreated: 2026-11-20\n---\n"
        "<!-- @hot heat=9 region=left -->\n<!-- @todo priority=high -->\n"
        "<!-- @lesson -->\nPin versions.\n<!-- @/lesson -->\n"
        "<!-- @decision date=2026-11-21 -->\nUse Postgres.\n<!-- @/decision -->\n"
        "<!-- @milestone status=done scope=api -->\nShipped.\n<!-- @/milestone -->\n"
        "<!-- @inject ttl_days=7 -->\nRead CLAUDE.md first.\n<!-- @/inject -->\n"
        '<!-- @signal severity=critical source=disk verify="df -h" -->\nDisk full\n<!-- @/signal -->\n'
        "<!-- @signal severity=resolved source=old-flake -->\nOld flake (CLEARED: fixed)\n<!-- @/signal -->\n"
        "<!-- @signal severity=warning source=tomb -->\nGone (CLEARED: by hand)\n<!-- @/signal -->\n"
    )
    rows = inline_records(frontmatter.parse(text), "left/notes.md", None)
    assert [r.kind for r in rows] == ["lesson", "decision", "milestone", "inject", "signal", "signal", "signal"]  # @hot and @todo: unused
    lesson, decision, milestone, inject, live, cleared, tomb = rows
    assert lesson.content == "Pin versions."
    assert decision.occurred_at == dt.datetime(2026, 11, 21, tzinfo=dt.timezone.utc)
    assert (milestone.status, milestone.meta["scope"]) == ("done", "api")
    assert inject_targets(inject) == ("all",) and inject.meta["ttl_days"] == "7"
    assert (live.severity, live.meta["source"], live.meta["verify"], live.status) == ("critical", "disk", "df -h", None)
    assert cleared.status == tomb.status == "resolved"  # severity=resolved, or (CLEARED: ...) in its content


def test_health_rows_are_upstreams_and_stay_in_the_feed_folder_beside_a_brain_etl_folder(settings: Settings, db: Session, tmp_path: Path) -> None:
    vault = Vault(settings.vault)
    vault.scaffold()
    (Path(settings.vault) / "brain-etl").mkdir()  # upstream wrote here when it existed, and read brain-feed/ (8 item 12)
    run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    for n, health in enumerate(("6/10 — quiet week", "4/10 — two stale signals", "6/10 — quiet week")):
        answer = tmp_path / f"answer-{n}.md"
        answer.write_text(f"### 1. Missing Edges\n\n### 5. Brain Health\n{health}\n")
        result = brain(settings, "apply", "--ai-output", str(answer))
        assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in vault.read_text("brain-feed/health.jsonl").splitlines()]
    assert len(rows) == 2  # one row per answer: the third is the first again
    assert {"timestamp", "score", "reason", "arcs", "signals", "lessons"} <= set(rows[0])
    assert [(r["score"], r["reason"]) for r in rows] == [(6, "quiet week"), (4, "two stale signals")]
    assert dt.datetime.fromisoformat(rows[0]["timestamp"].replace("Z", "+00:00")).tzinfo is not None
    assert list((Path(settings.vault) / "brain-etl").iterdir()) == []
