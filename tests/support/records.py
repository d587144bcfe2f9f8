"""Index records built by hand for the search tests: lessons of a shared log and an arc merged across projects."""

from __future__ import annotations

import datetime as dt

from brain_core.entries import EntryRecord


def lesson_record(n: int, key: str | None, repo: str | None, content: str, *, at: dt.datetime) -> EntryRecord:
    """The ``n``-th lesson of one shared log, filed under ``key``/``repo`` (None: unattributed)."""
    return EntryRecord(
        id=f"lesson:left/reference/lessons-x.md#{n}",
        kind="lesson",
        vault_path="left/reference/lessons-x.md",
        title=content,
        content=content,
        project=key,
        repo=repo,
        occurred_at=at,
    )


def merged_arc_record(content: str, *, at: dt.datetime) -> EntryRecord:
    """An arc of web merged with billing's: its primary project web, both in ``projects``."""
    return EntryRecord(
        id="arc:clusters/2026-11-29/arc-merged.md",
        kind="arc",
        vault_path="clusters/2026-11-29/arc-merged.md",
        title="Unify checkout for web and billing",
        content=content,
        project="web",
        projects=("web", "billing"),
        repo="acme/web",
        heat=7.5,
        status="active",
        occurred_at=at,
        meta={"cluster_id": "arc-merged"},
    )
