"""A chunk key is unique per producer and project: ``uq_content_embeddings_key_chunk_producer_project``.

A token bound to projects stores and replaces only its own projects' chunks
(ADR 0033): before, a store deleted every chunk of (producer, key), so a
token of one project could erase another's by reusing its key. The key now
names a chunk within its producer and its project (key and repo, NULLs equal),
so a scoped store's chunks sit beside another project's chunks of the same key.
An unrestricted store still replaces the key's chunks wherever they are.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_constraint("uq_content_embeddings_key_chunk_producer", "content_embeddings", type_="unique")
    op.create_unique_constraint(
        "uq_content_embeddings_key_chunk_producer_project",
        "content_embeddings",
        ["key", "chunk_idx", "producer", "project", "repo"],
        postgresql_nulls_not_distinct=True,
    )


def downgrade() -> None:
    op.drop_constraint("uq_content_embeddings_key_chunk_producer_project", "content_embeddings", type_="unique")
    op.execute(
        "DELETE FROM content_embeddings a USING content_embeddings b "
        "WHERE a.key = b.key AND a.chunk_idx = b.chunk_idx AND a.producer = b.producer AND a.id > b.id"
    )
    op.create_unique_constraint("uq_content_embeddings_key_chunk_producer", "content_embeddings", ["key", "chunk_idx", "producer"])
