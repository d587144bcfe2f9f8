"""Hybrid search (ADR 0044, ADR 0045): words and vectors fused, scores per method, no threshold unless asked, honest exactness.

Entries are stored through ``POST /embed`` with the offline embedder and
searched through ``POST /search``; the exactness and threshold tests place
vectors by hand (``Fixed``) so the nearest rows and their cosines are known.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from brain_api.app import create_app
from brain_core.chunks import EmbeddingDoc
from brain_kernel.db.engine import normalise_url, read_session_factory
from brain_kernel.index.entries import touch_project
from brain_kernel.search import embeddings
from brain_kernel.vault_store import Vault
from tests.support.harness import ManualClock, make_settings

NOTES = {
    "frontmatter-bom": "parse_frontmatter raises on a file that starts with a BOM: strip it before yaml.safe_load.",
    "frontmatter-slow": "Reading the front matter of every note is slow on a large vault; cache what the parser returns.",
    "lint-e1234": "The linter's E1234 means an import nobody uses; delete it rather than silencing the rule.",
    "lint-codes": "Lint error codes come in families; read the rule's documentation before adding an ignore.",
    "alembic-ini": "alembic.ini must name the migrations folder as script_location or upgrade finds no revisions.",
    "migrations": "Schema changes go through a migration; never edit a table by hand in production.",
    "db-reset": "ConnectionResetError in src/app/db.py came from the pooler closing idle clients after five minutes.",
    "pool-size": "The database pool was too small under load; raise it with the number of workers.",
    "flaky-auth": "The auth test flaked because the clock moved; pin the clock in the fixture.",
    "helm-values": "The helm chart's values file sets the replica count per environment.",
}
OTHER = {"other-frontmatter": "parse_frontmatter also lives in the other project's tooling, with alembic.ini and E1234."}


def _store(client: TestClient, notes: dict[str, str], repo: str, headers: dict[str, str] | None = None) -> None:
    for key, content in notes.items():
        r = client.post("/embed", json={"key": key, "content": content, "producer": "notes", "metadata": {"project": repo}}, headers=headers or {})
        assert r.status_code == 200, r.text


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory, module_database_url: str) -> Iterator[TestClient]:
    """The notes stored once for the module, on a database of its own (stored per test they cost 0.17 s each).

    The tests that use it only search (``POST /search`` reads), so each sees exactly these notes.
    """
    settings = make_settings(tmp_path_factory.mktemp("hybrid-notes"), module_database_url)
    Vault(settings.vault).scaffold()
    engine = create_engine(normalise_url(module_database_url))
    try:
        with Session(engine) as db:
            touch_project(db, "api", "org1/api")
            touch_project(db, "web", "org2/web")
            db.commit()
    finally:
        engine.dispose()
    with TestClient(create_app(settings, clock=ManualClock())) as client:
        _store(client, NOTES, "org1/api")
        _store(client, OTHER, "org2/web")
        yield client


def _search(client: TestClient, query: str, **body: object) -> dict:
    r = client.post("/search", json={"query": query, "project": "org1/api", **body})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize(
    ("query", "key"),
    [
        ("parse_frontmatter", "frontmatter-bom"),
        ("E1234", "lint-e1234"),
        ("alembic.ini", "alembic-ini"),
        ("ConnectionResetError", "db-reset"),
        ("src/app/db.py", "db-reset"),
        ("why does db.py fail", "db-reset"),
        ("what does E1234 mean", "lint-e1234"),
        ("parse_frontmatter fails on some files", "frontmatter-bom"),
    ],
)
def test_an_identifier_query_ranks_the_entry_naming_it_first(notes: TestClient, query: str, key: str) -> None:
    for mode in ("hybrid", "words"):
        answer = _search(notes, query, mode=mode)
        assert answer["results"][0]["key"] == key, (mode, [r["key"] for r in answer["results"]])
        assert answer["exhaustive"] is True and all(r["metadata"]["project"] == "org1/api" for r in answer["results"])


def test_each_mode_says_its_scores(notes: TestClient) -> None:
    hybrid = _search(notes, "parse_frontmatter")
    assert hybrid["mode"] == "hybrid" and hybrid["count"] == 10  # the default mode; every row of the project is a vector match
    first = hybrid["results"][0]
    assert set(first["scores"]) == {"vector", "words", "fused"}
    assert first["scores"]["words"] > 0 and first["scores"]["vector"] is not None and first["score"] == first["scores"]["fused"]
    assert 0 < first["score"] <= 1 and [r["score"] for r in hybrid["results"]] == sorted((r["score"] for r in hybrid["results"]), reverse=True)
    assert any(r["scores"]["words"] is None for r in hybrid["results"])  # found by its vector alone
    vector = _search(notes, "parse_frontmatter", mode="vector")
    assert all(r["scores"]["words"] is None and r["score"] == r["scores"]["vector"] for r in vector["results"])
    words = _search(notes, "parse_frontmatter", mode="words")
    assert words["count"] == 1  # the one chunk naming it ("the parser" is not "parse")
    assert all(r["scores"]["vector"] is None and r["score"] == r["scores"]["words"] for r in words["results"])
    assert _search(notes, "the of and", mode="words")["results"] == []  # common words alone match nothing
    assert notes.post("/search", json={"query": "x", "mode": "grep"}).status_code == 422
    assert notes.post("/search", json={"query": "x", "min_score": 2}).status_code == 422


def test_filters_hold_on_the_word_side(notes: TestClient) -> None:
    everywhere = notes.post("/search", json={"query": "parse_frontmatter", "mode": "words"}).json()
    assert {r["key"] for r in everywhere["results"]} == {"frontmatter-bom", "other-frontmatter"}
    web = notes.post("/search", json={"query": "parse_frontmatter", "mode": "words", "project": "org2/web"}).json()
    assert [r["key"] for r in web["results"]] == ["other-frontmatter"]
    assert notes.post("/search", json={"query": "parse_frontmatter", "mode": "words", "producer": "nobody"}).json()["results"] == []
    one = notes.post("/search", json={"query": "parse_frontmatter", "mode": "words", "one_per_key": True}).json()
    assert one["count"] == 2


@pytest.fixture
def scoped(tmp_path, database_url: str, db: Session) -> Iterator[TestClient]:
    settings = make_settings(tmp_path, database_url, tokens=["tok-all-0123456789", "tok-api-0123456789=org1/api"])
    touch_project(db, "api", "org1/api")
    touch_project(db, "web", "org2/web")
    db.commit()
    with TestClient(create_app(settings)) as client:
        admin = {"Authorization": "Bearer tok-all-0123456789"}
        _store(client, NOTES, "org1/api", admin)
        _store(client, OTHER, "org2/web", admin)
        yield client


def test_a_token_bound_to_a_project_finds_words_only_there(scoped: TestClient) -> None:
    api = {"Authorization": "Bearer tok-api-0123456789"}
    for mode in ("words", "hybrid"):
        found = scoped.post("/search", json={"query": "parse_frontmatter alembic.ini E1234", "mode": mode, "limit": 20}, headers=api).json()
        assert found["results"] and all(r["metadata"]["project"] == "org1/api" for r in found["results"]), mode
        assert "other-frontmatter" not in {r["key"] for r in found["results"]}
    assert scoped.post("/search", json={"query": "parse_frontmatter", "mode": "words", "project": "org2/web"}, headers=api).status_code == 403


class Fixed:
    """An embedder whose vectors the test chooses (unit length), so the ranking and every cosine are known."""

    name = "fixed"

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]


def unit(angle: float, dim: int) -> list[float]:
    return [math.cos(angle), math.sin(angle), *([0.0] * (dim - 2))]


def test_no_threshold_unless_asked_even_when_the_kth_cosine_is_negative(db: Session) -> None:
    dim = embeddings.column_dimension(db)
    assert dim is not None
    angles = {"near": 0.2, "side": 1.2, "behind": 2.0, "opposite": 3.0}  # cosines 0.98, 0.36, -0.42, -0.99
    vectors = {name: unit(a, dim) for name, a in angles.items()}
    embeddings.store_docs(db, Fixed(vectors), [EmbeddingDoc(name, "notes", name, "lesson", "api", ("api",), "org1/api") for name in angles])
    touch_project(db, "api", "org1/api")
    db.commit()
    for mode in ("vector", "hybrid"):
        hits, exhaustive = embeddings.search(db, unit(0.0, dim), query="nothing shared", mode=mode, project=("api", "org1/api"), limit=4)
        assert [h.key for h in hits] == ["near", "side", "behind", "opposite"] and exhaustive is True, mode
        assert hits[3].scores["vector"] == pytest.approx(math.cos(3.0), abs=1e-3)
    above, _ = embeddings.search(db, unit(0.0, dim), mode="vector", project=("api", "org1/api"), limit=4, min_score=0.5)
    assert [h.key for h in above] == ["near"]  # a threshold given applies to the cosine, before the limit
    hybrid, _ = embeddings.search(db, unit(0.0, dim), query="opposite", mode="hybrid", project=("api", "org1/api"), limit=4, min_score=0.5)
    assert [(h.key, h.scores["vector"] is None) for h in hybrid] == [("near", False), ("opposite", True)]  # its words keep it


def test_exhaustive_is_true_only_when_the_answer_is_exact(db: Session) -> None:
    """A project at the threshold goes through the index (not exhaustive) yet finds what the exact ranking finds."""
    dim = embeddings.column_dimension(db)
    assert dim is not None
    big, small = max(embeddings.EXACT_ROWS, embeddings.INDEX_COST * embeddings.INDEX_CANDIDATES) + 200, 3
    vectors, docs = {}, []
    for n in range(big):
        vectors[f"big {n}"] = unit(0.0007 * n, dim)
        docs.append(EmbeddingDoc(f"b{n}", "notes", f"big {n}", "lesson", "web", ("web",), "org2/web"))
    for n in range(small):
        vectors[f"small {n}"] = unit(1.5 + 0.1 * n, dim)
        docs.append(EmbeddingDoc(f"s{n}", "notes", f"small {n}", "lesson", "api", ("api",), "org1/api"))
    embeddings.store_docs(db, Fixed(vectors), docs)
    touch_project(db, "api", "org1/api")
    touch_project(db, "web", "org2/web")
    db.commit()
    db.execute(text("ANALYZE content_embeddings"))  # the plan follows the planner's estimate of the project's rows
    assert embeddings.choose_plan(big, big + small) == "index" and embeddings.choose_plan(small, big + small) == "exact"
    storage = "SELECT attstorage FROM pg_attribute WHERE attrelid = 'content_embeddings'::regclass AND attname = 'embedding'"
    assert db.execute(text(storage)).scalar() == "m"  # vectors stay in the row, never in TOAST
    query = unit(0.3, dim)
    chosen, exhaustive = embeddings.search(db, query, project=("web", "org2/web"), limit=10)
    exact, exact_is = embeddings.search(db, query, project=("web", "org2/web"), limit=10, plan="exact")
    assert exhaustive is False and exact_is is True
    assert [h.key for h in chosen] == [h.key for h in exact]
    few, few_exhaustive = embeddings.search(db, query, project=("api", "org1/api"), limit=10)
    assert [h.key for h in few] == ["s0", "s1", "s2"] and few_exhaustive is True
    forced, forced_exhaustive = embeddings.search(db, query, project=("api", "org1/api"), limit=10, plan="index")
    assert [h.key for h in forced] == ["s0", "s1", "s2"] and forced_exhaustive is True  # a short index scan falls back to exact
    # The API's read sessions are AUTOCOMMIT (a transaction a statement): the index plan's scan settings must
    # outlive their own statement, or the scan stops at the default ef_search (40 rows, fewer than the candidates)
    # and every search falls back to exact. The planner is held to the index here, as a large table holds it.
    db.commit()
    with read_session_factory(db.get_bind())() as read:
        read.execute(text("SET enable_seqscan = off; SET enable_sort = off"))
        try:
            served, served_exhaustive = embeddings.search(read, query, project=("web", "org2/web"), limit=10, plan="index")
            leftover = read.execute(text("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')")).one()
        finally:
            read.execute(text("RESET enable_seqscan; RESET enable_sort"))
    assert served_exhaustive is False and [h.key for h in served] == [h.key for h in exact]
    assert tuple(leftover) == ("40", "off")  # and the pooled connection is left as it was found
    unscoped, unscoped_exhaustive = embeddings.search(db, query, limit=10)
    assert unscoped_exhaustive is False and [h.key for h in unscoped] == [h.key for h in embeddings.search(db, query, limit=10, plan="exact")[0]]
