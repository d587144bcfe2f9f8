"""SQL repository of identity evidence: the session index and learned roots.

All SQL about the ``sessions`` and ``learned_roots`` tables lives here. The
functions take a session and never commit: the entry point (HTTP request, CLI
command, job) owns the transaction. Writes are upserts keyed by session id or
folder path, so re-registering a session or re-learning a root is safe to
repeat. Every recorded identity also records its project row (key, repo,
root), so the project becomes known to ``GET /projects`` and the feed lookup;
it never moves the project's last activity, which only entries do.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, literal, literal_column, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from brain_core.identity import LearnedRoot, ProjectIdentity
from brain_kernel.index import attribute_session, touch_project
from brain_kernel.models import LearnedRoot as LearnedRootRow
from brain_kernel.models import SessionRow

# ``xmax = 0`` holds for a row this statement inserted and not for one it updated (Postgres).
_INSERTED = literal_column("(xmax = 0)")


def get_session(db: Session, session_id: str) -> SessionRow | None:
    """The stored identity of a session, or None."""
    return db.get(SessionRow, session_id)


@functools.cache
def _record_session_stmt() -> Any:
    """The session upsert, built once (extraction records thousands of sessions per run)."""
    stmt = insert(SessionRow.__table__)
    table = SessionRow.__table__.c
    return stmt.on_conflict_do_update(
        index_elements=["session_id"],
        set_={
            "agent": func.coalesce(stmt.excluded.agent, table.agent),
            "project": stmt.excluded.project,
            "repo": stmt.excluded.repo,
            "worktree": stmt.excluded.worktree,
            "root": stmt.excluded.root,
            "cwd": stmt.excluded.cwd,
            "source": stmt.excluded.source,
            "started_at": func.coalesce(table.started_at, stmt.excluded.started_at),
            "updated_at": func.now(),
        },
    ).returning(_INSERTED)


def record_session(
    db: Session,
    session_id: str,
    identity: ProjectIdentity,
    *,
    agent: str | None = None,
    started_at: dt.datetime | None = None,
) -> bool:
    """Insert or update a session's identity; returns True when the session is new."""
    values = {
        "session_id": session_id,
        "agent": agent,
        "project": identity.project,
        "repo": identity.repo,
        "worktree": identity.worktree,
        "root": identity.root,
        "cwd": identity.cwd,
        "source": identity.source,
        "started_at": started_at,
    }
    inserted = bool(db.execute(_record_session_stmt(), values).scalar_one())
    if identity.project is not None:
        # Known, not active: a project's last activity comes from its entries, so registering a
        # session changes nothing a stored feed answer shows (and invalidates none).
        touch_project(db, identity.project, identity.repo, root=identity.root)
        attribute_session(db, session_id, identity.project, identity.repo)  # its markers written before it was known
    return inserted


def record_learned_roots(db: Session, identity: ProjectIdentity, paths: Iterable[tuple[str, str | None]]) -> int:
    """Remember folders (main root, worktree path) a git resolution found; returns rows written."""
    if identity.project is None or identity.root is None:
        return 0
    rows = [
        {
            "path": path,
            "project": identity.project,
            "repo": identity.repo,
            "root": identity.root,
            "worktree": worktree,
            "learned_at": dt.datetime.now(dt.timezone.utc),
        }
        for path, worktree in paths
    ]
    if not rows:
        return 0
    stmt = insert(LearnedRootRow.__table__).values(rows)
    stmt = stmt.on_conflict_do_update(
        index_elements=["path"],
        set_={c: stmt.excluded[c] for c in ("project", "repo", "root", "worktree", "learned_at")},
    )
    db.execute(stmt)
    touch_project(db, identity.project, identity.repo, root=identity.root)
    return len(rows)


def learned_roots_containing(db: Session, path: str) -> list[LearnedRoot]:
    """Learned folders that are ``path`` or one of its ancestors, deepest first."""
    probe = literal(path)
    stmt = (
        select(LearnedRootRow)
        .where((LearnedRootRow.path == probe) | func.starts_with(probe, LearnedRootRow.path + "/"))
        .order_by(func.length(LearnedRootRow.path).desc())
    )
    return [LearnedRoot(path=r.path, project=r.project, repo=r.repo, root=r.root, worktree=r.worktree) for r in db.scalars(stmt)]
