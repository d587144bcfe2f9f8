"""Embeddings schema behaviours of UPSTREAM.md section 2 that no other test pinned.

Each test names the rows of docs/compatibility-ledger.md it checks. Real
Postgres; the schema changes run in a transaction the fixture rolls back.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

from brain_kernel.search import embeddings


def _hnsw(tx: Session) -> str | None:
    return tx.execute(text("select indexdef from pg_indexes where indexname = :n"), {"n": embeddings.HNSW_INDEX}).scalar()


def test_the_hnsw_index_exists_only_up_to_2000_dimensions(tx: Session) -> None:
    """Ledger E20: pgvector's HNSW takes at most 2000 dimensions; a wider column has none, a narrower one gets it back
    with upstream's cosine operator class, m = 16 and ef_construction = 64."""
    tx.execute(text("DELETE FROM content_embeddings"))
    embeddings.ensure_dimension(tx, 3072)  # text-embedding-3-large
    assert embeddings.column_dimension(tx) == 3072 and _hnsw(tx) is None
    embeddings.ensure_dimension(tx, 1536)
    definition = _hnsw(tx) or ""
    assert embeddings.column_dimension(tx) == 1536
    assert "USING hnsw (embedding vector_cosine_ops)" in definition and "m='16'" in definition and "ef_construction='64'" in definition
