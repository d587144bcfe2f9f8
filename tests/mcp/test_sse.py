"""``brain mcp --http`` speaks the SSE transport (``GET /sse``, ``POST /messages/``) with the token in ``x-api-key``.

Upstream's client profiles connect to ``/sse`` and its example config sends
the token as ``x-api-key``: the official SDK's SSE client, configured that
way, lists the tools and calls ``kb_search`` on a real server process. The
key is checked as the bearer token is (401 without it or with a wrong one),
reaches the streamable transport too, and a message posted to a session
with another token answers as a missing session.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy.orm import Session

from brain_kernel.settings import Settings
from tests.mcp.test_mcp import TOOLS, _call, _plant, _wait_for_ping
from tests.support.harness import HTTP, REPO_ROOT, settings_env
from tests.support.servers import free_port, stop

TOKEN = "t0k-sse-0123456789"
OTHER = "t0k-web-0123456789"  # bound to another project


def test_an_sse_client_with_x_api_key_lists_the_tools_and_searches(settings: Settings, db: Session, tmp_path: Path) -> None:
    cluster_id, word = _plant(settings)
    port = free_port()
    errors = tmp_path / "mcp-sse.err"
    with errors.open("w") as errlog:
        proc = subprocess.Popen(
            [sys.executable, "-m", "brain_cli", "mcp", "--http", "--port", str(port)],
            env=settings_env(settings.with_overrides(tokens=[TOKEN, f"{OTHER}=org2/web"])),
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
        )
    answers: dict[str, Any] = {}
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for_ping(proc, f"{base}/ping", errors)
        bare = HTTP.get(f"{base}/sse")
        assert bare.status_code == 401 and bare.json() == {"detail": "missing bearer token"}
        wrong = HTTP.get(f"{base}/sse", headers={"x-api-key": "nope"})
        assert wrong.status_code == 401 and wrong.json() == {"detail": "invalid token"}

        async def session() -> None:
            sessions: list[str] = []
            async with Client(sse_client(f"{base}/sse", headers={"x-api-key": TOKEN}, on_session_created=sessions.append), read_timeout_seconds=30) as client:
                answers["tools"] = {tool.name for tool in (await client.list_tools()).tools}
                answers["search"] = await _call(client, "kb_search", {"query": word, "limit": 5})
                # The session's message endpoint: another token's message answers as a missing session; none, 401.
                hello = {"jsonrpc": "2.0", "id": 99, "method": "tools/list", "params": {}}
                url = f"{base}/messages/?session_id={sessions[0]}"
                answers["other_post"] = HTTP.post(url, json=hello, headers={"x-api-key": OTHER}).status_code
                answers["bare_post"] = HTTP.post(url, json=hello).status_code
                answers["after"] = await _call(client, "kb_search", {"query": word, "limit": 5})  # the session still answers
            async with Client(sse_client(f"{base}/sse", headers={"x-api-key": OTHER}), read_timeout_seconds=30) as client:
                answers["other_search"] = await _call(client, "kb_search", {"query": word, "limit": 5})
            async with (
                httpx2.AsyncClient(headers={"x-api-key": TOKEN}, timeout=30) as http,
                Client(streamable_http_client(f"{base}/mcp", http_client=http), read_timeout_seconds=30) as client,
            ):
                answers["streamable_tools"] = {tool.name for tool in (await client.list_tools()).tools}

        anyio.run(session)
    finally:
        stop(proc, 10)

    assert answers["tools"] == TOOLS == answers["streamable_tools"], errors.read_text()
    refs = [r["ref"] for r in answers["search"]["results"]]
    assert cluster_id in refs and any(r.endswith(f"{cluster_id}.md") for r in refs)
    assert answers["after"]["count"] == answers["search"]["count"]
    assert (answers["other_post"], answers["bare_post"]) == (404, 401)
    assert cluster_id not in json.dumps(answers["other_search"])  # the other token's session is scoped to its project
