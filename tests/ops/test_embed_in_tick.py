"""The tick embeds what was written since the last one: no ``brain embed`` between a marker and a search (ADR 0046).

A lesson goes in through ``POST /marker`` and the tick is the one every
entry point runs (``run_tick_and_warm``: ``brain tick``, the drain of
``POST /tick``, the ops loop). The OpenAI-compatible endpoint is a real
HTTP server on 127.0.0.1 answering as ``text-embedding-3-small`` does
(1536 dimensions), and can be taken down between ticks.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from brain_kernel.db.engine import make_engine
from brain_kernel.search import embeddings
from brain_kernel.search.embedders import OFFLINE_DIM
from brain_kernel.search.pending import pending
from brain_kernel.settings import KERNEL_VARIABLES, Settings
from brain_kernel.vault_store import Vault
from brain_ops.keeper.drain import run_tick_and_warm
from tests.support.harness import make_settings
from tests.support.openai_stub import OpenAIStub

LESSON = "Run the auth tests with a frozen clock: token expiry flakes them at midnight."
SMALL_DIM = 1536  # text-embedding-3-small


def _vector(text: str, dim: int) -> list[float]:
    """A deterministic, unnormalised vector for a text (same text, same vector)."""
    return [float(b) - 127.5 for b in hashlib.shake_256(text.encode()).digest(dim)]


class _Embeddings(OpenAIStub):
    """``/embeddings`` as OpenAI answers for its known models; ``down`` answers 503 as an overloaded server does."""

    def __init__(self) -> None:
        super().__init__()
        self.dims = {"text-embedding-3-small": SMALL_DIM, "text-embedding-3-large": 3072}
        self.down = False

    def respond(self, body: dict[str, Any]) -> tuple[int, Any]:
        if self.down:
            return 503, {"error": {"message": "service unavailable", "type": "server_error"}}
        dim = self.dims[body["model"]]
        data = [{"object": "embedding", "index": i, "embedding": _vector(t, dim)} for i, t in enumerate(body["input"])]
        return 200, {"object": "list", "model": body["model"], "data": data}


@pytest.fixture
def endpoint() -> Iterator[_Embeddings]:
    with _Embeddings() as server:
        yield server


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    made = make_engine(settings.database_url or "", pooled=False)
    yield made
    made.dispose()


def _post_lesson(client: Any, content: str = LESSON) -> None:
    response = client.post("/marker", json={"type": "lesson", "content": content, "attrs": {"project": "acme/web"}})
    assert response.status_code == 201, response.text


def _found(client: Any, query: str = LESSON) -> list[dict[str, Any]]:
    answer = client.post("/search", json={"query": query, "project": "acme/web", "limit": 5})
    assert answer.status_code == 200, answer.text
    return [r for r in answer.json()["results"] if LESSON[:60] in r["text_preview"]]


@pytest.mark.own_database  # the column takes the offline model's width
def test_a_posted_lesson_is_found_after_one_tick_with_no_embed_job(client: Any, settings: Settings, engine: Engine, db: Session) -> None:
    _post_lesson(client)
    assert pending(db) == 1 and pending(db, ("web", "acme/web")) == 1 and pending(db, ("api", None)) == 0
    assert _found(client) == []  # not embedded yet: only the tick will, and the answer says one is waiting
    assert client.post("/search", json={"query": LESSON, "project": "acme/web"}).json()["pending"] == 1
    assert client.post("/search", json={"query": LESSON}).json()["pending"] == 1
    assert client.post("/search", json={"query": LESSON, "project": "nobody/else"}).json()["pending"] == 0

    summary = run_tick_and_warm(engine, Vault(settings.vault), settings, use_ai=False, dry_run=False)
    assert summary.embeddings["ok"] is True and summary.embeddings["embedded"] == 1 and summary.embeddings["pending"] == 0
    [hit] = _found(client)
    assert hit["metadata"]["project"] == "web" and hit["producer"] == "brain-lesson"
    assert pending(db) == 0
    assert client.post("/search", json={"query": LESSON, "project": "acme/web"}).json()["pending"] == 0

    again = run_tick_and_warm(engine, Vault(settings.vault), settings, use_ai=False, dry_run=False)
    assert again.embeddings["ok"] is True and again.embeddings["embedded"] == 0 and again.embeddings["unchanged"] == 0


@pytest.mark.own_database  # the column becomes 1536-wide
def test_an_endpoint_down_leaves_the_tick_done_and_the_next_tick_embeds(tmp_path: Any, database_url: str, endpoint: _Embeddings, db: Session) -> None:
    """Upstream's embeddings settings with no EMBED_DIM: the model's 1536; the outage is a report, not a failed tick."""
    from fastapi.testclient import TestClient

    from brain_api.app import create_app

    settings = make_settings(tmp_path, database_url, embed_base_url=endpoint.url, embed_api_key="sk-test", embed_model="text-embedding-3-small")
    assert settings.embed_dim == SMALL_DIM
    vault = Vault(settings.vault)
    vault.scaffold()
    made = make_engine(database_url, pooled=False)
    try:
        with TestClient(create_app(settings)) as client:
            _post_lesson(client)
            _post_lesson(client, "Pin pgbouncer's pool size in the chart: the default starves the workers.")
            endpoint.down = True
            down = run_tick_and_warm(made, vault, settings, use_ai=False, dry_run=False)
            assert down.embeddings["ok"] is False and "503" in down.embeddings["error"], down.embeddings
            assert down.embeddings["pending"] == 2 and pending(db, ("web", "acme/web")) == 2
            assert down.stats["arcs_scanned"] == 0 and down.feed_answers is not None  # the tick itself did its work

            endpoint.down = False
            up = run_tick_and_warm(made, vault, settings, use_ai=False, dry_run=False)
            assert up.embeddings["ok"] is True and up.embeddings["embedded"] == 2 and up.embeddings["pending"] == 0, up.embeddings
            assert embeddings.column_dimension(db) == SMALL_DIM
            [hit] = _found(client)
            assert hit["metadata"]["project"] == "web"
    finally:
        made.dispose()


@pytest.mark.own_database  # the column becomes 1536-wide
def test_upstreams_env_embeds_on_the_first_brain_embed_without_embed_dim(tmp_path: Any, database_url: str, endpoint: _Embeddings, db: Session) -> None:
    """Upstream's variable names (LLM_API_BASE, LLM_API_KEY, LLM_EMBED_MODEL), no EMBED_DIM, an empty column of another width."""
    from brain_cli.cli import app

    base = make_settings(tmp_path, database_url)
    Vault(base.vault).scaffold()
    from brain_core.entries import EntryRecord
    from brain_kernel.index.entries import upsert_entries

    upsert_entries(db, [EntryRecord(id="lesson:l.md#1", kind="lesson", vault_path="l.md", content=LESSON, project="web", repo="acme/web")])
    db.commit()
    assert embeddings.column_dimension(db) == OFFLINE_DIM  # migrated for the offline model: not the endpoint's width
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith(KERNEL_VARIABLES)}
    env.update(base.to_environ())
    env.update(LLM_API_BASE=endpoint.url, LLM_API_KEY="sk-upstream", LLM_EMBED_MODEL="text-embedding-3-small")
    assert "EMBED_DIM" not in env and "BRAIN_EMBED_DIM" not in env
    result = CliRunner().invoke(app, ["embed"], env=env)
    assert result.exit_code == 0, result.stderr
    assert '"embedded": 1' in result.stdout
    assert embeddings.column_dimension(db) == SMALL_DIM and embeddings.count_chunks(db) == 1
    assert {r["auth"] for r in endpoint.requests} == {"Bearer sk-upstream"}
    assert pending(db) == 0
