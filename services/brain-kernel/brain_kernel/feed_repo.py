"""SQL repository of the read side: project feeds, project listings, signals, arcs.

Every query that serves ``GET /feed?project=``, ``GET /projects``,
``GET /arcs/{id}`` and the project filter of
``GET /vault/search`` lives here; the routes call these functions and the
pure ``brain_core.feed`` assembles the answer. Nothing here caches: each
request reads the index, so no replica can serve one project's rows to
another.

Membership (why the filter is exact) is the rule of ``brain_core.membership``
written in SQL: ``member`` is ``belongs`` (P's key in ``projects``, a
GIN-backed ``@>``, then the repo half) and ``key_unique_sql`` is
``key_is_unique``; tests/test_membership.py holds each pair equal over
generated rows.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import ColumnElement, DateTime, Integer, Text, and_, any_, bindparam, case, func, literal, or_, select, union_all
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.feed.project import ProjectMemory
from brain_core.membership import INACTIVE_SIGNAL_STATUSES, KnownProject, repo_matches, unique_keys
from brain_core.vault.records import ACTIVITY_KINDS
from brain_kernel.models import Entry, Project

MAX_RECENT = 200  # per kind of recent entry
MAX_SIGNALS = 20
RECENT_KINDS = ("lesson", "decision", "milestone")

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


def _record_at(row: Any, at: int) -> EntryRecord:
    """The record of a row whose ``_COLUMNS`` start at position ``at`` (positional access)."""
    (id_, kind, vault_path, title, content, project, projects, repo, scope, status, severity, heat, occurred_at, meta) = row[at : at + 14]
    return EntryRecord(
        id_,
        kind,
        vault_path,
        title,
        content,
        project,
        tuple(projects or ()),
        repo,
        scope,
        status,
        severity,
        float(heat or 0.0),
        occurred_at,
        dict(meta or {}),
    )


def _key_unique_query(key: Any) -> Any:
    return select((func.count() <= 1).label("ok")).where(
        (Project.key == key) | (any_(Project.aliases) == key), Project.repo.is_not(None) | Project.root.is_not(None)
    )


def key_unique_sql(key: Any) -> ColumnElement[bool]:
    """``membership.key_is_unique`` in SQL (at most one distinct project carries ``key``): one InitPlan per statement."""
    return _key_unique_query(key).scalar_subquery()


def member(key: Any, repo: Any, unique: bool | ColumnElement[bool], *, keys: Any = None, of: Any = Entry) -> ColumnElement[bool]:
    """``membership.belongs`` as a SQL condition: "this row belongs to project (key, repo)".

    ``key``/``repo`` are values or bind parameters (``repo`` None: P has no
    repo); ``unique`` is a Python bool or a SQL boolean the statement
    computes itself; ``keys`` is the ``[key]`` array when ``key`` is a bind
    parameter; ``of`` is the mapped table holding ``projects``, ``project``
    and ``repo`` (entries, or embedded chunks).
    """
    has_key = of.projects.contains(keys if keys is not None else [key])
    no_repo_for_key = or_(of.repo.is_(None), of.project.is_(None), of.project != key)
    if isinstance(unique, bool):
        if repo is not None:
            cond = or_(of.repo == repo, no_repo_for_key) if unique else of.repo == repo
        else:
            cond = no_repo_for_key if unique else of.repo.is_(None)
    elif repo is not None:
        cond = or_(of.repo == repo, and_(unique, no_repo_for_key))
    else:
        cond = or_(and_(unique, no_repo_for_key), of.repo.is_(None))
    return and_(has_key, cond)


def _fleet_signal() -> ColumnElement[bool]:
    return and_(Entry.kind == "signal", or_(Entry.scope == "fleet", func.cardinality(Entry.projects) == 0))


def _active_signal(table: Any = None) -> ColumnElement[bool]:
    status = table.c.status if table is not None else Entry.status
    return or_(status.is_(None), func.lower(status).not_in(sorted(INACTIVE_SIGNAL_STATUSES)))


@dataclass(frozen=True)
class ProjectRows:
    """What the project feed reads for P, P's last activity, and whether P's key is unique."""

    memory: ProjectMemory
    last_active: dt.datetime | None
    key_is_unique: bool = True


def _part(name: str, source: Any, where: list[Any], order: list[Any], limit: Any) -> Any:
    """One ranked, limited branch of the feed statement: (id, part, ord)."""
    rank = func.row_number().over(order_by=order).label("ord")
    return select(source.c.id, literal(name).label("part"), rank).where(*where).order_by(*order).limit(limit)


_P_KEY = bindparam("key", type_=Text)
_P_KEYS = bindparam("keys", type_=ARRAY(Text))
_P_REPO = bindparam("repo", type_=Text)
_P_SINCE = bindparam("since", type_=DateTime(timezone=True))
_P_TOP_N = bindparam("top_n", type_=Integer)


@lru_cache(maxsize=2)
def _project_statement(with_repo: bool) -> Any:
    """The project feed statement, built once per shape (with or without a repo).

    Only the SQL text is kept between requests; every value is a bind
    parameter, so nothing of one project's data can reach another's answer.
    """
    unique = select(_key_unique_query(_P_KEY).cte("uniq").c.ok).scalar_subquery()  # computed once, used twice
    mine = (
        select(Entry.id, Entry.kind, Entry.heat, Entry.occurred_at, Entry.scope, Entry.status)
        .where(member(_P_KEY, _P_REPO if with_repo else None, unique, keys=_P_KEYS))
        .cte("mine")
        .prefix_with("MATERIALIZED")
    )
    allt = Entry.__table__
    # Recent lessons, decisions and milestones: one budget per kind (a flood of lessons must
    # not push a project's decisions out), ranked within each kind; ``part`` is the kind.
    ranked = (
        select(mine.c.id, mine.c.kind, func.row_number().over(partition_by=mine.c.kind, order_by=[mine.c.occurred_at.desc(), mine.c.id]).label("ord"))
        .where(mine.c.kind.in_(RECENT_KINDS), mine.c.occurred_at >= _P_SINCE)
        .subquery("ranked")
    )
    recent = select(ranked.c.id, ranked.c.kind.label("part"), ranked.c.ord).where(ranked.c.ord <= MAX_RECENT)
    parts = union_all(
        _part("arc", mine, [mine.c.kind == "arc"], [mine.c.heat.desc(), mine.c.occurred_at.desc().nulls_last(), mine.c.id], _P_TOP_N),
        recent,
        _part("intent", mine, [mine.c.kind == "intent", mine.c.scope == "project"], [mine.c.occurred_at.desc().nulls_last(), mine.c.id], 1),
        _part(
            "own_signal",
            mine,
            [mine.c.kind == "signal", mine.c.scope == "project", _active_signal(mine), mine.c.occurred_at >= _P_SINCE],
            [mine.c.occurred_at.desc(), mine.c.id],
            MAX_SIGNALS,
        ),
        _part("last", mine, [mine.c.kind.in_(ACTIVITY_KINDS), mine.c.occurred_at.is_not(None)], [mine.c.occurred_at.desc(), mine.c.id], 1),
        _part(
            "fleet_signal",
            allt,
            [_fleet_signal(), _active_signal(), Entry.occurred_at >= _P_SINCE],
            [allt.c.occurred_at.desc(), allt.c.id],
            MAX_SIGNALS,
        ),
        # Inject blocks of no project (targeted ones are filtered by the feed), and P's own.
        _part("inject", allt, [allt.c.kind == "inject", or_(func.cardinality(allt.c.projects) == 0, allt.c.id.in_(select(mine.c.id)))], [allt.c.id], 200),
    ).subquery("picked")
    return (
        select(parts.c.part, parts.c.ord, unique.label("key_unique"), *_COLUMNS[:-1], _FEED_META)
        .join_from(parts, Entry, Entry.id == parts.c.id)
        .order_by(parts.c.part, parts.c.ord)
    )


_REQUEST_PARAMS = frozenset({"key", "keys", "repo", "since", "top_n"})
_PLACEHOLDER = re.compile(r"%\((\w+)\)s(::(?:VARCHAR|TEXT|INTEGER)\b)?")


def _sql_literal(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"cannot inline constant {value!r}")
    if isinstance(value, int):
        return str(value)
    return "'" + value.replace("'", "''").replace("%", "%%") + "'"  # %% : the driver's escape in pyformat SQL


@lru_cache(maxsize=8)
def _project_sql(dialect: Any, with_repo: bool) -> str:
    """The project feed statement as final SQL text: constants inline, request values as bind parameters.

    Rendered once per dialect and shape. The text is the same for every
    request, so the driver parses it once and prepares it (a statement with
    about fifty constant parameters re-rendered per request was too long for
    psycopg's query cache and cost a fifth of the request). Only the constants
    of this module are inlined (kinds, scopes, statuses, limits, labels);
    the five request values stay bind parameters.
    """
    placeholders: dict[str, Any] = {"key": "", "keys": [], "since": dt.datetime.now(dt.timezone.utc), "top_n": 1}
    if with_repo:
        placeholders["repo"] = ""
    state = _project_statement(with_repo).compile(dialect=dialect).construct_expanded_state(placeholders)

    def inline(match: re.Match[str]) -> str:
        # A constant goes in as a bare literal: Postgres types it from its context, and the
        # casts the dialect adds would make the text longer than psycopg's statement cache takes.
        name = match.group(1)
        return match.group(0) if name in _REQUEST_PARAMS else _sql_literal(state.parameters[name])

    return _PLACEHOLDER.sub(inline, state.statement)


# What the project feed reads of each row's metadata: an arc's cluster id, summary and
# region (its full frontmatter, with session signals, is several times larger), an
# intent's or inject block's whole metadata (few rows), nothing for the other kinds.
# Decoding every row's JSONB was a fifth of the statement's client-side cost.
_FEED_META = case(
    (Entry.kind == "arc", func.jsonb_build_object("cluster_id", Entry.meta["cluster_id"], "summary", Entry.meta["summary"], "region", Entry.meta["region"])),
    (Entry.kind.in_(("intent", "inject")), Entry.meta),
).label("meta")


def project_memory(
    session: Session,
    key: str,
    repo: str | None,
    *,
    top_n: int,
    since: dt.datetime,
) -> ProjectRows:
    """P's hot arcs, recent lessons/decisions/milestones, intent, signals; fleet signals; inject blocks.

    One statement, one round trip: P's rows are selected once (GIN ``@>`` on
    ``projects``, then the membership rule) into a materialized CTE of narrow
    columns; each feed section is a ranked, limited branch over it; only the
    picked rows are joined back for their text. Whether P's key is unique is
    an InitPlan of the same statement. Records carry only the metadata the
    feed reads (``_FEED_META``): an arc's cluster id, summary and region, an
    intent's or inject block's whole metadata, none for other kinds.
    """
    params: dict[str, Any] = {"key": key, "keys": [key], "since": since, "top_n": top_n}
    if repo is not None:
        params["repo"] = repo
    found: dict[str, list[EntryRecord]] = {}
    key_unique = True
    conn = session.connection()
    for row in conn.exec_driver_sql(_project_sql(conn.dialect, repo is not None), params).all():
        found.setdefault(row[0], []).append(_record_at(row, 3))
        key_unique = bool(row[2])
    last = found.get("last", [])
    memory = ProjectMemory(
        arcs=found.get("arc", []),
        lessons=found.get("lesson", []),
        decisions=found.get("decision", []),
        milestones=found.get("milestone", []),
        intent=(found.get("intent") or [None])[0],
        project_signals=found.get("own_signal", []),
        fleet_signals=found.get("fleet_signal", []),
        inject=found.get("inject", []),
    )
    return ProjectRows(memory=memory, last_active=last[0].occurred_at if last else None, key_is_unique=key_unique)


def fleet_signals(session: Session, *, since: dt.datetime) -> list[EntryRecord]:
    """Active fleet-wide signals since ``since``, newest first (what an unknown project still gets)."""
    stmt = (
        select(*_COLUMNS).where(_fleet_signal(), _active_signal(), Entry.occurred_at >= since).order_by(Entry.occurred_at.desc(), Entry.id).limit(MAX_SIGNALS)
    )
    return [_record_at(r, 0) for r in session.execute(stmt)]


def inject_blocks(session: Session) -> list[EntryRecord]:
    """Every indexed inject block of no project (the caller filters by target); a project's own blocks reach only it."""
    stmt = select(*_COLUMNS).where(Entry.kind == "inject", func.cardinality(Entry.projects) == 0).order_by(Entry.id).limit(200)
    return [_record_at(r, 0) for r in session.execute(stmt)]


def hot_arcs(session: Session, *, limit: int = 10) -> list[EntryRecord]:
    """The hottest live arcs of the whole fleet."""
    stmt = select(*_COLUMNS).where(Entry.kind == "arc").order_by(Entry.heat.desc(), Entry.occurred_at.desc().nulls_last(), Entry.id).limit(limit)
    return [_record_at(r, 0) for r in session.execute(stmt)]


def arc_by_cluster_id(session: Session, cluster_id: str) -> EntryRecord | None:
    """The live arc with this cluster id (frontmatter id, else file name), in clusters/ or a region folder."""
    stmt = (
        select(*_COLUMNS)
        .where(
            Entry.kind == "arc",
            or_(Entry.meta["cluster_id"].astext == cluster_id, Entry.vault_path.like(f"%/{_like(cluster_id)}.md")),
        )
        .order_by(Entry.vault_path)
        .limit(1)
    )
    row = session.execute(stmt).first()
    return _record_at(row, 0) if row is not None else None


def entries_of_kinds(session: Session, kinds: Sequence[str]) -> list[EntryRecord]:
    """Every indexed entry of the given kinds, by id (what ``brain embed`` embeds)."""
    stmt = select(*_COLUMNS).where(Entry.kind.in_(list(kinds))).order_by(Entry.id)
    return [_record_at(r, 0) for r in session.execute(stmt)]


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def arc_absorbing(session: Session, cluster_id: str) -> EntryRecord | None:
    """The live arc whose ``merged_from`` lists ``cluster_id`` (a merge recorded on the survivor)."""
    stmt = select(*_COLUMNS).where(Entry.kind == "arc", Entry.meta["merged_from"].contains([cluster_id])).order_by(Entry.vault_path).limit(1)
    row = session.execute(stmt).first()
    return _record_at(row, 0) if row is not None else None


def project_entries(session: Session, key: str, repo: str | None, *, prefix: str = "") -> list[EntryRecord]:
    """Every entry of P (optionally under a vault prefix): the candidates of a project-filtered search.

    Whether P's key is unique is part of the same statement, as in the feed's.
    """
    stmt = select(*_COLUMNS).where(member(key, repo, key_unique_sql(key)))
    if prefix:
        stmt = stmt.where(Entry.vault_path.like(_like(prefix.strip("/")) + "%"))
    return [_record_at(r, 0) for r in session.execute(stmt.order_by(Entry.vault_path, Entry.id))]


def foreign_paths(session: Session, paths: Sequence[str], ids: Iterable[str]) -> set[str]:
    """Of ``paths``, those that also hold entries other than ``ids`` (shared logs)."""
    if not paths:
        return set()
    stmt = select(Entry.vault_path).where(Entry.vault_path.in_(list(paths)), Entry.id.not_in(list(ids))).distinct()
    return set(session.scalars(stmt))


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
    """Every known project with counts by kind, using the feed's membership and uniqueness rules."""
    rows = list(session.scalars(select(Project).order_by(Project.id)))
    with_repo = {p.key for p in rows if p.repo}
    # A row with neither repo nor root only records that a key was mentioned; next to
    # a real repository of that key it is the same project, not a second one.
    projects = [p for p in rows if p.repo or p.root or p.key not in with_repo]
    unique = unique_keys(KnownProject(p.key, p.repo, p.root, tuple(p.aliases or ())) for p in projects)
    # One row per (entry, member key): unnest in the select list, then group.
    flat = select(func.unnest(Entry.projects).label("member_key"), Entry.repo, Entry.project, Entry.kind, Entry.occurred_at).subquery()
    is_primary = func.coalesce(flat.c.project == flat.c.member_key, False).label("is_primary")
    stmt = select(
        flat.c.member_key,
        flat.c.repo,
        is_primary,
        flat.c.kind,
        func.count().label("n"),
        func.max(flat.c.occurred_at).label("last"),
    ).group_by(flat.c.member_key, flat.c.repo, is_primary, flat.c.kind)
    groups_of: dict[str, list[Any]] = {}
    for g in session.execute(stmt):
        groups_of.setdefault(g.member_key, []).append(g)
    out: list[ProjectSummary] = []
    for p in projects:
        counts: dict[str, int] = {}
        last: dt.datetime | None = None
        for g in groups_of.get(p.key, ()):
            if not repo_matches(g.repo, bool(g.is_primary), p.repo, key_is_unique=unique.get(p.key, True)):
                continue
            counts[g.kind] = counts.get(g.kind, 0) + int(g.n)
            if g.kind in ACTIVITY_KINDS and g.last is not None and (last is None or g.last > last):
                last = g.last
        out.append(ProjectSummary(p.id, p.key, p.repo, sorted(p.aliases or []), counts, last or p.last_active))
    return out


# -- what the keeper reads back after its incremental refresh --------------------------------------


def count_of_kind(session: Session, kind: str) -> int:
    """How many entries of ``kind`` the index holds."""
    return int(session.scalar(select(func.count()).select_from(Entry).where(Entry.kind == kind)) or 0)


def recent_of_kind(session: Session, kind: str, *, since: dt.datetime, limit: int) -> list[EntryRecord]:
    """The newest entries of ``kind`` since ``since`` (``ix_entries_kind_occurred``)."""
    stmt = select(*_COLUMNS).where(Entry.kind == kind, Entry.occurred_at >= since).order_by(Entry.occurred_at.desc(), Entry.id.desc()).limit(limit)
    return [_record_at(r, 0) for r in session.execute(stmt)]


def top_arcs(session: Session, key: str, repo: str | None, *, limit: int) -> list[EntryRecord]:
    """P's hottest arcs by the feed's membership rule."""
    stmt = (
        select(*_COLUMNS)
        .where(Entry.kind == "arc", member(key, repo, key_unique_sql(key)))
        .order_by(Entry.heat.desc(), Entry.occurred_at.desc().nulls_last(), Entry.id)
        .limit(limit)
    )
    return [_record_at(r, 0) for r in session.execute(stmt)]


def arcs_created_on(session: Session, days: Sequence[str]) -> list[EntryRecord]:
    """The live arcs whose ``created`` falls on one of ``days`` (YYYY-MM-DD), for the dashboards."""
    stmt = select(*_COLUMNS).where(Entry.kind == "arc", func.left(Entry.meta["created"].astext, 10).in_(list(days))).order_by(Entry.id)
    return [_record_at(r, 0) for r in session.execute(stmt)]


@dataclass(frozen=True)
class ActiveProject:
    """A project with activity since a moment: id, key, repo, last activity."""

    id: str
    key: str
    repo: str | None
    last_active: dt.datetime | None


def active_projects(session: Session, *, since: dt.datetime) -> list[ActiveProject]:
    """Projects whose last activity is at or after ``since``; a key-only mention beside a real repository of that key is not one."""
    rows = list(session.execute(select(Project.id, Project.key, Project.repo, Project.root, Project.last_active).where(Project.last_active >= since)))
    with_repo = {key for key, repo in session.execute(select(Project.key, Project.repo).where(Project.repo.is_not(None)))}
    return [ActiveProject(i, k, r, at) for i, k, r, root, at in rows if r or root or k not in with_repo]
