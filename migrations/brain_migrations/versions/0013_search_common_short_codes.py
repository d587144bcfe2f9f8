"""The search index leaves out common short codes (ADR 0029): ``vault_search_state.common``.

Version 3 segments carry the codes of version 2 but the ASCII characters and
bigrams that more than a tenth of a sample of the vault's segments held when
the index was first built (``brain_kernel.search.search_docs.sample_common``). Such a
code's GIN bitmap reads about as many rows as a scan, and those codes were
more than half of the index's items. ``common`` maps each code left out to the
share of the sampled segments that held it (a search's estimate of its
token). Roots indexed before this revision have version 2 and leave nothing
out (``{}``): searches answer from their index as before until the next
``brain reindex`` writes every document again and chooses the codes.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("vault_search_state", sa.Column("common", JSONB(), nullable=False, server_default="{}"))


def downgrade() -> None:
    # Version 3 segments lack the common codes that version 2 searches ask the GIN index for: mark them older
    # than version 2, so short tokens are tested by strpos until a rebuild writes every document again.
    op.execute("UPDATE vault_search_state SET codes = 1 WHERE codes >= 3")
    op.drop_column("vault_search_state", "common")
