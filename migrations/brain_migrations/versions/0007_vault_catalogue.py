"""The vault catalogue: what the keeper and reindex last read of each file.

One row per vault file that holds entries: its size, mtime (nanoseconds),
content hash and kind, and for an arc the facts its heat is computed from
(``brain_core.heat.arc_facts``). A tick stats the vault and reads only files
whose size or mtime differ from their row (and whose hash then differs); an
arc whose file did not change is scored from its row, and its file is
rewritten only when its heat, status or place changes (ADR 0016).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "vault_catalogue",
        sa.Column("path", sa.Text(), primary_key=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("mtime_ns", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=True),
        sa.Column("arc", postgresql.JSONB(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("vault_catalogue")
