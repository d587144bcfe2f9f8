"""The search index: embedded chunks in ``content_embeddings``, stored, searched, pruned (UPSTREAM.md 2).

All SQL about embedded chunks lives here; callers pass a session and an
embedder (``brain_kernel.search.embedders``) and commit themselves.

Why a project-filtered search is exact: the chunks of project P are selected
by the feed's membership rule (``feed_repo.member`` over the chunk's typed
``projects``, ``project`` and ``repo`` columns; the ``projects`` GIN index
serves it) inside a materialized CTE that computes every filtered row's
distance, and only then ranked and cut to ``limit``. The HNSW index can
never answer that query (it would rank first and filter after, which
silently returns fewer rows), so every row of P above ``min_score`` takes
part and the answer says ``exhaustive: true``. A search with no filter at
all ranks through HNSW and says ``exhaustive: false``.

Upstream's defects fixed here (section 8, item 16): keys are unique per
producer (a store replaces only the same producer's chunks), ``min_score``
is applied before the limit, and ``one_per_key`` gives one result per key
for tools that list arcs. A key is unique within its producer and its
project (revision 0015): a token bound to projects replaces only its own
project's chunks of a key (``store_docs(owner=...)``, ADR 0033).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb
from sqlalchemy import delete, func, literal, or_, select, text
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from brain_core.chunks import PREVIEW_CHARS, EmbeddingDoc, chunk_text
from brain_core.identity import read_repo
from brain_core.jsonable import json_object
from brain_core.keys import InvalidKey, parse_project_ref
from brain_kernel.db.models import ContentEmbedding
from brain_kernel.errors import ConfigError
from brain_kernel.feed.feed_repo import key_owned_sql, member
from brain_kernel.search.embedders import Embedder

_TABLE = ContentEmbedding.__table__
HNSW_INDEX = "ix_content_embeddings_embedding_hnsw"
HNSW_MAX_DIM = 2000  # pgvector's HNSW limit for vector columns
BULK_ROWS = 20_000
_LOCK = 0x0A6B312D  # upstream's advisory lock id for dimension changes


@dataclass(frozen=True)
class Hit:
    """One search result, in upstream's shape."""

    key: str
    producer: str
    chunk_idx: int
    content_type: str
    text_preview: str
    metadata: dict[str, Any]
    score: float

    def as_dict(self) -> dict[str, Any]:
        """The JSON form of one result."""
        return json_object(self)


# -- dimension ----------------------------------------------------------------------------------


def column_dimension(session: Session | Connection) -> int | None:
    """The dimension of the ``embedding`` column, as the catalog says."""
    return session.execute(text("SELECT atttypmod FROM pg_attribute WHERE attrelid = 'content_embeddings'::regclass AND attname = 'embedding'")).scalar()


def ensure_dimension(session: Session, dim: int, *, force: bool = False) -> None:
    """Make the column hold ``dim``-dimensional vectors; refuse (ConfigError) when rows of another size exist.

    An empty table is migrated in place; a populated one only with ``force``
    (``EMBED_DIM_FORCE_MIGRATE``), which deletes its rows (they are derived:
    ``brain embed`` rebuilds them). Serialised by upstream's advisory lock.
    """
    current = column_dimension(session)
    if current == dim:
        return
    session.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _LOCK})
    current = column_dimension(session)
    if current == dim:
        return
    rows = session.execute(select(func.count()).select_from(_TABLE)).scalar_one()
    if rows and not force:
        raise ConfigError(
            f"content_embeddings holds {rows} vectors of dimension {current}, the embedder makes {dim}: "
            "left as it is; set EMBED_DIM_FORCE_MIGRATE=1 to drop them and migrate (then run brain embed)"
        )
    session.execute(delete(_TABLE))
    session.execute(text(f"DROP INDEX IF EXISTS {HNSW_INDEX}"))
    session.execute(text(f"ALTER TABLE content_embeddings ALTER COLUMN embedding TYPE vector({int(dim)})"))
    if dim <= HNSW_MAX_DIM:
        session.execute(text(f"CREATE INDEX {HNSW_INDEX} ON content_embeddings USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"))


# -- writes ------------------------------------------------------------------------------------------


def stored_hashes(session: Session, producer: str, keys: Sequence[str]) -> dict[str, str | None]:
    """The content hash stored with each key's first chunk (to re-embed only what changed)."""
    if not keys:
        return {}
    wanted = set(keys)  # one scan of the producer's first chunks: a 100,000-key IN list passes no driver
    stmt = select(_TABLE.c.key, _TABLE.c.content_hash).where(_TABLE.c.producer == producer, _TABLE.c.chunk_idx == 0)
    return {key: digest for key, digest in session.execute(stmt) if key in wanted}


def store_docs(
    session: Session,
    embedder: Embedder,
    docs: Sequence[EmbeddingDoc],
    *,
    content_type: str = "text/markdown",
    force_dim: bool = False,
    owner: tuple[str, str | None] | None = None,
) -> int:
    """Embed and store documents (their previous chunks of the same producer replaced); returns chunks stored.

    The column follows the embedder's dimension (``ensure_dimension``: a
    populated table of another size is refused unless ``force_dim``).
    ``owner`` (key, repo): a store by a token bound to projects replaces only
    that project's chunks of the keys, never another's (ADR 0033).
    """
    chunked = [(doc, idx, piece) for doc in docs for idx, piece in enumerate(chunk_text(doc.text))]
    if not chunked:
        return 0
    vectors = embedder.embed([piece for _, _, piece in chunked])
    ensure_dimension(session, len(vectors[0]), force=force_dim)
    keys_of: dict[str, list[str]] = {}
    for doc in docs:
        keys_of.setdefault(doc.producer, []).append(doc.key)
    for producer, keys in keys_of.items():  # a store replaces the same producer's chunks only (ADR 0013)
        delete_keys(session, producer, keys, owner=owner)
    _copy_rows(session, [(doc, idx, piece, vector) for (doc, idx, piece), vector in zip(chunked, vectors, strict=True)], content_type)
    return len(chunked)


_COPY = (
    "COPY content_embeddings (key, chunk_idx, producer, content_type, text_preview, content_hash, metadata, embedding, kind, project, projects, repo) "
    "FROM STDIN WITH (FORMAT BINARY)"
)
_COPY_TYPES = ["text", "int4", "varchar", "varchar", "text", "varchar", "jsonb", "vector", "varchar", "text", "text[]", "text"]


def _copy_rows(session: Session, rows: Sequence[tuple[EmbeddingDoc, int, str, Sequence[float]]], content_type: str) -> None:
    """Insert chunks with one binary COPY (a multi-row INSERT cost as much as the embedding and HNSW together)."""
    conn = session.connection().connection.driver_connection
    register_vector(conn)
    with conn.cursor() as cur, cur.copy(_COPY) as copy:
        copy.set_types(_COPY_TYPES)
        for doc, idx, piece, vector in rows:
            copy.write_row(
                (
                    doc.key,
                    idx,
                    doc.producer,
                    content_type,
                    piece[:PREVIEW_CHARS],
                    doc.content_hash,
                    Jsonb(doc.metadata),
                    np.asarray(vector, dtype=np.float32),
                    doc.kind,
                    doc.project,
                    list(doc.projects),
                    doc.repo,
                )
            )


@contextmanager
def bulk_load(session: Session, *, rows: int) -> Iterator[None]:
    """Around a large write: without the HNSW index, rebuilt once after (one build beats ``rows`` inserts into the graph).

    Used when a run writes at least ``BULK_ROWS`` chunks or more than the
    table already holds; smaller writes keep the index and pay per row.
    """
    existing = count_chunks(session)
    dim = column_dimension(session) or 0
    if rows < BULK_ROWS and rows <= existing:
        yield
        return
    session.execute(text(f"DROP INDEX IF EXISTS {HNSW_INDEX}"))
    yield
    if dim <= HNSW_MAX_DIM:
        session.execute(text("SET LOCAL maintenance_work_mem = '256MB'"))
        session.execute(text(f"CREATE INDEX {HNSW_INDEX} ON content_embeddings USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"))


def delete_keys(session: Session, producer: str, keys: Sequence[str], *, owner: tuple[str, str | None] | None = None) -> int:
    """Remove a producer's chunks of the given keys (with ``owner``: only that project's chunks of them)."""
    if not keys:
        return 0
    params: dict[str, Any] = {"producer": producer, "keys": list(keys)}
    sql = "DELETE FROM content_embeddings WHERE producer = :producer AND key = ANY(:keys)"
    if owner is not None:
        sql += " AND project IS NOT DISTINCT FROM :project AND repo IS NOT DISTINCT FROM :repo"
        params.update(project=owner[0], repo=owner[1])
    return session.execute(text(sql), params).rowcount or 0


def prune(session: Session, producer: str, keep_keys: Sequence[str]) -> dict[str, Any]:
    """Delete the producer's chunks whose key is not kept (upstream's ``/prune``: an empty list deletes all)."""
    keys = sorted(set(session.scalars(select(_TABLE.c.key).where(_TABLE.c.producer == producer).distinct())))
    kept = set(keep_keys)
    gone = [k for k in keys if k not in kept]
    delete_keys(session, producer, gone)
    return {"deleted": len(gone), "kept": len(keys) - len(gone), "scanned": len(keys), "deleted_keys": gone}


def by_key(session: Session, key: str) -> list[dict[str, Any]]:
    """Every chunk of ``key`` (any producer), by chunk index."""
    stmt = (
        select(_TABLE.c.key, _TABLE.c.producer, _TABLE.c.chunk_idx, _TABLE.c.content_type, _TABLE.c.text_preview, _TABLE.c["metadata"])
        .where(_TABLE.c.key == key)
        .order_by(_TABLE.c.producer, _TABLE.c.project.nulls_first(), _TABLE.c.repo.nulls_first(), _TABLE.c.chunk_idx)
    )
    return [
        {
            "key": r.key,
            "producer": r.producer,
            "chunk_idx": r.chunk_idx,
            "content_type": r.content_type,
            "text_preview": r.text_preview,
            "metadata": dict(r.metadata or {}),
        }
        for r in session.execute(stmt)
    ]


# -- search ---------------------------------------------------------------------------------------------


def search(
    session: Session,
    query_vector: Sequence[float],
    *,
    project: tuple[str, str | None] | None = None,
    producer: str | None = None,
    kind: str | None = None,
    limit: int = 10,
    min_score: float = 0.0,
    one_per_key: bool = False,
    within: Sequence[tuple[str, str | None]] | None = None,
) -> tuple[list[Hit], bool]:
    """The nearest chunks to ``query_vector`` (score = 1 - cosine distance) and whether the answer is exhaustive.

    With any filter (project (key, repo), producer or kind) the ranking is
    exact over the filtered rows; without one it goes through HNSW. ``within``:
    only chunks of these projects (a restricted token's scope; empty = none).
    """
    if within is not None and not within:
        return [], True
    distance = ContentEmbedding.embedding.cosine_distance(list(query_vector))
    where = []
    if project is not None:
        key, repo = project
        where.append(member(key, repo, key_owned_sql(key, repo), of=ContentEmbedding))
    if within is not None:
        where.append(or_(*(member(key, repo, key_owned_sql(key, repo), of=ContentEmbedding) for key, repo in within)))
    if producer:
        where.append(ContentEmbedding.producer == producer)
    if kind:
        where.append(ContentEmbedding.kind == kind)
    columns = [_TABLE.c.key, _TABLE.c.producer, _TABLE.c.chunk_idx, _TABLE.c.content_type, _TABLE.c.text_preview, _TABLE.c["metadata"]]
    exhaustive = bool(where)
    if exhaustive:
        scored = select(*columns, distance.label("d")).where(*where).cte("scored").prefix_with("MATERIALIZED")
        above = select(scored).where(literal(1.0) - scored.c.d >= min_score)
        if one_per_key:  # each key's nearest chunk, then the nearest keys
            best = above.ext(distinct_on(scored.c.producer, scored.c.key)).order_by(scored.c.producer, scored.c.key, scored.c.d).subquery("best")
            stmt = select(best).order_by(best.c.d).limit(limit)
        else:
            stmt = above.order_by(scored.c.d).limit(limit)
    else:
        ranked = select(*columns, distance.label("d")).order_by(distance).limit(max(limit * 4, 40) if one_per_key else limit).subquery("ranked")
        stmt = select(ranked).where(literal(1.0) - ranked.c.d >= min_score).order_by(ranked.c.d)
    try:
        rows = session.execute(stmt).all()
    except DBAPIError as exc:  # pgvector refuses to compare vectors of two sizes: no catalog read per search
        if "different vector dimensions" not in str(exc.orig):
            raise
        raise ConfigError(
            f"the embedder makes {len(query_vector)}-dimensional vectors but the index holds vectors of another size "
            f"({str(exc.orig).splitlines()[0]}): run brain embed (EMBED_DIM_FORCE_MIGRATE=1 to migrate)"
        ) from None
    hits: list[Hit] = []
    seen: set[tuple[str, str]] = set()
    for r in rows:
        if one_per_key and (r.producer, r.key) in seen:
            continue
        seen.add((r.producer, r.key))
        hits.append(Hit(r.key, r.producer, r.chunk_idx, r.content_type, r.text_preview, dict(r.metadata or {}), round(1.0 - float(r.d), 4)))
        if len(hits) >= limit:
            break
    return hits, exhaustive


def count_chunks(session: Session) -> int:
    """How many chunks are stored."""
    return session.execute(select(func.count()).select_from(_TABLE)).scalar_one()


def metadata_project(metadata: Mapping[str, Any]) -> tuple[str | None, tuple[str, ...], str | None]:
    """(project, projects, repo) a producer's metadata names, when it names a valid one; else none."""
    project, repo = metadata.get("project"), metadata.get("repo")
    try:
        slug = read_repo(repo) if isinstance(repo, str) and repo.strip() else None
        key, from_ref = parse_project_ref(project) if isinstance(project, str) and project.strip() else (None, None)
    except InvalidKey:
        return None, (), None
    slug = slug or from_ref
    if key is None and slug:
        key = slug.rsplit("/", 1)[-1]
    return key, ((key,) if key else ()), slug
