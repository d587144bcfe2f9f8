"""Injection records and session outcomes: what each session was served and what the kernel saw it do.

``injections`` holds one row per block or recall served to a session and per
MCP pull: when, session, agent, project, the entry ids, bytes, whether caps
cut it, the text's hash, and the trial's arm with the configuration that
produced it (percentage, salt id, seed, basis), so a report reads records
alone (ADR 0050). Telemetry, not memory: nothing in the vault depends on it,
and rows older than the retention setting are deleted. ``sessions.outcomes``
keeps what ``brain extract`` observed of a session (turns, duration, failed
tool calls, repeated failing commands, recall used), each labelled measured
or estimated. New, empty table and a nullable column: no rewrite, no lock held.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "injections",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("clock_timestamp()")),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("session_id", sa.Text()),
        sa.Column("agent", sa.String(32)),
        sa.Column("project", sa.Text()),
        sa.Column("repo", sa.Text()),
        sa.Column("entry_ids", ARRAY(sa.Text()), nullable=False, server_default="{}"),
        sa.Column("bytes", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("cut", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("feed_hash", sa.Text()),
        sa.Column("arm", sa.String(16), nullable=False),
        sa.Column("basis", sa.String(16)),
        sa.Column("seed", sa.Integer()),
        sa.Column("control_percent", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("salt_id", sa.Text()),
        sa.Column("text_served", sa.Text()),
    )
    op.create_index("ix_injections_session", "injections", ["session_id"])
    op.create_index("ix_injections_at", "injections", ["at"])
    op.add_column("sessions", sa.Column("outcomes", JSONB()))


def downgrade() -> None:
    op.drop_column("sessions", "outcomes")
    op.drop_index("ix_injections_at", table_name="injections")
    op.drop_index("ix_injections_session", table_name="injections")
    op.drop_table("injections")
