"""Identity at scale: git facts read in-process as git answers, kept across requests, and extraction that rewrites nothing.

Real repositories, worktrees and submodules in temporary folders, real git as
the reference, real Postgres. Processes are counted by wrapping
``subprocess.Popen`` (the wrapper starts the real process; nothing is faked).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from brain_core.identity import ProjectIdentity
from brain_kernel.db.models import LearnedRoot, SessionRow
from brain_kernel.identity.resolver import IdentityResolver, clear_git_caches
from brain_kernel.identity.sessions import SessionRecord, record_session, record_sessions
from brain_kernel.settings import Settings
from brain_ops.extract import run_extract
from tests.support.gitrepo import add_submodule, add_worktree, git, make_repo
from tests.support.harness import make_settings
from tests.support.transcript_factory import write_claude

NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The argument lists of every process started from here on (the real processes still run)."""
    calls: list[list[str]] = []
    real = subprocess.Popen.__init__

    def counting(self, args, *rest, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(list(args) if isinstance(args, list | tuple) else [str(args)])
        real(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", counting)
    return calls


def _ident(hit: ProjectIdentity) -> tuple:
    return (hit.project, hit.repo, hit.root, hit.worktree, hit.source)


def _both(settings: Settings, folder: Path) -> tuple[tuple, tuple, IdentityResolver]:
    """The identity of ``folder`` read in-process (from a cold process cache) and as git's own processes answer it."""
    clear_git_caches()
    mine = IdentityResolver(settings)
    ours = _ident(mine.resolve(str(folder)))
    theirs = _ident(IdentityResolver(settings, in_process=False).resolve(str(folder)))
    return ours, theirs, mine


def _world(tmp_path: Path) -> tuple[Settings, dict[str, Path]]:
    """Every layout git distinguishes: checkouts, worktrees (of a bare repository too), submodule, nested, odd ``.git`` entries."""
    settings = make_settings(tmp_path, None)
    home = settings.user_home
    main = make_repo(home / "dev" / "openrig", "https://github.com/acme/openrig.git")
    (main / "src" / "deep").mkdir(parents=True)
    wt = add_worktree(main, home / "trees" / "openrig-fix", "fix")
    (wt / "pkg").mkdir()
    lib = make_repo(tmp_path / "upstream" / "lib", "https://github.com/acme/lib.git")
    platform = make_repo(home / "dev" / "platform", "git@github.com:acme/platform.git")
    sub = add_submodule(platform, lib, "vendor-lib")
    git(sub, "remote", "set-url", "origin", "https://github.com/acme/lib.git")
    nested = make_repo(platform / "experiments" / "probe")
    bare = home / "srv" / "tool.git"
    git(tmp_path, "clone", "-q", "--bare", str(main), str(bare))
    git(bare, "remote", "set-url", "origin", "git@gitlab.com:group/sub/tool.git")
    bare_wt = home / "trees" / "tool-main"
    git(bare, "worktree", "add", "-q", str(bare_wt), "main")
    remotes = make_repo(home / "dev" / "remotes")
    (remotes / ".git" / "config").write_text(
        (remotes / ".git" / "config").read_text() + '[Remote "upstream"]\n\tURL = "git@github.com:acme/Up.git" ; the fork\n[remote.other]\n\turl\n'
    )
    several = make_repo(home / "dev" / "several")
    git(several, "remote", "add", "a", "git@github.com:acme/a.git")
    git(several, "remote", "add", "b", "git@github.com:acme/b.git")
    empty_dotgit = main / "src" / "stray"
    (empty_dotgit / ".git").mkdir(parents=True)
    broken = home / "dev" / "broken"
    broken.mkdir()
    (broken / ".git").write_text("gitdir: /nowhere/at/all\n")
    plain = home / "notes" / "misc"
    plain.mkdir(parents=True)
    link = home / "links" / "openrig-link"
    link.parent.mkdir()
    link.symlink_to(main / "src")
    linked_dotgit = home / "dev" / "linked-dotgit"
    linked_dotgit.mkdir()
    (linked_dotgit / ".git").symlink_to(main / ".git")
    folders = {
        "main": main,
        "deep": main / "src" / "deep",
        "worktree": wt,
        "worktree subfolder": wt / "pkg",
        "submodule": sub,
        "superproject": platform / "experiments",
        "nested": nested,
        "bare repository": bare,
        "inside a bare repository": bare / "refs",
        "inside .git": main / ".git" / "objects",
        "worktree of a bare repository": bare_wt,
        "one remote with odd spelling": remotes,
        "several remotes, no origin": several,
        "empty .git folder": empty_dotgit,
        "gitfile naming nothing": broken,
        "plain folder": plain,
        "through a symlink": link,
        ".git as a symlink": linked_dotgit,
    }
    return settings, folders


def test_in_process_git_facts_are_what_git_says(tmp_path: Path, spawned: list[list[str]]) -> None:
    settings, folders = _world(tmp_path)
    answers = {}
    for name, folder in folders.items():
        ours, theirs, mine = _both(settings, folder)
        assert ours == theirs, name
        assert mine.git_processes == 0, name
        answers[name] = ours
    assert answers["submodule"] == ("lib", "acme/lib", str(folders["submodule"]), None, "git")
    assert answers["worktree of a bare repository"][:4] == ("tool", "group/sub/tool", str(folders["bare repository"]), "tool-main")
    assert answers["one remote with odd spelling"][1] == "acme/up"
    assert answers["empty .git folder"][:3] == ("openrig", "acme/openrig", str(folders["main"]))
    assert answers["bare repository"][4] == answers["inside .git"][4] == answers["gitfile naming nothing"][4] == "unresolved"


def test_git_itself_answers_where_reading_could_differ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spawned: list[list[str]]) -> None:
    settings = make_settings(tmp_path, None)
    home = settings.user_home
    included = make_repo(home / "dev" / "included")
    extra = tmp_path / "remotes.inc"
    extra.write_text('[remote "origin"]\n\turl = git@github.com:acme/from-include.git\n')
    git(included, "config", "include.path", str(extra))
    harmless = make_repo(home / "dev" / "harmless", "git@github.com:acme/harmless.git")
    quiet = tmp_path / "quiet.inc"
    quiet.write_text("[core]\n\tautocrlf = false\n")
    git(harmless, "config", "include.path", str(quiet))
    bare_flag = make_repo(home / "dev" / "flagged", "git@github.com:acme/flagged.git")
    git(bare_flag, "config", "core.bare", "true")
    for folder, processes in ((included, 2), (harmless, 0), (bare_flag, 1)):  # git refuses the flagged one at rev-parse
        ours, theirs, mine = _both(settings, folder)
        assert ours == theirs, folder.name
        assert mine.git_processes == processes, folder.name
    assert _both(settings, included)[0][1] == "acme/from-include"
    assert _both(settings, bare_flag)[0][4] == "unresolved"
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "remote.origin.url")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "git@github.com:acme/from-env.git")
    ours, theirs, mine = _both(settings, make_repo(home / "dev" / "by-env"))
    assert ours == theirs and ours[1] == "acme/from-env" and mine.git_processes == 2


def test_kept_answers_follow_the_disk(tmp_path: Path, spawned: list[list[str]]) -> None:
    settings = make_settings(tmp_path, None)
    home = settings.user_home
    repo = make_repo(home / "dev" / "api", "git@github.com:org1/api.git")
    (repo / "a" / "b").mkdir(parents=True)
    clear_git_caches()
    first = IdentityResolver(settings)
    assert first.resolve(str(repo / "a" / "b")).repo == "org1/api"
    assert first.git_calls == 2
    again = IdentityResolver(settings)  # a new request in the same process: nothing is read again
    assert again.resolve(str(repo / "a")).repo == "org1/api" and again.git_calls == 0
    git(repo, "remote", "set-url", "origin", "git@github.com:org2/api.git")
    moved = IdentityResolver(settings)
    assert moved.resolve(str(repo / "a" / "b")).repo == "org2/api" and moved.git_calls == 2  # its files changed: read again
    inner = make_repo(repo / "a", "git@github.com:org3/inner.git")  # a repository appears inside the known one
    assert _ident(IdentityResolver(settings).resolve(str(inner / "b"))) == ("inner", "org3/inner", str(inner), None, "git")
    assert IdentityResolver(settings).resolve(str(repo)).repo == "org2/api"
    wt = add_worktree(repo, home / "trees" / "api-x", "x")
    assert IdentityResolver(settings).resolve(str(wt)).worktree == "api-x"
    git(repo, "worktree", "remove", "--force", str(wt))
    wt.mkdir(parents=True)
    assert IdentityResolver(settings).resolve(str(wt)).project is None
    assert not [c for c in spawned if c[:1] == ["git"] and "-C" in c]  # every answer above was read, none asked of git


def test_a_second_cwd_only_marker_starts_no_git_and_writes_no_learned_root(client, settings: Settings, db: Session, spawned: list[list[str]]) -> None:
    repo = make_repo(settings.user_home / "dev" / "widget", "git@github.com:acme/widget.git")
    folder = repo / "src" / "parser"
    folder.mkdir(parents=True)
    spawned.clear()

    def post(content: str) -> dict:
        r = client.post("/marker", json={"type": "lesson", "content": content, "attrs": {"cwd": str(folder)}})
        assert r.status_code == 201, r.text
        return r.json()

    assert post("Parsers need fuzzing.")["project"] == "widget"
    assert not [c for c in spawned if "-C" in c]  # read in-process (GitPython may run `git version` once, on import)
    learned = db.execute(text("SELECT path, xmin::text FROM learned_roots")).all()
    assert [p for p, _ in learned] == [str(repo)]
    started = len(spawned)
    assert post("Fuzz the tokenizer first.")["project"] == "widget"
    assert len(spawned) == started  # the second marker started no process at all
    db.expire_all()
    assert db.execute(text("SELECT path, xmin::text FROM learned_roots")).all() == learned  # known as it was: not rewritten
    rows = db.execute(text("SELECT project, repo, metadata ->> 'project_source' FROM entries WHERE kind = 'lesson' ORDER BY content")).all()
    assert [tuple(r) for r in rows] == [("widget", "acme/widget", "git")] * 2


def test_a_nested_repository_under_a_learned_root_resolves_to_itself(tmp_path: Path, database_url: str, db: Session) -> None:
    settings = make_settings(tmp_path, database_url)
    outer = make_repo(settings.user_home / "dev" / "platform", "git@github.com:acme/platform.git")
    (outer / "docs").mkdir()
    assert IdentityResolver(settings, db).resolve(str(outer / "docs")).project == "platform"
    db.commit()
    inner = make_repo(outer / "vendor" / "lib", "git@github.com:acme/lib.git")
    (inner / "src").mkdir()
    later = IdentityResolver(settings, db)  # the outer root is learned and its facts are kept in this process
    assert _ident(later.resolve(str(inner / "src"))) == ("lib", "acme/lib", str(inner), None, "git")
    assert later.resolve(str(outer / "docs")).project == "platform"
    db.commit()
    assert {r.path: r.project for r in db.scalars(select(LearnedRoot))} == {str(outer): "platform", str(inner): "lib"}
    shutil.rmtree(inner / ".git")  # no longer a repository: the folder is the outer one's again
    assert IdentityResolver(settings, db).resolve(str(inner / "src")).project == "platform"


def _row_versions(db: Session, table: str, key: str) -> dict[str, str]:
    db.expire_all()
    return dict(db.execute(text(f"SELECT {key}, xmin::text FROM {table}")).all())


def test_an_unchanged_extract_rerun_writes_no_session_row(tmp_path: Path, database_url: str, db: Session) -> None:
    settings = make_settings(tmp_path, database_url)
    home = settings.user_home
    repo = make_repo(home / "dev" / "api", "git@github.com:acme/api.git")
    wt = add_worktree(repo, home / "wt" / "api-feature", "feature")
    plain = home / "notes"
    plain.mkdir()
    later_repo = home / "dev" / "later"
    later_repo.mkdir(parents=True)
    for n, cwd in enumerate([repo, wt, repo / "gone", plain, later_repo, home / "scratchpad" / "api" / "t1"] * 3):
        write_claude(settings.resolved_claude_dir, f"s-{n:03d}", str(cwd), NOW - dt.timedelta(hours=2, minutes=n), ["One", "Two"])
    first = run_extract(settings, since=None, min_turns=1, db=db)
    db.commit()
    assert first["sessions_recorded"] == 18
    sessions, learned = _row_versions(db, "sessions", "session_id"), _row_versions(db, "learned_roots", "path")
    assert len(sessions) == 18 and set(learned) == {str(repo), str(wt)}
    assert db.get(SessionRow, "s-002").source == "learned"  # repo/gone: under the root the same run learned

    again = run_extract(settings, since=None, min_turns=1, db=db)
    db.commit()
    assert again["sessions_recorded"] == 0
    assert _row_versions(db, "sessions", "session_id") == sessions
    assert _row_versions(db, "learned_roots", "path") == learned
    assert [s["project_source"] for s in again["sessions"]].count("session") == 12  # the 6 unresolved were resolved again

    make_repo(later_repo, "git@github.com:acme/later.git")  # the plain folder became a repository: only its sessions change
    third = run_extract(settings, since=None, min_turns=1, db=db)
    db.commit()
    changed = {sid for sid, version in _row_versions(db, "sessions", "session_id").items() if sessions[sid] != version}
    assert third["sessions_recorded"] == 3 == len(changed)
    assert {db.get(SessionRow, sid).project for sid in changed} == {"later"}


def test_batched_session_records_equal_one_at_a_time(tx: Session) -> None:
    def ident(project: str | None, cwd: str) -> ProjectIdentity:
        return ProjectIdentity(project, f"acme/{project}" if project else None, None, None, cwd, "git" if project else "unresolved")

    t1, t2 = NOW - dt.timedelta(hours=2), NOW - dt.timedelta(hours=1)
    sequence = [
        SessionRecord("a", ident(None, "/x"), agent="claude", started_at=t2),
        SessionRecord("b", ident("web", "/w")),
        SessionRecord("a", ident("api", "/y"), agent=None, started_at=t1),
        SessionRecord("c", ident("api", "/z"), agent="codex"),
    ]
    for record in sequence:
        record_session(tx, record.session_id, record.identity, agent=record.agent, started_at=record.started_at)
    one_by_one = {r.session_id: (r.agent, r.project, r.repo, r.cwd, r.source, r.started_at) for r in tx.scalars(select(SessionRow))}
    tx.execute(text("DELETE FROM sessions"))
    assert record_sessions(tx, sequence) == 3
    batched = {
        r.session_id: (r.agent, r.project, r.repo, r.cwd, r.source, r.started_at)
        for r in tx.scalars(select(SessionRow).execution_options(populate_existing=True))
    }
    assert batched == one_by_one
    assert batched["a"] == ("claude", "api", "acme/api", "/y", "git", t2)
    assert record_sessions(tx, sequence) == 0
    assert record_sessions(tx, [SessionRecord("c", ident("api", "/moved"))]) == 1


def test_the_process_cache_is_bounded(tmp_path: Path) -> None:
    from brain_kernel.identity import gitfacts

    settings = make_settings(tmp_path, None)
    repos = [make_repo(settings.user_home / "dev" / f"r{n}", f"git@github.com:acme/r{n}.git") for n in range(4)]
    clear_git_caches()
    small = gitfacts._Lru(2)
    previous, gitfacts._TOPLEVELS = gitfacts._TOPLEVELS, small
    try:
        for repo in repos:
            assert IdentityResolver(settings).resolve(str(repo)).repo == f"acme/{repo.name}"
        assert len(small) == 2
        assert IdentityResolver(settings).resolve(str(repos[0])).repo == "acme/r0"  # evicted, read again
    finally:
        gitfacts._TOPLEVELS = previous
    assert os.path.isdir(repos[0])
