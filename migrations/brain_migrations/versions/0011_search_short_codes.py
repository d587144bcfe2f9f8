"""The search index's code version (ADR 0023): ``vault_search_state.codes``.

Version 2 segments carry, besides the codes of their words' trigrams, the
codes of their bigrams and characters, so a token of one or two characters
is found through the GIN index instead of a read of every segment
(``brain_kernel.search.search_docs``). Roots indexed before this revision are
version 1: searches keep answering from their index (short tokens by
``strpos``, as before) until the next ``brain reindex`` writes every
document again with version 2 codes and records it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("vault_search_state", sa.Column("codes", sa.SmallInteger(), nullable=False, server_default="1"))


def downgrade() -> None:
    op.drop_column("vault_search_state", "codes")
