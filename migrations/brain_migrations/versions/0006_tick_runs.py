"""The health of every keeper tick, for ``GET /metrics``.

``tick_runs`` holds one row per tick run by ``brain tick``, ``brain
tick-drain`` or the ops loop: when it started and finished, how long it took,
its flags, whether it succeeded (with the error when not), the arcs it scanned
and the keeper's stats. It replaces upstream's push of tick health to
ClickHouse; rows older than 90 days (upstream's TTL) are deleted as new ones
are recorded. The index on ``finished_at DESC`` finds the latest tick and the
rows past the retention without a scan.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tick_runs",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),  # bigserial
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("use_ai", sa.Boolean(), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("arcs_scanned", sa.Integer(), server_default="0", nullable=False),
        sa.Column("stats", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tick_runs"),
    )
    op.create_index("ix_tick_runs_finished_at", "tick_runs", [sa.text("finished_at DESC")])


def downgrade() -> None:
    op.drop_index("ix_tick_runs_finished_at", table_name="tick_runs")
    op.drop_table("tick_runs")
