"""The catalog's key pins (ADR 0021): ``project_pins`` (key -> repo).

A catalog entry with a key and a repo pins that key to the repository: the
lookup resolves the key to it and the key's entries that name no repo belong
to it only (``brain_core.membership.holds_unnamed``; its SQL twin
``brain_kernel.feed.feed_repo.key_owned_sql`` reads this table). ``brain serve``,
``brain reindex`` and ``brain tick`` write it from the catalog
(``brain_kernel.identity.pins.sync``). A row trigger logs the key (and both repos) of
every pin written or removed to ``feed_changes``, so the stored feed answers
of that key (revision 0003) are recomputed.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_LOG = """
CREATE FUNCTION brain_feed_log_pins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO feed_changes (scope, xid) SELECT s, pg_current_xact_id()::text::bigint FROM unnest(ARRAY[OLD.key, OLD.repo]) s ON CONFLICT DO NOTHING;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        INSERT INTO feed_changes (scope, xid) SELECT s, pg_current_xact_id()::text::bigint FROM unnest(ARRAY[NEW.key, NEW.repo]) s ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END;
$$;
"""


def upgrade() -> None:
    op.create_table(
        "project_pins",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("repo", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_project_pins"),
    )
    op.execute(_LOG)
    op.execute("CREATE TRIGGER project_pins_feed AFTER INSERT OR UPDATE OR DELETE ON project_pins FOR EACH ROW EXECUTE FUNCTION brain_feed_log_pins()")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS project_pins_feed ON project_pins")
    op.execute("DROP FUNCTION IF EXISTS brain_feed_log_pins()")
    op.drop_table("project_pins")
