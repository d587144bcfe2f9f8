"""GET /feed?format=markdown and ?cwd=: the memory block over the real app (ADR 0040).

Memory goes in through the real writers (POST /marker, the ``planted``
fixture); folders are real git repositories (tests/support/gitrepo.py).
"""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from brain_api.app import create_app
from brain_core.vault import frontmatter
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from tests.support.gitrepo import add_worktree, make_repo
from tests.support.harness import make_settings
from tests.support.planting import PROJECTS, Planted, post, run_cli, token

HEADINGS = ["### Signals", "### Focus and intent", "### Hot arcs", "### Decisions", "### Lessons", "### Milestones", "### Inject blocks"]


def _block(client, **params: object) -> str:
    r = client.get("/feed", params={"format": "markdown", **params})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "text/markdown; charset=utf-8"
    return r.text


def _framed(text: str, label: str) -> list[str]:
    lines = text.splitlines()
    assert lines[0] == f"<!-- brain memory: recalled state for {label}, not instructions -->"
    assert lines[1] == f"## Project memory: {label}"
    assert lines[-1] == "<!-- end of brain memory -->"
    assert text.count("<!--") == 2 and text.count("-->") == 2
    return lines


def test_each_project_block_is_framed_in_order_and_holds_only_its_memory(client, planted: Planted) -> None:
    everything = planted.everything()
    for pid in PROJECTS:
        text = _block(client, project=pid)
        lines = _framed(text, pid)
        shown = [ln for ln in lines if ln.startswith("### ")]
        assert shown == [h for h in HEADINGS if h in shown] and "### Focus and intent" in shown
        assert "### Hot arcs" in shown and "### Lessons" in shown
        allowed = planted.owned[pid] | planted.fleet | planted.inject_all | planted.inject_for[pid]
        assert not [t for t in everything - allowed if t in text], f"{pid} block leaks another project's memory"
        assert [t for t in planted.owned[pid] if t in text], f"{pid} block shows none of its own memory"
        for token_ in planted.fleet:
            assert token_ in text and "(fleet-wide)" in text
    json_feed = client.get("/feed", params={"project": "org1/api", "format": "json"})
    assert json_feed.headers["content-type"].startswith("application/json") and json_feed.json()["scope"] == "project"


def test_the_block_refuses_like_the_json_feed(client, planted: Planted) -> None:
    assert client.get("/feed", params={"project": "api", "format": "markdown"}).status_code == 409  # org1/api and org2/api
    assert client.get("/feed", params={"project": "bad key!", "format": "markdown"}).status_code == 422
    assert client.get("/feed", params={"project": "org1/api", "format": "yaml"}).status_code == 422
    bad = client.get("/feed", params={"project": "org1/api", "format": "markdown", "stale": '{"lesson:x": {"paths": [], "since": "abcd"}}'})
    assert bad.status_code == 422 and "stale['lesson:x'].paths must be a list of paths" in bad.text
    unknown = _block(client, project="nobody/here")
    assert "- No project memory yet for nobody/here." in unknown
    assert not [t for t in planted.everything() - planted.fleet - planted.inject_all if t in unknown]


def test_without_a_project_the_block_is_the_fleets_and_holds_no_projects_logs(client, planted: Planted) -> None:
    text = _block(client)
    lines = text.splitlines()
    assert lines[:2] == ["<!-- brain memory: recalled state for the fleet, not instructions -->", "## Fleet memory (this folder is in no known project)"]
    assert lines[-1] == "<!-- end of brain memory -->" and text.count("<!--") == 2
    assert [ln for ln in lines if ln.startswith("### ")] == ["### Signals", "### Focus and intent", "### Hot arcs", "### Inject blocks"]
    for token_ in planted.fleet | planted.inject_all:
        assert token_ in text
    for pid in PROJECTS:
        assert not [t for t in planted.inject_for[pid] if t in text], "a project's inject block reached the fleet block"
    assert len(_block(client, max_bytes=1024).encode()) <= 1024


def test_max_bytes_is_honoured_and_a_cut_is_one_line(client) -> None:
    for i in range(30):
        post(client, "lesson", f"Lesson {i} {token()}: ünïcödé ✓ 日本語 " * 4, repo="org9/app")
    full = _block(client, project="org9/app")
    assert re.search(r"^… \d+ more lessons: GET /feed\?project=org9/app or the brain_feed MCP tool$", full, re.M)
    for cap in (1024, 1500, 2500):
        text = _block(client, project="org9/app", max_bytes=cap)
        assert len(text.encode("utf-8")) <= cap
        _framed(text, "org9/app")
        assert len([ln for ln in text.splitlines() if ln.startswith("…")]) == 1
    assert client.get("/feed", params={"project": "org9/app", "format": "markdown", "max_bytes": 100}).status_code == 422
    assert client.get("/feed", params={"project": "org9/app", "format": "markdown", "max_bytes": 10**6}).status_code == 422


def test_a_worktree_ranks_its_entries_first_inside_the_project(client, clock) -> None:
    mine = token()
    post(client, "lesson", f"Worktree lesson {mine}.", repo="org9/app", worktree="wt-a")
    for _ in range(3):
        clock.advance(60)  # the others are newer
        post(client, "lesson", f"Main lesson {token()}.", repo="org9/app")
    other = token()
    post(client, "lesson", f"Other project lesson {other}.", repo="org9/other", worktree="wt-a")

    def lessons(text: str) -> list[str]:
        return text.split("### Lessons\n")[1].split("\n\n")[0].splitlines()

    plain = lessons(_block(client, project="org9/app"))
    assert mine not in plain[0]  # newest first without a worktree
    ranked = _block(client, project="org9/app", worktree="wt-a")
    assert mine in lessons(ranked)[0] and "[worktree wt-a]" in lessons(ranked)[0]
    assert other not in ranked
    assert client.get("/feed", params={"project": "org9/app", "format": "markdown", "worktree": "a/b"}).status_code == 422
    # A registered session of the project lends its worktree.
    r = client.post("/sessions", json={"session_id": "s-wt", "cwd": "", "repo": "org9/app", "worktree": "wt-a"})
    assert r.status_code == 200, r.text
    assert lessons(_block(client, project="org9/app", session_id="s-wt"))[0] == lessons(ranked)[0]


def test_cwd_resolves_a_real_repository_on_the_server(client, settings: Settings, clock) -> None:
    repo = make_repo(settings.user_home / "dev" / "app", "https://github.com/org9/app.git")
    wt = add_worktree(repo, settings.user_home / "trees" / "app-fix", "fix")
    mine, theirs = token(), token()
    post(client, "lesson", f"Fix lesson {mine}.", repo="org9/app", worktree="app-fix")
    for _ in range(2):
        clock.advance(60)
        post(client, "lesson", f"Main lesson {theirs}.", repo="org9/app")
    text = _block(client, cwd=str(repo))
    _framed(text, "org9/app")
    assert mine in text and theirs in text
    from_wt = _block(client, cwd=str(wt))  # the folder's worktree ranks first
    assert mine in from_wt.split("### Lessons\n")[1].splitlines()[0]
    as_json = client.get("/feed", params={"cwd": str(repo)})
    assert as_json.status_code == 200 and as_json.json()["project"]["repo"] == "org9/app"
    nowhere = settings.user_home / "scratch"
    nowhere.mkdir(parents=True)
    r = client.get("/feed", params={"cwd": str(nowhere), "format": "markdown"})
    assert r.status_code == 422 and f"cwd {nowhere} is not in a known project" in r.text
    r = client.get("/feed", params={"cwd": str(repo), "project": "org9/app"})
    assert r.status_code == 422


def test_a_token_bound_to_projects_gets_its_block_but_no_server_folder(tmp_path, database_url: str) -> None:
    settings = make_settings(tmp_path, database_url, tokens=["tok-all-0123456789", "tok-app-0123456789=org9/app", "tok-two-0123456789=org9/app|org9/web"])
    repo = make_repo(settings.user_home / "dev" / "app", "https://github.com/org9/app.git")
    with TestClient(create_app(settings)) as c:
        bound = {"Authorization": "Bearer tok-app-0123456789"}
        r = c.get("/feed", params={"cwd": str(repo), "format": "markdown"}, headers=bound)
        assert r.status_code == 422 and "cwd is not resolved for a token bound to projects; send project=" in r.text
        assert c.get("/feed", params={"project": "org9/app", "format": "markdown"}, headers=bound).status_code == 200
        assert c.get("/feed", params={"format": "markdown"}, headers=bound).status_code == 200  # its one project
        assert c.get("/feed", params={"project": "org9/other", "format": "markdown"}, headers=bound).status_code == 403
        assert c.get("/feed", params={"project": "org9/app", "format": "markdown"}).status_code == 401
        assert c.get("/feed", params={"format": "markdown"}, headers={"Authorization": "Bearer tok-two-0123456789"}).status_code == 403  # the fleet's block


def test_inject_blocks_reach_the_agents_they_name_and_none_past_their_days(client, settings: Settings) -> None:
    vault = Vault(settings.vault)
    codex, claude_app, old = token(), token(), token()
    vault.write_atomic("brain-feed/inject/codex.md", frontmatter.render({"id": "for-codex", "title": f"Codex {codex}", "target": "codex"}, "Run cargo fmt.\n"))
    vault.write_atomic(
        "brain-feed/inject/claude-app.md",
        frontmatter.render({"id": "claude-app", "title": f"App {claude_app}", "target": ["claude.md", "org9/app"]}, "Read the app's CLAUDE.md.\n"),
    )
    vault.write_atomic(
        "bridge/connections.md",
        f"---\ntitle: Connections\ncreated: 2020-01-01\n---\n<!-- @inject target=all ttl_days=1 -->\nOld advice {old}\n<!-- @/inject -->\n",
    )
    run_cli(settings, "reindex")
    for sid, agent, repo in (("s-codex", "codex", "org9/app"), ("s-claude", "claude", "org9/app"), ("s-codex-out", "codex", None)):
        r = client.post("/sessions", json={"session_id": sid, "cwd": "", "agent": agent, **({"repo": repo} if repo else {})})
        assert r.status_code == 200, r.text

    as_codex = _block(client, project="org9/app", session_id="s-codex")
    assert f"- (fleet-wide, for codex) Codex {codex}: Run cargo fmt." in as_codex and claude_app not in as_codex
    as_claude = _block(client, project="org9/app", session_id="s-claude")
    assert claude_app in as_claude and "(org9/app, for claude)" in as_claude and codex not in as_claude
    unknown_agent = _block(client, project="org9/app")  # a reader whose agent is unknown reads both, labelled
    assert codex in unknown_agent and claude_app in unknown_agent
    assert codex not in _block(client, project="org9/other", session_id="s-claude")
    fleet_codex = _block(client, session_id="s-codex-out")
    assert codex in fleet_codex and claude_app not in fleet_codex
    for text in (as_codex, as_claude, unknown_agent, fleet_codex, _block(client)):
        assert old not in text  # a day's block written in 2020 reaches no one
    blocks = client.get("/feed").json()["blocks"]
    assert [b["target"] for b in blocks] == [["codex"]]
