"""brain sync: two vault clones of one local bare repository, each kernel writing its own markers.

Real git, real markers (the kernel's marker writer), real ticks over two
databases: the logs merge by union, both clones end with every entry and the
keeper indexes the pulled files by their file stats (no reindex).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from brain_core.markers import Attribution, parse_request
from brain_core.vault import frontmatter
from brain_kernel.db.engine import make_engine
from brain_kernel.marker_service import write_marker
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_ops.keeper.tick import run_tick
from brain_ops.vault_sync import SyncRefused, sync_vault
from tests.support.gitrepo import git
from tests.support.harness import cloned_database
from tests.support.planting import arc_session, write_arc

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)
SECRET = "ghp_" + "a1B2" * 9


def _identity(repo: Path) -> None:
    for key, value in (("user.name", "Brain Test"), ("user.email", "brain-test@example.invalid"), ("commit.gpgsign", "false")):
        git(repo, "config", key, value)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    bare.mkdir()
    git(bare, "init", "-q", "--bare")
    git(bare, "symbolic-ref", "HEAD", "refs/heads/main")
    return bare


def _clone(remote: Path, path: Path) -> Vault:
    git(path.parent, "clone", "-q", str(remote), path.name)
    _identity(path)
    git(path, "checkout", "-q", "-B", "main")
    vault = Vault(path)
    vault.scaffold()
    return vault


def _lesson(vault: Vault, content: str, n: int, *, minutes: int) -> None:
    req = parse_request("lesson", content, {}, max_chars=4096)
    write_marker(vault, req, Attribution("api", "org1/api"), marker_id=f"{vault.path('').name}{n:03d}", at=NOW + dt.timedelta(minutes=minutes))


def _signal(vault: Vault, title: str, n: int) -> str:
    req = parse_request("signal", f"{title} body.", {"title": title, "severity": "alert"}, max_chars=4096)
    return write_marker(vault, req, Attribution("web", "acme/web"), marker_id=f"s{n}", at=NOW + dt.timedelta(minutes=n)).vault_path


@pytest.fixture
def second_db(pg_admin_url: str, template_url: str) -> Iterator[tuple[str, Session]]:
    with cloned_database(pg_admin_url, template_url) as url:
        engine = make_engine(url, pooled=False)
        session = Session(engine)
        try:
            yield url, session
        finally:
            session.close()
            engine.dispose()


def _contents(db: Session) -> set[str]:
    from sqlalchemy import text

    return {row[0] for row in db.execute(text("SELECT content FROM entries WHERE kind IN ('lesson', 'signal')"))}


def test_two_clones_sync_in_turn_and_both_end_with_every_entry_indexed(
    tmp_path: Path, remote: Path, settings: Settings, db: Session, second_db: tuple[str, Session]
) -> None:
    a = _clone(remote, tmp_path / "a")
    first = sync_vault(a)  # the first sync writes .gitattributes and .gitignore and creates the branch
    assert first.pushed and {".gitattributes", ".gitignore"} <= set(first.committed)
    b = _clone(remote, tmp_path / "b")
    sa, sb = settings.with_overrides(vault=a.path("")), settings.with_overrides(vault=b.path(""), database_url=second_db[0])
    db_b = second_db[1]

    _lesson(a, "From A: pin the worker count.", 1, minutes=1)
    _signal(a, "A latency", 1)
    _lesson(b, "From B: cache the parsed routes.", 1, minutes=2)
    _signal(b, "B disk", 2)
    run_tick(db, a, sa, now=NOW + dt.timedelta(hours=1), use_ai=False)
    db.commit()
    run_tick(db_b, b, sb, now=NOW + dt.timedelta(hours=1), use_ai=False)
    db_b.commit()
    assert a.exists("brain-feed/PROJECTS.md") and b.exists("brain-feed/PROJECTS.md")

    out_a = sync_vault(a)
    assert out_a.pushed and not any(p.startswith("brain-feed/") or p.endswith("_dashboard.md") for p in out_a.committed)
    assert "lesson" in out_a.message and "org1/api: 1 lesson" in out_a.message
    out_b = sync_vault(b)  # rebases onto A's commit: the shared lesson log merges by union
    assert out_b.pulled and out_b.pushed and not out_b.conflicts
    head = git(b.path(""), "rev-parse", "HEAD").strip()
    assert out_b.commit == head == git(b.path(""), "rev-parse", "origin/main").strip()  # the commit rebased and pushed
    out_a2 = sync_vault(a)
    assert out_a2.pulled and out_a2.committed == []

    log = "left/reference/lessons-2026-12-01.md"
    assert a.read_text(log) == b.read_text(log)
    assert "From A" in a.read_text(log) and "From B" in a.read_text(log)
    assert git(a.path(""), "status", "--porcelain", "--", "left", "amygdala") == ""
    assert "brain-feed" not in git(a.path(""), "ls-files")  # derived files are never committed

    tick_a = run_tick(db, a, sa, now=NOW + dt.timedelta(hours=2), use_ai=False)
    db.commit()
    tick_b = run_tick(db_b, b, sb, now=NOW + dt.timedelta(hours=2), use_ai=False)
    db_b.commit()
    assert tick_a.read_files >= 2 and tick_b.read_files >= 1  # the pulled files, read by their file stats
    every = {"From A: pin the worker count.", "From B: cache the parsed routes.", "A latency body.", "B disk body."}
    assert every <= {c.strip() for c in _contents(db)} and every <= {c.strip() for c in _contents(db_b)}


def test_a_hand_written_inject_block_reaches_the_other_clone_and_its_index(
    tmp_path: Path, remote: Path, settings: Settings, second_db: tuple[str, Session]
) -> None:
    a = _clone(remote, tmp_path / "a")
    sync_vault(a)
    b = _clone(remote, tmp_path / "b")
    rel = "brain-feed/inject/deploy-freeze.md"
    a.write_atomic(rel, frontmatter.render({"id": "deploy-freeze", "title": "Deploy freeze", "target": "all"}, "No deploys on Friday.\n"))
    a.write_atomic("brain-feed/hot-arcs.md", "# derived\n")  # what the keeper renders stays out

    out_a = sync_vault(a)
    assert rel in out_a.committed and "brain-feed/hot-arcs.md" not in out_a.committed
    assert sync_vault(b).pulled and b.read_text(rel) == a.read_text(rel)

    sb = settings.with_overrides(vault=b.path(""), database_url=second_db[0])
    run_tick(second_db[1], b, sb, now=NOW + dt.timedelta(hours=1), use_ai=False)
    second_db[1].commit()
    assert "No deploys on Friday." in b.read_text("brain-feed/inject.md")  # B's own feed carries A's block


def test_a_staged_unrelated_file_makes_the_sync_refuse(tmp_path: Path, remote: Path) -> None:
    a = _clone(remote, tmp_path / "a")
    sync_vault(a)
    head = git(a.path(""), "rev-parse", "HEAD")
    _lesson(a, "Something to commit.", 1, minutes=1)
    (a.path("") / "notes.txt").write_text("my own file\n")
    git(a.path(""), "add", "notes.txt")
    with pytest.raises(SyncRefused, match=r"notes\.txt"):
        sync_vault(a)
    assert git(a.path(""), "rev-parse", "HEAD") == head
    assert "A  notes.txt" in git(a.path(""), "status", "--porcelain")


def test_a_note_with_a_secret_is_left_out_and_named(tmp_path: Path, remote: Path) -> None:
    a = _clone(remote, tmp_path / "a")
    sync_vault(a)
    a.write_atomic("raw/inbox/leaky.md", f"# Deploy notes\n\ntoken {SECRET}\n")
    a.write_atomic("raw/inbox/clean.md", "# Clean note\n\nnothing secret\n")
    dry = sync_vault(a, dry_run=True)
    assert dry.committed == ["raw/inbox/clean.md"] and dry.commit is None
    out = sync_vault(a)
    assert out.committed == ["raw/inbox/clean.md"]
    assert out.left_out[0]["path"] == "raw/inbox/leaky.md" and "github" in out.left_out[0]["why"] and SECRET not in str(out.as_dict())
    tracked = git(a.path(""), "ls-files", "raw/inbox")
    assert "clean.md" in tracked and "leaky.md" not in tracked
    assert SECRET not in git(remote, "log", "-p", "--all")


def test_a_remote_that_moved_during_the_push_is_never_forced(tmp_path: Path, remote: Path) -> None:
    a = _clone(remote, tmp_path / "a")
    sync_vault(a)
    b = _clone(remote, tmp_path / "b")
    _signal(b, "B first", 1)
    git(b.path(""), "add", "--all", "amygdala")
    git(b.path(""), "commit", "-q", "-m", "b's note")
    # B pushes while A is between its pull and its push: A's push is not a fast-forward.
    hook = a.path("") / ".git" / "hooks" / "pre-push"
    hook.write_text(f"#!/bin/sh\nunset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE\ngit -C {b.path('')} push -q origin HEAD:main\n")
    os.chmod(hook, 0o755)
    _signal(a, "A second", 2)
    out = sync_vault(a)
    assert not out.pushed and any(n.startswith("push refused") for n in out.notes)
    b_head = git(b.path(""), "rev-parse", "HEAD").strip()
    assert git(remote, "rev-parse", "main").strip() == b_head  # B's commit kept: nothing forced over it
    assert out.commit and subprocess.run(["git", "cat-file", "-e", out.commit], cwd=a.path("")).returncode == 0
    hook.unlink()
    again = sync_vault(a)  # the next sync pulls B's commit first, then pushes
    assert again.pulled and again.pushed
    assert git(remote, "merge-base", "--is-ancestor", b_head, "main") == ""


def test_a_conflict_union_cannot_resolve_stops_with_the_work_tree_as_it_was(tmp_path: Path, remote: Path) -> None:
    a = _clone(remote, tmp_path / "a")
    sync_vault(a)
    path = _signal(a, "Shared", 1)
    sync_vault(a)
    b = _clone(remote, tmp_path / "b")
    b.write_atomic(path, b.read_text(path).replace("Shared body.", "Edited on B."))
    assert sync_vault(b).pushed
    a.write_atomic(path, a.read_text(path).replace("Shared body.", "Edited on A."))
    _lesson(a, "A lesson beside the conflict.", 1, minutes=1)
    before = {rel: a.read_text(rel) for rel in (path, "left/reference/lessons-2026-12-01.md")}
    out = sync_vault(a)
    assert out.conflicts == [path] and not out.pushed and not out.ok
    assert {rel: a.read_text(rel) for rel in before} == before
    assert not (a.path("") / ".git" / "rebase-merge").exists() and git(a.path(""), "status", "--porcelain") == ""
    from typer.testing import CliRunner

    from brain_cli.cli import app

    again = CliRunner().invoke(app, ["sync", "--vault", str(a.path(""))])  # the command says so: exit 1 and one error line
    assert again.exit_code == 1 and json.loads(again.stdout.strip().splitlines()[-1])["conflicts"] == [path]
    assert again.stderr.strip().splitlines() == [
        f"error: not synced, conflicts union merging cannot resolve: {path}; the work tree is as it was (see the summary's notes)"
    ]


def test_a_first_dry_run_lists_what_the_real_sync_commits(tmp_path: Path, remote: Path, settings: Settings, db: Session) -> None:
    a = _clone(remote, tmp_path / "a")
    _lesson(a, "Seen by a dry run.", 1, minutes=1)
    write_arc(a, [arc_session("s-dry", "api", "org1/api", "Build the importer", hours_ago=2)])
    run_tick(db, a, settings.with_overrides(vault=a.path("")), use_ai=False)  # the day's dashboard beside the arc
    db.commit()
    assert list(a.path("clusters").rglob("_dashboard.md"))
    assert not a.exists(".gitignore")  # the first sync writes it: the dry run only holds it
    dry = sync_vault(a, dry_run=True)
    assert not any(p.startswith("brain-feed/") or p.endswith("_dashboard.md") for p in dry.committed), dry.committed
    real = sync_vault(a)
    assert dry.committed == real.committed


def test_brain_sync_prints_its_summary_and_refuses_outside_a_work_tree(tmp_path: Path, remote: Path) -> None:
    from typer.testing import CliRunner

    from brain_cli.cli import app

    a = _clone(remote, tmp_path / "a")
    _lesson(a, "Seen by a dry run.", 1, minutes=1)
    dry = CliRunner().invoke(app, ["sync", "--vault", str(a.path("")), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "left/reference/lessons-2026-12-01.md" in dry.stdout and not a.exists(".gitattributes")
    plain = tmp_path / "plain"
    plain.mkdir()
    refused = CliRunner().invoke(app, ["sync", "--vault", str(plain)])
    assert refused.exit_code == 2 and "not the top of a git work tree" in refused.output  # the vault's set-up: configuration


def test_brain_init_git_leaves_a_repository_the_kernel_accepts_whoever_runs_it(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from brain_cli.cli import app

    repo_root = Path(__file__).resolve().parents[2]
    args = ["init", "--env-file", str(tmp_path / ".env"), "--template", str(repo_root / ".env.example"), "--vault", str(tmp_path / "vault"), "--git"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    made = json.loads(first.stdout)["git"]
    assert made["created"] and sorted(made["files"]) == [".gitattributes", ".gitignore"]
    vault = Vault(tmp_path / "vault")
    assert "lessons-*.md merge=union" in vault.read_text(".gitattributes") and "/brain-feed/" in vault.read_text(".gitignore")
    if os.getuid() == 0:  # handed to the image's user, .git included: the container's git owns its repository
        assert (tmp_path / "vault" / ".git" / "HEAD").stat().st_uid != 0
    again = json.loads(CliRunner().invoke(app, args).stdout)["git"]
    assert not again["created"] and again["files"] == []
    _lesson(vault, "Kept in history.", 1, minutes=1)
    out = sync_vault(vault)  # no remote: a local commit, accepted by git whoever runs the kernel
    assert out.commit and "left/reference/lessons-2026-12-01.md" in out.committed and out.notes == ["no remote 'origin': committed locally only"]


def _arc(vault: Vault, sid: str, prompt: str, *, hours_ago: float) -> str:
    from brain_core.arcs import ArcSession, build_plan, render_arc

    start = NOW - dt.timedelta(hours=hours_ago)
    session = ArcSession(
        session_id=sid,
        project="api",
        repo="org1/api",
        project_source="git",
        cwd="/h/api",
        start=start,
        end=start + dt.timedelta(minutes=30),
        num_tool_calls=120,
        first_user_prompt=prompt,
    )
    plan = build_plan([session])
    vault.write_atomic(plan.vault_path, render_arc(plan))
    return plan.vault_path


def test_only_the_keepers_clone_edits_and_commits_arcs_and_ticks_leave_nothing_derived_to_merge(
    tmp_path: Path, remote: Path, settings: Settings, db: Session, second_db: tuple[str, Session]
) -> None:
    a = _clone(remote, tmp_path / "a")
    arc = _arc(a, "hot", "Rewrite the request router for speed", hours_ago=2)
    sync_vault(a)
    b = _clone(remote, tmp_path / "b")
    keeper = settings.with_overrides(vault=a.path(""))
    other = settings.with_overrides(vault=b.path(""), database_url=second_db[0], vault_keeper=False)
    db_b = second_db[1]
    at = NOW + dt.timedelta(minutes=30)
    original = b.read_text(arc)

    tick_a = run_tick(db, a, keeper, now=at, use_ai=False)
    db.commit()
    tick_b = run_tick(db_b, b, other, now=at, use_ai=False)
    db_b.commit()
    assert tick_a.moves and not tick_b.moves and tick_b.arcs_updated == 0
    assert any("not the vault's keeper" in n for n in tick_b.notes)
    assert b.read_text(arc) == original  # B's copy untouched
    assert git(b.path(""), "status", "--porcelain") == ""  # B's tick wrote derived files only: nothing to commit or merge

    out_a, out_b = sync_vault(a), sync_vault(b)
    moved = tick_a.moves[0]["to"]
    assert moved in out_a.committed and arc in out_a.committed  # the keeper's move, committed by the keeper
    assert out_b.committed == [] and out_b.pulled and not out_b.conflicts
    assert b.exists(moved) and not b.exists(arc)
    again_b = run_tick(db_b, b, other, now=at + dt.timedelta(minutes=5), use_ai=False)
    db_b.commit()
    assert again_b.read_files >= 1 and not again_b.moves
    from sqlalchemy import text

    assert db_b.execute(text("SELECT vault_path FROM entries WHERE kind = 'arc'")).scalars().all() == [moved]


def test_the_ops_loop_syncs_after_each_tick_when_a_remote_is_configured(tmp_path: Path, remote: Path, settings: Settings) -> None:
    from brain_ops.loop import run_loop

    a = _clone(remote, tmp_path / "a")
    _lesson(a, "Synced by the loop.", 1, minutes=1)
    s = settings.with_overrides(
        vault=a.path(""), sync_remote="origin", tick_interval_seconds=10, tick_drain_interval_seconds=1000, extract_hour=(NOW.hour + 12) % 24
    )
    engine = make_engine(s.database_url or "", pooled=False)
    lines: list[dict] = []
    try:
        run_loop(engine, a, s, clock=lambda: NOW, sleep=lambda _: None, emit=lines.append, max_cycles=1, handle_signals=False)
    finally:
        engine.dispose()
    assert [line["job"] for line in lines] == ["tick", "embed", "sync", "drain"]
    assert all(line["ok"] for line in lines), lines
    assert "Synced by the loop." in git(remote, "show", "main:left/reference/lessons-2026-12-01.md")
