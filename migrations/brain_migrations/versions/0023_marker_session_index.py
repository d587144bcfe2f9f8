"""The markers a session posted, found by its id: the trial's outcome counts read a handful of rows, not the table.

``brain extract`` counts, for every session it observed, the lessons,
decisions and signals whose metadata names that session
(``brain_kernel.trial.outcomes.marker_counts``), and backfill looks for the
sessions markers name. Without an index on the session id each of those
reads is a scan of every entry: arcs, chunks' sources, everything. The index
is partial on the marker kinds, so arcs and other entries cost it nothing;
``bench/bench_outcomes.py`` measures the read with and without it. A plain
CREATE INDEX, as revision 0022's: writes wait while it reads the table once.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX ix_entries_marker_session ON entries ((metadata ->> 'session_id')) WHERE kind IN ('lesson', 'milestone', 'decision', 'signal')")


def downgrade() -> None:
    op.execute("DROP INDEX ix_entries_marker_session")
