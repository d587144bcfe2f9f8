"""``brain backfill`` on a generated vault: real repositories, worktrees and transcripts, real Postgres.

The vault holds upstream-format and kernel-format arcs in ``clusters/`` and
the region folders; their sessions live in transcripts, in the session index,
or nowhere any more. Each test builds the world afresh in its temp folder
(a few git repositories, about 0.2 s).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import shutil
import threading
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy import text as sql
from sqlalchemy.orm import Session

from brain_core.chunks import EMBEDDED_KINDS, entry_doc
from brain_core.identity import ProjectIdentity
from brain_core.vault import frontmatter
from brain_kernel.db.models import Entry
from brain_kernel.feed import answers
from brain_kernel.feed.feed_repo import entries_of_kinds
from brain_kernel.identity.sessions import record_session
from brain_kernel.index import filestats
from brain_kernel.index.entries import entry_rows
from brain_kernel.index.rebuild import rebuild
from brain_kernel.search import embeddings
from brain_kernel.search.embed_run import run_embed
from brain_kernel.search.pending import pending
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_ops.backfill import arcs as backfill_arcs
from brain_ops.backfill import follow as backfill_follow
from brain_ops.backfill.run import run_backfill
from tests.support.harness import brain, make_settings
from tests.support.transcript_factory import add_worktree, make_repo, write_claude

T0 = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.timezone.utc)
PROMPTS = ["Fix the flaky login test", "Run the suite"]


def _arc(meta: str, body: str = "\n# Work\n\nSome notes that must survive byte for byte.\n") -> str:
    return f"---\n{meta}---\n{body}"


class World:
    """Repos, a worktree, transcripts, session rows and a vault of mislabelled arcs."""

    def __init__(self, tmp_path: Path, database_url: str) -> None:
        self.settings: Settings = make_settings(tmp_path, database_url)
        self.home = self.settings.user_home
        self.vault = Vault(self.settings.vault)
        self.vault.scaffold()
        claude = self.settings.resolved_claude_dir
        hub = make_repo(self.home / "dev" / "agentihub", "git@github.com:the-cloud-clockwork/agentihub.git")
        (hub / "packages" / "package").mkdir(parents=True)
        hooks = make_repo(self.home / "dev" / "agentihooks", "git@github.com:the-cloud-clockwork/agentihooks.git")
        scratch = self.home / "scratchpad" / "agentihooks" / "m5-live-proof"
        scratch.mkdir(parents=True)
        wt = add_worktree(hooks, self.home / "trees" / "agentihooks-fix", "fix")
        self.hub, self.hooks = hub, hooks
        write_claude(claude, "s-package", str(hub / "packages" / "package"), T0, PROMPTS)
        write_claude(claude, "s-scratch", str(scratch), T0, PROMPTS)
        write_claude(claude, "s-worktree", str(wt), T0, PROMPTS)
        write_claude(claude, "s-noproject", str(hub), T0, PROMPTS)
        write_claude(claude, "s-deleted", str(hub / "packages" / "removed-later" / "src"), T0, PROMPTS)
        write_claude(claude, "s-conscious", str(hooks), T0, PROMPTS)
        write_claude(claude, "s-home", str(self.home), T0, PROMPTS)
        write_claude(claude, "s-merged", str(hub), T0, PROMPTS)
        self.files = {
            # upstream format: flat frontmatter, the basename project, no project_source
            "package": (
                "clusters/2026-11-20/arc-package.md",
                _arc(
                    "cluster_id: arc-package\ntitle: Fix the login\nregion: left-hemisphere\nstatus: active\nheat: 4\nsource_sessions: [s-package]\nproject: package\ncreated: 2026-11-20\nsignals: {errors: 0, joy: 1, tools: 3}\nedges: []\nsynthesized: false\n"
                ),
            ),
            "scratch": (
                "clusters/2026-11-20/arc-scratch.md",
                _arc("cluster_id: arc-scratch\ntitle: Live proof\nheat: 3\nsource_sessions:\n  - s-scratch\nproject: m5-live-proof\ncreated: 2026-11-20\n"),
            ),
            "worktree": (
                "clusters/2026-11-20/arc-worktree.md",
                _arc("cluster_id: arc-worktree\ntitle: Worktree work\nheat: 2\nsource_sessions: [s-worktree]\nproject: agentihooks-fix\ncreated: 2026-11-20\n"),
            ),
            "noproject": (
                "clusters/2026-11-20/arc-noproject.md",
                _arc("cluster_id: arc-noproject\ntitle: No project line\nheat: 2\nsource_sessions: [s-noproject]\ncreated: 2026-11-20\n"),
            ),
            "deleted": (
                "clusters/2026-11-20/arc-deleted.md",
                _arc("cluster_id: arc-deleted\ntitle: Deleted folder\nheat: 2\nsource_sessions: [s-deleted]\nproject: src\ncreated: 2026-11-20\n"),
            ),
            "knowledge": ("left/research/2026-11-20-knowledge.md", _arc("cluster_id: arc-knowledge\ntitle: Notes\nproject: research\ncreated: 2026-11-20\n")),
            "conscious": (
                "frontal-lobe/conscious/arc-conscious.md",
                "---\r\ncluster_id: arc-conscious\r\ntitle: 'Hot: work'\r\nheat: 7\r\nsource_sessions: [s-conscious]\r\nproject: wrong-name\r\ncreated: 2026-11-20\r\n---\r\n\r\n# Hot\r\n",
            ),
            "home": (
                "clusters/2026-11-20/arc-home.md",
                _arc("cluster_id: arc-home\ntitle: Home folder chat\nsource_sessions: [s-home]\nproject: alice\ncreated: 2026-11-20\n"),
            ),
            "gone": (
                "clusters/2026-11-20/arc-gone.md",
                _arc("cluster_id: arc-gone\ntitle: Evidence gone\nsource_sessions: [s-vanished]\nproject: mystery\ncreated: 2026-11-20\n"),
            ),
            "indexed": (
                "clusters/2026-11-21/arc-indexed.md",
                _arc("cluster_id: arc-indexed\ntitle: Known session\nsource_sessions: [s-indexed, s-vanished-2]\nproject: stale\ncreated: 2026-11-21\n"),
            ),
            "tombstone": (
                "clusters/2026-11-21/arc-merged.merged.md",
                _arc(
                    "cluster_id: arc-merged\ntitle: Merged away\nstatus: merged\nmerged_into: arc-indexed\nsource_sessions: [s-merged]\nproject: wrong\ncreated: 2026-11-21\n"
                ),
            ),
        }
        for rel, text in self.files.values():
            target = self.vault.path(rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8"))
        os.chmod(self.vault.path(self.files["package"][0]), 0o640)
        lesson = "left/reference/lessons-2026-11-20.md"
        self.vault.path(lesson).write_text("# Lessons\n\n## 2026-11-20T10:00:00+00:00 — claude-code — `s-lesson`\n\nPin the fixture.\n")
        write_claude(claude, "s-lesson", str(hub), T0, PROMPTS)
        self.lesson = lesson
        shutil.rmtree(hub / "packages")  # s-deleted's folder (and s-package's) gone from disk; the repo stays

    def path(self, name: str) -> str:
        return self.files[name][0]

    def meta(self, name: str) -> dict:
        return frontmatter.parse(self.vault.read_text(self.path(name))).meta

    def snapshot(self) -> dict[str, tuple[bytes, int]]:
        out = {}
        for path in sorted(self.vault.root.rglob("*.md")):
            out[self.vault.rel(path)] = (path.read_bytes(), path.stat().st_mode)
        return out


@pytest.fixture
def world(tmp_path: Path, database_url: str, db: Session) -> World:
    w = World(tmp_path, database_url)
    record_session(db, "s-indexed", ProjectIdentity("agentihub", "the-cloud-clockwork/agentihub", str(w.hub), None, str(w.hub), "git"))
    rebuild(db, w.vault)  # the kernel as deployed: the index and file stats built from the vault before the backfill
    db.commit()
    return w


def _run(world: World, db: Session, **kwargs: object):
    return run_backfill(world.settings, world.vault, db=db, **kwargs)  # type: ignore[arg-type]


def _outside_project_keys(text: str) -> str:
    """The file without the lines of the five keys (and their continuation lines)."""
    keys = ("project:", "projects:", "repo:", "worktrees:", "project_source:")
    lines, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith(keys):
            skipping = True
            continue
        if skipping and line.startswith((" ", "- ")):
            continue
        skipping = False
        lines.append(line)
    return "".join(lines)


def test_each_mislabelled_arc_gets_its_real_project_and_nothing_else_changes(world: World, db: Session) -> None:
    before = world.snapshot()
    audit = io.StringIO()
    summary = _run(world, db, audit=audit)
    db.commit()

    def ident(name: str) -> tuple:
        m = world.meta(name)
        return (m.get("project"), m.get("projects"), m.get("repo"), m.get("worktrees"), m.get("project_source"))

    hub, hooks = "the-cloud-clockwork/agentihub", "the-cloud-clockwork/agentihooks"
    # the first deleted folder resolves through its existing ancestor (git) and teaches the repo's root; later ones use it
    assert ident("deleted") == ("agentihub", ["agentihub"], hub, [], "git")
    assert ident("package") == ("agentihub", ["agentihub"], hub, [], "learned")  # a subfolder (since deleted) of agentihub
    assert ident("scratch") == ("agentihooks", ["agentihooks"], None, [], "layout")  # a layout names a key, no repo
    assert ident("worktree") == ("agentihooks", ["agentihooks"], hooks, ["agentihooks-fix"], "git")
    assert ident("noproject") == ("agentihub", ["agentihub"], hub, [], "git")
    assert ident("conscious") == ("agentihooks", ["agentihooks"], hooks, [], "git")
    assert ident("indexed") == ("agentihub", ["agentihub"], hub, [], "session")
    assert ident("tombstone") == ("agentihub", ["agentihub"], hub, [], "git")
    assert ident("home") == (None, [], None, [], "unresolved")  # the evidence says no project: the label is cleared
    assert world.vault.read_text(world.path("knowledge")) == world.files["knowledge"][1]
    assert world.vault.read_text(world.path("gone")) == world.files["gone"][1]  # unverifiable: left as it is

    after = world.snapshot()
    assert set(after) == set(before)
    for rel, (data, mode) in before.items():
        assert after[rel][1] == mode, rel  # the file's mode is kept (arc-package.md is 0640)
        assert _outside_project_keys(after[rel][0].decode()) == _outside_project_keys(data.decode()), rel
    assert after[world.path("conscious")][0].count(b"\n") == after[world.path("conscious")][0].count(b"\r\n")  # CRLF kept

    assert summary.as_dict()["scanned"] == 11
    assert (summary.changed, summary.unchanged, summary.unresolved) == (9, 2, 2)
    assert summary.by_outcome == {"resolved": 8, "cleared": 1, "unverifiable": 1, "knowledge": 1}
    assert dict(summary.by_source) == {"git": 5, "learned": 1, "layout": 1, "session": 1, "unresolved": 1}
    lines = [json.loads(line) for line in audit.getvalue().splitlines()]
    assert len(lines) == 9
    home = next(line for line in lines if line["path"] == world.path("home"))
    assert home["old"]["project"] == "alice" and home["new"]["project"] is None and home["sessions"] == ["s-home"]
    pkg = next(line for line in lines if line["path"] == world.path("package"))
    assert (pkg["old"]["project"], pkg["new"]["project"], pkg["source"], pkg["sessions"]) == ("package", "agentihub", "learned", ["s-package"])

    # The index follows: every arc row says its new project, a rebuild changes nothing, the next tick reads nothing.
    rows = {r.vault_path: (r.project, r.repo) for r in db.scalars(select(Entry).where(Entry.kind == "arc"))}
    assert rows[world.path("package")] == ("agentihub", hub) and rows[world.path("conscious")] == ("agentihooks", hooks)
    assert rows[world.path("home")] == (None, None)
    lesson = db.scalars(select(Entry).where(Entry.vault_path == world.lesson)).one()
    assert (lesson.project, lesson.repo) == ("agentihub", hub)  # its session found in a transcript and recorded
    held = entry_rows(db)
    rebuild(db, world.vault)
    assert entry_rows(db) == held
    stats, known = filestats.stat_files(world.vault), filestats.load(db)
    assert all(known[rel].stat == stats[rel] for rel in known)
    db.rollback()


class _OneVector:
    """Every text at one unit vector (the template's width); counts the texts it embedded."""

    name, dim = "one-vector", 256

    def __init__(self) -> None:
        self.texts = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.texts += len(texts)
        return [[1.0, *([0.0] * 255)] for _ in texts]


def _misfiled_chunks(db: Session) -> list[str]:
    """Keys whose first chunk is filed under other projects than its entry's row."""
    wanted = {doc.key: (doc.project, list(doc.projects), doc.repo) for r in entries_of_kinds(db, EMBEDDED_KINDS) if (doc := entry_doc(r))}
    held = {k: (p, list(ps), r) for k, p, ps, r in db.execute(sql("SELECT key, project, projects, repo FROM content_embeddings WHERE chunk_idx = 0"))}
    return sorted(k for k in wanted if held.get(k) != wanted[k])


def test_the_search_index_files_each_arc_under_its_new_project_with_no_new_vector(world: World, db: Session) -> None:
    embedder = _OneVector()
    first = run_embed(db, embedder)
    db.commit()
    assert first.embedded >= 9 and _misfiled_chunks(db) == []
    _run(world, db)
    db.commit()
    moved = _misfiled_chunks(db)
    assert len(moved) >= 8 and pending(db) == len(moved)  # every arc the backfill changed, and the lesson it retagged
    embedded = embedder.texts
    summary = run_embed(db, embedder, only_pending=True)  # the next tick's step (or a follower's pass)
    db.commit()
    assert (summary.relabelled, summary.embedded, embedder.texts) == (len(moved), 0, embedded)
    assert _misfiled_chunks(db) == [] and pending(db) == 0
    hits, _ = embeddings.search(db, [1.0, *([0.0] * 255)], project=("agentihub", "the-cloud-clockwork/agentihub"), limit=50)
    assert "package" not in {h.metadata.get("project") for h in hits} and {h.metadata["project"] for h in hits} == {"agentihub"}


def test_dry_run_writes_nothing_and_a_rerun_writes_nothing(world: World, db: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backfill_follow, "INDEX_BATCH", 2)  # batches of two: the index follows on its own thread
    monkeypatch.setattr(backfill_arcs, "ARC_CHUNK", 3)  # arcs read three ahead, their sessions looked up on that thread
    before = world.snapshot()
    mtimes = {rel: world.vault.path(rel).stat().st_mtime_ns for rel in before}
    rows = entry_rows(db)
    planned: list[dict] = []
    dry = _run(world, db, dry_run=True, plan=planned.append)
    db.commit()
    assert world.snapshot() == before and {rel: world.vault.path(rel).stat().st_mtime_ns for rel in before} == mtimes
    assert entry_rows(db) == rows
    assert dry.files_written == 0 and dry.changed == len(planned) == 9

    def feed() -> answers.FeedAnswer:
        answer = answers.project_answer(db, "agentihub", top_n=10, lesson_days=14, vault_root=str(world.vault.root), now=T0 + dt.timedelta(days=1))
        db.commit()
        return answer

    assert "arc-package" not in feed().body and feed().source == "stored"
    real = _run(world, db)
    db.commit()
    assert real.changed == 9 and real.files_written == 9
    after = feed()  # the stored answer was invalidated by the index's writes
    assert after.source == "live" and "arc-package" in after.body and "arc-deleted" in after.body
    searched = db.execute(sql("SELECT content FROM vault_segments WHERE path = 'clusters/2026-11-20/arc-package.md'")).scalars().all()
    assert any("project: agentihub" in c for c in searched) and not any("project: package" in c for c in searched)
    done = world.snapshot()
    again = _run(world, db)
    db.commit()
    assert (again.changed, again.files_written, again.index["files"]) == (0, 0, 0)
    assert world.snapshot() == done


@pytest.mark.parametrize("batch", [500, 2], ids=["one-batch", "batches-in-flight"])
def test_a_run_killed_between_files_and_rerun_ends_as_an_uninterrupted_run(
    world: World, db: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    monkeypatch.setattr(backfill_follow, "INDEX_BATCH", batch)  # 2: killed while the index thread writes a batch
    monkeypatch.setattr(backfill_arcs, "ARC_CHUNK", 1000 if batch == 500 else 3)
    pristine = tmp_path / "pristine"
    shutil.copytree(world.vault.root, pristine)
    _run(world, db)
    expected = world.snapshot()
    expected_rows = entry_rows(db)
    db.rollback()

    class Killed(Exception):
        pass

    for kill_at in range(1, 9):
        shutil.rmtree(world.vault.root)
        shutil.copytree(pristine, world.vault.root)
        done = []

        def stop(rel: str, done: list = done, kill_at: int = kill_at) -> None:
            done.append(rel)
            if len(done) == kill_at:
                raise Killed(rel)

        with pytest.raises(Killed):
            _run(world, db, after_write=stop)
        db.rollback()  # the process died: nothing it sent the database was committed
        _run(world, db)
        assert world.snapshot() == expected, kill_at
        assert entry_rows(db) == expected_rows, kill_at
        db.rollback()


def test_only_limits_the_run_and_the_cli_prints_the_plan_then_the_summary(world: World, db: Session, tmp_path: Path) -> None:
    audit = tmp_path / "audit" / "dry.jsonl"
    proc = brain(world.settings, "backfill", "--dry-run", "--audit", str(audit), "--only", "frontal-lobe")
    assert proc.exit_code == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [line["path"] for line in lines[:-1]] == [world.path("conscious")]
    assert lines[-1]["scanned"] == 1 and lines[-1]["changed"] == 1 and lines[-1]["dry_run"] is True
    assert set(lines[-1]) >= {"scanned", "changed", "unchanged", "unresolved", "by_source"}
    assert [json.loads(line)["path"] for line in audit.read_text().splitlines()] == [world.path("conscious")]
    assert world.vault.path(world.path("conscious")).read_bytes() == world.files["conscious"][1].encode()


KERNEL_LESSON = (
    "## 2026-11-20T11:00:00Z [unattributed] Retry the upload — claude-code — `s-indexed`\n"
    '<!-- brain {"kind": "lesson", "id": "l-1", "session_id": "s-indexed", "source": "claude-code", "project_source": "unresolved"} -->\n\n'
    "Back off.\n\n"
    "## 2026-11-20T12:00:00Z [unattributed] Nobody knows — claude-code — `s-vanished`\n"
    '<!-- brain {"kind": "lesson", "id": "l-2", "session_id": "s-vanished", "source": "claude-code"} -->\n\n'
    "Gone.\n\n"
    "## 2026-11-20T13:00:00Z [project: agentihooks] Tagged already — claude-code\n"
    '<!-- brain {"kind": "lesson", "id": "l-3", "source": "claude-code"} -->\n\nKept.\n'
)
MILESTONE = '# 2026-11-20\n\n## 2026-11-20T14:00:00Z [unattributed] Shipped the login\n<!-- brain {"kind": "milestone", "id": "m-1", "session_id": "s-lesson"} -->\n\nDone.\n'
SIGNAL = "---\r\ntitle: 'Disk: full'\r\nseverity: warning\r\nsession_id: s-lesson\r\ncreated: 2026-11-20T15:00:00Z\r\n---\r\n\r\n# Disk full\r\n"
SIGNAL_PATH = "amygdala/20261120-150000-warning-disk.md"


def _with_markers(world: World, db: Session) -> dict[str, str]:
    world.vault.append(world.lesson, "\n" + KERNEL_LESSON)
    world.vault.path("daily/2026-11-20.md").write_text(MILESTONE)
    world.vault.path(SIGNAL_PATH).write_bytes(SIGNAL.encode())
    rebuild(db, world.vault)
    db.commit()
    return {rel: world.vault.path(rel).read_bytes().decode() for rel in (world.lesson, "daily/2026-11-20.md", SIGNAL_PATH)}


def _marker_rows(db: Session, paths: list[str]) -> dict[str, tuple]:
    rows = db.scalars(select(Entry).where(Entry.vault_path.in_(paths)))
    return {r.id: (r.project, r.repo, r.title, r.content) for r in rows}


def test_rewrite_markers_tags_each_entry_its_session_resolves_and_changes_no_other_byte(world: World, db: Session) -> None:
    before = _with_markers(world, db)
    rows_before = _marker_rows(db, list(before))
    planned: list[dict] = []
    dry = _run(world, db, dry_run=True, rewrite_markers=True, plan=planned.append)
    db.commit()
    assert {rel: world.vault.path(rel).read_bytes().decode() for rel in before} == before
    assert dry.markers["entries_retagged"] == 4 and dry.markers["files_rewritten"] == 0
    assert len([line for line in planned if "marker" in line]) == 4

    audit = io.StringIO()
    summary = _run(world, db, rewrite_markers=True, audit=audit)
    db.commit()
    hub = "[project: agentihub repo: the-cloud-clockwork/agentihub]"
    after = {rel: world.vault.path(rel).read_bytes().decode() for rel in before}
    lesson = before[world.lesson]
    lesson = lesson.replace("## 2026-11-20T10:00:00+00:00 — claude-code", f"## 2026-11-20T10:00:00+00:00 {hub} — claude-code")  # an old header
    lesson = lesson.replace("[unattributed] Retry", f"{hub} Retry").replace('"project_source": "unresolved"', '"project_source": "session"')
    assert after[world.lesson] == lesson  # s-vanished has no evidence: its entry stays unattributed; the tagged one stays
    milestone = before["daily/2026-11-20.md"].replace("[unattributed]", hub).replace('"s-lesson"}', '"s-lesson", "project_source": "git"}')
    assert after["daily/2026-11-20.md"] == milestone
    assert after[SIGNAL_PATH] == SIGNAL.replace(
        "---\r\n\r\n", "project: agentihub\r\nrepo: the-cloud-clockwork/agentihub\r\nproject_source: git\r\n---\r\n\r\n"
    )  # CRLF kept
    assert summary.markers["entries_retagged"] == 4 and summary.markers["files_rewritten"] == 3
    lines = [json.loads(line) for line in audit.getvalue().splitlines() if "marker" in json.loads(line)]
    assert sorted(line["sessions"][0] for line in lines) == ["s-indexed", "s-lesson", "s-lesson", "s-lesson"]
    assert all(line["old"]["project"] is None and line["new"]["project"] == "agentihub" for line in lines)

    rows = _marker_rows(db, list(before))
    assert set(rows) == set(rows_before)  # every entry keeps its id (an old one is anchored on its header without the tag)
    tagged = {rid for rid, row in rows.items() if row[:2] == ("agentihub", "the-cloud-clockwork/agentihub")}
    assert len(tagged) == 4  # s-indexed's lesson was attributed through the session index already; now its file says so
    assert {rid for rid in rows if rows[rid] != rows_before[rid]} <= tagged
    assert all(rows[rid][2:] == rows_before[rid][2:] for rid in rows)  # titles and contents as they were
    held = entry_rows(db)
    rebuild(db, world.vault)
    assert entry_rows(db) == held
    again = _run(world, db, rewrite_markers=True)
    assert (again.markers["entries_retagged"], again.markers["files_rewritten"]) == (0, 0)
    assert {rel: world.vault.path(rel).read_bytes().decode() for rel in before} == after
    db.rollback()


def test_a_run_killed_while_rewriting_markers_and_rerun_ends_as_an_uninterrupted_run(world: World, db: Session, tmp_path: Path) -> None:
    _with_markers(world, db)
    pristine = tmp_path / "pristine"
    shutil.copytree(world.vault.root, pristine)
    _run(world, db, rewrite_markers=True)
    expected, expected_rows = world.snapshot(), entry_rows(db)
    db.rollback()

    class Killed(Exception):
        pass

    for kill_at in (10, 11, 12):  # the nine arcs are written first, then the three marker files
        shutil.rmtree(world.vault.root)
        shutil.copytree(pristine, world.vault.root)
        done: list[str] = []

        def stop(rel: str, done: list = done, kill_at: int = kill_at) -> None:
            done.append(rel)
            if len(done) == kill_at:
                raise Killed(rel)

        with pytest.raises(Killed):
            _run(world, db, rewrite_markers=True, after_write=stop)
        db.rollback()
        _run(world, db, rewrite_markers=True)
        assert world.snapshot() == expected, kill_at
        assert entry_rows(db) == expected_rows, kill_at
        db.rollback()


def test_an_append_waiting_on_a_locked_rewrite_lands_in_the_new_file(tmp_path: Path) -> None:
    vault = Vault(tmp_path / "v")
    vault.scaffold()
    rel = "left/reference/lessons-2026-11-20.md"
    vault.append(rel, "## a\n")
    appender = threading.Thread(target=vault.append, args=(rel, "## c\n"))

    def edit(text: str) -> str:
        appender.start()  # blocks on the lock this rewrite holds, or opens the new file once it is in place
        return text + "## b\n"

    assert vault.rewrite_locked(rel, edit) is not None
    appender.join()
    assert vault.read_text(rel) == "## a\n## b\n## c\n"
