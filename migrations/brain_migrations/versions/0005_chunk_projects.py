"""Project columns on embedded chunks, for an exact project-filtered search through a GIN index.

``projects`` (every project the chunk's entry belongs to: several for a
merged arc), ``project`` (the primary one), ``repo`` and ``kind`` are typed
columns beside the JSONB metadata, so the filter is the feed's membership
rule (``projects @> ARRAY[key]`` through the GIN index, then the repo half)
and the nearest neighbours are ranked exactly among the filtered rows.
``content_type`` grows to upstream's 100 characters.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("content_embeddings", sa.Column("kind", sa.String(length=32), nullable=True))
    op.add_column("content_embeddings", sa.Column("project", sa.Text(), nullable=True))
    op.add_column("content_embeddings", sa.Column("projects", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False))
    op.add_column("content_embeddings", sa.Column("repo", sa.Text(), nullable=True))
    op.alter_column("content_embeddings", "content_type", type_=sa.String(length=100), existing_type=sa.String(length=32), existing_nullable=False)
    op.create_index("ix_content_embeddings_projects_gin", "content_embeddings", ["projects"], postgresql_using="gin")
    op.create_index("ix_content_embeddings_producer_key", "content_embeddings", ["producer", "key"])


def downgrade() -> None:
    op.drop_index("ix_content_embeddings_producer_key", table_name="content_embeddings")
    op.drop_index("ix_content_embeddings_projects_gin", table_name="content_embeddings")
    op.alter_column("content_embeddings", "content_type", type_=sa.String(length=32), existing_type=sa.String(length=100), existing_nullable=False)
    for column in ("repo", "projects", "project", "kind"):
        op.drop_column("content_embeddings", column)
