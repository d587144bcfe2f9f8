"""Attribution without the client's help, and legacy vaults: what today's fleet sends and keeps.

Today's client sends only ``session_id`` and ``source`` with a marker, and
upstream vaults keep arcs in region folders with a basename ``project:``.
The kernel attributes such markers through the session's transcript at write
time, or later when the session becomes known (extract, ``POST /sessions``),
and reads legacy arcs from every folder upstream's tick scans, trusting their
``project:`` only when it names exactly one known project.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from brain_core.vault import frontmatter
from brain_kernel.db.models import Entry, SessionRow
from brain_kernel.index.entries import entry_rows
from brain_kernel.index.rebuild import rebuild
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from tests.support.harness import brain
from tests.support.transcript_factory import make_repo, write_claude, write_claude_subagent

NOW = dt.datetime.now(dt.timezone.utc)


def _lesson(client, content: str, **attrs: str) -> dict:
    r = client.post("/marker", json={"type": "lesson", "content": content, "attrs": attrs})
    assert r.status_code == 201, r.text
    return r.json()


def _feed(client, ref: str) -> str:
    r = client.get("/feed", params={"project": ref})
    assert r.status_code == 200, r.text
    return r.text


def test_a_session_only_marker_is_attributed_through_its_claude_transcript(client, settings: Settings, db: Session) -> None:
    repo = make_repo(settings.user_home / "dev" / "widget", "git@github.com:acme/widget.git")
    (repo / "src").mkdir()
    write_claude(settings.resolved_claude_dir, "sess-1", str(repo / "src"), NOW - dt.timedelta(minutes=5), ["Fix the widget parser"])
    first = _lesson(client, "Parsers need fuzzing.", session_id="sess-1", source="claude-code")
    assert first["project"] == "widget"
    [row] = db.scalars(select(Entry).where(Entry.kind == "lesson")).all()
    assert (row.project, row.repo, row.meta["project_source"]) == ("widget", "acme/widget", "git")
    # The session is now in the index: the next marker of it needs no transcript at all.
    for path in settings.resolved_claude_dir.rglob("sess-1.jsonl"):
        path.unlink()
    assert _lesson(client, "Second lesson of the session.", session_id="sess-1")["project"] == "widget"
    assert "Parsers need fuzzing." in _feed(client, "acme/widget")


def test_a_lesson_posted_before_its_session_was_known_joins_the_feed_when_extract_records_it(client, settings: Settings, db: Session) -> None:
    written = _lesson(client, "Written before anyone knew the session.", session_id="sess-2", source="claude-code")
    assert written["project"] is None
    repo = make_repo(settings.user_home / "dev" / "gadget", "https://github.com/acme/gadget.git")
    assert "Written before anyone knew" not in _feed(client, "acme/gadget")
    write_claude(settings.resolved_claude_dir, "sess-2", str(repo), NOW - dt.timedelta(minutes=30), ["Build the gadget", "Add tests", "Ship it"])
    done = brain(settings, "extract", "--since", "2d", "--min-turns", "1")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["sessions_recorded"] == 1
    feed = _feed(client, "acme/gadget")
    assert "Written before anyone knew the session." in feed  # the stored answer was invalidated too
    db.expire_all()
    [row] = db.scalars(select(Entry).where(Entry.kind == "lesson")).all()
    assert (row.project, row.repo, row.meta["project_source"]) == ("gadget", "acme/gadget", "session")
    # A rebuild from the vault alone derives the same row (the vault still says unattributed).
    before = entry_rows(db)
    rebuild(db, Vault(settings.vault))
    db.commit()
    assert entry_rows(db) == before


def test_posting_a_session_attributes_its_earlier_markers(client, db: Session) -> None:
    _lesson(client, "Orphan until registered.", session_id="sess-3")
    _feed(client, "org9/tool")  # unknown yet
    assert client.post("/sessions", json={"session_id": "sess-3", "repo": "org9/tool", "cwd": "/nowhere"}).status_code == 200
    assert "Orphan until registered." in _feed(client, "org9/tool")


def _session_ids(db: Session) -> set[str]:
    db.expire_all()
    return set(db.scalars(select(SessionRow.session_id)).all())


def test_a_marker_posted_with_a_subagent_id_gets_its_parent_session_s_project(client, settings: Settings, db: Session) -> None:
    repo = make_repo(settings.user_home / "dev" / "widget", "git@github.com:acme/widget.git")
    claude, start = settings.resolved_claude_dir, NOW - dt.timedelta(minutes=5)
    write_claude(claude, "sess-parent", str(repo), start, ["Fix the widget parser"])
    # The subagent's lines name its parent; its own cwd (a scratch folder) is not where the session works.
    scratch = settings.user_home / "scratchpad"
    scratch.mkdir()
    path = write_claude_subagent(claude, "sess-parent", "a7c9e01b", str(scratch), start, "Find the parser")
    assert path.parent.name == "subagents" and path.parent.parent.name == "sess-parent"
    assert _lesson(client, "Subagents see the parser first.", session_id="a7c9e01b")["project"] == "widget"
    # The parent session is what the index learns, never the agent id as a session of its own.
    assert "sess-parent" in _session_ids(db) and "a7c9e01b" not in _session_ids(db)
    assert _lesson(client, "Same agent, prefixed id.", session_id="agent-a7c9e01b")["project"] == "widget"


def test_a_flat_subagent_resolves_through_the_session_index_before_any_transcript(client, settings: Settings, db: Session) -> None:
    repo = make_repo(settings.user_home / "dev" / "gadget", "https://github.com/acme/gadget.git")
    claude, start = settings.resolved_claude_dir, NOW - dt.timedelta(minutes=5)
    parent = write_claude(claude, "sess-known", str(repo), start, ["Build the gadget"])
    assert _lesson(client, "The parent's own marker.", session_id="sess-known")["project"] == "gadget"
    parent.unlink()  # only the session index knows the parent now
    other = make_repo(settings.user_home / "dev" / "elsewhere", "https://github.com/acme/elsewhere.git")
    path = write_claude_subagent(claude, "sess-known", "b2c3d4e5", str(other), start, "Look elsewhere", flat=True)
    assert path.parent.parent == claude  # flat: beside the session's transcript
    assert _lesson(client, "A flat subagent's lesson.", session_id="b2c3d4e5")["project"] == "gadget"


def test_a_subagent_whose_parent_left_no_transcript_takes_its_folder_and_names_the_parent_by_folder(client, settings: Settings, db: Session) -> None:
    repo = make_repo(settings.user_home / "dev" / "gizmo", "git@github.com:acme/gizmo.git")
    start = NOW - dt.timedelta(minutes=5)
    write_claude_subagent(settings.resolved_claude_dir, "sess-folder", "c9d8e7f6", str(repo), start, "Work alone", name_session=False)
    assert _lesson(client, "Alone but attributed.", session_id="c9d8e7f6")["project"] == "gizmo"
    assert "sess-folder" in _session_ids(db) and "c9d8e7f6" not in _session_ids(db)


def test_a_project_attr_that_is_a_folder_is_resolved_as_a_cwd(client, settings: Settings) -> None:
    repo = make_repo(settings.user_home / "dev" / "gizmo", "git@github.com:acme/gizmo.git")
    assert _lesson(client, "From the outbox.", project=str(repo))["project"] == "gizmo"  # upstream's CLAUDE_PROJECT_DIR
    assert _lesson(client, "Nowhere.", project="/no/such/folder")["project"] is None  # never its basename


def _legacy_arc(vault: Vault, rel: str, meta: dict, body: str = "Old work.\n") -> None:
    vault.write_atomic(rel, frontmatter.render(meta, body))


def test_legacy_arcs_in_region_folders_are_indexed_and_served(client, settings: Settings, db: Session) -> None:
    vault = Vault(settings.vault)
    for sid, repo in (("k1", "the-cloud-clockwork/agentihooks"), ("k2", "org1/api"), ("k3", "org2/api")):
        assert client.post("/sessions", json={"session_id": sid, "repo": repo, "cwd": "/nowhere"}).status_code == 200
    when = (NOW - dt.timedelta(hours=2)).isoformat()
    _legacy_arc(
        vault,
        "frontal-lobe/conscious/2026-11-20-hooks.md",
        {
            "cluster_id": "2026-11-20-hooks",
            "title": "Hooks work",
            "region": "left-hemisphere",
            "status": "active",
            "heat": "6",
            "project": "agentihooks",
            "created": when,
        },
    )
    _legacy_arc(vault, "right/ideas/router.md", {"cluster_id": "router-idea", "title": "Router idea", "project": "api", "created": when})
    _legacy_arc(vault, "left/projects/agentihooks/VISION.md", {"title": "Vision"})  # a standing document, not an arc
    _legacy_arc(vault, "bridge/_index.md", {"cluster_id": "index"})  # underscore files are indexes
    summary = rebuild(db, vault)
    db.commit()
    assert summary.by_kind.get("arc") == 2
    rows = {r.meta.get("cluster_id"): r for r in db.scalars(select(Entry).where(Entry.kind == "arc"))}
    assert set(rows) == {"2026-11-20-hooks", "router-idea"}
    hooks, router = rows["2026-11-20-hooks"], rows["router-idea"]
    assert (hooks.project, hooks.repo, hooks.meta["project_source"]) == ("agentihooks", "the-cloud-clockwork/agentihooks", "legacy")
    assert router.project is None and router.meta["legacy_project"] == "api"  # "api" names two known projects: left for backfill
    arc = client.get("/arcs/2026-11-20-hooks")
    assert arc.status_code == 200 and arc.json()["vault_path"] == "frontal-lobe/conscious/2026-11-20-hooks.md"
    assert client.get("/arcs/router-idea").status_code == 200
    assert "Hooks work" in _feed(client, "agentihooks")
    assert "Router idea" not in _feed(client, "org1/api")


def test_upstream_marker_files_keep_their_shapes(client, settings: Settings) -> None:
    signal = client.post("/marker", json={"type": "signal", "content": "Disk at 95%", "attrs": {"source": "claude-code"}}).json()
    meta = frontmatter.parse((settings.vault / signal["vault_path"]).read_text()).meta
    assert meta["id"].startswith("amygdala-") and meta["severity"] == "warning" and meta["source"] == "claude-code"  # upstream's default
    decision = client.post("/marker", json={"type": "decision", "content": "Use Postgres.", "attrs": {"title": "Storage"}}).json()
    text = (settings.vault / decision["vault_path"]).read_text()
    doc = frontmatter.parse(text)
    assert doc.meta["id"] == "ADR-0001" and doc.meta["status"] == "proposed" and doc.body.lstrip().startswith("# ADR-0001 — Storage")
    assert Path(settings.vault / decision["vault_path"]).name.startswith("ADR-0001-storage")


def test_a_first_rebuild_into_an_empty_database_resolves_a_legacy_project_as_a_second_does(client, settings: Settings, db: Session) -> None:
    """A rebuild records the projects last: an old arc's ``project: web`` was read before ``web`` was known and stayed
    unattributed, its ``@inject target=all`` reaching every project, until a second rebuild."""
    from sqlalchemy import text

    assert client.post("/marker", json={"type": "lesson", "content": "Web lesson.", "attrs": {"repo": "acme/web"}}).status_code == 201
    vault = Vault(settings.vault)
    when = (NOW - dt.timedelta(hours=2)).isoformat()
    note = {"cluster_id": "web-notes", "title": "Web notes", "project": "web", "created": when}
    _legacy_arc(vault, "left/2026-12-01-web-notes.md", note, "<!-- @inject target=all -->\nRun the web checklist.\n<!-- @/inject -->\n")
    for table in ("entries", "projects", "sessions", "project_counts", "vault_file_stats"):
        db.execute(text(f"DELETE FROM {table}"))  # the database lost: the vault alone is left
    db.commit()
    rebuild(db, vault)
    db.commit()
    first = {(r.kind, r.project, r.repo) for r in db.scalars(select(Entry).where(Entry.vault_path == "left/2026-12-01-web-notes.md"))}
    assert first == {("arc", "web", "acme/web"), ("inject", "web", "acme/web")}, first
    rebuild(db, vault)
    db.commit()
    assert {(r.kind, r.project, r.repo) for r in db.scalars(select(Entry).where(Entry.vault_path == "left/2026-12-01-web-notes.md"))} == first
