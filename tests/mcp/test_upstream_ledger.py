"""MCP behaviours of UPSTREAM.md section 3 that no other test pinned, over the tools in-process.

Each test names the rows of docs/compatibility-ledger.md it checks. Real
Postgres, a real vault, the app over ASGI to store the artifacts.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_mcp import tools


def test_kb_search_with_both_sources_off_answers_nothing(settings: Settings) -> None:
    """Ledger M5: ``include_artifact=false, include_obsidian=false`` is ``{query, count: 0, results: []}``."""
    k = tools.Kernel.open(settings)
    try:
        answer = tools.kb_search(k, "anything", include_artifact=False, include_obsidian=False)
    finally:
        k.close()
    assert {key: answer[key] for key in ("query", "count", "results")} == {"query": "anything", "count": 0, "results": []}


def test_kb_search_takes_limit_hits_from_each_source_and_ranks_them_together(client: TestClient, settings: Settings) -> None:
    """Ledger M4: each source is asked for ``limit`` hits, the merged list is sorted by ``normalized_score`` and cut
    to 2 x limit; an artifact's title is the last ``/`` segment of its key."""
    for n in range(4):
        stored = client.post("/embed", json={"key": f"docs/wombat-{n}", "content": f"wombat burrow survey number {n}", "producer": "artifacts"})
        assert stored.status_code == 200
        Vault(settings.vault).write_atomic(f"left/research/wombat-{n}.md", f"# Wombat {n}\n\nwombat burrow notes {n}\n")
    k = tools.Kernel.open(settings)
    try:
        answer = tools.kb_search(k, "wombat burrow", limit=2)
    finally:
        k.close()
    sources = [r["source"] for r in answer["results"]]
    assert answer["count"] == len(answer["results"]) == 4 and sorted(sources) == ["artifact", "artifact", "obsidian", "obsidian"]
    scores = [r["normalized_score"] for r in answer["results"]]
    assert scores == sorted(scores, reverse=True)
    assert {r["title"] for r in answer["results"] if r["source"] == "artifact"} <= {f"wombat-{n}" for n in range(4)}
