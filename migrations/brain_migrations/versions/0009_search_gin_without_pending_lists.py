"""The search index's trigram GIN indexes without pending lists (``fastupdate = off``).

With the default pending list, a marker's search write hook (one segment of
its day's log) now and then fell on the insert that flushes the list into
the index: seconds of work at a year of history while it held the row lock
of that log's document, so every marker to the same log waited behind it
(measured at x1: markers stalled for minutes with 32 clients). Without the
list each insert updates the index at once (a few milliseconds for a
segment's codes), the way ``entries``' GIN indexes already work (0001). A
first build still creates the indexes after the load (``search_docs``).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_INDEXES = ("ix_vault_segments_grams", "ix_vault_documents_name_grams")


def upgrade() -> None:
    for name in _INDEXES:
        op.execute(f"ALTER INDEX {name} SET (fastupdate = off)")
        op.execute(f"SELECT gin_clean_pending_list('{name}'::regclass)")  # what the list held, merged now


def downgrade() -> None:
    for name in _INDEXES:
        op.execute(f"ALTER INDEX {name} RESET (fastupdate)")
