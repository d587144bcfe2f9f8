"""``brain mcp --remote``: the real process over stdio, serving the tools through a real running kernel's HTTP API.

The kernel is the run's ``brain serve`` (``served``); the MCP process is
started the way an agent starts it, in a git repository, with a home of its
own whose client file names the kernel. It must list the same tools as the
in-process server (names, input and output schemas, annotations), answer
them through the kernel, and create nothing: no ``vault/`` or ``.brain/`` in
its working folder, no data folder, no database. A kernel that does not
answer, or refuses the token, is each tool's ``isError`` with the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from brain_kernel.settings import KERNEL_VARIABLES, Settings
from brain_mcp.server import build_server
from tests.mcp.test_mcp import TOOLS, _plant
from tests.support.gitrepo import make_repo
from tests.support.harness import Served, make_settings, serve_brain
from tests.support.servers import free_port, stop

TOKEN = "remote-t0k"


def _files(folder: Path) -> set[str]:
    """Every path under ``folder`` but git's own, relative."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if ".git" not in p.relative_to(folder).parts}


def _client_env(tmp_path: Path, url: str, token: str | None = None) -> dict[str, str]:
    """An agent's environment: no kernel variable, a home of its own whose client file names ``url``, XDG data in the test folder."""
    home = tmp_path / "home"
    (home / ".config" / "brain").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "brain" / "client.json").write_text(json.dumps({"url": url, "token": token or ""}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(KERNEL_VARIABLES) and not k.startswith("XDG_")}
    env.update({"HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "xdg-data")})
    return env


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", remote="git@github.com:org1/api.git")


async def _answer(client: Client, name: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any], Any]:
    """(isError, the JSON text parsed, structuredContent) of one call."""
    result = await client.call_tool(name, arguments)
    [content] = result.content
    return bool(result.is_error), json.loads(content.text), result.structured_content  # type: ignore[union-attr]


def _local_tools(tmp_path: Path) -> dict[str, Any]:
    """The in-process server's tools, as listed (no database: nothing is called)."""
    (tmp_path / "local").mkdir()
    server = build_server(make_settings(tmp_path / "local", None), kernel=object())  # type: ignore[arg-type]
    return {tool.name: tool for tool in anyio.run(server.list_tools)}


def test_remote_serves_the_same_tools_through_the_kernel_and_creates_nothing(served: Served, tmp_path: Path, repo: Path) -> None:
    cluster_id, word = _plant(served.settings)
    env = _client_env(tmp_path, served.base)
    home_before = _files(tmp_path / "home")
    repo_before = _files(repo)
    # No URL: the client file's, as brain connect registers it.
    params = StdioServerParameters(command=sys.executable, args=["-m", "brain_cli", "mcp", "--remote"], env=env, cwd=str(repo))
    answers: dict[str, Any] = {}

    async def session() -> None:
        with (tmp_path / "mcp-remote.err").open("w") as errlog:
            started = time.monotonic()
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=30) as client:
                answers["initialized_s"] = time.monotonic() - started
                answers["listed"] = (await client.list_tools()).tools
                answers["search"] = await _answer(client, "kb_search", {"query": word})
                answers["scoped"] = await _answer(client, "kb_search", {"query": word, "project": "acme/nobody"})
                answers["bad_project"] = await _answer(client, "kb_search", {"query": word, "project": "not a key!"})
                answers["brief"] = await _answer(client, "kb_brief", {"query": word})
                answers["arcs"] = await _answer(client, "brain_search_arcs", {"query": f"the {word} pipeline", "project": "org1/api"})
                answers["arc"] = await _answer(client, "brain_get_arc", {"cluster_id": cluster_id})
                answers["missing"] = await _answer(client, "brain_get_arc", {"cluster_id": "arc-nope"})
                answers["feed"] = await _answer(client, "brain_feed", {})
                answers["project_feed"] = await _answer(client, "brain_feed", {"project": "org1/api"})
                lesson = {"type": "lesson", "content": f"Lesson: {word} needs a warm cache.", "attrs": {"repo": "org1/api", "source": "mcp-remote-test"}}
                answers["marker"] = await _answer(client, "brain_marker", lesson)
                answers["replay"] = await _answer(client, "brain_marker", lesson)
                answers["too_long"] = await _answer(client, "brain_marker", {"type": "lesson", "content": "x" * 5000})
                answers["tick"] = await _answer(client, "brain_tick", {"wait": False, "no_ai": True})
                answers["ingest"] = await _answer(client, "brain_ingest", {"content": f"{word} kept through the kernel", "title": "remote note"})
                [feed] = (await client.read_resource("brain://feed")).contents
                answers["feed_resource"] = json.loads(feed.text)  # type: ignore[union-attr]
                [block] = (await client.read_resource("brain://feed/org1/api")).contents
                answers["block"] = block.text  # type: ignore[union-attr]

    anyio.run(session)
    errors = (tmp_path / "mcp-remote.err").read_text()
    print(f"brain mcp --remote initialized in {answers['initialized_s']:.2f} s")

    # The same tools as in-process: names, descriptions, input and output schemas, annotations.
    listed = {tool.name: tool for tool in answers["listed"]}
    local = _local_tools(tmp_path)
    assert set(listed) == TOOLS == set(local), errors
    for name, tool in listed.items():
        mine = local[name]
        assert (tool.description, tool.input_schema, tool.output_schema, tool.annotations) == (
            mine.description,
            mine.input_schema,
            mine.output_schema,
            mine.annotations,
        ), name

    # Every structured answer is its text and validates against the tool's output schema.
    for key in ("search", "scoped", "brief", "arcs", "arc", "feed", "project_feed", "marker", "replay", "tick", "ingest"):
        failed, text, structured = answers[key]
        assert not failed and structured == text, (key, text)
    for key, name in (("search", "kb_search"), ("brief", "kb_brief"), ("arcs", "brain_search_arcs"), ("arc", "brain_get_arc")):
        jsonschema.validate(answers[key][2], listed[name].output_schema)
    for key, name in (("feed", "brain_feed"), ("marker", "brain_marker"), ("tick", "brain_tick"), ("ingest", "brain_ingest")):
        jsonschema.validate(answers[key][2], listed[name].output_schema)

    search = answers["search"][1]
    by_source = {r["source"]: r for r in search["results"]}
    assert by_source["artifact"]["ref"] == cluster_id and by_source["artifact"]["producer"] == "brain-arc"
    assert by_source["obsidian"]["ref"].endswith(f"{cluster_id}.md") and word in by_source["obsidian"]["preview"]
    assert set(by_source["artifact"]) == {"source", "ref", "title", "score", "normalized_score", "preview", "producer", "content_type", "metadata"}
    assert search["sources_searched"] == ["artifact", "obsidian"] and search["count"] == len(search["results"])
    assert answers["scoped"][1] == {"query": word, "count": 0, "results": [], "sources_searched": ["artifact", "obsidian"]}
    failed, bad, _ = answers["bad_project"]
    assert failed and bad["status"] == 422 and "project" in bad["error"]  # the kernel's reason, as a tool error
    brief = answers["brief"][1]
    assert brief["brief"] == "[inference gateway not configured]" and brief["candidate_refs"][0] == f"artifact://{cluster_id}"
    [arc] = answers["arcs"][1]["arcs"]
    assert arc["cluster_id"] == cluster_id and arc["path"].endswith(f"{cluster_id}.md") and isinstance(arc["heat"], int)
    got = answers["arc"][1]
    # Indexed: upstream's embeddings form first (its clients read it), with the file's path and content beside it.
    assert got["source"] == "embeddings" and got["cluster_id"] == cluster_id and got["metadata"]["title"] and got["text_preview"]
    assert got["path"].endswith(f"{cluster_id}.md") and word in got["content"] and len(got["content"]) <= 2000
    assert answers["missing"][:2] == (True, {"error": "cluster_id not found: arc-nope"})
    assert [a["cluster_id"] for a in answers["feed"][1]["arcs"]] == [cluster_id]
    assert answers["project_feed"][1]["scope"] == "project" and answers["project_feed"][1]["project"]["repo"] == "org1/api"
    marker, replay = answers["marker"][1], answers["replay"][1]
    assert marker["ok"] is True and marker["marker_type"] == "lesson" and marker["project"] == "api"
    assert word in (served.settings.vault / marker["vault_path"]).read_text()  # written by the kernel, in its vault
    assert replay["idempotent_replay"] is True and replay["vault_path"] == marker["vault_path"]
    assert answers["too_long"][:2] == (True, {"error": "content exceeds 4KB limit", "status": 400})
    tick = answers["tick"][1]
    assert tick["status"] == "pending" and tick["no_ai"] is True and tick["waited"] is False
    ingested = answers["ingest"][1]
    assert (ingested["chunks_sent"], ingested["total_chunks"], ingested["title"]) == (1, 1, "remote note")
    note = ingested["results"][0]["detail"]["obsidian_path"]
    assert f"[remote note]\n\n{word} kept through the kernel" in (served.settings.vault / note).read_text()  # the kernel's vault
    assert [a["cluster_id"] for a in answers["feed_resource"]["arcs"]] == [cluster_id]
    assert answers["block"].startswith("<!-- brain memory: recalled state for org1/api") and f"- {cluster_id} (heat " in answers["block"]

    # Nothing local: the repository, the home (but its client file) and the data folder are as they were.
    assert _files(repo) == repo_before, "brain mcp --remote wrote into its working folder"
    assert _files(tmp_path / "home") == home_before
    assert not (tmp_path / "xdg-data").exists()


def test_a_kernel_that_does_not_answer_is_each_calls_error_never_a_crash(tmp_path: Path, repo: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens: a stopped kernel
    env = _client_env(tmp_path, "http://unused.invalid")
    repo_before = _files(repo)
    params = StdioServerParameters(command=sys.executable, args=["-m", "brain_cli", "mcp", "--remote", down], env=env, cwd=str(repo))
    answers: dict[str, Any] = {}

    async def session() -> None:
        with (tmp_path / "mcp-remote.err").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=30) as client:
                answers["tools"] = {tool.name for tool in (await client.list_tools()).tools}
                for name, arguments in (
                    ("kb_search", {"query": "anything"}),
                    ("brain_marker", {"type": "lesson", "content": "Lesson: kept nowhere."}),
                    ("brain_feed", {}),
                    ("brain_tick", {"wait": False}),
                ):
                    answers[name] = await _answer(client, name, arguments)
                try:
                    await client.read_resource("brain://feed")
                except MCPError as exc:
                    answers["resource"] = exc.error.message
                answers["after"] = await _answer(client, "brain_get_arc", {"cluster_id": "arc-1"})  # still serving

    anyio.run(session)
    assert answers["tools"] == TOOLS, (tmp_path / "mcp-remote.err").read_text()
    for name in ("kb_search", "brain_marker", "brain_feed", "brain_tick"):
        failed, text, structured = answers[name]
        assert failed and structured is None and text["error"].startswith(f"kernel unavailable: cannot reach {down}"), (name, text)
    assert json.loads(answers["resource"])["error"].startswith("kernel unavailable")
    assert answers["after"][0] is True
    assert _files(repo) == repo_before
    assert not (tmp_path / "xdg-data").exists()


@dataclass
class Guarded:
    """A kernel of its own with auth on (one worker): its base URL, and its process to stop mid-test."""

    base: str
    proc: subprocess.Popen[bytes]


@pytest.fixture
def guarded(tmp_path: Path, database_url: str) -> Iterator[Guarded]:
    from brain_kernel.vault_store import Vault

    (tmp_path / "guarded").mkdir()
    settings: Settings = make_settings(tmp_path / "guarded", database_url, tokens=[TOKEN])
    Vault(settings.vault).scaffold()
    proc, base = serve_brain(settings, workers=1)
    try:
        yield Guarded(base, proc)
    finally:
        if proc.poll() is None:
            stop(proc, 15)


@pytest.mark.slow
def test_the_token_is_sent_a_refused_one_is_the_tools_error_and_so_is_a_kernel_stopped(guarded: Guarded, tmp_path: Path, repo: Path) -> None:
    answers: dict[str, Any] = {}
    named = tmp_path / "elsewhere" / "client.json"  # --client-file: a client file outside the default place
    named.parent.mkdir()
    named.write_text(json.dumps({"url": guarded.base, "token": TOKEN}))

    async def session(args: list[str], key: str, url: str = guarded.base, token: str = "wrong-token") -> None:
        env = _client_env(tmp_path / key, url, token=token)
        params = StdioServerParameters(command=sys.executable, args=["-m", "brain_cli", "mcp", "--remote", *args], env=env, cwd=str(repo))
        with (tmp_path / f"{key}.err").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=30) as client:
                answers[key] = await _answer(client, "brain_feed", {})
                if key == "right":  # the kernel stops while the server runs: its pooled connection is gone too
                    stop(guarded.proc, 15)
                    answers["stopped"] = await _answer(client, "brain_marker", {"type": "lesson", "content": "Lesson: nobody hears this."})
                    answers["stopped_search"] = await _answer(client, "kb_search", {"query": "anything"})

    anyio.run(session, [], "wrong")
    # The client file's token belongs to its own URL: a kernel named on the command line never receives it.
    anyio.run(session, [guarded.base], "elsewhere", "http://brain.example", TOKEN)
    anyio.run(session, ["--client-file", str(named)], "right")
    failed, feed, _ = answers["right"]
    assert not failed and "hot_arcs" in feed
    failed, refused, _ = answers["wrong"]
    assert failed and refused["status"] == 401
    assert "refused the token from" in refused["error"] and "invalid token" in refused["error"] and "client.json" in refused["error"]
    failed, unsent, _ = answers["elsewhere"]
    assert failed and unsent["status"] == 401 and "missing bearer token" in unsent["error"]
    assert "none was sent" in unsent["error"] and "refused the token" not in unsent["error"]  # no token blamed that never went
    for key in ("stopped", "stopped_search"):
        failed, down, structured = answers[key]
        assert failed and structured is None and down["error"].startswith("kernel unavailable"), down


def test_a_remote_server_started_in_a_worktree_reads_by_its_repositorys_arm(settings: Settings, tmp_path: Path, repo: Path) -> None:
    """A read naming no project and no session takes the arm of the repository the agent started the server in (ADR 0066)."""
    from tests.support.gitrepo import add_worktree

    control = settings.with_overrides(trial_control_percent=100, trial_salt="pepper-0123456789")  # every assignable read is control
    _cluster_id, word = _plant(control)
    worktree = add_worktree(repo, tmp_path / "wt" / "api-feature", "feature")
    (tmp_path / "plain").mkdir()
    proc, base = serve_brain(control, workers=1)
    env = _client_env(tmp_path, base)
    found: dict[str, Any] = {}

    async def session(label: str, cwd: Path, project_dir: Path | None = None) -> None:
        agent_env = {k: v for k, v in env.items() if k != "CLAUDE_PROJECT_DIR"}  # the suite may itself run under an agent
        if project_dir is not None:
            agent_env["CLAUDE_PROJECT_DIR"] = str(project_dir)
        params = StdioServerParameters(command=sys.executable, args=["-m", "brain_cli", "mcp", "--remote"], env=agent_env, cwd=str(cwd))
        with (tmp_path / f"mcp-{label}.err").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=30) as client:
                found[label] = (await _answer(client, "kb_search", {"query": word}))[1]

    try:
        anyio.run(session, "worktree", worktree)
        anyio.run(session, "plain", tmp_path / "plain")  # no repository: the read is unassignable and answered as usual
        anyio.run(session, "named", tmp_path / "plain", worktree)  # started elsewhere, the project named by Claude Code's variable
    finally:
        stop(proc, 15)
    assert found["worktree"]["count"] == 0 and found["worktree"]["note"] == "No memory is shown in this answer.", found
    assert found["plain"]["count"] > 0 and "note" not in found["plain"]
    assert found["named"]["count"] == 0 and found["named"]["note"] == "No memory is shown in this answer."
