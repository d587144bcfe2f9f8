"""Project-aware search: the embeddings routes on the kernel, an exact project-filtered top-k, ``brain embed``.

Entries are planted through the index, embedded by ``brain embed``'s job
with the offline embedder shipped in the package, and searched over HTTP.
The exactness tests place vectors by hand so that other projects' chunks
are nearer the query than every chunk of the project asked for: a search
that ranked through HNSW first and filtered after would come back short.
"""

from __future__ import annotations

import datetime as dt
import math

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from brain_core.chunks import EmbeddingDoc
from brain_kernel.db.models import ContentEmbedding
from brain_kernel.errors import ConfigError
from brain_kernel.index.entries import touch_project, upsert_entries
from brain_kernel.search import embeddings
from brain_kernel.search.embed_run import run_embed
from brain_kernel.search.embedders import OFFLINE_DIM, OfflineEmbedder
from tests.support.records import lesson_record, merged_arc_record

NOW = dt.datetime.now(dt.timezone.utc)


class Fixed:
    """An embedder whose vectors the test chooses: text -> vector (unit length), for exact rankings."""

    name = "fixed"

    def __init__(self, vectors: dict[str, list[float]], dim: int) -> None:
        self.vectors, self.dim = vectors, dim

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]


def unit(angle: float, dim: int = 256) -> list[float]:
    """A unit vector at ``angle`` radians from the first axis, in the plane of the first two."""
    return [math.cos(angle), math.sin(angle), *([0.0] * (dim - 2))]


def _plant(db: Session) -> None:
    records = [
        lesson_record(1, "api", "org1/api", "Pin the clock in the auth test so it stops flaking.", at=NOW),
        lesson_record(2, "api", "org1/api", "Retry the token refresh once before failing the request.", at=NOW),
        lesson_record(3, "web", "acme/web", "Update the helm chart values for the web frontend.", at=NOW),
        lesson_record(4, "web", "acme/web", "The auth test in web flakes when the clock drifts.", at=NOW),
        lesson_record(5, None, None, "An unattributed note about flaky auth tests.", at=NOW),
        merged_arc_record("Checkout flow shared by web and billing; flaky auth test fixed on the way.", at=NOW),
    ]
    upsert_entries(db, records)
    for key, repo in (("api", "org1/api"), ("web", "acme/web"), ("billing", "acme/billing")):
        touch_project(db, key, repo, at=NOW)
    db.commit()


@pytest.fixture(scope="module")
def offline() -> OfflineEmbedder:
    return OfflineEmbedder()


def test_project_search_returns_only_its_chunks_including_merged_arcs(client, db: Session, offline: OfflineEmbedder) -> None:
    _plant(db)
    summary = run_embed(db, offline)
    db.commit()
    assert summary.embedded == 6 and summary.chunks == 6
    web = client.post("/search", json={"query": "fix flaky auth test", "project": "acme/web", "limit": 10}).json()
    assert web["exhaustive"] is True and web["count"] == 3
    assert {r["metadata"]["title"][:20] for r in web["results"]} == {"Update the helm char", "The auth test in web", "Unify checkout for w"}
    billing = client.post("/search", json={"query": "checkout", "project": "billing"}).json()
    assert [r["key"] for r in billing["results"]] == ["arc-merged"]  # a merged arc counts for each of its projects
    assert billing["results"][0]["producer"] == "brain-arc"
    api = client.post("/search", json={"query": "fix flaky auth test", "project": "api", "kind": "lesson"}).json()
    assert next(r["metadata"]["title"] for r in api["results"]).startswith("Pin the clock")  # the offline model ranks by meaning
    assert all(r["metadata"]["project"] == "api" for r in api["results"])
    unknown = client.post("/search", json={"query": "x", "project": "nobody/here"}).json()
    assert unknown["results"] == [] and unknown["exhaustive"] is True
    assert client.post("/search", json={"query": "x", "project": "../x"}).status_code == 422
    everything = client.post("/search", json={"query": "fix flaky auth test", "limit": 3}).json()
    assert everything["count"] == 3 and everything["exhaustive"] is True  # six rows: exact even unfiltered (ADR 0045)
    again = run_embed(db, offline)
    assert again.embedded == 0 and again.unchanged == 6  # a rerun embeds nothing


def test_a_project_with_three_rows_gets_those_three_even_when_others_are_nearer(db: Session) -> None:
    """2,000 chunks of other projects sit nearer the query than P's three: P still gets all three, exhaustively."""
    vectors: dict[str, list[float]] = {}
    docs = []
    for n in range(2000):
        t = f"other {n}"
        vectors[t] = unit(0.001 * (n % 50))
        docs.append(EmbeddingDoc(f"o{n}", "brain-lesson", t, "lesson", "web", ("web",), "acme/web"))
    for n in range(3):
        t = f"mine {n}"
        vectors[t] = unit(1.0 + 0.1 * n)
        docs.append(EmbeddingDoc(f"m{n}", "brain-lesson", t, "lesson", "api", ("api",), "org1/api"))
    embeddings.store_docs(db, Fixed(vectors, 256), docs)
    touch_project(db, "api", "org1/api")
    touch_project(db, "web", "acme/web")
    db.commit()
    hits, exhaustive = embeddings.search(db, unit(0.0), project=("api", "org1/api"), limit=10)
    assert exhaustive is True and [h.key for h in hits] == ["m0", "m1", "m2"]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    above, _ = embeddings.search(db, unit(0.0), project=("api", "org1/api"), limit=10, min_score=math.cos(1.15))
    assert [h.key for h in above] == ["m0", "m1"]  # min_score before the limit, never after
    plain, exhaustive = embeddings.search(db, unit(0.0), limit=5)
    assert exhaustive is False and len(plain) == 5


def test_a_dimension_mismatch_is_refused_and_the_table_left_intact(db: Session) -> None:
    embeddings.store_docs(db, Fixed({"a": unit(0.1)}, 256), [EmbeddingDoc("a", "p", "a", "lesson")])
    db.commit()
    small = Fixed({"b": [1.0, 0.0, 0.0, 0.0]}, 4)
    with pytest.raises(ConfigError, match="EMBED_DIM_FORCE_MIGRATE"):
        embeddings.store_docs(db, small, [EmbeddingDoc("b", "p", "b", "lesson")])
    db.rollback()
    assert embeddings.column_dimension(db) == 256 and embeddings.count_chunks(db) == 1
    embeddings.store_docs(db, small, [EmbeddingDoc("b", "p", "b", "lesson")], force_dim=True)
    db.commit()
    assert embeddings.column_dimension(db) == 4 and list(db.scalars(select(ContentEmbedding.key))) == ["b"]
    # A query of the old size is refused with the reason.
    with pytest.raises(ConfigError, match=r"another size \(different vector dimensions (256 and 4|4 and 256)\)"):
        embeddings.search(db, unit(0.0), limit=3)
    db.rollback()
    db.execute(text("DELETE FROM content_embeddings"))
    embeddings.ensure_dimension(db, 256)  # an empty table follows the embedder back
    db.commit()
    assert embeddings.column_dimension(db) == 256


def test_the_upstream_embeddings_routes(client) -> None:
    stored = client.post(
        "/embed", json={"key": "doc-1", "content": "Helm charts and values files.", "producer": "artifacts", "metadata": {"project": "acme/web"}}
    )
    assert stored.status_code == 200 and stored.json() == {"key": "doc-1", "chunks_stored": 1, "dimensions": OFFLINE_DIM}
    client.post("/embed", json={"key": "doc-1", "content": "Same key, another producer.", "producer": "notes"})
    chunks = client.get("/by-key/doc-1").json()
    assert {c["producer"] for c in chunks["chunks"]} == {"artifacts", "notes"}  # keys are unique per producer
    assert client.get("/by-key/nope").status_code == 404 and client.get("/by-key/nope").json()["detail"] == "key not found: nope"
    assert client.post("/index_artifact", json={"content": "x"}).json() == {"detail": "missing required fields: ['key']"}
    assert client.post("/index_artifact", json={"key": "a/b/c", "content": "An artifact"}).status_code == 200
    pruned = client.post("/prune", json={"producer": "artifacts", "keep_keys": []}).json()
    assert pruned == {"deleted": 1, "kept": 0, "scanned": 1, "deleted_keys": ["doc-1"]}
    assert [c["producer"] for c in client.get("/by-key/doc-1").json()["chunks"]] == ["notes"]
