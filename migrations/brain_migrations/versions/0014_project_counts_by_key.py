"""A project search reads its project's counts through an index: ``ix_project_counts_member_key``.

``search_docs.search`` bounds the entries of the project it searches by the
sum of its key's rows in ``project_counts`` (a few rows once folded). The
deltas are folded only by ``GET /projects`` (revision 0008), so after a
reindex or a tick, and between reads of that route, a key's rows are many:
at x16 a reindex left 67,013, and each project search then scanned all of
them (4 to 15 ms). With the index it reads the key's own rows, covered by
``n``.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_project_counts_member_key", "project_counts", ["member_key"], postgresql_include=["n"])


def downgrade() -> None:
    op.drop_index("ix_project_counts_member_key", table_name="project_counts")
