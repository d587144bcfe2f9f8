"""Project feed snapshots: the stored answers, the change log that invalidates them, the GC horizon.

A snapshot is one project feed answer with the database snapshot it was read
in. Statement-level triggers on ``entries`` and ``projects`` log, per writing
transaction, the scopes it touched (project keys, aliases, slugs, ``*`` for
fleet-wide rows). A stored answer is served only while no logged change of
its scopes is invisible to the snapshot it was read in (ADR 0010).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# The scopes a batch of entry rows touches: every project key they carry, and "*" when a
# row reaches every project's feed (a fleet-wide signal, any inject block). Kept in step
# with brain_kernel.feed.feed_repo (what the project feed reads) by tests/kernel/test_feed_snapshots.py.
_ENTRY_SCOPES = """
    SELECT unnest(projects) FROM {rows}
    UNION
    SELECT '*' FROM {rows}
     WHERE kind = 'inject' OR (kind = 'signal' AND (scope = 'fleet' OR cardinality(projects) = 0))
"""

# The scopes a batch of project rows touches: what a project reference can match
# (key, alias, slug, id).
_PROJECT_SCOPES = """
    SELECT key FROM {rows}
    UNION SELECT unnest(aliases) FROM {rows}
    UNION SELECT repo FROM {rows} WHERE repo IS NOT NULL
    UNION SELECT id FROM {rows}
"""


# The columns whose change can change an answer (bookkeeping timestamps are left out, so
# an index refresh that rewrites a row unchanged invalidates nothing).
_ENTRY_COLUMNS = ("kind", "title", "content", "project", "projects", "repo", "scope", "status", "severity", "heat", "vault_path", "occurred_at", "metadata")
_PROJECT_COLUMNS = ("key", "repo", "root", "aliases", "last_active")


def _log_function(name: str, scopes: str, columns: tuple[str, ...]) -> str:
    def insert(rows: str) -> str:
        return (
            "INSERT INTO feed_changes (scope, xid) "
            f"SELECT DISTINCT s, pg_current_xact_id()::text::bigint FROM ({scopes.format(rows=rows)}) AS touched(s) "
            "WHERE s IS NOT NULL ON CONFLICT DO NOTHING;"
        )

    def changed(side: str, other: str) -> str:
        """The rows of one side of an UPDATE that the other side does not hold unchanged."""
        same = " AND ".join(f"a.{c} IS NOT DISTINCT FROM b.{c}" for c in columns)
        return f"(SELECT a.* FROM {side} a WHERE NOT EXISTS (SELECT 1 FROM {other} b WHERE b.id = a.id AND {same})) AS r"

    return f"""
CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        INSERT INTO feed_changes (scope, xid) VALUES ('*', pg_current_xact_id()::text::bigint) ON CONFLICT DO NOTHING;
    ELSIF TG_OP = 'INSERT' THEN
        {insert("new_rows")}
    ELSIF TG_OP = 'DELETE' THEN
        {insert("old_rows")}
    ELSE
        {insert(changed("new_rows", "old_rows"))}
        {insert(changed("old_rows", "new_rows"))}
    END IF;
    RETURN NULL;
END;
$$;
"""


def _triggers(table: str, function: str) -> list[str]:
    # Transition tables allow one event per trigger, hence four triggers per table.
    return [
        f"CREATE TRIGGER {table}_feed_ins AFTER INSERT ON {table} REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
        f"CREATE TRIGGER {table}_feed_upd AFTER UPDATE ON {table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
        f"CREATE TRIGGER {table}_feed_del AFTER DELETE ON {table} REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
        f"CREATE TRIGGER {table}_feed_trunc AFTER TRUNCATE ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
    ]


def upgrade() -> None:
    op.create_table(
        "feed_snapshots",
        sa.Column("ref", sa.Text(), nullable=False),
        sa.Column("top_n", sa.Integer(), nullable=False),
        sa.Column("lesson_days", sa.Integer(), nullable=False),
        sa.Column("vault_root", sa.Text(), nullable=False),
        sa.Column("scopes", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("built", sa.Text(), nullable=False),
        sa.Column("built_xmin", sa.BigInteger(), nullable=False),
        sa.Column("valid_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("ref", "top_n", "lesson_days", "vault_root", name="pk_feed_snapshots"),
    )
    op.create_table(
        "feed_changes",
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("xid", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "xid", name="pk_feed_changes"),
    )
    op.create_table(
        "feed_horizon",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("horizon", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("pending", sa.BigInteger(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_feed_horizon"),
    )
    op.execute("INSERT INTO feed_horizon (id, horizon, pending) VALUES (1, 0, 0)")
    op.execute(_log_function("brain_feed_log_entries", _ENTRY_SCOPES, _ENTRY_COLUMNS))
    op.execute(_log_function("brain_feed_log_projects", _PROJECT_SCOPES, _PROJECT_COLUMNS))
    for statement in _triggers("entries", "brain_feed_log_entries") + _triggers("projects", "brain_feed_log_projects"):
        op.execute(statement)


def downgrade() -> None:
    for table in ("entries", "projects"):
        for suffix in ("ins", "upd", "del", "trunc"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_feed_{suffix} ON {table}")
    op.execute("DROP FUNCTION IF EXISTS brain_feed_log_entries()")
    op.execute("DROP FUNCTION IF EXISTS brain_feed_log_projects()")
    op.drop_table("feed_horizon")
    op.drop_table("feed_changes")
    op.drop_table("feed_snapshots")
