"""SQL the operator pages read beyond the API's own readers: attribution, ticks, coverage, signals, timelines.

The pages reuse the kernel's readers where one exists (``list_projects``,
``project_block``, ``top_arcs``, the search route); what no route answered
before lives here, so every statement of the pages is in one module. Each
read of project memory takes the scope's membership condition
(``scope_condition``), written with ``feed_repo.member``, the feed's own rule,
so a page shows a token bound to projects exactly what the API would. Nothing
here writes; every function is one statement or a few, each bounded by an
index or a limit (the pages answer within 300 ms at 50 projects and 20,000
entries: docs/performance.md).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, case, false, func, literal, or_, select
from sqlalchemy.orm import Session

from brain_core.chunks import PRODUCERS
from brain_core.entries import EntryRecord
from brain_kernel.db.models import ContentEmbedding, Entry, SessionRow, TickRequest, TickRun
from brain_kernel.feed import feed_repo
from brain_kernel.feed.feed_repo import key_owned_sql, member, unattributed_counts
from brain_kernel.feed.snapshots import stored_root
from brain_kernel.scope import Scope

MARKER_KINDS = ("lesson", "decision", "milestone", "signal")
TIMELINE_KINDS = ("lesson", "decision", "milestone", "signal")
ENTRY_KINDS = ("arc", "lesson", "decision", "milestone", "signal")


def scope_condition(scope: Scope) -> ColumnElement[bool] | None:
    """The rows of ``entries`` a scope reads as its projects' (None: every row); fleet signals are added where a page shows them."""
    if not scope.restricted:
        return None
    if not scope.members:
        return false()
    return or_(*(member(m.key, m.repo, m.unique) for m in scope.members))


_LIST_COLUMNS = (
    Entry.id,
    Entry.kind,
    Entry.vault_path,
    Entry.title,
    Entry.project,
    Entry.projects,
    Entry.repo,
    Entry.scope,
    Entry.status,
    Entry.severity,
    Entry.heat,
    Entry.occurred_at,
)


def _listed(rows: Sequence[Any]) -> list[EntryRecord]:
    """Records of listing rows (no content, no metadata: a page lists titles)."""
    return [
        EntryRecord(
            r.id,
            r.kind,
            r.vault_path,
            r.title or "",
            "",
            r.project,
            tuple(r.projects or ()),
            r.repo,
            r.scope,
            r.status,
            r.severity,
            float(r.heat or 0),
            r.occurred_at,
        )
        for r in rows
    ]


# -- projects -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unattributed:
    """The memory of no project: entries by kind and the newest one's time."""

    counts: dict[str, int]
    last_active: dt.datetime | None


def unattributed(db: Session) -> Unattributed:
    """Arcs, lessons, decisions, milestones and signals that name no project (fleet signals among them)."""
    return Unattributed(*unattributed_counts(db))


# The project feed's stored-answer test (``brain_kernel.feed.snapshots``) for many references at once.
_STORED_REFS = """
SELECT s.ref FROM feed_snapshots s
 WHERE s.ref = ANY (%(refs)s) AND s.top_n = %(top_n)s AND s.lesson_days = %(lesson_days)s AND s.vault_root = %(vault_root)s
   AND s.valid_until > %(now)s
   AND s.built_xmin >= (SELECT horizon FROM feed_horizon WHERE id = 1)
   AND NOT EXISTS (
       SELECT 1 FROM feed_changes c
        WHERE c.scope = ANY (s.scopes) AND c.xid >= s.built_xmin
          AND NOT pg_visible_in_snapshot(c.xid::text::xid8, s.built::pg_snapshot))
"""


def stored_refs(db: Session, refs: Sequence[str], *, top_n: int, lesson_days: int, vault_root: str, now: dt.datetime) -> set[str]:
    """Of ``refs``, those whose default feed answer is stored and still exact (served as ``X-Brain-Feed: stored``)."""
    if not refs:
        return set()
    params = {"refs": list(refs), "top_n": top_n, "lesson_days": lesson_days, "vault_root": stored_root(vault_root), "now": now}
    return {row[0] for row in db.connection().exec_driver_sql(_STORED_REFS, params)}


# -- a project ----------------------------------------------------------------------------------


def timeline(db: Session, key: str, repo: str | None, *, limit: int = 150) -> list[EntryRecord]:
    """P's newest lessons, decisions, milestones and signals (the feed's membership rule), newest first, curated ones included."""
    stmt = (
        select(*_LIST_COLUMNS, Entry.meta["valid_until"].astext)
        .where(Entry.kind.in_(TIMELINE_KINDS), member(key, repo, key_owned_sql(key, repo)))
        .order_by(Entry.occurred_at.desc().nulls_last(), Entry.id)
        .limit(limit)
    )
    rows = db.execute(stmt).all()
    # Superseded, retracted and expired entries stay in the timeline, marked: the curation state reads status and valid_until.
    return [dataclasses.replace(record, meta={"valid_until": row[-1]} if row[-1] else {}) for record, row in zip(_listed(rows), rows, strict=True)]


# -- attribution ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WeekShare:
    """One week of one kind of memory: how many there were and how many carry a project."""

    week: dt.date
    total: int
    attributed: int


def _weeks(db: Session, at: Any, attributed: ColumnElement[bool], *conds: Any, table: Any, since: dt.datetime) -> list[WeekShare]:
    week = func.date_trunc("week", at)
    stmt = select(week, func.count(), func.count().filter(attributed)).select_from(table).where(at >= since, *conds).group_by(week).order_by(week)
    return [WeekShare(w.date(), int(n), int(a)) for w, n, a in db.execute(stmt)]


def session_weeks(db: Session, *, since: dt.datetime) -> list[WeekShare]:
    """Sessions per week (started, else first recorded) and how many resolved to a project."""
    at = func.coalesce(SessionRow.started_at, SessionRow.created_at)
    return _weeks(db, at, SessionRow.project.is_not(None), table=SessionRow, since=since)


def arc_weeks(db: Session, *, since: dt.datetime) -> list[WeekShare]:
    """Arcs per week of last activity and how many hold a project."""
    return _weeks(db, Entry.occurred_at, func.cardinality(Entry.projects) > 0, Entry.kind == "arc", table=Entry, since=since)


def marker_weeks(db: Session, *, since: dt.datetime) -> list[WeekShare]:
    """Lessons, decisions, milestones and project signals per week and how many hold a project (fleet-wide signals are meant to hold none)."""
    conds = (Entry.kind.in_(MARKER_KINDS), or_(Entry.kind != "signal", Entry.scope != "fleet"))
    return _weeks(db, Entry.occurred_at, func.cardinality(Entry.projects) > 0, *conds, table=Entry, since=since)


@dataclass(frozen=True)
class ShareTotal:
    """All of one kind of memory: how many, and how many carry a project."""

    total: int
    attributed: int


def totals(db: Session) -> dict[str, ShareTotal]:
    """All-time totals of sessions, arcs and markers, and how many of each carry a project."""
    sessions = db.execute(select(func.count(), func.count().filter(SessionRow.project.is_not(None)))).one()
    has = func.cardinality(Entry.projects) > 0
    is_marker = and_(Entry.kind.in_(MARKER_KINDS), or_(Entry.kind != "signal", Entry.scope != "fleet"))
    arcs, arcs_in, markers, markers_in = db.execute(
        select(
            func.count().filter(Entry.kind == "arc"),
            func.count().filter(Entry.kind == "arc", has),
            func.count().filter(is_marker),
            func.count().filter(is_marker, has),
        ).where(Entry.kind.in_(ENTRY_KINDS))
    ).one()
    return {
        "sessions": ShareTotal(int(sessions[0]), int(sessions[1])),
        "arcs": ShareTotal(int(arcs), int(arcs_in)),
        "markers": ShareTotal(int(markers), int(markers_in)),
    }


@dataclass(frozen=True)
class UnresolvedGroup:
    """Sessions of no project sharing a reason (how resolution ended) and a folder."""

    reason: str
    folder: str
    sessions: int
    last_active: dt.datetime | None


def unresolved_sessions(db: Session, *, limit: int = 50) -> tuple[list[UnresolvedGroup], int]:
    """Sessions with no project grouped by reason and folder, largest groups first; and how many groups there are."""
    reason = func.coalesce(SessionRow.source, literal("unresolved"))
    folder = func.coalesce(SessionRow.cwd, literal(""))
    at = func.coalesce(SessionRow.started_at, SessionRow.created_at)
    grouped = (
        select(reason.label("reason"), folder.label("folder"), func.count().label("n"), func.max(at).label("last"))
        .where(SessionRow.project.is_(None))
        .group_by(reason, folder)
    )
    sub = grouped.subquery()
    rows = db.execute(select(sub, func.count().over()).order_by(sub.c.n.desc(), sub.c.last.desc().nulls_last(), sub.c.folder).limit(limit)).all()
    return [UnresolvedGroup(r.reason, r.folder, int(r.n), r.last) for r in rows], int(rows[0][-1]) if rows else 0


# -- keeper -------------------------------------------------------------------------------------


def last_ticks(db: Session, *, limit: int = 25) -> list[Any]:
    """The newest recorded keeper ticks (``tick_runs``), newest first."""
    return list(db.execute(select(TickRun).order_by(TickRun.finished_at.desc(), TickRun.id.desc()).limit(limit)).scalars())


def failed_ticks(db: Session, *, limit: int = 10) -> list[Any]:
    """The newest ticks that failed, with their errors."""
    return list(db.execute(select(TickRun).where(TickRun.ok.is_(False)).order_by(TickRun.finished_at.desc()).limit(limit)).scalars())


def queue_counts(db: Session) -> dict[str, int]:
    """Tick requests by status."""
    return {str(s): int(n) for s, n in db.execute(select(TickRequest.status, func.count()).group_by(TickRequest.status))}


def queued(db: Session, *, limit: int = 25) -> list[Any]:
    """The newest tick requests (any status), newest first: the queue and what it ran."""
    return list(db.execute(select(TickRequest).order_by(TickRequest.requested_at.desc()).limit(limit)).scalars())


@dataclass(frozen=True)
class Coverage:
    """Embeddable entries of one kind and how many the search index holds."""

    kind: str
    entries: int
    embedded: int


def embedding_coverage(db: Session, scope: Scope) -> list[Coverage]:
    """For arcs, lessons, decisions and signals: how many entries the search index holds a chunk of (by producer and key).

    An arc's key is its cluster id (frontmatter, else its file name), any
    other entry's its id, as ``brain_core.chunks.entry_doc`` keys them.
    """
    stem = func.regexp_replace(Entry.vault_path, r"^.*/|\.md$", "", "g")
    key = case((Entry.kind == "arc", func.coalesce(Entry.meta["cluster_id"].astext, stem)), else_=Entry.id)
    producer = case(*((Entry.kind == k, literal(p)) for k, p in PRODUCERS.items()))
    # One hash join against the distinct (producer, key) pairs: a probe per entry cost 110 ms at 20,000 entries.
    held = select(ContentEmbedding.producer, ContentEmbedding.key).where(ContentEmbedding.producer.in_(list(PRODUCERS.values()))).distinct().subquery()
    stmt = (
        select(Entry.kind, func.count(), func.count(held.c.key))
        .select_from(Entry)
        .outerjoin(held, and_(held.c.producer == producer, held.c.key == key))
        .where(Entry.kind.in_(list(PRODUCERS)))
    )
    cond = scope_condition(scope)
    if cond is not None:
        stmt = stmt.where(cond)
    found = {kind: (int(n), int(e)) for kind, n, e in db.execute(stmt.group_by(Entry.kind))}
    return [Coverage(kind, *found.get(kind, (0, 0))) for kind in PRODUCERS]


# -- signals --------------------------------------------------------------------------------------


def _signal_conditions(scope: Scope, now: dt.datetime) -> list[Any]:
    """Active and live signals (the feed's: not resolved, superseded, retracted or past ``valid_until``), the scope's."""
    conds: list[Any] = [Entry.kind == "signal", feed_repo.active_signal(), feed_repo.live(now)]
    cond = scope_condition(scope)
    if cond is not None:
        conds.append(or_(feed_repo.fleet_signal(), cond))
    return conds


def active_signals(db: Session, scope: Scope, *, now: dt.datetime, limit: int = 200) -> list[EntryRecord]:
    """The newest active signals the scope reads (fleet-wide and its projects')."""
    stmt = select(*_LIST_COLUMNS).where(*_signal_conditions(scope, now)).order_by(Entry.occurred_at.desc().nulls_last(), Entry.id).limit(limit)
    return _listed(db.execute(stmt).all())


def signal_counts(db: Session, scope: Scope, *, now: dt.datetime, bucket_days: Sequence[int]) -> list[tuple[bool, str, int, int]]:
    """Every active signal the scope reads, counted as (fleet-wide, severity, age bucket, n).

    The bucket is the index of the first of ``bucket_days`` the signal is
    younger than, else ``len(bucket_days)`` (undated signals count as the oldest).
    """
    fleet = or_(Entry.scope == "fleet", func.cardinality(Entry.projects) == 0)
    severity = func.lower(func.coalesce(func.nullif(func.trim(Entry.severity), ""), "info"))
    age = literal(now) - Entry.occurred_at
    bucket = case(*((age < dt.timedelta(days=d), i) for i, d in enumerate(bucket_days)), else_=len(bucket_days))
    stmt = select(fleet, severity, bucket, func.count()).where(*_signal_conditions(scope, now)).group_by(fleet, severity, bucket)
    return [(bool(f), str(s), int(b), int(n)) for f, s, b, n in db.execute(stmt)]
