"""SQL repository of the read side: project feeds, project listings, signals, arcs.

Every query that serves ``GET /feed?project=``, ``GET /projects``,
``GET /signal``, ``GET /arcs/{id}`` and the project filter of
``GET /vault/search`` lives here; the routes call these functions and the
pure ``brain_core.feed`` assembles the answer. Nothing here caches: each
request reads the index, so no replica can serve one project's rows to
another.

Membership rule (why the filter is exact): an entry belongs to project P =
(key, repo) when P's key is in the entry's ``projects`` (a GIN-backed ``@>``)
and either the entry's repo is P's repo, or the entry names no repo for that
key (no repo at all, or the key is a secondary project of a merged arc) and
P's key is unique across known repositories. A key shared by two
repositories therefore only ever matches by slug: an ``api`` lesson with no
repo reaches neither ``org1/api`` nor ``org2/api``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, any_, func, or_, select
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.feed import INACTIVE_SIGNAL_STATUSES, ProjectMemory
from brain_kernel.models import Entry, Project

MAX_RECENT = 200
MAX_SIGNALS = 20
ACTIVITY_KINDS = ("arc", "lesson", "decision", "signal", "milestone")

_COLUMNS = (
    Entry.id,
    Entry.kind,
    Entry.vault_path,
    Entry.title,
    Entry.content,
    Entry.project,
    Entry.projects,
    Entry.repo,
    Entry.scope,
    Entry.status,
    Entry.severity,
    Entry.heat,
    Entry.occurred_at,
    Entry.meta,
)


def _record(row: Any) -> EntryRecord:
    return EntryRecord(
        id=row.id,
        kind=row.kind,
        vault_path=row.vault_path,
        title=row.title,
        content=row.content,
        project=row.project,
        projects=tuple(row.projects or ()),
        repo=row.repo,
        scope=row.scope,
        status=row.status,
        severity=row.severity,
        heat=float(row.heat or 0.0),
        occurred_at=row.occurred_at,
        meta=dict(row.meta or {}),
    )


def key_is_unique(session: Session, key: str) -> bool:
    """True unless two or more distinct repositories share ``key`` (as key or alias)."""
    stmt = select(func.count(func.distinct(Project.repo))).where(
        ((Project.key == key) | (any_(Project.aliases) == key)) & Project.repo.is_not(None)
    )
    return (session.scalar(stmt) or 0) <= 1


def member(key: str, repo: str | None, unique: bool) -> ColumnElement[bool]:
    """The SQL condition "this entry belongs to project (key, repo)" (see the module docstring)."""
    has_key = Entry.projects.contains([key])
    no_repo_for_key = or_(Entry.repo.is_(None), Entry.project.is_(None), Entry.project != key)
    if repo:
        cond = or_(Entry.repo == repo, no_repo_for_key) if unique else Entry.repo == repo
    else:
        cond = no_repo_for_key if unique else Entry.repo.is_(None)
    return and_(has_key, cond)


def _fleet_signal() -> ColumnElement[bool]:
    return and_(Entry.kind == "signal", or_(Entry.scope == "fleet", func.cardinality(Entry.projects) == 0))


def _active_signal() -> ColumnElement[bool]:
    return or_(Entry.status.is_(None), func.lower(Entry.status).not_in(sorted(INACTIVE_SIGNAL_STATUSES)))


@dataclass(frozen=True)
class ProjectRows:
    """What the project feed reads for P, plus P's last activity from its entries."""

    memory: ProjectMemory
    last_active: dt.datetime | None


def project_memory(
    session: Session,
    key: str,
    repo: str | None,
    *,
    unique: bool,
    top_n: int,
    since: dt.datetime,
) -> ProjectRows:
    """P's hot arcs, recent lessons/decisions/milestones, intent, signals; fleet signals; inject blocks."""
    mine = member(key, repo, unique)
    arcs = select(*_COLUMNS).where(Entry.kind == "arc", mine).order_by(
        Entry.heat.desc(), Entry.occurred_at.desc().nulls_last(), Entry.id
    ).limit(top_n)
    recent = (
        select(*_COLUMNS)
        .where(Entry.kind.in_(("lesson", "decision", "milestone")), mine, Entry.occurred_at >= since)
        .order_by(Entry.occurred_at.desc(), Entry.id)
        .limit(MAX_RECENT * 3)
    )
    intent = select(*_COLUMNS).where(Entry.kind == "intent", Entry.scope == "project", mine).order_by(
        Entry.occurred_at.desc().nulls_last(), Entry.id
    ).limit(1)
    own_signals = (
        select(*_COLUMNS)
        .where(Entry.kind == "signal", Entry.scope == "project", mine, _active_signal(), Entry.occurred_at >= since)
        .order_by(Entry.occurred_at.desc(), Entry.id)
        .limit(MAX_SIGNALS)
    )
    fleet_signals = (
        select(*_COLUMNS)
        .where(_fleet_signal(), _active_signal(), Entry.occurred_at >= since)
        .order_by(Entry.occurred_at.desc(), Entry.id)
        .limit(MAX_SIGNALS)
    )
    inject = select(*_COLUMNS).where(Entry.kind == "inject").order_by(Entry.id).limit(200)
    last = select(func.max(Entry.occurred_at)).where(Entry.kind.in_(ACTIVITY_KINDS), mine)

    arc_rows = [_record(r) for r in session.execute(arcs)]
    recent_rows = [_record(r) for r in session.execute(recent)]
    intent_row = session.execute(intent).first()
    memory = ProjectMemory(
        arcs=arc_rows,
        lessons=[r for r in recent_rows if r.kind == "lesson"][:MAX_RECENT],
        decisions=[r for r in recent_rows if r.kind == "decision"][:MAX_RECENT],
        milestones=[r for r in recent_rows if r.kind == "milestone"][:MAX_RECENT],
        intent=_record(intent_row) if intent_row is not None else None,
        project_signals=[_record(r) for r in session.execute(own_signals)],
        fleet_signals=[_record(r) for r in session.execute(fleet_signals)],
        inject=[_record(r) for r in session.execute(inject)],
    )
    return ProjectRows(memory=memory, last_active=session.scalar(last))


def fleet_signals(session: Session, *, since: dt.datetime) -> list[EntryRecord]:
    """Active fleet-wide signals since ``since``, newest first (what an unknown project still gets)."""
    stmt = (
        select(*_COLUMNS)
        .where(_fleet_signal(), _active_signal(), Entry.occurred_at >= since)
        .order_by(Entry.occurred_at.desc(), Entry.id)
        .limit(MAX_SIGNALS)
    )
    return [_record(r) for r in session.execute(stmt)]


def inject_blocks(session: Session) -> list[EntryRecord]:
    """Every indexed inject block (the caller filters by target)."""
    return [_record(r) for r in session.execute(select(*_COLUMNS).where(Entry.kind == "inject").order_by(Entry.id).limit(200))]


def hot_arcs(session: Session, *, limit: int = 10) -> list[EntryRecord]:
    """The hottest live arcs of the whole fleet."""
    stmt = select(*_COLUMNS).where(Entry.kind == "arc").order_by(
        Entry.heat.desc(), Entry.occurred_at.desc().nulls_last(), Entry.id
    ).limit(limit)
    return [_record(r) for r in session.execute(stmt)]


def latest_signal(session: Session) -> EntryRecord | None:
    """The newest active signal of any scope (what ``GET /signal`` reports)."""
    stmt = (
        select(*_COLUMNS)
        .where(Entry.kind == "signal", _active_signal())
        .order_by(Entry.occurred_at.desc().nulls_last(), Entry.created_at.desc(), Entry.id.desc())
        .limit(1)
    )
    row = session.execute(stmt).first()
    return _record(row) if row is not None else None


def arc_by_cluster_id(session: Session, cluster_id: str) -> EntryRecord | None:
    """The live arc with this cluster id (frontmatter id, else file name)."""
    stmt = (
        select(*_COLUMNS)
        .where(
            Entry.kind == "arc",
            or_(Entry.meta["cluster_id"].astext == cluster_id, Entry.vault_path.like(f"clusters/%/{_like(cluster_id)}.md")),
        )
        .order_by(Entry.vault_path)
        .limit(1)
    )
    row = session.execute(stmt).first()
    return _record(row) if row is not None else None


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def arc_absorbing(session: Session, cluster_id: str) -> EntryRecord | None:
    """The live arc whose ``merged_from`` lists ``cluster_id`` (a merge recorded on the survivor)."""
    stmt = (
        select(*_COLUMNS)
        .where(Entry.kind == "arc", Entry.meta["merged_from"].contains([cluster_id]))
        .order_by(Entry.vault_path)
        .limit(1)
    )
    row = session.execute(stmt).first()
    return _record(row) if row is not None else None


def project_entries(session: Session, key: str, repo: str | None, *, unique: bool, prefix: str = "") -> list[EntryRecord]:
    """Every entry of P (optionally under a vault prefix): the candidates of a project-filtered search."""
    stmt = select(*_COLUMNS).where(member(key, repo, unique))
    if prefix:
        stmt = stmt.where(Entry.vault_path.like(_like(prefix.strip("/")) + "%"))
    return [_record(r) for r in session.execute(stmt.order_by(Entry.vault_path, Entry.id))]


def foreign_paths(session: Session, paths: Sequence[str], ids: Iterable[str]) -> set[str]:
    """Of ``paths``, those that also hold entries other than ``ids`` (shared logs)."""
    if not paths:
        return set()
    stmt = select(Entry.vault_path).where(Entry.vault_path.in_(list(paths)), Entry.id.not_in(list(ids))).distinct()
    return set(session.scalars(stmt))


def _belongs(entry_repo: str | None, is_primary: bool, repo: str | None, unique: bool) -> bool:
    """``member`` evaluated in Python for one (entry repo, primary?) group of a key."""
    no_repo_for_key = entry_repo is None or not is_primary
    if repo:
        return entry_repo == repo or (unique and no_repo_for_key)
    return no_repo_for_key if unique else entry_repo is None


@dataclass(frozen=True)
class ProjectSummary:
    """One known project with its entry counts by kind and its last activity."""

    id: str
    key: str
    repo: str | None
    aliases: list[str]
    counts: dict[str, int]
    last_active: dt.datetime | None


def list_projects(session: Session) -> list[ProjectSummary]:
    """Every known project with counts by kind, using the same membership rule as the feed."""
    rows = list(session.scalars(select(Project).order_by(Project.id)))
    with_repo = {p.key for p in rows if p.repo}
    # A row with neither repo nor root only records that a key was mentioned; next to
    # a real repository of that key it is the same project, not a second one.
    projects = [p for p in rows if p.repo or p.root or p.key not in with_repo]
    repos_per_key: dict[str, set[str]] = {}
    for p in projects:
        for k in {p.key, *(p.aliases or [])}:
            if p.repo:
                repos_per_key.setdefault(k, set()).add(p.repo)
    # One row per (entry, member key): unnest in the select list, then group.
    flat = select(
        func.unnest(Entry.projects).label("member_key"), Entry.repo, Entry.project, Entry.kind, Entry.occurred_at
    ).subquery()
    is_primary = func.coalesce(flat.c.project == flat.c.member_key, False).label("is_primary")
    stmt = select(
        flat.c.member_key,
        flat.c.repo,
        is_primary,
        flat.c.kind,
        func.count().label("n"),
        func.max(flat.c.occurred_at).label("last"),
    ).group_by(flat.c.member_key, flat.c.repo, is_primary, flat.c.kind)
    groups = session.execute(stmt).all()
    out: list[ProjectSummary] = []
    for p in projects:
        unique = len(repos_per_key.get(p.key, set())) <= 1
        counts: dict[str, int] = {}
        last: dt.datetime | None = None
        for g in groups:
            if g.member_key != p.key or not _belongs(g.repo, bool(g.is_primary), p.repo, unique):
                continue
            counts[g.kind] = counts.get(g.kind, 0) + int(g.n)
            if g.kind in ACTIVITY_KINDS and g.last is not None and (last is None or g.last > last):
                last = g.last
        out.append(ProjectSummary(p.id, p.key, p.repo, sorted(p.aliases or []), counts, last or p.last_active))
    return out
