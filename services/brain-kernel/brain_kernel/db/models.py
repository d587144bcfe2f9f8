"""SQLAlchemy models of the index (DESIGN section 7).

The index is derived from the vault and can be rebuilt with ``brain reindex``;
only idempotency keys and the session/learned-root evidence are index-only.
The schema changes only through Alembic revisions in ``migrations/``; the
test suite runs ``alembic check`` so these models and the revisions agree.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    Computed,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

DEFAULT_EMBED_DIM = 256

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def _now() -> Any:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class Entry(Base):
    """One indexed vault entry: arc, lesson, decision, signal, milestone, intent or inject block."""

    __tablename__ = "entries"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32), nullable=False)
    title: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    content: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    project: Mapped[str | None] = mapped_column(Text)
    projects: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default="{}")
    repo: Mapped[str | None] = mapped_column(Text)
    scope: Mapped[str] = mapped_column(String(16), nullable=False, server_default="project")
    status: Mapped[str | None] = mapped_column(String(32))
    severity: Mapped[str | None] = mapped_column(String(32))
    heat: Mapped[float] = mapped_column(Float, nullable=False, server_default="0")
    vault_path: Mapped[str] = mapped_column(Text, nullable=False)
    occurred_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[dt.datetime] = _now()
    updated_at: Mapped[dt.datetime] = _now()
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, nullable=False, server_default="{}")
    # What the search index should hold for the entry (its embedded text's hash; null for kinds not embedded), written
    # with the row, and the hash the index held when the embed step last looked (revision 0018, ADR 0046).
    embed_hash: Mapped[str | None] = mapped_column(String(64))
    embedded_hash: Mapped[str | None] = mapped_column(String(64))
    # A column of its own, not the comparison in a query: the planner has statistics for a column (it estimates
    # a comparison of two columns at nearly every row, and then reads the whole table instead of the index).
    embed_pending: Mapped[bool] = mapped_column(Boolean, Computed("embed_hash IS DISTINCT FROM embedded_hash", persisted=True), nullable=False)

    __table_args__ = (
        # fastupdate off: feed lookups never scan a GIN pending list left by a bulk reindex.
        Index("ix_entries_projects_gin", "projects", postgresql_using="gin", postgresql_with={"fastupdate": "off"}),
        Index("ix_entries_kind_occurred", "kind", "occurred_at"),
        # The project feed's ordered reads (revision 0008): rows that list exactly their own
        # project are read by ``project = key`` in the order each section wants, up to its limit.
        Index("ix_entries_project_kind_occurred", "project", "kind", occurred_at.desc(), "id"),
        Index("ix_entries_project_hot_arcs", "project", heat.desc(), occurred_at.desc().nulls_last(), "id", postgresql_where=text("kind = 'arc'")),
        # The few other rows (merged arcs, a key that is not the row's own project).
        Index(
            "ix_entries_shared_projects_gin",
            "projects",
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
            postgresql_where=text("projects <> ARRAY[project] AND cardinality(projects) > 0"),
        ),
        Index(
            "ix_entries_fleet_signals", occurred_at.desc(), "id", postgresql_where=text("kind = 'signal' AND (scope = 'fleet' OR cardinality(projects) = 0)")
        ),
        Index("ix_entries_vault_path", "vault_path"),
        # The global feed's hottest arcs: an ordered partial index instead of sorting every arc.
        Index(
            "ix_entries_hot_arcs",
            heat.desc(),
            occurred_at.desc().nulls_last(),
            "id",
            postgresql_where=text("kind = 'arc'"),
        ),
        # Markers written before their session was known, found again when it is (``attribute_sessions``).
        Index("ix_entries_unattributed_session", text("(metadata ->> 'session_id')"), postgresql_where=text("project IS NULL")),
        # The entries the search index lags (``brain_kernel.search.pending``): as few as were written since the last embed step.
        Index("ix_entries_embed_pending", "project", postgresql_where=text("embed_pending")),
        # the withdrawn ids search leaves out, read once per query (revision 0022, ADR 0048)
        Index("ix_entries_withdrawn", "id", postgresql_where=text("status IN ('retracted', 'superseded')")),
        # the markers a session posted, for the trial's outcome counts and backfill (revision 0023)
        Index(
            "ix_entries_marker_session",
            text("(metadata ->> 'session_id')"),
            postgresql_where=text("kind IN ('lesson', 'milestone', 'decision', 'signal')"),
        ),
    )


class SessionRow(Base):
    """A session's resolved identity (from registration, transcripts or extraction)."""

    __tablename__ = "sessions"

    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    agent: Mapped[str | None] = mapped_column(String(32))
    project: Mapped[str | None] = mapped_column(Text)
    repo: Mapped[str | None] = mapped_column(Text)
    worktree: Mapped[str | None] = mapped_column(Text)
    root: Mapped[str | None] = mapped_column(Text)
    cwd: Mapped[str | None] = mapped_column(Text)
    source: Mapped[str | None] = mapped_column(String(32))
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[dt.datetime] = _now()
    updated_at: Mapped[dt.datetime] = _now()
    outcomes: Mapped[dict[str, Any] | None] = mapped_column(JSONB)  # what the kernel observed of the session (revision 0020, ADR 0050)

    __table_args__ = (Index("ix_sessions_project", "project"),)


class Project(Base):
    """A known project: short key, repo slug (when it has a remote), aliases, activity."""

    __tablename__ = "projects"

    id: Mapped[str] = mapped_column(Text, primary_key=True)  # the repo slug, else the key
    key: Mapped[str] = mapped_column(Text, nullable=False)
    repo: Mapped[str | None] = mapped_column(Text)
    root: Mapped[str | None] = mapped_column(Text)
    aliases: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default="{}")
    last_active: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[dt.datetime] = _now()
    updated_at: Mapped[dt.datetime] = _now()

    __table_args__ = (
        Index("ix_projects_key", "key"),
        Index("ix_projects_aliases_gin", "aliases", postgresql_using="gin"),
    )


class ProjectPin(Base):
    """A short key the operator's catalog pins to one repository (revision 0010, ``brain_kernel.identity.pins``).

    The key's entries that name no repo for it belong to that repository only
    (``brain_core.membership.holds_unnamed``), and ``?project=<key>`` resolves
    to it however many repositories carry the key.
    """

    __tablename__ = "project_pins"

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    repo: Mapped[str] = mapped_column(Text, nullable=False)


class LearnedRoot(Base):
    """A folder once resolved through git (main root or worktree path) and what it resolved to."""

    __tablename__ = "learned_roots"

    path: Mapped[str] = mapped_column(Text, primary_key=True)
    project: Mapped[str] = mapped_column(Text, nullable=False)
    repo: Mapped[str | None] = mapped_column(Text)
    root: Mapped[str] = mapped_column(Text, nullable=False)
    worktree: Mapped[str | None] = mapped_column(Text)
    learned_at: Mapped[dt.datetime] = _now()


class IdempotencyKey(Base):
    """A processed write, so replays across workers and replicas return the original response."""

    __tablename__ = "idempotency_keys"

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    scope: Mapped[str] = mapped_column(String(64), nullable=False, server_default="marker")
    state: Mapped[str] = mapped_column(String(16), nullable=False, server_default="done")  # pending until the write commits
    body_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    status_code: Mapped[int] = mapped_column(Integer, nullable=False, server_default="201")
    response: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    created_at: Mapped[dt.datetime] = _now()
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)

    __table_args__ = (Index("ix_idempotency_keys_expires_at", "expires_at"),)


class TickRequest(Base):
    """A queued keeper tick (``POST /tick``), run by ``brain tick-drain``; its result kept on the row."""

    __tablename__ = "tick_requests"

    job_id: Mapped[str] = mapped_column(Text, primary_key=True)
    requested_at: Mapped[dt.datetime] = _now()
    dry_run: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    no_ai: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    source: Mapped[str] = mapped_column(Text, nullable=False, server_default="brain-api")
    status: Mapped[str] = mapped_column(String(16), nullable=False, server_default="pending")  # pending, running, completed, failed
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (Index("ix_tick_requests_status_requested_at", "status", "requested_at"),)


class TickRun(Base):
    """One keeper tick as it ran (``brain tick``, ``brain tick-drain``, the ops loop): timing, outcome, stats.

    The health ``GET /metrics`` exposes; kept 90 days (``brain_kernel.ticks.health``).
    """

    __tablename__ = "tick_runs"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    finished_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    duration_ms: Mapped[int] = mapped_column(Integer, nullable=False)
    source: Mapped[str] = mapped_column(Text, nullable=False)  # brain-cli, brain-drain, brain-ops-loop
    dry_run: Mapped[bool] = mapped_column(Boolean, nullable=False)
    use_ai: Mapped[bool] = mapped_column(Boolean, nullable=False)
    ok: Mapped[bool] = mapped_column(Boolean, nullable=False)
    error: Mapped[str | None] = mapped_column(Text)  # ``Type: message`` when the tick raised
    arcs_scanned: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    stats: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")  # the keeper's stats keys

    __table_args__ = (Index("ix_tick_runs_finished_at", finished_at.desc()),)


class EventCount(Base):
    """A monotonic total of one kind of event (revision 0021, ADR 0054): ``GET /metrics`` exposes it as a counter."""

    __tablename__ = "event_counts"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)  # tick_runs, markers, injections, embeddings_written
    label: Mapped[str] = mapped_column(Text, primary_key=True, server_default="")  # the outcome, type or kind
    value: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")


class FeedSnapshot(Base):
    """One stored project feed answer and the database snapshot it was read in (ADR 0010)."""

    __tablename__ = "feed_snapshots"

    ref: Mapped[str] = mapped_column(Text, primary_key=True)  # the reference as the client sent it
    top_n: Mapped[int] = mapped_column(Integer, primary_key=True)
    lesson_days: Mapped[int] = mapped_column(Integer, primary_key=True)
    vault_root: Mapped[str] = mapped_column(Text, primary_key=True)
    scopes: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False)  # change scopes the answer depends on
    built: Mapped[str] = mapped_column(Text, nullable=False)  # pg_snapshot text of the first read
    built_xmin: Mapped[int] = mapped_column(BigInteger, nullable=False)
    valid_until: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    body: Mapped[str] = mapped_column(Text, nullable=False)  # the JSON answer without generated_at
    created_at: Mapped[dt.datetime] = _now()


class FeedChange(Base):
    """A scope (project key, alias, slug, or ``*``) written by a transaction; filled by triggers."""

    __tablename__ = "feed_changes"

    scope: Mapped[str] = mapped_column(Text, primary_key=True)
    xid: Mapped[int] = mapped_column(BigInteger, primary_key=True)


class FeedHorizon(Base):
    """The single row below which change records and older snapshots have been collected.

    ``pending`` is the read point of the previous collection: the next one
    moves the horizon there, so answers read since then survive a collection.
    """

    __tablename__ = "feed_horizon"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    horizon: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    pending: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")


class ProjectCount(Base):
    """A signed delta of entry counts for one (member key, repo, primary, kind); written by triggers on ``entries``.

    Insert-only (revision 0008), so writers never wait on a counter row;
    ``GET /projects`` sums the deltas (``feed_repo.list_projects``) and folds
    them now and then (``feed_repo.compact_project_counts``).
    """

    __tablename__ = "project_counts"
    __table_args__ = (Index("ix_project_counts_member_key", "member_key", postgresql_include=["n"]),)  # a project search's size (revision 0014)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    member_key: Mapped[str] = mapped_column(Text, nullable=False)
    repo: Mapped[str | None] = mapped_column(Text)
    is_primary: Mapped[bool] = mapped_column(Boolean, nullable=False)
    kind: Mapped[str] = mapped_column(String(32), nullable=False)
    n: Mapped[int] = mapped_column(BigInteger, nullable=False)
    last: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))  # newest occurred_at the added rows bring
    gone: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))  # newest occurred_at the removed rows take away


class VaultDocument(Base):
    """One searchable vault file (``.md``, ``.markdown``, ``.txt``) in the search index (``brain_kernel.search.search_docs``)."""

    __tablename__ = "vault_documents"

    path: Mapped[str] = mapped_column(Text, primary_key=True)
    name_lower: Mapped[str] = mapped_column(Text, nullable=False)
    name_grams: Mapped[list[int]] = mapped_column(ARRAY(Integer), nullable=False, server_default="{}")
    size: Mapped[int] = mapped_column(BigInteger, nullable=False)
    mtime_ns: Mapped[int | None] = mapped_column(BigInteger)  # with size, as a rebuild's walk saw the file: unchanged, it is not read
    lines: Mapped[int] = mapped_column(Integer, nullable=False)
    digest: Mapped[str] = mapped_column(Text, nullable=False)  # of the text indexed: an unchanged file is not rewritten
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=text("clock_timestamp()"))

    __table_args__ = (
        Index("ix_vault_documents_name_grams", "name_grams", postgresql_using="gin", postgresql_with={"fastupdate": "off"}),
        # The frequent-token walk, in code-point order: revision 0008 creates it on ``path COLLATE "C"``.
        Index("ix_vault_documents_long", "path", postgresql_where=text("lines >= 30")),
    )


class VaultSegment(Base):
    """Consecutive lines of a document (an entry of a shared log, the lines between, a block), with their trigram codes."""

    __tablename__ = "vault_segments"

    path: Mapped[str] = mapped_column(Text, ForeignKey("vault_documents.path", ondelete="CASCADE"), primary_key=True)
    first_line: Mapped[int] = mapped_column(Integer, primary_key=True)
    last_line: Mapped[int] = mapped_column(Integer, nullable=False)
    entry_id: Mapped[str | None] = mapped_column(Text)
    content: Mapped[str] = mapped_column(Text, nullable=False)
    lowered: Mapped[str] = mapped_column(Text, nullable=False)
    grams: Mapped[list[int]] = mapped_column(ARRAY(Integer), nullable=False, server_default="{}")

    __table_args__ = (
        # No pending list (revision 0009): a marker's insert never pays for flushing one under a document's row lock.
        Index("ix_vault_segments_grams", "grams", postgresql_using="gin", postgresql_with={"fastupdate": "off"}),
        Index("ix_vault_segments_entry_id", "entry_id", postgresql_where=text("entry_id IS NOT NULL")),
    )


class VaultSearchState(Base):
    """A vault root whose files a full rebuild indexed: search answers from the index only for these."""

    __tablename__ = "vault_search_state"

    vault_root: Mapped[str] = mapped_column(Text, primary_key=True)
    rebuilt_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=text("clock_timestamp()"))
    codes: Mapped[int] = mapped_column(SmallInteger, nullable=False, server_default="1")  # the code version its segments carry (revision 0011)
    # The common short codes its segments leave out: code -> share of a first build's sample holding it (revision 0013).
    common: Mapped[dict[str, float]] = mapped_column(JSONB, nullable=False, server_default="{}")


class ContentEmbedding(Base):
    """One embedded chunk; ``metadata`` carries the project for the GIN-backed filter."""

    __tablename__ = "content_embeddings"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(Text, nullable=False)
    chunk_idx: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    producer: Mapped[str] = mapped_column(String(64), nullable=False)
    content_type: Mapped[str] = mapped_column(String(100), nullable=False, server_default="text")
    text_preview: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    content_hash: Mapped[str | None] = mapped_column(String(64))
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, nullable=False, server_default="{}")
    embedding: Mapped[list[float]] = mapped_column(Vector(DEFAULT_EMBED_DIM), nullable=False)
    created_at: Mapped[dt.datetime] = _now()
    # The chunk's entry as the membership rule reads it (revision 0005): typed, so the filter is a GIN lookup.
    kind: Mapped[str | None] = mapped_column(String(32))
    project: Mapped[str | None] = mapped_column(Text)
    projects: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default="{}")
    repo: Mapped[str | None] = mapped_column(Text)
    # The chunk's words for the word side of search (revision 0017, ADR 0044), made by ``brain_kernel.search.words``.
    words: Mapped[str] = mapped_column(TSVECTOR, nullable=False, server_default=text("''::tsvector"))

    __table_args__ = (
        # A key names a chunk within its producer and its project (revision 0015, ADR 0033).
        UniqueConstraint(
            "key", "chunk_idx", "producer", "project", "repo", name="uq_content_embeddings_key_chunk_producer_project", postgresql_nulls_not_distinct=True
        ),
        Index("ix_content_embeddings_metadata_gin", "metadata", postgresql_using="gin", postgresql_ops={"metadata": "jsonb_path_ops"}),
        Index("ix_content_embeddings_projects_gin", "projects", postgresql_using="gin"),
        Index("ix_content_embeddings_producer_key", "producer", "key"),
        Index("ix_content_embeddings_words_gin", "words", postgresql_using="gin", postgresql_with={"fastupdate": "off"}),
        Index(
            "ix_content_embeddings_embedding_hnsw",
            "embedding",
            postgresql_using="hnsw",
            postgresql_with={"m": 16, "ef_construction": 64},
            postgresql_ops={"embedding": "vector_cosine_ops"},
        ),
    )


__all__ = [
    "Base",
    "ContentEmbedding",
    "Entry",
    "FeedChange",
    "FeedHorizon",
    "FeedSnapshot",
    "IdempotencyKey",
    "Injection",
    "LearnedRoot",
    "Project",
    "ProjectCount",
    "ProjectPin",
    "SessionRow",
    "TickRequest",
    "TickRun",
    "VaultDocument",
    "VaultSearchState",
    "VaultSegment",
    "text",
]


class VaultFile(Base):
    """What the keeper and reindex last read of one vault file: its file stats (revisions 0007, 0016)."""

    __tablename__ = "vault_file_stats"

    path: Mapped[str] = mapped_column(Text, primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger, nullable=False)
    mtime_ns: Mapped[int] = mapped_column(BigInteger, nullable=False)
    sha256: Mapped[str] = mapped_column(Text, nullable=False)
    kind: Mapped[str | None] = mapped_column(Text)
    arc: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=text("clock_timestamp()"))


class Injection(Base):
    """One block or recall served to a session, or one MCP pull: telemetry, not memory (revision 0020, ADR 0050).

    Kept ``BRAIN_INJECTION_RETENTION_DAYS`` (90); the trial's arm and the configuration that produced it
    (percentage, salt id, seed, basis) are on every row, so a report never needs the settings of the day.
    """

    __tablename__ = "injections"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=text("clock_timestamp()"))
    kind: Mapped[str] = mapped_column(String(16), nullable=False)  # block, recall, pull
    session_id: Mapped[str | None] = mapped_column(Text)
    agent: Mapped[str | None] = mapped_column(String(32))
    project: Mapped[str | None] = mapped_column(Text)
    repo: Mapped[str | None] = mapped_column(Text)
    entry_ids: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default="{}")
    bytes: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    cut: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    feed_hash: Mapped[str | None] = mapped_column(Text)
    arm: Mapped[str] = mapped_column(String(16), nullable=False)  # treatment, control, unassignable
    basis: Mapped[str | None] = mapped_column(String(16))  # repo, project, session
    seed: Mapped[int | None] = mapped_column(Integer)
    control_percent: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    salt_id: Mapped[str | None] = mapped_column(Text)
    text_served: Mapped[str | None] = mapped_column(Text)  # a control block's text: what a control session read

    __table_args__ = (Index("ix_injections_session", "session_id"), Index("ix_injections_at", "at"))
