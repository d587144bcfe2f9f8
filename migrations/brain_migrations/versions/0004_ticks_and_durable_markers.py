"""Tick requests in Postgres, marker writes that survive a crash, late attribution by session.

- ``tick_requests``: ``POST /tick`` queues a request, ``brain tick-drain``
  claims and runs them (UPSTREAM.md 1.7, 5.10), results kept on the row.
- ``idempotency_keys.state``: a key is claimed (``pending``) in a transaction
  of its own before the vault is written and marked ``done`` with the index
  rows, so a retry after a crash in between finds the earlier attempt.
- A partial expression index on the session id of unattributed entries, so
  recording a session attributes its earlier markers without a scan.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tick_requests",
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("dry_run", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("no_ai", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("source", sa.Text(), server_default="brain-api", nullable=False),
        sa.Column("status", sa.String(length=16), server_default="pending", nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("job_id", name="pk_tick_requests"),
    )
    op.create_index("ix_tick_requests_status_requested_at", "tick_requests", ["status", "requested_at"])
    op.add_column("idempotency_keys", sa.Column("state", sa.String(length=16), server_default="done", nullable=False))
    op.create_index(
        "ix_entries_unattributed_session",
        "entries",
        [sa.text("(metadata ->> 'session_id')")],
        postgresql_where=sa.text("project IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_entries_unattributed_session", table_name="entries")
    op.drop_column("idempotency_keys", "state")
    op.drop_index("ix_tick_requests_status_requested_at", table_name="tick_requests")
    op.drop_table("tick_requests")
