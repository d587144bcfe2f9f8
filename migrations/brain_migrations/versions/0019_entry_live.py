"""``entry_live(entries, text)``: whether an entry is live at a moment, the one SQL rule of curation (ADR 0048).

An entry is withdrawn when its status is ``superseded`` or ``retracted`` and
expired once its ``metadata.valid_until`` (ISO text in UTC, ``Z``) is at or
before the moment given (the same form); live otherwise. Both are derived from
the entry's own file, so no row changes here. The project feed applies it in
its windowed sections, fleet signals and the curation listing; search can
apply it too. A SQL function of one expression is inlined by the planner, so
it costs what the expression written out does, and the feed statement stays
short enough for psycopg's query cache. The comparison is in the C collation:
a comparison of the text is then a comparison of the moments.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """CREATE FUNCTION entry_live(e entries, at text) RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT (e.status IS NULL OR e.status NOT IN ('superseded', 'retracted'))
     AND NOT coalesce((e.metadata ->> 'valid_until') COLLATE "C" <= at COLLATE "C", false)
$$"""
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION entry_live(entries, text)")
