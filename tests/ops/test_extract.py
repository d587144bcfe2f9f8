"""``brain extract`` on real temporary repositories and generated transcripts."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from brain_kernel.db.models import LearnedRoot, SessionRow
from brain_kernel.identity.transcript_files import TranscriptFile, read_summary
from brain_kernel.settings import Settings
from brain_ops.extract import parse_when, run_extract
from tests.support.harness import REPO_ROOT, brain, make_settings, settings_env
from tests.support.transcript_factory import add_worktree, make_repo, write_claude, write_claude_subagent, write_codex

NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
T0 = NOW - dt.timedelta(hours=3)
PROMPTS = ["Fix the flaky login test in the auth module", "Now run the whole suite", "Commit it please"]


class World:
    """A user home with real repos, a worktree, a subfolder, a scratch folder, and transcripts of each."""

    def __init__(self, tmp_path: Path, database_url: str | None = None) -> None:
        self.settings: Settings = make_settings(tmp_path, database_url)
        self.home = self.settings.user_home
        self.claude = self.settings.resolved_claude_dir
        self.codex = self.settings.resolved_codex_dir
        self.api = make_repo(self.home / "dev" / "api", "git@github.com:acme/api.git")
        self.worktree = add_worktree(self.api, self.home / "wt" / "api-feature", "feature")
        (self.api / "src" / "pkg").mkdir(parents=True)
        self.subfolder = self.api / "src" / "pkg"
        self.scratch = self.home / "scratchpad" / "api" / "task1"
        self.scratch.mkdir(parents=True)
        self.other_api = make_repo(self.home / "other" / "api", "https://github.com/org2/api.git")
        self.ids: dict[str, str] = {}

    def claude_session(self, name: str, cwd: Path | str, start: dt.datetime = T0, **kwargs: object) -> Path:
        sid = f"00000000-0000-4000-8000-{len(self.ids):012d}"
        self.ids[name] = sid
        return write_claude(self.claude, sid, str(cwd), start, kwargs.pop("prompts", PROMPTS), **kwargs)  # type: ignore[arg-type]

    def codex_session(self, name: str, cwd: Path | str, start: dt.datetime = T0, **kwargs: object) -> Path:
        sid = f"019a0000-0000-7000-8000-{len(self.ids):012d}"
        self.ids[name] = sid
        return write_codex(self.codex, sid, str(cwd), start, kwargs.pop("prompts", PROMPTS), **kwargs)  # type: ignore[arg-type]

    def extract(self, **kwargs: object) -> dict:
        options: dict[str, object] = {"since": NOW - dt.timedelta(days=2), "min_turns": 1}
        options.update(kwargs)
        return run_extract(self.settings, **options)  # type: ignore[arg-type]


def by_name(world: World, bundle: dict) -> dict[str, dict]:
    ids = {sid: name for name, sid in world.ids.items()}
    return {ids[s["session_id"]]: s for s in bundle["sessions"] if s["session_id"] in ids}


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def test_each_kind_of_folder_resolves_to_its_real_project(world: World) -> None:
    world.claude_session("primary", world.api)
    world.claude_session("worktree", world.worktree, start=T0 + dt.timedelta(minutes=30))
    world.claude_session("subfolder", world.subfolder)
    world.claude_session("scratch", world.scratch)
    world.claude_session("home", world.home)
    world.claude_session("twin", world.other_api)
    world.codex_session("codex_gone", world.home / "dev" / "deleted-repo", repo_url="https://github.com/acme/Widget.git")
    sessions = by_name(world, world.extract())

    assert sessions["primary"]["project"] == "api" and sessions["primary"]["repo"] == "acme/api"
    assert sessions["primary"]["worktree"] is None and sessions["primary"]["project_source"] == "git"
    assert sessions["worktree"]["project"] == "api" and sessions["worktree"]["repo"] == "acme/api"
    assert sessions["worktree"]["worktree"] == "api-feature"
    assert sessions["subfolder"]["repo"] == "acme/api"
    assert sessions["scratch"]["project"] == "api" and sessions["scratch"]["project_source"] == "layout"
    assert sessions["home"]["project"] is None and sessions["home"]["project_source"] == "unresolved"
    assert sessions["twin"]["project"] == "api" and sessions["twin"]["repo"] == "org2/api"
    gone = sessions["codex_gone"]
    assert not Path(gone["cwd"]).exists()
    assert (gone["project"], gone["repo"], gone["project_source"], gone["agent"]) == ("widget", "acme/widget", "transcript", "codex")


def test_every_session_carries_identity_and_activity_fields(world: World) -> None:
    world.claude_session("primary", world.api, branch="fix/login")
    world.codex_session("codex", world.worktree, repo_url="git@github.com:acme/api.git", branch="feature")
    bundle = world.extract()
    assert bundle["sessions_returned"] == 2 and bundle["sessions_scanned"] == 2
    required = {
        "agent",
        "project",
        "repo",
        "worktree",
        "project_source",
        "cwd",
        "git_branch",
        "session_id",
        "start",
        "end",
        "duration_minutes",
        "num_user_turns",
        "num_assistant_turns",
        "num_tool_calls",
        "first_user_prompt",
        "last_user_prompt",
        "top_tools",
        "compactions",
        "joy_markers",
        "error_markers",
    }
    for session in bundle["sessions"]:
        assert required <= set(session), required - set(session)
    sessions = by_name(world, bundle)
    assert sessions["primary"]["agent"] == "claude" and sessions["primary"]["git_branch"] == "fix/login"
    assert sessions["primary"]["first_user_prompt"] == PROMPTS[0]
    assert sessions["primary"]["num_user_turns"] == 3 and sessions["primary"]["num_tool_calls"] == 6
    assert sessions["codex"]["agent"] == "codex" and sessions["codex"]["git_branch"] == "feature"
    json.dumps(bundle)  # JSON-ready


def test_bad_files_are_counted_as_skipped(world: World) -> None:
    good_path = world.claude_session("good", world.api)
    folder = world.claude / "-junk"
    folder.mkdir(parents=True)
    (folder / "empty-session.jsonl").write_bytes(b"")
    (folder / "binary-session.jsonl").write_bytes(b"\xff\xfe\x00\x01garbage\n\xc3\x28\n")
    good_lines = good_path.read_bytes()
    (folder / "mixed-session.jsonl").write_bytes(b"{broken json\n\xff\xff\n" + good_lines.replace(world.ids["good"].encode(), b"mixed"))
    bundle = world.extract()
    assert bundle["sessions_scanned"] == 4
    assert bundle["sessions_returned"] == 2  # good and mixed
    assert bundle["skipped_by_reason"]["empty"] == 1
    assert bundle["skipped_by_reason"]["no_activity"] == 1
    assert bundle["skipped"] == 2
    assert bundle["lines_skipped"]["malformed"] == 1
    assert bundle["lines_skipped"]["non_utf8"] == 3


def test_window_min_turns_and_project_filters(world: World) -> None:
    world.claude_session("recent", world.api)
    world.claude_session("short", world.api, prompts=["One thing only please"])
    old = world.claude_session("old", world.other_api, start=NOW - dt.timedelta(days=10))
    past = (NOW - dt.timedelta(days=10)).timestamp()
    os.utime(old, (past, past))
    bundle = world.extract(min_turns=5)
    names = set(by_name(world, bundle))
    assert names == {"recent"}
    assert bundle["skipped_by_reason"]["below_min_turns"] == 1
    assert bundle["skipped_by_reason"]["outside_window"] == 1
    everything = world.extract(since=None, min_turns=0)
    assert set(by_name(world, everything)) == {"recent", "short", "old"}
    assert set(by_name(world, world.extract(since=None, project="org2/api"))) == {"old"}
    assert set(by_name(world, world.extract(since=None, project="api"))) == {"recent", "short", "old"}
    until = world.extract(since=None, until=NOW - dt.timedelta(days=5))
    assert set(by_name(world, until)) == {"old"}


def test_git_runs_at_most_twice_per_distinct_folder(world: World) -> None:
    folders = [world.api, world.worktree, world.subfolder, world.scratch, world.other_api]
    for n in range(30):
        world.claude_session(f"s{n}", folders[n % len(folders)], start=T0 + dt.timedelta(minutes=n))
    bundle = world.extract()
    assert bundle["sessions_returned"] == 30
    assert 0 < bundle["git_calls"] <= 2 * len(folders)


def test_large_transcript_is_streamed_not_loaded(world: World) -> None:
    path = world.claude_session("big", world.api, prompts=[f"Step {i} of the migration" for i in range(300)], filler_chars=20_000)
    size = path.stat().st_size
    assert size > 10_000_000
    tracemalloc.start()
    try:
        summary = read_summary(TranscriptFile(path, "claude", world.ids["big"]))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert summary.num_user_turns == 300
    assert peak < size / 5, f"peak {peak} bytes for a {size} byte file"


def test_duration_and_date_bounds() -> None:
    now = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.timezone.utc)
    assert parse_when("24h", now) == now - dt.timedelta(hours=24)
    assert parse_when("7d", now) == now - dt.timedelta(days=7)
    assert parse_when("90m", now) == now - dt.timedelta(minutes=90)
    assert parse_when("2026-11-01", now) == dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    assert parse_when("all", now) is None and parse_when(None, now) is None
    from brain_kernel.errors import ConfigError

    with pytest.raises(ConfigError):
        parse_when("yesterday-ish", now)


def test_samples_extract_through_the_cli(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, None)
    env = settings_env(settings)
    data = REPO_ROOT / "tests" / "data"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "brain_cli",
            "extract",
            "--since",
            "all",
            "--min-turns",
            "1",
            "--claude-dir",
            str(data / "claude" / "projects"),
            "--codex-dir",
            str(data / "codex"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    bundle = json.loads(proc.stdout)
    agents = {s["agent"]: s for s in bundle["sessions"]}
    assert set(agents) == {"claude", "codex"}
    assert agents["codex"]["repo"] == "acme/widget" and agents["codex"]["project_source"] == "transcript"
    assert agents["claude"]["project"] is None  # /home/dev/... is not on this machine and matches no pattern
    assert "extract" in proc.stderr  # progress on stderr, JSON alone on stdout


def test_with_database_records_the_sessions_in_the_embedded_default(tmp_path: Path, embedded_home: Path) -> None:
    """No DATABASE_URL (the embedded default): --with-database starts the one under BRAIN_HOME for the run, so the
    sessions (and the trial's outcomes) are recorded, as the ops loop's daily extract records them."""
    settings = make_settings(tmp_path, None, home=embedded_home)
    data = REPO_ROOT / "tests" / "data"
    args = ["extract", "--since", "all", "--min-turns", "1", "--claude-dir", str(data / "claude" / "projects"), "--codex-dir", str(data / "codex")]
    plain = brain(settings, *args)
    assert plain.exit_code == 0 and json.loads(plain.stdout)["sessions_recorded"] == 0  # no database: nothing recorded
    recorded = brain(settings, *args, "--with-database")
    assert recorded.exit_code == 0, recorded.stderr
    assert json.loads(recorded.stdout)["sessions_recorded"] == 2


def test_with_a_database_sessions_and_learned_roots_are_recorded_and_reused(tmp_path: Path, database_url: str, db: Session) -> None:
    world = World(tmp_path, database_url)
    world.claude_session("primary", world.api)
    world.claude_session("worktree", world.worktree)
    bundle = run_extract(world.settings, since=None, min_turns=1, db=db)
    db.commit()
    assert bundle["sessions_recorded"] == 2
    rows = {r.session_id: r for r in db.scalars(select(SessionRow))}
    assert rows[world.ids["worktree"]].repo == "acme/api" and rows[world.ids["worktree"]].worktree == "api-feature"
    assert rows[world.ids["primary"]].agent == "claude"
    assert db.scalars(select(LearnedRoot)).first() is not None

    # The repositories disappear (a pod without them): the index still knows every session and folder.
    shutil.rmtree(world.worktree)
    shutil.rmtree(world.api)
    world.claude_session("later", world.home / "dev" / "api" / "src")
    again = run_extract(world.settings, since=None, min_turns=1, db=db)
    sessions = by_name(world, again)
    assert sessions["primary"]["repo"] == "acme/api" and sessions["primary"]["project_source"] == "session"
    assert sessions["later"]["repo"] == "acme/api" and sessions["later"]["project_source"] == "learned"
    assert again["git_calls"] == 0


def test_subagent_work_joins_its_parent_session_in_both_layouts_and_is_never_a_session(world: World) -> None:
    world.claude_session("nested", world.api, prompts=["Find and fix the login bug"])
    world.claude_session("flat", world.worktree, start=T0 + dt.timedelta(minutes=30), prompts=["Review the feature branch"])
    task_time = T0 + dt.timedelta(minutes=10)
    write_claude_subagent(world.claude, world.ids["nested"], "a1111111", str(world.api), task_time, "Search for the login handler", tools=("Grep", "Read"))
    write_claude_subagent(world.claude, world.ids["nested"], "a2222222", str(world.api), task_time, "Read the tests", tools=("Read",))
    write_claude_subagent(world.claude, world.ids["flat"], "b3333333", str(world.worktree), task_time, "List the changes", tools=("Bash",), flat=True)
    # A subagent whose session left no transcript, in a folder of its own: skipped, never given a project guess.
    write_claude_subagent(world.claude, "gone-session", "c4444444", str(world.scratch), task_time, "Orphan work")
    result = brain(world.settings, "extract", "--since", "2d", "--min-turns", "1")
    assert result.exit_code == 0, result.stderr
    bundle = json.loads(result.stdout)
    assert sorted(s["session_id"] for s in bundle["sessions"]) == sorted(world.ids.values())
    sessions = by_name(world, bundle)
    nested, flat = sessions["nested"], sessions["flat"]
    # Its own two tool calls (Bash, Edit) plus the subagents': one session, its project, one arc.
    assert (nested["subagents"], nested["num_tool_calls"], nested["top_tools"]["Read"]) == (2, 5, 2)
    assert (nested["project"], nested["num_user_turns"], nested["first_user_prompt"]) == ("api", 1, "Find and fix the login bug")
    assert nested["subagent_turns"] == 5  # the subagents' assistant turns, apart from the session's own
    assert (flat["subagents"], flat["num_tool_calls"], flat["top_tools"]["Bash"], flat["worktree"]) == (1, 3, 2, "api-feature")
    assert (bundle["subagent_files"], bundle["subagents_merged"]) == (4, 3)
    assert bundle["skipped_by_reason"]["subagent_without_session"] == 1
