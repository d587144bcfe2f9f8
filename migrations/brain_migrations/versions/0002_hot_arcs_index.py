"""Ordered partial index for the global feed's hottest arcs.

Without it ``GET /feed`` sorted every arc on each request (27 ms at 20,000 arcs).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_entries_hot_arcs",
        "entries",
        [sa.text("heat DESC"), sa.text("occurred_at DESC NULLS LAST"), "id"],
        postgresql_where=sa.text("kind = 'arc'"),
    )


def downgrade() -> None:
    op.drop_index("ix_entries_hot_arcs", table_name="entries")
