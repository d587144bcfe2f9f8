"""The word side of search: ``content_embeddings.words`` (a ``tsvector``) and its GIN index.

Search fuses a word search with the vector search (ADR 0044). The words are
made in Python by ``brain_kernel.search.words`` (Postgres's default parser
splits identifiers and keeps paths whole, so ``parse_frontmatter`` and
``db.py`` would not match as words) and written with the chunk by the
store's COPY. The column is stored rather than an expression index because
the chunk's full text is not kept: only its first 500 characters are.

Chunks stored before this revision get the words of that preview, the only
text the table holds; an entry's chunks get the words of its whole text when
it is next embedded (a changed entry, or a re-embed). The GIN index has no
pending list (``fastupdate = off``, as the vault search's, ADR 0023): a
query never scans one left by a bulk write.

The vector column is stored MAIN from here on (ADR 0045): pgvector's type is
EXTERNAL, so a row over 2 kB had its vector moved to the TOAST table and an
exact ranking of 3,972 rows read 12,296 buffers (35 ms) where inline vectors
read 1,001 (12.5 ms). Rows up to 4 kB stay whole (``toast_tuple_target``):
a short chunk's words are read from its row, not from TOAST, and the word
side of an unscoped search at 100,000 chunks took 22.9 ms of CPU instead of
40.9. The backfill rewrites every row, so existing rows take both here.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TSVECTOR

from brain_kernel.search.words import Words, WordsDumper, tsvector_binary

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_BATCH = 5_000


def _backfill() -> None:
    """Each existing chunk's words, from its preview: read by id in batches, written back through one temp table."""
    bind = op.get_bind()
    conn = bind.connection.driver_connection
    conn.adapters.register_dumper(Words, WordsDumper)
    bind.execute(sa.text("CREATE TEMP TABLE chunk_words (id bigint PRIMARY KEY, words tsvector NOT NULL) ON COMMIT DROP"))
    last = 0
    while True:
        rows = bind.execute(sa.text("SELECT id, text_preview FROM content_embeddings WHERE id > :last ORDER BY id LIMIT :n"), {"last": last, "n": _BATCH}).all()
        if not rows:
            break
        with conn.cursor() as cur, cur.copy("COPY chunk_words (id, words) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "tsvector"])
            for chunk_id, preview in rows:
                copy.write_row((chunk_id, Words(tsvector_binary(preview or ""))))
        last = rows[-1][0]
    bind.execute(sa.text("UPDATE content_embeddings c SET words = w.words FROM chunk_words w WHERE c.id = w.id"))
    bind.execute(sa.text("DROP TABLE chunk_words"))


def upgrade() -> None:
    op.add_column("content_embeddings", sa.Column("words", TSVECTOR(), nullable=False, server_default=sa.text("''::tsvector")))
    op.execute("ALTER TABLE content_embeddings ALTER COLUMN embedding SET STORAGE MAIN")  # before the backfill, which writes every row again
    op.execute("ALTER TABLE content_embeddings SET (toast_tuple_target = 4096)")
    _backfill()
    op.create_index("ix_content_embeddings_words_gin", "content_embeddings", ["words"], postgresql_using="gin", postgresql_with={"fastupdate": "off"})


def downgrade() -> None:
    op.execute("ALTER TABLE content_embeddings ALTER COLUMN embedding SET STORAGE EXTERNAL")
    op.execute("ALTER TABLE content_embeddings RESET (toast_tuple_target)")
    op.drop_index("ix_content_embeddings_words_gin", table_name="content_embeddings")
    op.drop_column("content_embeddings", "words")
