"""Event counts: monotonic totals of what happened, whichever process made it happen (ADR 0054).

``event_counts`` holds one row per (name, label): ticks by outcome, markers by
type, injections by kind, embedding chunks written. Each is bumped in the
transaction that does the thing, so a tick run by a CronJob pod and a marker
written through the MCP server count alike, and ``GET /metrics`` exposes them
as Prometheus counters. Seeded from the tick runs still kept, so the tick
count does not drop at the upgrade. A new small table: no rewrite, no lock held.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_counts",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("label", sa.Text(), primary_key=True, server_default=""),
        sa.Column("value", sa.BigInteger(), nullable=False, server_default="0"),
    )
    op.execute(
        "INSERT INTO event_counts (name, label, value) SELECT 'tick_runs', CASE WHEN ok THEN 'ok' ELSE 'failed' END, count(*) FROM tick_runs GROUP BY ok"
    )


def downgrade() -> None:
    op.drop_table("event_counts")
