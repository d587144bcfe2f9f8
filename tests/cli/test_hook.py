"""``brain hook claude|codex <event>``: the real hook process, on the samples' payloads, against a kernel.

Each test runs the process (``python -m brain_cli.hook``) with HOME at a
temporary folder holding the client file, so the outbox and the sent keys are
the test's own. The real kernel is the run's multi-worker ``brain serve``; the
stand-in (tests/support/hook_kernel.py) counts exactly what a hook sent.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import text

from brain_cli.hook import outbox as outbox_module
from tests.support.gitrepo import git, make_repo
from tests.support.harness import Served
from tests.support.hook_kernel import BLOCK, RECALLED, stub_kernel
from tests.support.servers import free_port

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "hooks"  # the agents' documented payloads
BUDGET = 2.0

MARKERS = [
    ("lesson", 'title="Pin the clock"', "Auth tests flake when the clock moves; pin it."),
    ("lesson", "", "The login test needs a fresh database per run."),
    ("milestone", "status=done", "Auth tests are stable."),
    ("milestone", 'scope=auth title="Clock pinned"', "The clock is pinned in every auth test."),
    ("signal", "severity=warning", "The staging database is nearly full."),
    ("decision", 'title="Freeze the clock in tests" status=accepted', "Tests freeze time through one fixture."),
    ("decision", 'title="One auth fixture"', "Every auth test uses the same fixture."),
]


def _sample(name: str, **changes: object) -> dict[str, object]:
    """A sample payload with some fields changed (cwd to a real repository, transcript_path to a written one)."""
    payload = json.loads((SAMPLES / name).read_text())
    payload.update(changes)
    return payload


def _transcript(path: Path, session: str) -> Path:
    """A Claude transcript whose assistant turns hold the seven block markers (and markers that must not post)."""
    lines = [{"type": "user", "sessionId": session, "message": {"role": "user", "content": "<!-- @lesson -->from the user, never posted<!-- @/lesson -->"}}]
    for n, (kind, attrs, content) in enumerate(MARKERS):
        opening = f"<!-- @{kind} {attrs} -->" if attrs else f"<!-- @{kind} -->"
        said = f"Step {n} done.\n\n{opening}\n{content}\n<!-- @/{kind} -->\n\nMoving on. <!-- @hot arc=x -->"
        lines.append({"type": "assistant", "sessionId": session, "message": {"role": "assistant", "content": [{"type": "text", "text": said}]}})
    lines.append({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "tool_use", "name": "Bash", "input": {}}]}})
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    return path


def _home(tmp_path: Path, url: str) -> Path:
    home = tmp_path / "home"
    client = home / ".config" / "brain" / "client.json"
    client.parent.mkdir(parents=True, exist_ok=True)
    client.write_text(json.dumps({"url": url, "token": None}))
    client.chmod(0o600)
    return home


def _point(home: Path, url: str) -> None:
    (home / ".config" / "brain" / "client.json").write_text(json.dumps({"url": url, "token": None}))


def hook(
    home: Path, agent: str, event: str, payload: dict[str, object], *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the hook process once (``env``: variables the agent adds): (its result, seconds it took)."""
    env = {**os.environ, "HOME": str(home), **(env or {})}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "brain_cli.hook", agent, event, *args], input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=30
    )
    return proc, time.monotonic() - started


def hooks_at_once(home: Path, *runs: tuple[str, str, dict[str, object]]) -> list[tuple[subprocess.CompletedProcess[str], float]]:
    """Run a hook process per (agent, event, payload) at the same time, as an agent's hooks may run: each one's (result, seconds)."""
    with ThreadPoolExecutor(len(runs)) as pool:
        return list(pool.map(lambda run: hook(home, *run), runs))


def _outbox(home: Path) -> list[Path]:
    folder = home / ".local" / "state" / "brain" / "outbox"
    return sorted(folder.glob("*.json")) if folder.exists() else []


def _hook_keys(served: Served) -> int:
    served.db.rollback()
    return served.db.execute(text("SELECT count(*) FROM idempotency_keys WHERE key LIKE 'hook-%'")).scalar_one()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "dev" / "widget", remote="git@github.com:acme/widget.git")


def test_stop_posts_every_block_marker_once_and_a_second_stop_posts_none(served: Served, tmp_path: Path, repo: Path) -> None:
    home = _home(tmp_path, served.base)
    payload = _sample("claude-stop.json", cwd=str(repo))
    payload["transcript_path"] = str(_transcript(tmp_path / "t.jsonl", str(payload["session_id"])))
    first, _ = hook(home, "claude", "Stop", payload)
    assert (first.returncode, first.stdout) == (0, "")
    assert _hook_keys(served) == 7
    assert _outbox(home) == []
    again, _ = hook(home, "claude", "Stop", payload)
    assert (again.returncode, again.stdout) == (0, "")
    assert _hook_keys(served) == 7
    # Without the local record of sent keys, the kernel replays: still nothing new.
    for sent in (home / ".local" / "state" / "brain" / "sent").iterdir():
        sent.unlink()
    hook(home, "claude", "Stop", payload)
    assert _hook_keys(served) == 7
    assert _outbox(home) == []


def test_with_the_kernel_down_markers_wait_and_the_next_hook_drains_them(served: Served, tmp_path: Path, repo: Path) -> None:
    home = _home(tmp_path, f"http://127.0.0.1:{free_port()}")  # nothing listens there
    payload = _sample("claude-stop.json", cwd=str(repo))
    payload["transcript_path"] = str(_transcript(tmp_path / "t.jsonl", str(payload["session_id"])))
    down, took = hook(home, "claude", "Stop", payload)
    assert (down.returncode, down.stdout) == (0, "")
    assert took < BUDGET + 1
    assert len(_outbox(home)) == 7
    hook(home, "claude", "Stop", payload)  # still down: queued once, not twice
    assert len(_outbox(home)) == 7
    _point(home, served.base)
    back, _ = hook(home, "claude", "UserPromptSubmit", _sample("claude-user-prompt-submit.json", cwd=str(repo)))
    assert (back.returncode, back.stdout) == (0, "")
    assert _outbox(home) == []
    assert _hook_keys(served) == 7


def test_a_kernel_that_never_answers_costs_the_budget_and_nothing_more(tmp_path: Path, repo: Path) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # accepts connections, never answers
        home = _home(tmp_path, f"http://127.0.0.1:{silent.getsockname()[1]}")
        begin = _sample("claude-session-start.json", cwd=str(repo))
        end = _sample("claude-stop.json", cwd=str(repo))
        end["transcript_path"] = str(_transcript(tmp_path / "t.jsonl", str(end["session_id"])))
        # Both at once: each waits out its own budget on the silent kernel, so run in turn they cost two.
        (start, took), (stop, stop_took) = hooks_at_once(home, ("claude", "SessionStart", begin), ("claude", "Stop", end))
        assert (start.returncode, start.stdout) == (0, "")
        assert BUDGET - 0.2 < took < BUDGET + 1
        assert (stop.returncode, stop.stdout, stop_took < BUDGET + 1) == (0, "", True)
        assert len(_outbox(home)) == 7


def test_the_budget_counts_from_the_process_start_not_from_the_hooks_imports(tmp_path: Path, repo: Path) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        home = _home(tmp_path, f"http://127.0.0.1:{silent.getsockname()[1]}")
        late = "import sys, time; time.sleep(1.0); from brain_cli.hook.run import main; sys.exit(main(sys.argv[1:]))"  # a slow start
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-c", late, "claude", "SessionStart"],
            input=json.dumps(_sample("claude-session-start.json", cwd=str(repo))),
            capture_output=True,
            text=True,
            env={**os.environ, "HOME": str(home)},
            timeout=30,
        )
        took = time.monotonic() - started
    assert (proc.returncode, proc.stdout) == (0, "")
    assert BUDGET - 0.2 < took < BUDGET + 0.5, took  # the second spent starting is part of the 2 s, not before them


def test_the_drain_sends_each_waiting_marker_exactly_once_oldest_first(tmp_path: Path, repo: Path) -> None:
    port = free_port()
    home = _home(tmp_path, f"http://127.0.0.1:{port}")
    payload = _sample("claude-stop.json", cwd=str(repo))
    payload["transcript_path"] = str(_transcript(tmp_path / "t.jsonl", str(payload["session_id"])))
    hook(home, "claude", "Stop", payload)
    queued = [json.loads(p.read_text())["key"] for p in _outbox(home)]
    assert len(set(queued)) == 7
    with stub_kernel(port) as stub:
        hook(home, "claude", "UserPromptSubmit", _sample("claude-user-prompt-submit.json"))
        hook(home, "claude", "Stop", payload)
    posted = [key for method, path, key, _ in stub.requests if (method, path) == ("POST", "/marker")]
    assert posted == queued
    bodies = [body for method, path, _, body in stub.requests if path == "/marker"]
    assert [b["type"] for b in bodies] == [m[0] for m in MARKERS]
    assert bodies[0]["attrs"] == {
        "project": "widget",
        "repo": "acme/widget",
        "cwd": str(repo),
        "title": "Pin the clock",
        "session_id": payload["session_id"],
        "source": "claude-code",
        "commit": git(repo, "rev-parse", "HEAD").strip(),
    }
    assert bodies[5]["attrs"]["status"] == "accepted"


def test_a_refused_marker_moves_aside_with_its_reason_and_a_bad_file_stops_nothing(tmp_path: Path, repo: Path) -> None:
    with stub_kernel(refuse={"signal"}) as stub:
        home = _home(tmp_path, f"http://127.0.0.1:{free_port()}")
        payload = _sample("claude-stop.json", cwd=str(repo))
        payload["transcript_path"] = str(_transcript(tmp_path / "t.jsonl", str(payload["session_id"])))
        hook(home, "claude", "Stop", payload)
        outbox = home / ".local" / "state" / "brain" / "outbox"
        (outbox / "00000000000000000000-garbage.json").write_text("{not json")
        _point(home, stub.url)
        hook(home, "claude", "UserPromptSubmit", _sample("claude-user-prompt-submit.json"))
        assert _outbox(home) == []
        refused = sorted((outbox / "refused").glob("*.json"))
        reasons = [json.loads(p.read_text())["refused"] for p in refused]
        assert reasons[0]["detail"].startswith("unreadable outbox file")
        assert reasons[1] == {"status": 400, "detail": "invalid marker type: 'signal'"}
        assert len(refused) == 2
        hook(home, "claude", "Stop", payload)  # a refused marker is never retried
    assert sum(1 for _, path, _, body in stub.requests if path == "/marker" and body["type"] == "signal") == 1
    assert sum(1 for _, path, _, _ in stub.requests if path == "/marker") == 7


def test_behind_a_proxy_that_refuses_http_1_0_and_chunks_its_answers_every_hook_works(tmp_path: Path, repo: Path) -> None:
    with stub_kernel(proxy=True) as stub:
        home = _home(tmp_path, stub.url)
        start, _ = hook(home, "claude", "SessionStart", _sample("claude-session-start.json", cwd=str(repo)))
        assert json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"] == BLOCK.strip()
        payload = _sample("claude-stop.json", cwd=str(repo))
        payload["transcript_path"] = str(_transcript(tmp_path / "t.jsonl", str(payload["session_id"])))
        hook(home, "claude", "Stop", payload)
    assert _outbox(home) == [] and not (home / ".local" / "state" / "brain" / "outbox" / "refused").exists()
    assert sum(1 for _, path, _, _ in stub.requests if path == "/marker") == 7


def test_a_marker_the_kernel_fails_on_holds_back_no_other_and_a_proxys_4xx_refuses_none(tmp_path: Path, repo: Path) -> None:
    fault = (500, "text/plain; charset=utf-8", b"Internal Server Error")
    not_the_kernel = (404, "text/html", b"<html><h1>404 Not Found</h1></html>")  # a gateway's page: no word of the kernel
    with stub_kernel(answers={"signal": fault, "milestone": not_the_kernel}) as stub:
        home = _home(tmp_path, stub.url)
        payload = _sample("claude-stop.json", cwd=str(repo))
        payload["transcript_path"] = str(_transcript(tmp_path / "t.jsonl", str(payload["session_id"])))
        hook(home, "claude", "Stop", payload)
        # The drain stops at the gateway's 404 (the way to the kernel is wrong, so is every marker's) ...
        assert [json.loads(p.read_text())["marker"]["type"] for p in _outbox(home)] == ["milestone", "milestone", "signal", "decision", "decision"]
        stub.answers.pop("milestone")
        for _ in range(outbox_module.MAX_FAULTS):  # ... and goes past the one marker the kernel fails on, each hook
            hook(home, "claude", "UserPromptSubmit", _sample("claude-user-prompt-submit.json"))
    assert _outbox(home) == []
    [refused] = (home / ".local" / "state" / "brain" / "outbox" / "refused").glob("*.json")
    kept = json.loads(refused.read_text())
    assert kept["refused"] == {"status": 500, "detail": "Internal Server Error", "faults": outbox_module.MAX_FAULTS}
    assert kept["queued"]["marker"]["type"] == "signal"
    posted = [body["type"] for _, path, _, body in stub.requests if path == "/marker"]
    assert posted.count("signal") == outbox_module.MAX_FAULTS and posted.count("decision") == 2 and posted.count("milestone") == 3


def test_a_session_the_kernel_does_not_register_gets_only_its_folders_block(tmp_path: Path, repo: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with stub_kernel(session_status=403) as stub:  # a token bound to another project
        home = _home(tmp_path, stub.url)
        start, _ = hook(home, "claude", "SessionStart", _sample("claude-session-start.json", cwd=str(repo)))
        elsewhere, _ = hook(home, "claude", "SessionStart", _sample("claude-session-start.json", cwd=str(plain)))
    asked = [path for method, path, _, _ in stub.requests if method == "GET"]
    # this folder's project by name, which such a token is refused; never the token's own block or the fleet's
    assert len(asked) == 1 and "project=acme%2Fwidget" in asked[0], asked
    assert json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"] == BLOCK.strip()  # the stub answers any project
    assert elsewhere.stdout == ""


def test_a_marker_waits_for_the_kernel_of_the_client_file_it_was_queued_with(tmp_path: Path, repo: Path) -> None:
    home = _home(tmp_path, "http://127.0.0.1:9")
    team_a, team_b = tmp_path / "a.json", tmp_path / "b.json"
    down = free_port()
    team_a.write_text(json.dumps({"url": f"http://127.0.0.1:{down}"}))
    payload = _sample("claude-stop.json", cwd=str(repo))
    payload["transcript_path"] = str(_transcript(tmp_path / "t.jsonl", str(payload["session_id"])))
    hook(home, "claude", "Stop", payload, "--client-file", str(team_a))  # team A's kernel is down: all 7 wait
    assert len(_outbox(home)) == 7
    with stub_kernel() as b:
        team_b.write_text(json.dumps({"url": b.url}))
        hook(home, "claude", "UserPromptSubmit", _sample("claude-user-prompt-submit.json"), "--client-file", str(team_b))
    assert not [r for r in b.requests if r[1] == "/marker"] and len(_outbox(home)) == 7
    with stub_kernel(port=down) as a:
        hook(home, "claude", "UserPromptSubmit", _sample("claude-user-prompt-submit.json"), "--client-file", str(team_a))
    assert len([r for r in a.requests if r[1] == "/marker"]) == 7 and _outbox(home) == []


def test_a_marker_shown_as_code_is_an_example_not_memory(tmp_path: Path, repo: Path) -> None:
    said = [
        "To record a lesson, write:\n```markdown\n<!-- @lesson -->\nyour lesson text here\n<!-- @/lesson -->\n```\nThat is all.",
        "The inline form is `<!-- @decision -->text<!-- @/decision -->`, rarely used.",
        "<!-- @lesson -->\nSync first:\n```sh\nuv sync\n```\n<!-- @/lesson -->",  # real, with code inside
        "<!-- @milestone -->The `make test` target is green.<!-- @/milestone -->",
    ]
    lines = [{"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": t}]}} for t in said]
    transcript = tmp_path / "examples.jsonl"
    transcript.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    with stub_kernel() as stub:
        home = _home(tmp_path, stub.url)
        hook(home, "claude", "Stop", _sample("claude-stop.json", cwd=str(repo), transcript_path=str(transcript)))
    posted = [(body["type"], body["content"]) for _, path, _, body in stub.requests if path == "/marker"]
    assert posted == [("lesson", "Sync first:\n```sh\nuv sync\n```"), ("milestone", "The `make test` target is green.")]


def test_a_subagent_stop_reads_the_subagent_transcript(tmp_path: Path, repo: Path) -> None:
    with stub_kernel() as stub:
        home = _home(tmp_path, stub.url)
        payload = _sample("claude-subagent-stop.json", cwd=str(repo))
        main = tmp_path / "s.jsonl"
        _transcript(main, "other")
        sub = tmp_path / str(payload["session_id"]) / "subagents" / f"agent-{payload['agent_id']}.jsonl"
        sub.parent.mkdir(parents=True)
        sub.write_text(
            json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "<!-- @lesson -->sub<!-- @/lesson -->"}]}})
        )
        payload.update(transcript_path=str(main), agent_transcript_path=None)
        result, _ = hook(home, "claude", "SubagentStop", payload)
    assert (result.returncode, result.stdout) == (0, "")
    bodies = [body for _, path, _, body in stub.requests if path == "/marker"]
    assert [(b["content"], b["attrs"]["agent_id"]) for b in bodies] == [("sub", payload["agent_id"])]
    # the parent session's id and its folder's project: a subagent's marker is its parent's project's
    assert (bodies[0]["attrs"]["session_id"], bodies[0]["attrs"]["project"], bodies[0]["attrs"]["repo"]) == (payload["session_id"], "widget", "acme/widget")


def test_a_codex_stop_reads_the_rollout(tmp_path: Path, repo: Path) -> None:
    with stub_kernel() as stub:
        home = _home(tmp_path, stub.url)
        rollout = tmp_path / "rollout.jsonl"
        said = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "<!-- @decision title=T -->Use one fixture.<!-- @/decision -->"}],
        }
        rollout.write_text(json.dumps({"type": "response_item", "payload": said}) + "\n")
        payload = _sample("codex-stop.json", cwd=str(repo), transcript_path=str(rollout))
        hook(home, "codex", "Stop", payload)
    bodies = [body for _, path, _, body in stub.requests if path == "/marker"]
    assert [(b["type"], b["content"], b["attrs"]["source"], b["attrs"]["title"]) for b in bodies] == [("decision", "Use one fixture.", "codex", "T")]


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_session_start_prints_the_memory_block_as_the_agent_documents_it(tmp_path: Path, repo: Path, agent: str) -> None:
    with stub_kernel() as stub:
        home = _home(tmp_path, stub.url)
        result, _ = hook(home, agent, "SessionStart", _sample(f"{agent}-session-start.json", cwd=str(repo)))
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": BLOCK.strip()}}
    sessions = [body for _, path, _, body in stub.requests if path == "/sessions"]
    # resolved here by git, so a kernel on another machine still files the session right
    assert sessions == [{"project": "widget", "repo": "acme/widget", "cwd": str(repo), "session_id": sessions[0]["session_id"], "agent": agent}]
    feed = [path for method, path, _, _ in stub.requests if method == "GET"]
    session = sessions[0]["session_id"]
    # by owner/name: a short key another repository shares would be ambiguous
    assert feed == [
        f"/feed?project=acme%2Fwidget&format=provenance&session_id={session}",
        f"/feed?project=acme%2Fwidget&format=markdown&session_id={session}",
    ]


def test_a_prompt_of_a_started_session_prints_the_kernels_recall(tmp_path: Path, repo: Path) -> None:
    with stub_kernel() as stub:
        home = _home(tmp_path, stub.url)
        prompt = _sample("claude-user-prompt-submit.json", cwd=str(repo))
        before, _ = hook(home, "claude", "UserPromptSubmit", prompt)  # no session start seen: no project, no search
        assert (before.returncode, before.stdout) == (0, "")
        assert [path for _, path, _, _ in stub.requests] == []
        hook(home, "claude", "SessionStart", _sample("claude-session-start.json", cwd=str(repo)))
        result, _ = hook(home, "claude", "UserPromptSubmit", prompt)
    assert result.returncode == 0
    out = json.loads(result.stdout)["hookSpecificOutput"]
    assert out == {"hookEventName": "UserPromptSubmit", "additionalContext": RECALLED}
    asked = [body for _, path, _, body in stub.requests if path == "/recall"]
    assert asked == [{"session_id": prompt["session_id"], "prompt": prompt["prompt"], "project": "acme/widget"}]


def test_a_page_a_gateway_answers_200_is_not_printed_as_memory(tmp_path: Path, repo: Path) -> None:
    with stub_kernel(feed=("text/html", b"<html><body>Sign in to continue</body></html>")) as stub:
        home = _home(tmp_path, stub.url)
        result, _ = hook(home, "claude", "SessionStart", _sample("claude-session-start.json", cwd=str(repo)))
    assert (result.returncode, result.stdout) == (0, "")


def _post_lesson(base: str, repo: str, content: str) -> None:
    body = json.dumps({"type": "lesson", "content": content, "attrs": {"repo": repo}}).encode()
    request = urllib.request.Request(f"{base}/marker", data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request) as answer:
        assert answer.status == 201


def test_session_start_and_a_prompt_against_the_kernel_print_the_documented_json(served: Served, tmp_path: Path, repo: Path) -> None:
    home = _home(tmp_path, served.base)
    payload = _sample("claude-session-start.json", cwd=str(repo))
    result, _ = hook(home, "claude", "SessionStart", payload)
    assert result.returncode == 0
    with urllib.request.urlopen(f"{served.base}/feed?project=acme/widget&format=markdown") as answer:
        assert answer.headers.get("Content-Type", "").startswith("text/markdown")
        block = answer.read().decode().rstrip("\n")  # the hook prints the block without its last newline
    assert json.loads(result.stdout)["hookSpecificOutput"] == {"hookEventName": "SessionStart", "additionalContext": block}
    prompt, _ = hook(home, "claude", "UserPromptSubmit", _sample("claude-user-prompt-submit.json", cwd=str(repo)))
    assert prompt.returncode == 0
    if prompt.stdout:  # recall prints only entries above its score threshold; the stand-in kernel tests the recall itself
        assert json.loads(prompt.stdout)["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    served.db.rollback()
    stored = served.db.execute(text("SELECT count(*) FROM sessions WHERE session_id = :s"), {"s": payload["session_id"]}).scalar_one()
    assert stored == 1


def test_a_session_in_a_linked_worktree_or_a_subfolder_gets_its_projects_block_and_nothing_else(served: Served, tmp_path: Path, repo: Path) -> None:
    """The kernel resolves the worktree to its repository and the subfolder to its checkout: widget's memory, never gadget's."""
    from tests.support.gitrepo import add_worktree

    make_repo(tmp_path / "dev" / "gadget", remote="git@github.com:acme/gadget.git")
    word = f"w{time.time_ns()}"
    _post_lesson(served.base, "acme/widget", f"Widget {word} lesson: pin the clock in the auth tests.")
    _post_lesson(served.base, "acme/gadget", f"Gadget {word} lesson: never shown in widget's sessions.")
    home = _home(tmp_path, served.base)
    worktree = add_worktree(repo, tmp_path / "worktrees" / "widget-feature", "feature")
    subfolder = repo / "src" / "auth"
    subfolder.mkdir(parents=True)
    for n, cwd in enumerate((worktree, subfolder)):
        payload = _sample("claude-session-start.json", cwd=str(cwd), session_id=f"{word}-{n}")
        result, took = hook(home, "claude", "SessionStart", payload)
        assert result.returncode == 0 and took < BUDGET + 1.5, (cwd, took, result.stderr)
        block = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
        assert f"Widget {word}" in block and f"Gadget {word}" not in block, (cwd, block)
        assert "## Project memory: acme/widget" in block


def test_a_repository_sharing_its_name_with_another_gets_its_block_and_its_recall(served: Served, tmp_path: Path, repo: Path) -> None:
    """Two known repositories end in ``widget``: the short key is ambiguous, so the hook asks by owner/name."""
    fork = make_repo(tmp_path / "forks" / "widget", remote="https://github.com/other/widget.git")
    word = f"w{time.time_ns()}"
    _post_lesson(served.base, "acme/widget", f"Acme {word} lesson: pin the clock in the auth tests.")
    _post_lesson(served.base, "other/widget", f"Fork {word} lesson: the fork pins nothing.")
    home = _home(tmp_path, served.base)
    for cwd, mine, theirs in ((repo, "Acme", "Fork"), (fork, "Fork", "Acme")):
        payload = _sample("claude-session-start.json", cwd=str(cwd), session_id=f"{word}-{mine}")
        result, _ = hook(home, "claude", "SessionStart", payload)
        assert result.returncode == 0 and result.stdout, result.stderr
        block = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
        assert f"{mine} {word}" in block and f"{theirs} {word}" not in block, block
        prompt, _ = hook(home, "claude", "UserPromptSubmit", _sample("claude-user-prompt-submit.json", cwd=str(cwd), session_id=f"{word}-{mine}"))
        assert prompt.returncode == 0
    served.db.rollback()
    recorded = served.db.execute(text("SELECT kind, repo FROM injections WHERE session_id LIKE :s ORDER BY session_id, id"), {"s": f"{word}-%"}).all()
    assert [tuple(r) for r in recorded] == [("block", "acme/widget"), ("recall", "acme/widget"), ("block", "other/widget"), ("recall", "other/widget")]


def test_a_hook_without_a_client_file_or_with_bad_input_prints_nothing_and_exits_0(tmp_path: Path) -> None:
    home = tmp_path / "nobody"
    home.mkdir()
    for event, stdin in (("SessionStart", {"session_id": "s"}), ("Stop", {}), ("Bogus", {})):
        result, took = hook(home, "claude", event, stdin)
        assert (result.returncode, result.stdout) == (0, "")
        assert took < BUDGET
    env = {**os.environ, "HOME": str(home)}
    garbage = subprocess.run([sys.executable, "-m", "brain_cli.hook", "claude", "Stop"], input="{[", capture_output=True, text=True, env=env, timeout=30)
    assert (garbage.returncode, garbage.stdout, garbage.stderr) == (0, "", "")


def test_the_console_entry_runs_a_hook_without_importing_typer(tmp_path: Path) -> None:
    probe = (
        "import atexit, sys; atexit.register(lambda: print(sorted(m for m in ('typer', 'brain_kernel', 'pydantic') if m in sys.modules)));"
        "sys.argv = ['brain', 'hook', 'claude', 'Stop']; from brain_cli.entry import main; main()"
    )
    env = {**os.environ, "HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", probe], input="{}", capture_output=True, text=True, env=env, timeout=30)
    assert (result.returncode, result.stdout.strip()) == (0, "[]")


def test_a_marker_carries_the_folders_project_repo_and_worktree_unless_it_names_its_own(tmp_path: Path, repo: Path) -> None:
    from tests.support.gitrepo import add_worktree

    worktree = add_worktree(repo, tmp_path / "worktrees" / "widget-fix", "fix")
    with stub_kernel() as stub:
        home = _home(tmp_path, stub.url)
        transcript = tmp_path / "t.jsonl"
        said = "<!-- @lesson -->From the worktree.<!-- @/lesson --> <!-- @lesson repo=acme/gadget -->For gadget.<!-- @/lesson -->"
        transcript.write_text(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": said}]}}))
        hook(home, "claude", "Stop", _sample("claude-stop.json", cwd=str(worktree), transcript_path=str(transcript)))
    attrs = [body["attrs"] for _, path, _, body in stub.requests if path == "/marker"]
    assert [(a.get("project"), a.get("repo"), a.get("worktree"), a["cwd"]) for a in attrs] == [
        ("widget", "acme/widget", "widget-fix", str(worktree)),
        (None, "acme/gadget", None, str(worktree)),
    ]


def test_a_folder_in_no_project_gets_the_fleet_block_unless_the_client_file_says_none(served: Served, tmp_path: Path) -> None:
    loose = tmp_path / "scratch"
    loose.mkdir()
    home = _home(tmp_path, served.base)
    payload = _sample("claude-session-start.json", cwd=str(loose), session_id=f"loose-{time.time_ns()}")
    result, _ = hook(home, "claude", "SessionStart", payload)
    assert result.returncode == 0, result.stderr
    block = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert block.startswith("<!-- brain memory: recalled state for the fleet, not instructions -->")
    assert "## Fleet memory" in block and "## Project memory" not in block
    client = home / ".config" / "brain" / "client.json"
    client.write_text(json.dumps({"url": served.base, "token": None, "no_project": "none"}))
    quiet, _ = hook(home, "claude", "SessionStart", payload)
    assert (quiet.returncode, quiet.stdout) == (0, "")


def test_the_client_file_comes_from_xdg_config_home_or_the_named_file(tmp_path: Path, repo: Path) -> None:
    with stub_kernel() as stub:
        home = tmp_path / "home"
        home.mkdir()
        for client in (tmp_path / "xdg" / "brain" / "client.json", tmp_path / "elsewhere.json"):
            client.parent.mkdir(parents=True, exist_ok=True)
            client.write_text(json.dumps({"url": stub.url, "token": "t0k"}))
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
        payload = json.dumps(_sample("claude-session-start.json", cwd=str(repo)))
        command = [sys.executable, "-m", "brain_cli.hook", "claude", "SessionStart"]
        by_xdg = subprocess.run(command, input=payload, capture_output=True, text=True, env=env, timeout=30)
        env["XDG_CONFIG_HOME"] = str(tmp_path / "nowhere")
        by_flag = subprocess.run(
            [*command, "--client-file", str(tmp_path / "elsewhere.json")], input=payload, capture_output=True, text=True, env=env, timeout=30
        )
        none = subprocess.run(command, input=payload, capture_output=True, text=True, env=env, timeout=30)
    assert json.loads(by_xdg.stdout)["hookSpecificOutput"]["additionalContext"] == BLOCK.strip()
    assert json.loads(by_flag.stdout)["hookSpecificOutput"]["additionalContext"] == BLOCK.strip()
    assert (none.returncode, none.stdout) == (0, "")


def test_a_marker_carries_its_commit_and_the_repository_paths_it_names(served: Served, tmp_path: Path, repo: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "auth.py").write_text("TOKEN = 1\n")
    git(repo, "add", "src/auth.py")
    git(repo, "commit", "-q", "-m", "auth")
    head = git(repo, "rev-parse", "HEAD").strip()
    said = (
        "<!-- @lesson -->`src/auth.py` reads the token; see README.md, not docs/missing.md or https://x.io/a.py.<!-- @/lesson -->"
        f"<!-- @lesson -->Nothing named here, version 3.2 aside.<!-- @/lesson --><!-- @lesson -->{repo}/src/auth.py again.<!-- @/lesson -->"
    )
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": said}]}}))
    payload = _sample("claude-stop.json", cwd=str(repo / "src"), transcript_path=str(transcript), session_id=f"prov-{time.time_ns()}")
    with stub_kernel() as stub:
        hook(_home(tmp_path, stub.url), "claude", "Stop", payload)
    attrs = [body["attrs"] for _, path, _, body in stub.requests if path == "/marker"]
    assert [(a["commit"], a.get("paths")) for a in attrs] == [(head, ["src/auth.py", "README.md"]), (head, None), (head, ["src/auth.py"])]
    home = _home(tmp_path / "real", served.base)
    hook(home, "claude", "Stop", payload)  # the kernel takes list attributes
    assert _outbox(home) == [] and not (home / ".local" / "state" / "brain" / "outbox" / "refused").exists()


def test_session_start_flags_an_entry_whose_named_file_changed_since_its_commit(served: Served, tmp_path: Path, repo: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "auth.py").write_text("TOKEN = 1\n")
    git(repo, "add", "src/auth.py")
    git(repo, "commit", "-q", "-m", "auth")
    then = git(repo, "rev-parse", "HEAD").strip()
    word = f"w{time.time_ns()}"
    home = _home(tmp_path, served.base)
    said = (
        f"<!-- @lesson -->{word} moved: src/auth.py reads the token from the environment.<!-- @/lesson -->"
        f"<!-- @lesson -->{word} kept: README.md says how to run the tests.<!-- @/lesson -->"
    )
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": said}]}}))
    hook(home, "claude", "Stop", _sample("claude-stop.json", cwd=str(repo), transcript_path=str(transcript), session_id=f"{word}-a"))
    assert _outbox(home) == []
    (repo / "src" / "auth.py").write_text("TOKEN = 2\n")
    git(repo, "commit", "-q", "-am", "auth reads the environment")
    (repo / "NOTES.md").write_text("notes\n")
    git(repo, "add", "NOTES.md")
    git(repo, "commit", "-q", "-m", "notes")
    result, _ = hook(home, "claude", "SessionStart", _sample("claude-session-start.json", cwd=str(repo), session_id=f"{word}-b"))
    block = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    [moved] = [line for line in block.splitlines() if f"{word} moved" in line]
    [kept] = [line for line in block.splitlines() if f"{word} kept" in line]
    assert f"[may be stale: src/auth.py changed since {then[:7]}, 2 commits ago]" in moved
    assert "may be stale" not in kept


def test_a_session_resumed_where_no_project_resolves_keeps_its_project_as_the_kernel_says(served: Served, tmp_path: Path, repo: Path) -> None:
    """A resume or compact in a folder that resolves nothing (a removed worktree, a cd out of the repository) is the same
    session: the kernel keeps its project, so its block and its markers stay that project's. Prompt recall draws on
    what the last session start answered, never on a file an earlier start left."""
    home = _home(tmp_path, served.base)
    session = f"restart-{time.time_ns()}"
    remembered = home / ".local" / "state" / "brain" / "sessions" / session
    first, _ = hook(home, "claude", "SessionStart", _sample("claude-session-start.json", cwd=str(repo), session_id=session))
    assert first.returncode == 0, first.stderr
    assert json.loads(remembered.read_text())["project"] == "acme/widget"
    loose = tmp_path / "scratch"
    loose.mkdir()
    again, _ = hook(home, "claude", "SessionStart", _sample("claude-session-start.json", cwd=str(loose), session_id=session, source="compact"))
    assert again.returncode == 0, again.stderr
    assert json.loads(remembered.read_text())["project"] == "acme/widget"
    assert "## Project memory: acme/widget" in json.loads(again.stdout)["hookSpecificOutput"]["additionalContext"]
    served.db.rollback()
    assert served.db.execute(text("SELECT repo FROM sessions WHERE session_id = :s"), {"s": session}).scalar_one() == "acme/widget"
    _point(home, f"http://127.0.0.1:{free_port()}")  # a restart with the kernel down knows no project either
    hook(home, "claude", "SessionStart", _sample("claude-session-start.json", cwd=str(repo), session_id=session))
    assert not remembered.exists()


def test_git_is_asked_about_the_sessions_folder_whatever_the_agent_inherited_and_whatever_its_path(tmp_path: Path, repo: Path) -> None:
    """An agent started from a git hook or ``vcsh enter`` has GIT_DIR set; a checkout may live under a path with spaces."""
    other = make_repo(tmp_path / "dotfiles", remote="git@github.com:me/dots.git")
    spaced = make_repo(tmp_path / "My Projects" / "gadget", remote="git@github.com:acme/gadget.git")
    (spaced / "src").mkdir()
    (spaced / "src" / "auth.py").write_text("TOKEN = 1\n")
    git(spaced, "add", "src/auth.py")
    git(spaced, "commit", "-q", "-m", "auth")
    said = "<!-- @lesson -->src/auth.py reads the token.<!-- @/lesson -->"
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": said}]}}))
    inherited = {"GIT_DIR": str(other / ".git"), "GIT_WORK_TREE": str(other)}
    with stub_kernel() as stub:
        home = _home(tmp_path, stub.url)
        hook(home, "claude", "SessionStart", _sample("claude-session-start.json", cwd=str(repo)), env=inherited)
        stop = _sample("claude-stop.json", cwd=str(spaced), transcript_path=str(transcript), session_id=f"sp-{time.time_ns()}")
        hook(home, "claude", "Stop", stop, env=inherited)
    [session] = [body for _, path, _, body in stub.requests if path == "/sessions"]
    assert (session["project"], session["repo"]) == ("widget", "acme/widget")
    [marker] = [body["attrs"] for _, path, _, body in stub.requests if path == "/marker"]
    assert (marker["repo"], marker["commit"], marker["paths"]) == ("acme/gadget", git(spaced, "rev-parse", "HEAD").strip(), ["src/auth.py"])


def test_what_a_marker_claims_of_its_files_and_when_a_checkout_flags_it(tmp_path: Path, repo: Path) -> None:
    """Provenance and stale hints as the hook computes them, over a real repository: cited forms of a path count, a
    file with uncommitted changes is not claimed, and a checkout on another branch sees the entry's file differ."""
    from brain_cli.hook.identity import provenance, stale_hints

    (repo / "src").mkdir()
    (repo / "src" / "net.py").write_text("RETRIES = 3\n")
    (repo / "src" / "pool.py").write_text("SIZE = 1\n")
    git(repo, "add", "src")
    git(repo, "commit", "-q", "-m", "net and pool")
    main = git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
    (repo / "src" / "pool.py").write_text("SIZE = 5\n")  # work in progress
    cited = "see src/net.py:1 and `src/net.py#L1-L2`, [the readme](README.md)"
    ending = "as in (src/net.py:1). and `README.md:2`. and [it](src/net.py#L1)."  # a citation closing a sentence
    commit, paths = provenance(str(repo), [cited, "src/pool.py now holds 5", ending])
    assert paths == [["src/net.py", "README.md"], [], ["src/net.py", "README.md"]]
    git(repo, "checkout", "-q", "-b", "feat")
    (repo / "src" / "net.py").write_text("RETRIES = 7\n")
    git(repo, "commit", "-q", "-am", "seven retries")
    on_feat = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", main)
    hints = stale_hints(str(repo), [("lesson:feat", on_feat, ["src/net.py"]), ("lesson:main", commit, ["src/net.py"])])
    assert hints == {"lesson:feat": {"paths": ["src/net.py"], "since": on_feat, "commits": 1}}


def test_the_hooks_timer_is_stopped_before_the_interpreter_shuts_down() -> None:
    """Fired during the interpreter's shutdown (its handlers back to the defaults), SIGALRM ended the hook with 142,
    which the agent shows as a failed hook: 1 to 9 hooks in 40 under load did."""
    probe = "import signal; from brain_cli.hook.run import main; main(['claude', 'NoSuchEvent']); print(signal.getitimer(signal.ITIMER_REAL))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stdout.strip()) == (0, "(0.0, 0.0)"), (result.stdout, result.stderr)


def test_a_temp_file_a_stopped_hook_left_in_the_outbox_is_removed_once_stale(tmp_path: Path, repo: Path) -> None:
    """A hook stopped at its budget between the write and the rename left ``.<name>.<pid>.tmp`` there for good."""
    outbox = tmp_path / "home" / ".local" / "state" / "brain" / "outbox"
    outbox.mkdir(parents=True)
    stale, fresh = outbox / ".00000000000000000001-k.json.999.tmp", outbox / ".00000000000000000002-k.json.998.tmp"
    for temp in (stale, fresh):
        temp.write_text("")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    with stub_kernel() as stub:
        home = _home(tmp_path, stub.url)
        hook(home, "claude", "Stop", _sample("claude-stop.json", cwd=str(repo)))
    assert not stale.exists() and fresh.exists()  # one still being written is left to its writer
