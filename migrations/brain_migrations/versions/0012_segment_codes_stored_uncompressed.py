"""The search segments' code arrays are stored out of line uncompressed (ADR 0027): ``STORAGE EXTERNAL``.

A segment's row is its text twice (as written and lower-cased) and its gram
codes, about 400 four-byte integers: most rows pass the 2 kB at which
Postgres shrinks a row, and it tried ``pglz`` on the code array first, the
largest value. Integer codes do not compress, so the attempt always failed
before the array was moved to the TOAST table anyway. Measured on 122,631
segments of the x16 vault, a ``COPY`` took 4.8 s with this storage against
6.0 s without it. The stored values are the same; only rows written from
now on skip the attempt. The GIN index is built from the column's values
and never reads it back from the table, so reads do not change.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE vault_segments ALTER COLUMN grams SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.execute("ALTER TABLE vault_segments ALTER COLUMN grams SET STORAGE EXTENDED")
