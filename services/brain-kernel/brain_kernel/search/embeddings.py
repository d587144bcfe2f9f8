"""The search index: embedded chunks in ``content_embeddings``, stored, searched, pruned (UPSTREAM.md 2).

All SQL about embedded chunks lives here; callers pass a session and an
embedder (``brain_kernel.search.embedders``) and commit themselves.

A search has two sides, fused by rank in ``hybrid`` mode (ADR 0044): the
chunk's words (``brain_kernel.search.words``, a ``tsvector`` written with the
chunk) and its vector. Both take the same filters: the chunks of project P
are selected by the feed's membership rule (``feed_repo.member`` over the
chunk's typed ``projects``, ``project`` and ``repo`` columns; the
``projects`` GIN index serves it).

The vector side has two plans (ADR 0045). Exact: a materialized CTE computes
every filtered row's distance, then ranks and cuts (an HNSW scan that ranked
first and filtered after would silently return fewer rows); the answer says
``exhaustive: true``. Index: pgvector's iterative HNSW scan collects enough
filtered candidates and they are re-ranked by their exact distance
(recall@10 measured at least 0.99; ``exhaustive: false``). The index is
chosen only where the planner's estimate of the filtered rows makes it the
cheaper; a short index answer falls back to exact.

Upstream's defects fixed here (section 8, item 16): keys are unique per
producer (a store replaces only the same producer's chunks), ``min_score``
is applied before the limit, and ``one_per_key`` gives one result per key
for tools that list arcs. A key is unique within its producer and its
project (revision 0015): a token bound to projects replaces only its own
project's chunks of a key (``store_docs(owner=...)``, ADR 0033).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb
from sqlalchemy import Text, cast, delete, func, literal, or_, select, text
from sqlalchemy.dialects.postgresql import ARRAY, TSQUERY, distinct_on
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from brain_core.chunks import PREVIEW_CHARS, SEARCH_MODES, EmbeddingDoc, chunk_text, labels
from brain_core.curation import WITHDRAWN
from brain_core.entries import entry_id
from brain_core.identity import read_repo
from brain_core.jsonable import json_object
from brain_core.keys import InvalidKey, parse_project_ref
from brain_kernel import event_counts
from brain_kernel.clock import utc_now
from brain_kernel.curation.states import expired_sql, now_text
from brain_kernel.db.models import ContentEmbedding
from brain_kernel.errors import ConfigError
from brain_kernel.feed.feed_repo import key_owned_sql, member
from brain_kernel.search import words
from brain_kernel.search.embedders import Embedder

_TABLE = ContentEmbedding.__table__
HNSW_INDEX = "ix_content_embeddings_embedding_hnsw"
HNSW_MAX_DIM = 2000  # pgvector's HNSW limit for vector columns
BULK_ROWS = 20_000
_LOCK = 0x0A6B312D  # upstream's advisory lock id for dimension changes
# pgvector's type is stored EXTERNAL: a row over 2 kB (a 384-dimension vector, a preview, metadata, words) had
# its vector moved out of line, and an exact ranking read three buffers a row instead of one (ADR 0045).
KEEP_VECTORS_INLINE = "ALTER TABLE content_embeddings ALTER COLUMN embedding SET STORAGE MAIN"


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
    session.execute(text(KEEP_VECTORS_INLINE))  # a new type takes the type's storage again
    if dim <= HNSW_MAX_DIM:
        session.execute(text(f"CREATE INDEX {HNSW_INDEX} ON content_embeddings USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"))


# -- writes ------------------------------------------------------------------------------------------


# A few keys (a follower's pass, a tick's) are looked up by key; more are read in one scan of the producer's first
# chunks, since a 100,000-key list passes no driver.
_LOOKUP_KEYS = 1_000


@dataclass(frozen=True)
class Held:
    """What the search index holds for a key: its text's hash and its labels (``brain_core.chunks.labels``).

    ``copies``: how many sets of chunks it has (a token bound to one project
    may have stored its own, ADR 0033): only a single set is relabelled in place.
    """

    content_hash: str | None
    labels: str
    copies: int = 1


def stored_state(session: Session, producer: str, keys: Sequence[str]) -> dict[str, Held]:
    """What each key's first chunk holds (to re-embed only changed texts, and relabel only changed labels)."""
    if not keys:
        return {}
    t = _TABLE.c
    stmt = select(t.key, t.content_hash, t.project, t.projects, t.repo, t["metadata"]).where(t.producer == producer, t.chunk_idx == 0)
    wanted = set(keys)
    if len(wanted) <= _LOOKUP_KEYS:
        stmt = stmt.where(t.key == func.any(literal(sorted(wanted), ARRAY(Text))))
    held: dict[str, Held] = {}
    for r in session.execute(stmt):
        if r.key in wanted:
            before = held.get(r.key)
            labelled = labels(r.project, r.projects or (), r.repo, r.metadata or {})
            held[r.key] = Held(r.content_hash, labelled, before.copies + 1 if before is not None else 1)
    return held


_RELABEL = text(
    "UPDATE content_embeddings SET project = :project, projects = CAST(:projects AS text[]), repo = :repo, "
    "metadata = CAST(:metadata AS jsonb) WHERE producer = :producer AND key = :key"
)


def relabel(session: Session, docs: Sequence[EmbeddingDoc]) -> int:
    """Rewrite the project columns and metadata of these keys' chunks, their vectors and words kept (ADR 0068)."""
    if not docs:
        return 0
    params = [
        {"producer": d.producer, "key": d.key, "project": d.project, "projects": list(d.projects), "repo": d.repo, "metadata": json.dumps(d.metadata)}
        for d in docs
    ]
    session.execute(_RELABEL, params)
    return len(docs)


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
    event_counts.bump(session, event_counts.EMBEDDINGS_WRITTEN, by=len(chunked))
    return len(chunked)


_COPY = (
    "COPY content_embeddings (key, chunk_idx, producer, content_type, text_preview, content_hash, metadata, embedding, kind, project, projects, repo, words) "
    "FROM STDIN WITH (FORMAT BINARY)"
)
_COPY_TYPES = ["text", "int4", "varchar", "varchar", "text", "varchar", "jsonb", "vector", "varchar", "text", "text[]", "text", "tsvector"]


def _copy_rows(session: Session, rows: Sequence[tuple[EmbeddingDoc, int, str, Sequence[float]]], content_type: str) -> None:
    """Insert chunks with one binary COPY (a multi-row INSERT cost as much as the embedding and HNSW together).

    Each chunk's words (the word side of search, ``brain_kernel.search.words``) go in the same COPY.
    """
    conn = session.connection().connection.driver_connection
    register_vector(conn)
    conn.adapters.register_dumper(words.Words, words.WordsDumper)
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
                    words.Words(words.tsvector_binary(piece)),
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

PLANS = ("exact", "index")
RRF_K = 60  # reciprocal rank fusion's constant: a result's share is 1 / (RRF_K + its rank) on each side
# The vector side's plan (ADR 0045). Exact ranking costs about one unit a filtered row; the iterative HNSW scan
# visits about candidates * table / filtered rows before it has its candidates, each visit about INDEX_COST
# units (measured: docs/performance.md). The index is chosen where it is the cheaper, and never under EXACT_ROWS.
EXACT_ROWS = 2_000
INDEX_COST = 20
INDEX_CANDIDATES = 100  # rows the iterative scan hands to the exact re-rank, at least
INDEX_EF_SEARCH = 200  # the scan's candidate list (hnsw.ef_search): 100 gave recall@10 0.99 on the 30% project, 200 gave 1.00
INDEX_MAX_SCAN_TUPLES = 50_000  # where the iterative scan gives up; a short answer then falls back to exact
# The word side matches a query's rarer words only, as many as keep the expected matches under this share of
# all chunks (by the planner's lexeme statistics), and ranks those matches by all its words (ADR 0044).
WORDS_MATCH_SHARE = 0.05
_WORD_FREQUENCIES = text(
    "SELECT u.e, u.f FROM pg_stats s, unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS u(e, f) "
    "WHERE s.schemaname = current_schema() AND s.tablename = 'content_embeddings' AND s.attname = 'words' AND u.e = ANY(:lexemes)"
)


@dataclass(frozen=True)
class Hit:
    """One search result, in upstream's shape, plus ``scores``: each method's own (None when it did not find it)."""

    key: str
    producer: str
    chunk_idx: int
    content_type: str
    text_preview: str
    metadata: dict[str, Any]
    score: float
    scores: dict[str, float | None]

    def as_dict(self) -> dict[str, Any]:
        """The JSON form of one result."""
        return json_object(self)


@dataclass(frozen=True)
class _Ranked:
    """One side's candidate: the chunk's id, its identity for fusion, and the side's score."""

    id: int
    ident: Any
    score: float


WITHDRAWN_SQL = ", ".join(f"'{s}'" for s in sorted(WITHDRAWN))
# One read of the few withdrawn ids per query (partial index ix_entries_withdrawn, revision 0022), hashed, not a
# probe per candidate chunk; the predicate is the index's, so the planner uses it.
_LIVE_CHUNK = text(f"content_embeddings.key NOT IN (SELECT w.id FROM entries w WHERE w.status IN ({WITHDRAWN_SQL}))")
_EXPIRED = text(f"SELECT w.id FROM entries w WHERE w.id = ANY(:ids) AND {expired_sql('w', ':now')}")


def _filters(project: tuple[str, str | None] | None, within: Sequence[tuple[str, str | None]] | None, producer: str | None, kind: str | None) -> list[Any]:
    """The WHERE terms both sides share: the project's membership rule, a token's scope, producer, kind; never a
    superseded or retracted entry's chunk (ADR 0048: a successor takes its place)."""
    where: list[Any] = [_LIVE_CHUNK]
    if project is not None:
        key, repo = project
        where.append(member(key, repo, key_owned_sql(key, repo), of=ContentEmbedding))
    if within is not None:
        where.append(or_(*(member(key, repo, key_owned_sql(key, repo), of=ContentEmbedding) for key, repo in within)))
    if producer:
        where.append(ContentEmbedding.producer == producer)
    if kind:
        where.append(ContentEmbedding.kind == kind)
    return where


def _ident(one_per_key: bool) -> Any:
    return (lambda r: (r.producer, r.key)) if one_per_key else (lambda r: r.id)


def _estimated_rows(
    session: Session, project: tuple[str, str | None] | None, within: Sequence[tuple[str, str | None]] | None, producer: str | None, kind: str | None
) -> tuple[float, float]:
    """(rows the filters keep, rows in the table) as the planner estimates them: no row is read.

    The estimate reads the filters' typed columns (the ``projects`` array's
    element statistics, producer, kind); the membership rule's repo terms
    would only make it smaller than the project is.
    """
    total = session.execute(text("SELECT reltuples FROM pg_class WHERE oid = 'content_embeddings'::regclass")).scalar_one()
    if total < 0:  # never analysed (a new table): counted, which is cheap while it is small
        total = count_chunks(session)
    terms: list[Any] = []
    if project is not None:
        terms.append(ContentEmbedding.projects.contains([project[0]]))
    if within is not None:
        terms.append(or_(*(ContentEmbedding.projects.contains([key]) for key, _ in within)))
    if producer:
        terms.append(ContentEmbedding.producer == producer)
    if kind:
        terms.append(ContentEmbedding.kind == kind)
    if not terms or total <= 0:
        return float(total), float(total)
    compiled = select(literal(1)).select_from(_TABLE).where(*terms).compile(dialect=session.get_bind().dialect)
    [[plan]] = session.connection().exec_driver_sql("EXPLAIN (FORMAT JSON) " + str(compiled), compiled.params).all()
    return float(plan[0]["Plan"]["Plan Rows"]), float(total)


def choose_plan(rows: float, total: float, candidates: int = INDEX_CANDIDATES) -> str:
    """``index`` when the iterative scan is expected to cost less than ranking every filtered row, else ``exact``."""
    return "index" if rows >= EXACT_ROWS and rows * rows >= INDEX_COST * candidates * total else "exact"


def _vector_exact(session: Session, distance: Any, where: list[Any], depth: int, min_score: float | None, one_per_key: bool) -> list[Any]:
    """Every filtered row's distance in a materialized CTE (no index can rank first and filter after), then the nearest."""
    t = _TABLE.c
    scored = select(t.id, t.producer, t.key, distance.label("d")).where(*where).cte("scored").prefix_with("MATERIALIZED")
    above = select(scored)
    if min_score is not None:
        above = above.where(literal(1.0) - scored.c.d >= min_score)
    if one_per_key:  # each key's nearest chunk, then the nearest keys
        best = above.ext(distinct_on(scored.c.producer, scored.c.key)).order_by(scored.c.producer, scored.c.key, scored.c.d).subquery("best")
        stmt = select(best).order_by(best.c.d, best.c.id).limit(depth)
    else:
        stmt = above.order_by(scored.c.d, scored.c.id).limit(depth)
    return list(session.execute(stmt))


_RESET_SCAN = text("SELECT set_config(name, reset_val, false) FROM pg_settings WHERE name IN ('hnsw.iterative_scan', 'hnsw.ef_search', 'hnsw.max_scan_tuples')")


def _vector_index(session: Session, distance: Any, where: list[Any], candidates: int) -> list[Any]:
    """The iterative HNSW scan's nearest ``candidates`` filtered rows, re-ranked by their exact distance.

    ``relaxed_order`` lets the scan go on past ``ef_search`` until it has
    ``candidates`` rows that pass the filters (or ``max_scan_tuples``); its
    order is approximate, so the outer query sorts by the distance itself.
    """
    t = _TABLE.c
    # Session-wide, then reset: set for the transaction alone, they were gone by the query's own statement on
    # the API's read sessions (AUTOCOMMIT: a transaction a statement), and the scan stopped at the default
    # ef_search (40 rows, fewer than the candidates), so every search fell back to the exact plan.
    session.execute(
        text(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false), set_config('hnsw.ef_search', :ef, false), "
            "set_config('hnsw.max_scan_tuples', :tuples, false)"
        ),
        {"ef": str(max(INDEX_EF_SEARCH, candidates)), "tuples": str(INDEX_MAX_SCAN_TUPLES)},
    )
    try:
        scan = select(t.id, t.producer, t.key, distance.label("d")).where(*where).order_by(distance).limit(candidates).subquery("scan")
        return list(session.execute(select(scan).order_by(scan.c.d, scan.c.id)))
    finally:
        session.execute(_RESET_SCAN)


def _vector_side(
    session: Session, query_vector: Sequence[float], where: list[Any], depth: int, min_score: float | None, one_per_key: bool, plan: str | None, sizes: Any
) -> tuple[list[_Ranked], bool]:
    """The vector side's ranked candidates (score: cosine) and whether they are exact (ADR 0045)."""
    distance = ContentEmbedding.embedding.cosine_distance(list(query_vector))
    candidates = max(INDEX_CANDIDATES, 4 * depth if one_per_key else depth)
    if plan is None:
        plan = choose_plan(*sizes(), candidates)
    ident = _ident(one_per_key)
    try:
        rows: list[Any] = []
        if plan == "index":
            rows = _vector_index(session, distance, where, candidates)
            if len(rows) < candidates:  # the scan gave up early (or the filters keep fewer rows): never a short answer
                plan = "exact"
            else:
                if min_score is not None:
                    rows = [r for r in rows if 1.0 - float(r.d) >= min_score]
                if one_per_key:
                    seen: set[Any] = set()
                    rows = [r for r in rows if not (ident(r) in seen or seen.add(ident(r)))]
                rows = rows[:depth]
        if plan == "exact":
            rows = _vector_exact(session, distance, where, depth, min_score, one_per_key)
    except DBAPIError as exc:  # pgvector refuses to compare vectors of two sizes: no catalog read per search
        if "different vector dimensions" not in str(exc.orig):
            raise
        raise ConfigError(
            f"the embedder makes {len(query_vector)}-dimensional vectors but the index holds vectors of another size "
            f"({str(exc.orig).splitlines()[0]}): run brain embed (EMBED_DIM_FORCE_MIGRATE=1 to migrate)"
        ) from None
    return [_Ranked(r.id, ident(r), round(1.0 - float(r.d), 4)) for r in rows], plan == "exact"


def _matching_lexemes(session: Session, lexemes: list[str]) -> list[str]:
    """The query's rarer lexemes: rarest first, while their summed share of chunks stays under ``WORDS_MATCH_SHARE``.

    A lexeme missing from the planner's most common elements is rare (share
    0); the rarest is always kept. Without statistics every lexeme is kept.
    """
    shares = {e: float(f) for e, f in session.execute(_WORD_FREQUENCIES, {"lexemes": lexemes})}
    kept: list[str] = []
    total = 0.0
    for lexeme in sorted(lexemes, key=lambda w: shares.get(w, 0.0)):
        share = shares.get(lexeme, 0.0)
        if kept and total + share > WORDS_MATCH_SHARE:
            break
        kept.append(lexeme)
        total += share
    return kept


def _words_side(session: Session, query: str, where: list[Any], depth: int, one_per_key: bool) -> list[_Ranked]:
    """The chunks holding one of the query's rarer words, ranked by ``ts_rank`` over all its words (ADR 0044)."""
    lexemes = words.query_lexemes(query)
    if not lexemes:
        return []
    t = _TABLE.c
    ranked_by = cast(literal(words.tsquery_of(lexemes)), TSQUERY)
    matched_by = cast(literal(words.tsquery_of(_matching_lexemes(session, lexemes))), TSQUERY)
    rank = func.ts_rank(t.words, ranked_by).label("r")
    matched = select(t.id, t.producer, t.key, rank).where(t.words.op("@@")(matched_by), *where)
    if one_per_key:
        best = matched.ext(distinct_on(t.producer, t.key)).order_by(t.producer, t.key, rank.desc(), t.id).subquery("best")
        stmt = select(best).order_by(best.c.r.desc(), best.c.id).limit(depth)
    else:
        stmt = matched.order_by(rank.desc(), t.id).limit(depth)
    ident = _ident(one_per_key)
    return [_Ranked(r.id, ident(r), round(float(r.r), 4)) for r in session.execute(stmt)]


def _fuse(vector: list[_Ranked], word: list[_Ranked], limit: int) -> list[tuple[int, dict[str, float | None], float]]:
    """Reciprocal rank fusion: (chunk id, scores per method, fused) of the best ``limit``.

    ``fused`` is the sum of 1 / (RRF_K + rank) over the sides that found the
    chunk, divided by its largest value (first on both sides), so it lies in
    (0, 1] like a cosine: 1.0 is first for both, 0.5 first for one side only.
    """
    best = 2.0 / (RRF_K + 1)
    merged: dict[Any, dict[str, Any]] = {}
    for side, ranked in (("vector", vector), ("words", word)):
        for rank, cand in enumerate(ranked, start=1):
            entry = merged.setdefault(cand.ident, {"id": cand.id, "vector": None, "words": None, "fused": 0.0})
            entry[side] = cand.score
            entry["fused"] += 1.0 / (RRF_K + rank)
    order = sorted(merged.values(), key=lambda e: (-e["fused"], -(e["vector"] if e["vector"] is not None else -2.0), e["id"]))
    out = []
    for e in order[:limit]:
        fused = round(e["fused"] / best, 4)
        out.append((e["id"], {"vector": e["vector"], "words": e["words"], "fused": fused}, fused))
    return out


def search(
    session: Session,
    query_vector: Sequence[float] | None,
    *,
    query: str = "",
    mode: str = "vector",
    project: tuple[str, str | None] | None = None,
    producer: str | None = None,
    kind: str | None = None,
    limit: int = 10,
    min_score: float | None = None,
    one_per_key: bool = False,
    within: Sequence[tuple[str, str | None]] | None = None,
    plan: str | None = None,
) -> tuple[list[Hit], bool]:
    """The chunks that best answer the query, and whether the answer is exhaustive (ADR 0044, ADR 0045).

    ``mode``: ``vector`` (``query_vector``, score = cosine), ``words``
    (``query``'s words, score = ``ts_rank``) or ``hybrid`` (both, fused by
    reciprocal rank; score = the fused value in (0, 1]). Every filter applies
    to both sides alike; ``within``: only chunks of these projects (a
    restricted token's scope; empty = none). ``min_score``: None is no
    threshold; else the least cosine a vector candidate needs (in hybrid a
    chunk found by its words alone stays, with ``scores.vector`` None; in
    words mode it is ignored). ``plan``: None chooses by the filtered set's
    size (exact under ``EXACT_ROWS``); ``exact`` or ``index`` force one (the
    bench compares them).
    """
    if mode not in SEARCH_MODES or (plan is not None and plan not in PLANS):
        raise ValueError(f"mode must be one of {SEARCH_MODES} and plan None or one of {PLANS}: {mode!r}, {plan!r}")
    if within is not None and not within:
        return [], True
    where = _filters(project, within, producer, kind)
    depth = limit if mode != "hybrid" else max(2 * limit, 20)
    vector: list[_Ranked] = []
    word: list[_Ranked] = []
    exhaustive = True
    if mode != "words":
        if query_vector is None:
            raise ValueError("a vector or hybrid search needs the query's vector")
        vector, exhaustive = _vector_side(
            session, query_vector, where, depth, min_score, one_per_key, plan, lambda: _estimated_rows(session, project, within, producer, kind)
        )
    if mode != "vector":
        word = _words_side(session, query, where, depth, one_per_key)
    if mode == "vector":
        chosen = [(c.id, {"vector": c.score, "words": None, "fused": c.score}, c.score) for c in vector]
    elif mode == "words":
        chosen = [(c.id, {"vector": None, "words": c.score, "fused": c.score}, c.score) for c in word]
    else:
        chosen = _fuse(vector, word, limit)
    return _hits(session, chosen[:limit]), exhaustive


def _hits(session: Session, chosen: list[tuple[int, dict[str, float | None], float]]) -> list[Hit]:
    """The results' columns, read once for the chosen chunks only, in the chosen order."""
    if not chosen:
        return []
    t = _TABLE.c
    stmt = select(t.id, t.key, t.producer, t.chunk_idx, t.content_type, t.text_preview, t["metadata"]).where(t.id.in_([c[0] for c in chosen]))
    rows = {r.id: r for r in session.execute(stmt)}
    keys = [r.key for r in rows.values()]
    expired = set(session.execute(_EXPIRED, {"ids": keys, "now": now_text(utc_now())}).scalars())
    return [
        Hit(r.key, r.producer, r.chunk_idx, r.content_type, r.text_preview, _result_meta(r.key, r.metadata, r.key in expired), score, scores)
        for chunk_id, scores, score in chosen
        if (r := rows.get(chunk_id)) is not None
    ]


def _result_meta(key: str, stored: Mapping[str, Any] | None, expired: bool) -> dict[str, Any]:
    """A result's metadata with the entry it stands for (ADR 0048): an arc's file entry, else its key; and
    ``expired`` when that entry's valid_until has passed (it stays searchable, marked)."""
    meta = dict(stored or {})
    path = meta.get("path")
    if meta.get("kind") == "arc" and isinstance(path, str):
        meta.setdefault("entry_id", entry_id("arc", path))
    elif meta.get("kind") in ("lesson", "decision", "signal", "milestone"):
        meta.setdefault("entry_id", key)
    if expired:
        meta["expired"] = True
    return meta


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
