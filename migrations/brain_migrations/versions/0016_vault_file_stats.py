"""The file stats: ``vault_catalogue`` (revision 0007) is ``vault_file_stats``, its key ``pk_vault_file_stats``.

The table was named a catalogue beside the operator's catalog of projects
(``BRAIN_CATALOG``), two words for two unrelated things; it holds what the
keeper and reindex last read of each file (size, mtime, hash, an arc's heat
facts), and the code calls it the file stats (``brain_kernel.index.filestats``).
Its primary key is renamed with it. A rename moves no row; it holds the table's
lock for an instant, so the jobs that write it (tick, apply, reindex, backfill)
wait for it as for any migration.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.rename_table("vault_catalogue", "vault_file_stats")
    op.execute("ALTER TABLE vault_file_stats RENAME CONSTRAINT pk_vault_catalogue TO pk_vault_file_stats")


def downgrade() -> None:
    op.execute("ALTER TABLE vault_file_stats RENAME CONSTRAINT pk_vault_file_stats TO pk_vault_catalogue")
    op.rename_table("vault_file_stats", "vault_catalogue")
