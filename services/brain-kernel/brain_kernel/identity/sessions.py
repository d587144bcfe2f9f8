"""SQL repository of identity evidence: the session index and learned roots.

All SQL about the ``sessions`` and ``learned_roots`` tables lives here. The
functions take a session and never commit: the entry point (HTTP request, CLI
command, job) owns the transaction. Writes are upserts keyed by session id or
folder path that write only when a value differs from the stored row
(``IS DISTINCT FROM``), so re-registering a session or re-learning a root is
safe to repeat and an unchanged one writes nothing. Every recorded identity
also records its project row (key, repo, root), so the project becomes known
to ``GET /projects`` and the feed lookup; it never moves the project's last
activity, which only entries do.
"""

from __future__ import annotations

import datetime as dt
import functools
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import DateTime, Text, bindparam, func, literal_column, select, text, tuple_
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.orm import Session

from brain_core.identity import LearnedRoot, ProjectIdentity
from brain_core.text import storable
from brain_kernel.db.models import LearnedRoot as LearnedRootRow
from brain_kernel.db.models import SessionRow
from brain_kernel.index.entries import attribute_session, touch_project

# ``xmax = 0`` holds for a row this statement inserted and not for one it updated (Postgres).
_INSERTED = literal_column("(xmax = 0)")
_BATCH = 1000  # rows per multi-row statement
_SESSION_FIELDS = ("agent", "project", "repo", "worktree", "root", "cwd", "source", "started_at")


def get_session(db: Session, session_id: str) -> SessionRow | None:
    """The stored identity of a session, or None."""
    return db.get(SessionRow, session_id)


@functools.cache
def _record_session_stmt() -> Any:
    """The session upsert, built once: it writes only when a stored value would change."""
    stmt = insert(SessionRow.__table__)
    table = SessionRow.__table__.c
    new = {
        "agent": func.coalesce(stmt.excluded.agent, table.agent),
        "project": stmt.excluded.project,
        "repo": stmt.excluded.repo,
        "worktree": stmt.excluded.worktree,
        "root": stmt.excluded.root,
        "cwd": stmt.excluded.cwd,
        "source": stmt.excluded.source,
        "started_at": func.coalesce(table.started_at, stmt.excluded.started_at),
    }
    changed = tuple_(*(table[c] for c in _SESSION_FIELDS)).is_distinct_from(tuple_(*(new[c] for c in _SESSION_FIELDS)))
    return stmt.on_conflict_do_update(index_elements=["session_id"], set_={**new, "updated_at": func.now()}, where=changed).returning(
        table.session_id, _INSERTED
    )


def _session_values(session_id: str, identity: ProjectIdentity, agent: str | None, started_at: dt.datetime | None) -> dict[str, Any]:
    return storable(
        {
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
    )


def hold_session(db: Session, session_id: str) -> None:
    """This transaction's lock on a session id, taken by its registration and by a marker naming it before either reads
    the other: whichever commits second sees the first, so a marker is never left unattributed beside its session's
    registration (the registration relabels markers it sees; a marker attributes by a registration it sees)."""
    db.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:id, 49))"), {"id": session_id})


def record_session(
    db: Session,
    session_id: str,
    identity: ProjectIdentity,
    *,
    agent: str | None = None,
    started_at: dt.datetime | None = None,
) -> bool:
    """Insert or update a session's identity (no write when nothing changed); returns True when the session is new."""
    hold_session(db, session_id)
    written = db.execute(_record_session_stmt(), _session_values(session_id, identity, agent, started_at)).first()
    if identity.project is not None:
        # Known, not active: a project's last activity comes from its entries, so registering a
        # session changes nothing a stored feed answer shows (and invalidates none).
        touch_project(db, identity.project, identity.repo, root=identity.root)
        attribute_session(db, session_id, identity.project, identity.repo)  # its markers written before it was known
    return bool(written is not None and written[1])


@dataclass(frozen=True)
class SessionRecord:
    """One session a job records: its id, identity, agent and start."""

    session_id: str
    identity: ProjectIdentity
    agent: str | None = None
    started_at: dt.datetime | None = None


def record_sessions(db: Session, records: Iterable[SessionRecord]) -> int:
    """``record_session`` for many sessions in a few statements; returns the session rows written (new or changed).

    A session given twice is stored as the sequence of single upserts would
    leave it (the last identity, the first agent and start known). Projects
    are recorded and earlier markers attributed only for sessions whose row
    was written: an unchanged session was recorded, with its project, before.
    """
    merged: dict[str, dict[str, Any]] = {}
    for record in records:
        values = _session_values(record.session_id, record.identity, record.agent, record.started_at)
        previous = merged.pop(record.session_id, None)
        if previous is not None:
            values["agent"] = values["agent"] or previous["agent"]
            values["started_at"] = previous["started_at"] or values["started_at"]
        merged[record.session_id] = values  # re-inserted: the order of last occurrence, as sequential upserts write
    rows = list(merged.values())
    written: list[dict[str, Any]] = []
    for start in range(0, len(rows), _BATCH * 5):
        chunk = rows[start : start + _BATCH * 5]
        columns = {name: [row[name] for row in chunk] for name in ("session_id", *_SESSION_FIELDS)}
        done = {sid for (sid,) in db.execute(_RECORD_SESSIONS, columns)}
        written.extend(row for row in chunk if row["session_id"] in done)
    attributed = [row for row in written if row["project"] is not None]
    touched: dict[tuple[str, str | None, str | None], None] = {}
    for row in reversed(attributed):  # each project once, in the order its last session would have left it
        touched.setdefault((row["project"], row["repo"], row["root"]), None)
    for project, repo, root in reversed(list(touched)):
        touch_project(db, project, repo, root=root)
    orphans = _sessions_with_unattributed_entries(db, [row["session_id"] for row in attributed])
    for row in attributed:
        if row["session_id"] in orphans:
            attribute_session(db, row["session_id"], row["project"], row["repo"])
    return len(written)


# ``_record_session_stmt`` for many rows in one statement: one array per column (a multi-row VALUES list
# of thousands of parameters costs more to build and send than the upsert itself).
_RECORD_SESSIONS = text(
    """
    INSERT INTO sessions AS s (session_id, agent, project, repo, worktree, root, cwd, source, started_at)
    SELECT * FROM unnest(:session_id, :agent, :project, :repo, :worktree, :root, :cwd, :source, :started_at)
    ON CONFLICT (session_id) DO UPDATE SET
        agent = coalesce(EXCLUDED.agent, s.agent), project = EXCLUDED.project, repo = EXCLUDED.repo,
        worktree = EXCLUDED.worktree, root = EXCLUDED.root, cwd = EXCLUDED.cwd, source = EXCLUDED.source,
        started_at = coalesce(s.started_at, EXCLUDED.started_at), updated_at = now()
    WHERE (s.agent, s.project, s.repo, s.worktree, s.root, s.cwd, s.source, s.started_at)
          IS DISTINCT FROM (coalesce(EXCLUDED.agent, s.agent), EXCLUDED.project, EXCLUDED.repo, EXCLUDED.worktree,
                            EXCLUDED.root, EXCLUDED.cwd, EXCLUDED.source, coalesce(s.started_at, EXCLUDED.started_at))
    RETURNING session_id
    """
).bindparams(
    *(bindparam(name, type_=ARRAY(Text)) for name in ("session_id", "agent", "project", "repo", "worktree", "root", "cwd", "source")),
    bindparam("started_at", type_=ARRAY(DateTime(timezone=True))),
)


_UNATTRIBUTED = text("SELECT DISTINCT metadata ->> 'session_id' FROM entries WHERE project IS NULL AND (metadata ->> 'session_id') = ANY(:sids)").bindparams(
    bindparam("sids", type_=ARRAY(Text))
)


def _sessions_with_unattributed_entries(db: Session, session_ids: Sequence[str]) -> set[str]:
    """Which of these sessions have markers still waiting for a project (the partial index of revision 0004)."""
    found: set[str] = set()
    for start in range(0, len(session_ids), _BATCH * 5):
        found.update(sid for (sid,) in db.execute(_UNATTRIBUTED, {"sids": list(session_ids[start : start + _BATCH * 5])}))
    return found


def stored_identities(db: Session, session_ids: Sequence[str]) -> dict[str, ProjectIdentity]:
    """The stored identities of these sessions (those the index holds), read in a few statements."""
    table = SessionRow.__table__.c
    stmt = select(table.session_id, table.project, table.repo, table.root, table.worktree, table.cwd).where(
        table.session_id == func.any(bindparam("ids", type_=ARRAY(Text)))
    )
    out: dict[str, ProjectIdentity] = {}
    for start in range(0, len(session_ids), _BATCH * 5):
        for row in db.execute(stmt, {"ids": list(session_ids[start : start + _BATCH * 5])}):
            source = "session" if row.project else "unresolved"
            out[row.session_id] = ProjectIdentity(row.project or None, row.repo, row.root, row.worktree, row.cwd, source)
    return out


def record_learned_roots(db: Session, identity: ProjectIdentity, paths: Iterable[tuple[str, str | None]]) -> int:
    """Remember folders (main root, worktree path) a git resolution found; returns rows written."""
    return record_learned(db, [(identity, paths)])


def record_learned(db: Session, learned: Iterable[tuple[ProjectIdentity, Iterable[tuple[str, str | None]]]]) -> int:
    """``record_learned_roots`` for many resolutions in a few statements; returns rows written.

    The stored rows are read first: folders already learned with the same
    identity write nothing (a marker from a known folder costs one indexed
    read here), and a project is recorded only when one of its rows changed.
    A folder given twice keeps the last identity, as sequential calls would.
    """
    wanted: dict[str, tuple[LearnedRoot, ProjectIdentity]] = {}
    for identity, paths in learned:
        if identity.project is None or identity.root is None:
            continue
        for path, worktree in paths:
            wanted.pop(path, None)
            wanted[path] = (LearnedRoot(path, identity.project, identity.repo, identity.root, worktree), identity)
    if not wanted:
        return 0
    known = {lr.path: lr for lr in _learned_by_path(db, list(wanted))}
    changed = [(lr, identity) for path, (lr, identity) in wanted.items() if known.get(path) != lr]
    now = dt.datetime.now(dt.timezone.utc)
    table = LearnedRootRow.__table__.c
    fields = ("project", "repo", "root", "worktree")
    for start in range(0, len(changed), _BATCH):
        rows = [{"path": lr.path, **{f: getattr(lr, f) for f in fields}, "learned_at": now} for lr, _ in changed[start : start + _BATCH]]
        stmt = insert(LearnedRootRow.__table__).values(rows)
        stmt = stmt.on_conflict_do_update(
            index_elements=["path"],
            set_={c: stmt.excluded[c] for c in (*fields, "learned_at")},
            where=tuple_(*(table[c] for c in fields)).is_distinct_from(tuple_(*(stmt.excluded[c] for c in fields))),
        )
        db.execute(stmt)
    touched: dict[tuple[str, str | None, str | None], None] = {}
    for _, identity in reversed(changed):  # each project once, in the order its last resolution would have left it
        touched.setdefault((identity.project, identity.repo, identity.root), None)  # type: ignore[arg-type]
    for project, repo, root in reversed(list(touched)):
        touch_project(db, project, repo, root=root)
    return len(changed)


def all_learned_roots(db: Session) -> dict[str, LearnedRoot]:
    """Every learned folder by path (a job resolving many folders reads them once)."""
    table = LearnedRootRow.__table__.c
    rows = db.connection().execute(select(table.path, table.project, table.repo, table.root, table.worktree))
    return {r.path: LearnedRoot(path=r.path, project=r.project, repo=r.repo, root=r.root, worktree=r.worktree) for r in rows}


def path_and_ancestors(path: str) -> list[str]:
    """``path`` and every folder above it, ``/`` only for ``/`` itself (as a learned root matches)."""
    out = [path]
    current = path
    while True:
        parent = posixpath.dirname(current)
        if parent == current or parent == "/":
            return out
        out.append(parent)
        current = parent


# SQL text run by the driver (every marker with a cwd reads it; ADR 0022): plain columns.
_LEARNED_BY_PATH = "SELECT path, project, repo, root, worktree FROM learned_roots WHERE path = ANY(%(paths)s::text[])"


def _learned_by_path(db: Session, paths: Sequence[str]) -> list[LearnedRoot]:
    rows = db.connection().exec_driver_sql(_LEARNED_BY_PATH, {"paths": list(paths)})
    return [LearnedRoot(path=path, project=project, repo=repo, root=root, worktree=worktree) for path, project, repo, root, worktree in rows]


def learned_roots_containing(db: Session, path: str) -> list[LearnedRoot]:
    """Learned folders that are ``path`` or one of its ancestors, deepest first (primary-key lookups)."""
    return sorted(_learned_by_path(db, path_and_ancestors(path)), key=lambda lr: len(lr.path), reverse=True)
