"""The withdrawn entries, indexed apart: search leaves their chunks out with one small read per query.

A search keeps superseded and retracted entries out (ADR 0048). A probe per
candidate chunk would cost a primary-key read for each of tens of thousands
of rows in an exact ranking; instead each query reads the ids of withdrawn
entries once, through this partial index (a handful of rows), and drops
chunks keyed by them. The index holds only withdrawn rows, so it costs
nothing to other writes. A plain CREATE INDEX: writes wait while it reads the
table once.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX ix_entries_withdrawn ON entries (id) WHERE status IN ('retracted', 'superseded')")


def downgrade() -> None:
    op.execute("DROP INDEX ix_entries_withdrawn")
