"""What the search index lags: ``entries.embed_hash`` and ``entries.embedded_hash``, and a partial index of the rows apart.

``embed_hash`` is the hash of the text the search index embeds for the
entry (``brain_core.chunks.entry_doc``; null for kinds that are not
embedded), written with the row by the index's one path; ``embedded_hash``
is the hash the index held for the entry's key when the embed step last
looked. Where the two differ the entry is pending: new, or changed since it
was embedded; the stored generated column ``embed_pending`` says so (the
planner has statistics for a column, where it estimates a comparison of two
columns at nearly every row and reads the table whole: 78 ms against 0.02 ms
at 100,000 entries). The partial index holds only those rows, so counting them
(``brain_kernel.search.pending``, on every search) and finding them (the
tick's embed step) cost as many rows as are pending, not as the index holds
(ADR 0046).

Existing rows are filled here: each entry's hash computed as the index
computes it, and the hash the search index holds for its key, so an index
embedded before the upgrade is not counted pending and one never embedded is.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from brain_core.chunks import EMBEDDED_KINDS, entry_doc
from brain_core.entries import EntryRecord

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_BATCH = 10_000


def _fill(conn: sa.Connection) -> None:
    stored: dict[tuple[str, str], set[str]] = {}
    for producer, key, digest in conn.execute(sa.text("SELECT producer, key, content_hash FROM content_embeddings WHERE chunk_idx = 0")):
        stored.setdefault((producer, key), set()).add(digest)
    rows = conn.execute(
        sa.text(
            "SELECT id, kind, vault_path, title, content, project, projects, repo, status, heat, metadata FROM entries WHERE kind = ANY(:kinds) ORDER BY id"
        ),
        {"kinds": list(EMBEDDED_KINDS)},
    ).all()
    values: list[tuple[str, str, str | None]] = []
    for r in rows:
        record = EntryRecord(
            id=r.id,
            kind=r.kind,
            vault_path=r.vault_path,
            title=r.title,
            content=r.content,
            project=r.project,
            projects=tuple(r.projects or ()),
            repo=r.repo,
            status=r.status,
            heat=float(r.heat or 0.0),
            meta=dict(r.metadata or {}),
        )
        doc = entry_doc(record)
        if doc is None:
            continue
        held = stored.get((doc.producer, doc.key), set())
        values.append((r.id, doc.content_hash, doc.content_hash if doc.content_hash in held else min(held, key=str, default=None)))
    for start in range(0, len(values), _BATCH):
        batch = values[start : start + _BATCH]
        params: dict[str, Any] = {"ids": [v[0] for v in batch], "wanted": [v[1] for v in batch], "held": [v[2] for v in batch]}
        conn.execute(
            sa.text(
                "UPDATE entries e SET embed_hash = v.wanted, embedded_hash = v.held "
                "FROM unnest(CAST(:ids AS text[]), CAST(:wanted AS varchar[]), CAST(:held AS varchar[])) AS v(id, wanted, held) WHERE e.id = v.id"
            ),
            params,
        )


def upgrade() -> None:
    op.add_column("entries", sa.Column("embed_hash", sa.String(length=64), nullable=True))
    op.add_column("entries", sa.Column("embedded_hash", sa.String(length=64), nullable=True))
    _fill(op.get_bind())
    # Added after the fill: a stored generated column rewrites the table once, here, not on every filled row.
    op.add_column(
        "entries",
        sa.Column("embed_pending", sa.Boolean(), sa.Computed("embed_hash IS DISTINCT FROM embedded_hash", persisted=True), nullable=False),
    )
    op.create_index("ix_entries_embed_pending", "entries", ["project"], postgresql_where=sa.text("embed_pending"))
    op.execute("ANALYZE entries")  # the planner's estimate of pending rows, before the first search asks


def downgrade() -> None:
    op.drop_index("ix_entries_embed_pending", table_name="entries")
    op.drop_column("entries", "embed_pending")
    op.drop_column("entries", "embedded_hash")
    op.drop_column("entries", "embed_hash")
