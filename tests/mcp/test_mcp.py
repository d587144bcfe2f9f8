"""``brain mcp``: the MCP server in real processes, over stdio and streamable HTTP, with the SDK's own clients.

An arc is written to the vault, indexed by ``brain reindex`` and embedded by
``brain embed`` (the offline model); the server then answers from the same
database and vault in-process. Over HTTP the tokens are on: a request
without the bearer token is refused before it reaches the MCP app, and
``/ping`` answers without one. A tool's failure is an MCP tool error
(``isError``) whose text is upstream's JSON ``{"error": ...}`` (ADR 0041).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import jsonschema
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy.orm import Session

from brain_core.markers import MARKER_TYPES
from brain_kernel.settings import Settings
from brain_kernel.ticks import tick_queue
from brain_kernel.vault_store import Vault
from brain_mcp import answers, tools
from brain_mcp.answers import to_json
from tests.support.harness import HTTP, REPO_ROOT, brain, settings_env
from tests.support.openai_stub import OpenAIStub
from tests.support.planting import arc_session, write_arc
from tests.support.servers import free_port, stop

TOOLS = {
    "kb_search",
    "kb_brief",
    "brain_search_arcs",
    "brain_get_arc",
    "brain_ingest",
    "brain_tick",
    "brain_feed",
    "brain_marker",
    "brain_retract",
    "brain_expire",
    "brain_supersede",
}
READ_ONLY = {"kb_search", "kb_brief", "brain_search_arcs", "brain_get_arc", "brain_feed"}
TOKEN = "t0k"
OTHER = "t0k-web"  # bound to another project: org1/api's memory never reaches it


def _plant(settings: Settings) -> tuple[str, str]:
    """One arc of org1/api in the vault, indexed and embedded: (cluster_id, a word only it holds)."""
    word = "tk" + uuid.uuid4().hex[:12]
    cluster_id = write_arc(Vault(settings.vault), [arc_session("mcp-s1", "api", "org1/api", f"Implement the {word} pipeline for users", hours_ago=2)])
    for command in ("reindex", "embed"):
        result = brain(settings, command)
        assert result.exit_code == 0, result.stderr
    return cluster_id, word


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool's answer: the JSON text it returns, parsed; an ``{"error": ...}`` one came as an MCP tool error,
    a success also as ``structuredContent``, the same object (ADR 0043)."""
    result = await client.call_tool(name, arguments)
    [content] = result.content
    answer = json.loads(content.text)  # type: ignore[union-attr]
    assert result.is_error == ("error" in answer), (result.is_error, answer)
    assert result.structured_content == (None if result.is_error else answer), name
    return answer


def _validate(listed: dict[str, Any], pairs: list[tuple[str, dict[str, Any]]]) -> None:
    """Each (tool, answer) against the tool's output schema, as a client that validates would."""
    for name, answer in pairs:
        schema = listed[name].output_schema
        assert schema is not None and schema["type"] == "object", name
        jsonschema.validate(answer, schema)


async def _read(client: Client, uri: str) -> Any:
    """A resource's text: JSON parsed, markdown as it is."""
    [content] = (await client.read_resource(uri)).contents
    text = content.text  # type: ignore[union-attr]
    assert content.mime_type in ("application/json", "text/markdown"), content.mime_type
    return json.loads(text) if content.mime_type == "application/json" else text


async def _unreadable(client: Client, uri: str) -> str:
    """The message of the JSON-RPC error a resource read answered."""
    try:
        await client.read_resource(uri)
    except MCPError as exc:
        return exc.error.message
    raise AssertionError(f"{uri} was read")


async def _refusal(client: Client, name: str, arguments: dict[str, Any]) -> str:
    """The text of a call the SDK refused against the tool's input schema (an MCP tool error)."""
    result = await client.call_tool(name, arguments)
    assert result.is_error, result.content
    [content] = result.content
    return content.text  # type: ignore[union-attr]


def test_stdio_lists_the_tools_and_answers_search_feed_and_markers(settings: Settings, tmp_path: Path) -> None:
    cluster_id, word = _plant(settings)
    params = StdioServerParameters(command=sys.executable, args=["-m", "brain_cli", "mcp"], env=settings_env(settings), cwd=str(REPO_ROOT))
    answers: dict[str, Any] = {}

    async def session() -> None:
        with (tmp_path / "mcp-stdio.err").open("w") as errlog:
            # Leaving the block closes stdin and stops the process (terminated, then killed), also on a failure.
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=30) as client:
                answers["listed"] = (await client.list_tools()).tools
                answers["search"] = await _call(client, "kb_search", {"query": word})
                answers["scoped"] = await _call(client, "kb_search", {"query": word, "project": "acme/nobody"})
                answers["brief"] = await _call(client, "kb_brief", {"query": word})
                answers["arc"] = await _call(client, "brain_get_arc", {"cluster_id": cluster_id})
                answers["feed"] = await _call(client, "brain_feed", {})
                answers["project_feed"] = await _call(client, "brain_feed", {"project": "org1/api"})
                lesson = {"type": "lesson", "content": f"Lesson: {word} needs a warm cache.", "attrs": {"repo": "org1/api", "source": "mcp-test"}}
                answers["marker"] = await _call(client, "brain_marker", lesson)
                answers["replay"] = await _call(client, "brain_marker", lesson)
                answers["refused"] = await _refusal(client, "brain_marker", {"type": "rumour", "content": "x"})
                answers["too_long"] = await _call(client, "brain_marker", {"type": "lesson", "content": "x" * 5000})
                # the project as an argument of its own, as agents pass it: filed there, not unattributed
                answers["argued"] = await _call(client, "brain_marker", {"type": "lesson", "content": "Lesson: argued.", "project": "org1/api"})
                answers["missing"] = await _call(client, "brain_get_arc", {"cluster_id": "arc-nope"})
                answers["resources"] = [str(r.uri) for r in (await client.list_resources()).resources]
                answers["templates"] = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
                answers["feed_resource"] = await _read(client, "brain://feed")
                answers["project_resource"] = await _read(client, "brain://feed/org1/api")
                answers["key_resource"] = await _read(client, "brain://feed/api")
                answers["bad_resource"] = await _unreadable(client, "brain://feed/not a key!")

    anyio.run(session)
    listed = {tool.name: tool for tool in answers["listed"]}
    assert set(listed) == TOOLS
    assert {name for name, tool in listed.items() if tool.output_schema is None} == set()
    _validate(
        listed,
        [
            ("kb_search", answers["search"]),
            ("kb_search", answers["scoped"]),
            ("kb_brief", answers["brief"]),
            ("brain_get_arc", answers["arc"]),
            ("brain_feed", answers["feed"]),
            ("brain_feed", answers["project_feed"]),
            ("brain_marker", answers["marker"]),
            ("brain_marker", answers["replay"]),
        ],
    )
    assert {name for name, tool in listed.items() if tool.annotations and tool.annotations.read_only_hint} == READ_ONLY
    assert all(tool.annotations and tool.annotations.destructive_hint is False for tool in listed.values())
    assert listed["brain_marker"].input_schema["properties"]["type"]["enum"] == list(MARKER_TYPES)

    search = answers["search"]
    assert search["query"] == word and search["sources_searched"] == ["artifact", "obsidian"]
    assert search["count"] == len(search["results"]) >= 2
    by_source = {r["source"]: r for r in search["results"]}
    artifact, obsidian = by_source["artifact"], by_source["obsidian"]
    assert artifact["ref"] == cluster_id and artifact["producer"] == "brain-arc" and artifact["normalized_score"] == artifact["score"]
    assert set(artifact) == {"source", "ref", "title", "score", "normalized_score", "preview", "producer", "content_type", "metadata"}
    assert obsidian["ref"].startswith("clusters/") and obsidian["ref"].endswith(f"{cluster_id}.md") and word in obsidian["preview"]
    assert obsidian["normalized_score"] == 1.0 and obsidian["metadata"] == {} and obsidian["match_count"] >= 1
    scores = [r["normalized_score"] for r in search["results"]]
    assert scores == sorted(scores, reverse=True)
    assert answers["scoped"] == {"query": word, "count": 0, "results": [], "sources_searched": ["artifact", "obsidian"]}

    brief = answers["brief"]
    assert brief["brief"] == "[inference gateway not configured]" and brief["model"] == "brain-brief"
    assert brief["candidate_refs"] == [f"{h['source']}://{h['ref']}" for h in brief["hits"][:3]]

    arc = answers["arc"]
    # Indexed: upstream's embeddings form first (its clients read it), with the file's path and content beside it.
    assert arc["source"] == "embeddings" and arc["cluster_id"] == cluster_id and arc["metadata"]["title"] and arc["text_preview"]
    assert arc["path"].endswith(f"{cluster_id}.md") and word in arc["content"] and len(arc["content"]) <= 2000

    feed = answers["feed"]
    assert {"hot_arcs", "inject_blocks", "entries", "generated_at", "hash", "entry_count", "vault_root", "arcs", "blocks"} <= set(feed)
    assert [a["cluster_id"] for a in feed["arcs"]] == [cluster_id]
    project_feed = answers["project_feed"]
    assert project_feed["scope"] == "project" and project_feed["project"]["repo"] == "org1/api" and project_feed["generated_at"]
    assert cluster_id in [a["cluster_id"] for a in project_feed["arcs"]]

    marker, replay = answers["marker"], answers["replay"]
    assert marker["ok"] is True and marker["marker_type"] == "lesson" and marker["action"] == "appended" and marker["project"] == "api"
    assert word in Vault(settings.vault).read_text(marker["vault_path"])
    assert replay["idempotent_replay"] is True and replay["vault_path"] == marker["vault_path"]
    assert answers["argued"]["project"] == "api", answers["argued"]
    assert "'lesson', 'milestone', 'signal' or 'decision'" in answers["refused"]  # refused by the schema's enum
    assert answers["too_long"] == {"error": "content exceeds 4KB limit"}
    assert answers["missing"] == {"error": "cluster_id not found: arc-nope"}

    # The feed as resources: the global feed's JSON, and a project's memory block (GET /feed?format=markdown).
    assert answers["resources"] == ["brain://feed"] and answers["templates"] == ["brain://feed/{+project}"]
    assert [a["cluster_id"] for a in answers["feed_resource"]["arcs"]] == [cluster_id]
    block = answers["project_resource"]
    assert block.startswith("<!-- brain memory: recalled state for org1/api") and block.rstrip().endswith("<!-- end of brain memory -->")
    assert "## Project memory: org1/api" in block and f"- {cluster_id} (heat " in block
    assert (
        answers["key_resource"].splitlines()[:2] == block.splitlines()[:2] and f"- {cluster_id} (heat " in answers["key_resource"]
    )  # the short key: the same project
    assert "error" in json.loads(answers["bad_resource"])


class _Replies(OpenAIStub):
    """A chat endpoint answering the queued (status, reply text) pairs in order."""

    def __init__(self, *replies: tuple[int, str]) -> None:
        super().__init__()
        self.replies = list(replies)

    def respond(self, body: dict[str, Any]) -> tuple[int, Any]:
        status, text = self.replies.pop(0)
        return (status, {"choices": [{"message": {"role": "assistant", "content": text}}]}) if status == 200 else (status, {"error": text})


def test_kb_brief_asks_the_llm_once_per_call_and_takes_its_refs_line(settings: Settings) -> None:
    with _Replies() as llm:
        kernel = tools.Kernel.open(settings.with_overrides(llm_base_url=llm.url, llm_api_key="k3y", llm_model="brief-model"))
        try:
            nothing = tools.kb_brief(kernel, "zzqqxx")  # an empty index and no vault text: no call at all
            cluster_id, word = _plant(settings)
            llm.replies = [
                (200, f'The {word} pipeline is arc [1].\n  CANDIDATE_REFS: ["artifact://{cluster_id}"]\nThat is all.'),
                (200, "No refs here.\nCANDIDATE_REFS: artifact://x, obsidian://y"),
                *[(500, "overloaded")] * 3,  # the call and its two retries (brain_kernel.http_client)
            ]
            parsed = tools.kb_brief(kernel, word)
            unparsed = tools.kb_brief(kernel, word, model="other-model")
            failed = tools.kb_brief(kernel, word)
        finally:
            kernel.close()
    assert nothing == {"query": "zzqqxx", "hits": [], "brief": "Nothing found in the knowledge base for this query.", "candidate_refs": []}
    assert len(llm.requests) == 5 and llm.requests[2]["body"] == llm.requests[4]["body"]  # one call per brief, the failing one retried
    first = llm.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer k3y"
    assert {k: first["body"][k] for k in ("model", "max_tokens", "temperature")} == {"model": "brief-model", "max_tokens": 800, "temperature": 0.3}
    assert f"[1] {parsed['hits'][0]['source']}://{parsed['hits'][0]['ref']} - " in first["body"]["messages"][-1]["content"]
    assert parsed["brief"] == f"The {word} pipeline is arc [1].\nThat is all." and parsed["candidate_refs"] == [f"artifact://{cluster_id}"]
    fallback = [f"{h['source']}://{h['ref']}" for h in parsed["hits"][:3]]
    assert unparsed["brief"].endswith("CANDIDATE_REFS: artifact://x, obsidian://y") and unparsed["candidate_refs"] == fallback
    assert unparsed["model"] == "other-model" and llm.requests[1]["body"]["model"] == "other-model"
    assert failed["brief"] == '[inference error 500: {"error": "overloaded"}]' and failed["candidate_refs"] == fallback


def _wait_for_ping(proc: subprocess.Popen[bytes], url: str, errors: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # polling a starting process, not waiting on the code under test
        if proc.poll() is not None:
            raise AssertionError(f"brain mcp --http exited: {errors.read_text()}")
        try:
            if HTTP.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"brain mcp --http did not answer /ping in 30 s: {errors.read_text()}")


def test_http_refuses_requests_without_the_token_and_answers_arcs_and_ticks(settings: Settings, db: Session, tmp_path: Path) -> None:
    cluster_id, word = _plant(settings)
    port = free_port()
    errors = tmp_path / "mcp-http.err"
    with errors.open("w") as errlog:
        proc = subprocess.Popen(
            [sys.executable, "-m", "brain_cli", "mcp", "--http", "--port", str(port)],
            env=settings_env(settings.with_overrides(tokens=[TOKEN, f"{OTHER}=org2/web"])),
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for_ping(proc, f"{base}/ping", errors)
        assert HTTP.get(f"{base}/ping").text == "pong"
        hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        bare = HTTP.post(f"{base}/mcp", json=hello)
        assert bare.status_code == 401 and bare.json() == {"detail": "missing bearer token"}
        wrong = HTTP.post(f"{base}/mcp", json=hello, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json() == {"detail": "invalid token"}

        answers: dict[str, Any] = {}

        async def session() -> None:
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
                Client(streamable_http_client(f"{base}/mcp", http_client=http), read_timeout_seconds=30) as client,
            ):
                answers["tools"] = {tool.name: tool for tool in (await client.list_tools()).tools}
                answers["arcs"] = await _call(client, "brain_search_arcs", {"query": f"the {word} pipeline", "project": "org1/api"})
                answers["too_hot"] = await _call(client, "brain_search_arcs", {"query": word, "min_heat": 1000})
                answers["tick"] = await _call(client, "brain_tick", {"wait": False, "no_ai": True})
                answers["watched"] = await _call(client, "brain_tick", {"timeout": 0.6})  # nobody drains: still pending
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {OTHER}"}, timeout=30) as http,
                Client(streamable_http_client(f"{base}/mcp", http_client=http), read_timeout_seconds=30) as client,
            ):
                answers["other_arcs"] = await _call(client, "brain_search_arcs", {"query": f"the {word} pipeline"})
                answers["other_refused"] = await _call(client, "brain_search_arcs", {"query": word, "project": "org1/api"})
                answers["other_resource"] = await _unreadable(client, "brain://feed/org1/api")
                answers["own_resource"] = await _read(client, "brain://feed")

        anyio.run(session)
    finally:
        stop(proc, 10)

    assert set(answers["tools"]) == TOOLS
    _validate(answers["tools"], [("brain_search_arcs", answers["arcs"]), ("brain_tick", answers["tick"]), ("brain_tick", answers["watched"])])
    arcs = answers["arcs"]
    assert arcs["query"] == f"the {word} pipeline" and arcs["count"] == len(arcs["arcs"]) == 1  # one result per arc
    [arc] = arcs["arcs"]
    assert set(arc) == {"cluster_id", "title", "region", "heat", "status", "path", "score", "preview"}
    assert arc["cluster_id"] == cluster_id and isinstance(arc["heat"], int) and arc["path"].endswith(f"{cluster_id}.md") and len(arc["preview"]) <= 200
    assert answers["too_hot"] == {"query": word, "count": 0, "arcs": []}
    assert answers["other_arcs"]["arcs"] == [] and "outside" in answers["other_refused"]["error"]  # scoped tokens (ADR 0021)
    assert "outside" in json.loads(answers["other_resource"])["error"]  # the resources read as the token's principal
    assert answers["own_resource"]["scope"] == "project" and cluster_id not in json.dumps(answers["own_resource"])  # the feed of org2/web

    tick = answers["tick"]
    assert set(tick) == {"job_id", "status", "no_ai", "waited", "note"}
    assert tick["status"] == "pending" and tick["no_ai"] is True and tick["waited"] is False
    job = tick_queue.get(db, tick["job_id"])
    assert job is not None and job.source == "mcp-agent" and job.no_ai and not job.dry_run
    watched = answers["watched"]
    assert watched["status"] == "pending" and watched["waited"] is True and watched["no_ai"] is False
    assert 0.5 <= watched["waited_seconds"] <= 1.5 and "tick-drain" in watched["note"]


def test_every_feed_answer_of_a_full_memory_validates_against_the_feed_schema(settings: Settings, planted: Any) -> None:
    """Six projects' memory, fleet signals, inject blocks and a tombstone: the global feed, each project's, an unknown one's."""
    kernel = tools.Kernel.open(settings)
    try:
        schema = answers.Feed.model_json_schema()
        feeds = [tools.brain_feed(kernel), tools.brain_feed(kernel, "acme/nobody")]
        feeds += [tools.brain_feed(kernel, project) for project in sorted(planted.owned)]
    finally:
        kernel.close()
    assert len(feeds) >= 4
    for feed in feeds:
        assert "error" not in feed, feed
        jsonschema.validate(json.loads(to_json(feed)), schema)
    assert feeds[1]["project"]["known"] is False
