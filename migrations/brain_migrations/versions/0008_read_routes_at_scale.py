"""Read routes bounded by their answer: ordered feed indexes, project counts kept by triggers, the search index.

- **Feed indexes.** Almost every entry lists exactly its own project
  (``projects = ARRAY[project]``); for those, membership is ``project = key``
  plus the repo half, so each section of the project feed is an ordered scan
  of a btree that stops at its limit: ``(project, kind, occurred_at DESC,
  id)`` for the dated sections, ``(project, heat DESC, occurred_at DESC
  NULLS LAST, id) WHERE kind = 'arc'`` for hot arcs. The other rows (merged
  arcs, a key that is not the row's own project) are few and have a partial
  GIN index of their own; fleet-wide signals a partial index by date. The
  ``(project, kind, heat)`` index of 0001 is covered by the arc index and
  dropped.
- **Project counts.** ``project_counts`` holds signed deltas of entry counts
  per (member key, repo, key is the primary project, kind), inserted by
  statement-level triggers on ``entries`` (the style of 0003), with the
  newest ``occurred_at`` each delta adds (``last``) or takes away
  (``gone``): insert-only, so no writer waits on a counter row held by a
  long keeper or reindex transaction. ``GET /projects`` sums them; a group's
  last activity is the newest ``last`` unless a removal took away one at
  least as new, and only then is it read from the entries. Deltas are
  folded into one row per group now and then; the table is filled from the
  entries at upgrade.
- **Search index.** ``vault_documents`` (one row per searchable vault file:
  lower-cased name, its trigram codes, size and mtime as a full rebuild saw
  them, line count, a digest of its text) and
  ``vault_segments`` (the file's lines in line-aligned pieces: each entry of
  a shared log, the lines between them, blocks of other files; original and
  lower-cased text and the codes of the lower-cased trigrams, GIN-indexed).
  Core Postgres only: pg_trgm is not in the embedded server, so trigrams are
  ``int4[]`` codes under the core GIN ``array_ops``. ``vault_search_state``
  records the vault roots a full rebuild has indexed: search uses the index
  only for those (a partly filled table would answer partly).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# The rows of one transition table as deltas, one per group (member key, repo, primary, kind):
# added rows count +1 and give the newest ``occurred_at`` they bring (``last``), removed rows
# count -1 and give the newest they take away (``gone``).
_ADDED = """
    INSERT INTO project_counts (member_key, repo, is_primary, kind, n, last)
    SELECT k, r.repo, coalesce(r.project = k, false), r.kind, count(*), max(r.occurred_at)
      FROM {rows}, unnest(r.projects) AS k
     GROUP BY 1, 2, 3, 4;
"""
_REMOVED = """
    INSERT INTO project_counts (member_key, repo, is_primary, kind, n, gone)
    SELECT k, r.repo, coalesce(r.project = k, false), r.kind, -count(*), max(r.occurred_at)
      FROM {rows}, unnest(r.projects) AS k
     GROUP BY 1, 2, 3, 4;
"""

# The columns a count or a last activity depends on: an UPDATE that keeps them logs nothing.
_COUNT_COLUMNS = ("kind", "project", "projects", "repo", "occurred_at")


def _changed(side: str, other: str) -> str:
    same = " AND ".join(f"a.{c} IS NOT DISTINCT FROM b.{c}" for c in _COUNT_COLUMNS)
    return f"(SELECT a.* FROM {side} a WHERE NOT EXISTS (SELECT 1 FROM {other} b WHERE b.id = a.id AND {same})) AS r"


_COUNT_FUNCTION = f"""
CREATE FUNCTION brain_project_counts_entries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM project_counts;
    ELSIF TG_OP = 'INSERT' THEN
        {_ADDED.format(rows="new_rows AS r")}
    ELSIF TG_OP = 'DELETE' THEN
        {_REMOVED.format(rows="old_rows AS r")}
    ELSE
        {_REMOVED.format(rows=_changed("old_rows", "new_rows"))}
        {_ADDED.format(rows=_changed("new_rows", "old_rows"))}
    END IF;
    RETURN NULL;
END;
$$;
"""

_COUNT_TRIGGERS = (
    "CREATE TRIGGER entries_counts_ins AFTER INSERT ON entries REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION brain_project_counts_entries()",
    "CREATE TRIGGER entries_counts_upd AFTER UPDATE ON entries REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION brain_project_counts_entries()",
    "CREATE TRIGGER entries_counts_del AFTER DELETE ON entries REFERENCING OLD TABLE AS old_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION brain_project_counts_entries()",
    "CREATE TRIGGER entries_counts_trunc AFTER TRUNCATE ON entries FOR EACH STATEMENT EXECUTE FUNCTION brain_project_counts_entries()",
)


def upgrade() -> None:
    op.create_index("ix_entries_project_kind_occurred", "entries", ["project", "kind", sa.text("occurred_at DESC"), "id"])
    op.create_index(
        "ix_entries_project_hot_arcs",
        "entries",
        ["project", sa.text("heat DESC"), sa.text("occurred_at DESC NULLS LAST"), "id"],
        postgresql_where=sa.text("kind = 'arc'"),
    )
    op.create_index(
        "ix_entries_shared_projects_gin",
        "entries",
        ["projects"],
        postgresql_using="gin",
        postgresql_with={"fastupdate": "off"},
        postgresql_where=sa.text("projects <> ARRAY[project] AND cardinality(projects) > 0"),
    )
    op.create_index(
        "ix_entries_fleet_signals",
        "entries",
        [sa.text("occurred_at DESC"), "id"],
        postgresql_where=sa.text("kind = 'signal' AND (scope = 'fleet' OR cardinality(projects) = 0)"),
    )
    op.drop_index("ix_entries_project_kind_heat", table_name="entries")
    # What the planner must know to price those ordered scans: almost every row lists exactly
    # its own project, and a project has (nearly) one repo. Without these it multiplies two
    # guesses of 0.5 % and reads a hot project's whole history through a bitmap instead.
    op.execute("CREATE STATISTICS entries_single_project ON ((projects = ARRAY[project])) FROM entries")
    op.execute("CREATE STATISTICS entries_project_repo (dependencies, mcv) ON project, repo FROM entries")

    op.create_table(
        "project_counts",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),  # bigserial
        sa.Column("member_key", sa.Text(), nullable=False),
        sa.Column("repo", sa.Text(), nullable=True),
        sa.Column("is_primary", sa.Boolean(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("last", sa.DateTime(timezone=True), nullable=True),
        sa.Column("gone", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_project_counts"),
    )
    op.execute(_COUNT_FUNCTION)
    for statement in _COUNT_TRIGGERS:
        op.execute(statement)
    op.execute(
        "INSERT INTO project_counts (member_key, repo, is_primary, kind, n, last) "
        "SELECT k, e.repo, coalesce(e.project = k, false), e.kind, count(*), max(e.occurred_at) FROM entries e, unnest(e.projects) AS k GROUP BY 1, 2, 3, 4"
    )

    op.create_table(
        "vault_documents",
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("name_lower", sa.Text(), nullable=False),
        sa.Column("name_grams", postgresql.ARRAY(sa.Integer()), server_default="{}", nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("mtime_ns", sa.BigInteger(), nullable=True),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.PrimaryKeyConstraint("path", name="pk_vault_documents"),
    )
    op.create_index("ix_vault_documents_name_grams", "vault_documents", ["name_grams"], postgresql_using="gin")
    # Files long enough to reach the score's cap on hit lines, in code-point order: what a search with a frequent token walks.
    op.create_index("ix_vault_documents_long", "vault_documents", [sa.text('(path COLLATE "C")')], postgresql_where=sa.text("lines >= 30"))
    op.create_table(
        "vault_segments",
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("first_line", sa.Integer(), nullable=False),
        sa.Column("last_line", sa.Integer(), nullable=False),
        sa.Column("entry_id", sa.Text(), nullable=True),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("lowered", sa.Text(), nullable=False),
        sa.Column("grams", postgresql.ARRAY(sa.Integer()), server_default="{}", nullable=False),
        sa.ForeignKeyConstraint(["path"], ["vault_documents.path"], name="fk_vault_segments_path_vault_documents", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("path", "first_line", name="pk_vault_segments"),
    )
    op.create_index("ix_vault_segments_grams", "vault_segments", ["grams"], postgresql_using="gin")
    # Statistics of up to 10,000 trigram codes: a search reads from them how frequent a token is.
    op.execute("ALTER TABLE vault_segments ALTER COLUMN grams SET STATISTICS 1000")
    op.create_index("ix_vault_segments_entry_id", "vault_segments", ["entry_id"], postgresql_where=sa.text("entry_id IS NOT NULL"))
    op.create_table(
        "vault_search_state",
        sa.Column("vault_root", sa.Text(), nullable=False),
        sa.Column("rebuilt_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.PrimaryKeyConstraint("vault_root", name="pk_vault_search_state"),
    )


def downgrade() -> None:
    op.drop_table("vault_search_state")
    op.drop_index("ix_vault_segments_entry_id", table_name="vault_segments")
    op.drop_index("ix_vault_segments_grams", table_name="vault_segments")
    op.drop_table("vault_segments")
    op.drop_index("ix_vault_documents_long", table_name="vault_documents")
    op.drop_index("ix_vault_documents_name_grams", table_name="vault_documents")
    op.drop_table("vault_documents")
    for suffix in ("ins", "upd", "del", "trunc"):
        op.execute(f"DROP TRIGGER IF EXISTS entries_counts_{suffix} ON entries")
    op.execute("DROP FUNCTION IF EXISTS brain_project_counts_entries()")
    op.drop_table("project_counts")
    op.create_index("ix_entries_project_kind_heat", "entries", ["project", "kind", "heat"])
    op.execute("DROP STATISTICS IF EXISTS entries_project_repo")
    op.execute("DROP STATISTICS IF EXISTS entries_single_project")
    op.drop_index("ix_entries_fleet_signals", table_name="entries")
    op.drop_index("ix_entries_shared_projects_gin", table_name="entries")
    op.drop_index("ix_entries_project_hot_arcs", table_name="entries")
    op.drop_index("ix_entries_project_kind_occurred", table_name="entries")
