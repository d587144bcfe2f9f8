"""Initial index schema: vector extension, entries, sessions, projects, learned roots,
idempotency keys, content embeddings (GIN on metadata, HNSW on the vector).

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import pgvector.sqlalchemy
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _embed_dim() -> int:
    """The vector dimension: ``brain migrate`` passes BRAIN_EMBED_DIM (or a known model's) through the Alembic config.

    None given: the offline model's, so a kernel with no embeddings endpoint
    starts with the column its embedder fills (the readiness check compares them).
    """
    config = op.get_context().config
    value = config.attributes.get("embed_dim") if config is not None else None
    if value:
        return int(value)
    from brain_kernel.search.embedders import OFFLINE_DIM

    return OFFLINE_DIM


def _ts(name: str, nullable: bool = False) -> sa.Column:
    if nullable:
        return sa.Column(name, sa.DateTime(timezone=True), nullable=True)
    return sa.Column(name, sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False)


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "entries",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("title", sa.Text(), server_default="", nullable=False),
        sa.Column("content", sa.Text(), server_default="", nullable=False),
        sa.Column("project", sa.Text(), nullable=True),
        sa.Column("projects", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("repo", sa.Text(), nullable=True),
        sa.Column("scope", sa.String(16), server_default="project", nullable=False),
        sa.Column("status", sa.String(32), nullable=True),
        sa.Column("severity", sa.String(32), nullable=True),
        sa.Column("heat", sa.Float(), server_default="0", nullable=False),
        sa.Column("vault_path", sa.Text(), nullable=False),
        _ts("occurred_at", nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
        sa.Column("metadata", postgresql.JSONB(), server_default="{}", nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_entries"),
    )
    op.create_index("ix_entries_projects_gin", "entries", ["projects"], postgresql_using="gin", postgresql_with={"fastupdate": "off"})
    op.create_index("ix_entries_project_kind_heat", "entries", ["project", "kind", "heat"])
    op.create_index("ix_entries_kind_occurred", "entries", ["kind", "occurred_at"])
    op.create_index("ix_entries_vault_path", "entries", ["vault_path"])

    op.create_table(
        "sessions",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("agent", sa.String(32), nullable=True),
        sa.Column("project", sa.Text(), nullable=True),
        sa.Column("repo", sa.Text(), nullable=True),
        sa.Column("worktree", sa.Text(), nullable=True),
        sa.Column("root", sa.Text(), nullable=True),
        sa.Column("cwd", sa.Text(), nullable=True),
        sa.Column("source", sa.String(32), nullable=True),
        _ts("started_at", nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("session_id", name="pk_sessions"),
    )
    op.create_index("ix_sessions_project", "sessions", ["project"])

    op.create_table(
        "projects",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("repo", sa.Text(), nullable=True),
        sa.Column("root", sa.Text(), nullable=True),
        sa.Column("aliases", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        _ts("last_active", nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_projects"),
    )
    op.create_index("ix_projects_key", "projects", ["key"])
    op.create_index("ix_projects_aliases_gin", "projects", ["aliases"], postgresql_using="gin")

    op.create_table(
        "learned_roots",
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("repo", sa.Text(), nullable=True),
        sa.Column("root", sa.Text(), nullable=False),
        sa.Column("worktree", sa.Text(), nullable=True),
        _ts("learned_at"),
        sa.PrimaryKeyConstraint("path", name="pk_learned_roots"),
    )

    op.create_table(
        "idempotency_keys",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("scope", sa.String(64), server_default="marker", nullable=False),
        sa.Column("body_hash", sa.String(64), nullable=False),
        sa.Column("status_code", sa.Integer(), server_default="201", nullable=False),
        sa.Column("response", postgresql.JSONB(), server_default="{}", nullable=False),
        _ts("created_at"),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_idempotency_keys"),
    )
    op.create_index("ix_idempotency_keys_expires_at", "idempotency_keys", ["expires_at"])

    op.create_table(
        "content_embeddings",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("chunk_idx", sa.Integer(), server_default="0", nullable=False),
        sa.Column("producer", sa.String(64), nullable=False),
        sa.Column("content_type", sa.String(32), server_default="text", nullable=False),
        sa.Column("text_preview", sa.Text(), server_default="", nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=True),
        sa.Column("metadata", postgresql.JSONB(), server_default="{}", nullable=False),
        sa.Column("embedding", pgvector.sqlalchemy.Vector(_embed_dim()), nullable=False),
        _ts("created_at"),
        sa.PrimaryKeyConstraint("id", name="pk_content_embeddings"),
        sa.UniqueConstraint("key", "chunk_idx", "producer", name="uq_content_embeddings_key_chunk_producer"),
    )
    op.create_index(
        "ix_content_embeddings_metadata_gin",
        "content_embeddings",
        ["metadata"],
        postgresql_using="gin",
        postgresql_ops={"metadata": "jsonb_path_ops"},
    )
    op.create_index(
        "ix_content_embeddings_embedding_hnsw",
        "content_embeddings",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )


def downgrade() -> None:
    op.drop_table("content_embeddings")
    op.drop_table("idempotency_keys")
    op.drop_table("learned_roots")
    op.drop_table("projects")
    op.drop_table("sessions")
    op.drop_table("entries")
