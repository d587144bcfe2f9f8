"""SQL repository of the read side: project feeds, project listings, signals, arcs.

Every query that serves ``GET /feed?project=``, ``GET /projects``,
``GET /arcs/{id}`` and the project filter of
``GET /vault/search`` lives here; the routes call these functions and the
pure ``brain_core.feed`` assembles the answer. Nothing here caches: each
request reads the index, so no replica can serve one project's rows to
another.

Membership (why the filter is exact) is the rule of ``brain_core.membership``
written in SQL: ``member`` is ``belongs`` (P's key in ``projects``, a
GIN-backed ``@>``, then the repo half), ``key_unique_sql`` is
``key_is_unique`` and ``key_owned_sql`` is ``holds_unnamed`` with the pin
read from ``project_pins`` (the catalog's pins, revision 0010);
tests/test_membership.py holds each pair equal over generated rows.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import Boolean, ColumnElement, DateTime, Text, and_, any_, bindparam, case, false, func, literal_column, or_, select, text
from sqlalchemy.dialects.postgresql import ARRAY, array
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, aliased

from brain_core.entries import EntryRecord
from brain_core.feed.project import ProjectMemory
from brain_core.membership import INACTIVE_SIGNAL_STATUSES, KnownProject, holds_unnamed, repo_matches, unique_keys
from brain_core.vault.records import ACTIVITY_KINDS
from brain_kernel.db.models import Entry, Project, ProjectPin

log = logging.getLogger(__name__)

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


# Short aliases: the feed statement embeds these, and its text must stay within psycopg's statement cache.
_PR = aliased(Project, name="p")
_PIN = aliased(ProjectPin, name="n")


def _key_unique_query(key: Any) -> Any:
    return select((func.count() <= 1).label("ok")).where((_PR.key == key) | (any_(_PR.aliases) == key), _PR.repo.is_not(None) | _PR.root.is_not(None))


def key_unique_sql(key: Any) -> ColumnElement[bool]:
    """``membership.key_is_unique`` in SQL (at most one distinct project carries ``key``): one InitPlan per statement."""
    return _key_unique_query(key).scalar_subquery()


def _key_owned_query(key: Any, repo: Any) -> Any:
    # holds_unnamed: the pinned project when the key has a pin (pins are NOT NULL, so the
    # comparison is never NULL), else whether the key is unique.
    pinned = select((_PIN.repo == repo if repo is not None else false()).label("p")).where(_PIN.key == key).scalar_subquery()
    return select(func.coalesce(pinned, _key_unique_query(key).scalar_subquery()).label("ok"))


def key_owned_sql(key: Any, repo: Any) -> ColumnElement[bool]:
    """``membership.holds_unnamed`` in SQL for P = (key, repo), the pin read from ``project_pins``: ``member``'s ``unique``."""
    return _key_owned_query(key, repo).scalar_subquery()


def member(key: Any, repo: Any, unique: bool | ColumnElement[bool], *, keys: Any = None, of: Any = Entry) -> ColumnElement[bool]:
    """``membership.belongs`` as a SQL condition: "this row belongs to project (key, repo)".

    ``key``/``repo`` are values or bind parameters (``repo`` None: P has no
    repo); ``unique`` is whether P holds the key's entries that name no
    repo (``membership.holds_unnamed``: the key is unique, or pinned to P), a
    Python bool or a SQL boolean the statement computes itself
    (``key_owned_sql``); ``keys`` is the ``[key]`` array when ``key`` is a bind
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
    """What the project feed reads for P, P's last activity, and whether P holds its key's unnamed entries."""

    memory: ProjectMemory
    last_active: dt.datetime | None
    key_is_unique: bool = True  # membership.holds_unnamed: the key is unique, or pinned to P


def single_project(of: Any = Entry) -> ColumnElement[bool]:
    """Rows that list exactly their own project (almost every row): for them ``member`` is ``primary_member``.

    Written ``IS TRUE`` (never NULL, so the same rows) because that is the form
    the planner estimates from the expression statistics of revision 0008:
    guessed at 0.5 %, it priced the feed's ordered scans as full ones.
    """
    return (of.projects == array([of.project])).is_(True)


def other_projects(of: Any = Entry) -> ColumnElement[bool]:
    """Every other row that lists a project (merged arcs, a key that is not the row's own); a partial GIN index holds them."""
    return and_(of.projects != array([of.project]), func.cardinality(of.projects) > 0)


def primary_member(key: Any, repo: Any, unique: bool | ColumnElement[bool], *, of: Any = Entry) -> ColumnElement[bool]:
    """``member`` for a ``single_project`` row, without the array lookup: its project is P's key, then the repo half.

    With ``projects = [project]`` and ``project = key``, the row names a repo
    for the key exactly when it has one, so the repo half reduces to this;
    tests/test_membership.py holds ``single_project AND primary_member`` or
    ``other_projects AND member`` equal to ``belongs``.
    """
    if isinstance(unique, bool):
        if repo is not None:
            cond = or_(of.repo == repo, of.repo.is_(None)) if unique else of.repo == repo
        else:
            cond = of.repo.is_(None)
    elif repo is not None:
        # ``repo = R OR (unique AND repo IS NULL)``, as one expression the planner does not guess
        # at 0.5 % (two repos share a key at most): it prices ordered scans as the short reads they are.
        cond = func.coalesce(of.repo == repo, unique)
    else:
        cond = func.coalesce(of.repo.is_(None), false())  # the same, for a project with no repo of its own
    return and_(of.project == key, cond)


_P_KEY = bindparam("key", type_=Text)
_P_KEYS = bindparam("keys", type_=ARRAY(Text))
_P_REPO = bindparam("repo", type_=Text)
_P_SINCE = bindparam("since", type_=DateTime(timezone=True))
_REQUEST_PARAMS = frozenset({"key", "keys", "repo", "since", "top_n"})
_PLACEHOLDER = re.compile(r"%\((\w+)\)s(::(?:VARCHAR|TEXT(?:\[\])?|INTEGER)\b)?")
_UNIQUE = literal_column("(SELECT ok FROM u)", Boolean)  # P holds its key's unnamed entries (key_owned_sql): one InitPlan


def _sql_literal(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"cannot inline constant {value!r}")
    if isinstance(value, int):
        return str(value)
    return "'" + value.replace("'", "''").replace("%", "%%") + "'"  # %% : the driver's escape in pyformat SQL


def _render(expr: Any, dialect: Any) -> str:
    """One SQL fragment as final text: this module's constants inline, request values as bind parameters.

    A constant goes in as a bare literal (Postgres types it from its context;
    the casts the dialect adds would make the statement longer than
    psycopg's statement cache takes); a request value keeps its placeholder.
    """
    placeholders = {"key": "", "keys": [], "repo": "", "since": dt.datetime.now(dt.timezone.utc)}
    compiled = expr.compile(dialect=dialect)
    state = compiled.construct_expanded_state({k: v for k, v in placeholders.items() if k in compiled.binds})

    def inline(match: re.Match[str]) -> str:
        # Request values go in untyped (Postgres types them from their context, as it does
        # the constants), except ``keys``, the array ``@>`` needs typed.
        name = match.group(1)
        if name in _REQUEST_PARAMS:
            return match.group(0) if name == "keys" else f"%({name})s"
        return _sql_literal(state.parameters[name])

    return f"({_PLACEHOLDER.sub(inline, state.statement)})"


@lru_cache(maxsize=8)
def _project_sql(dialect: Any, with_repo: bool) -> str:
    """The project feed statement as final SQL text, rendered once per dialect and shape (with or without a repo).

    Each section reads only what it returns, through an index ordered for
    that read: P's ``single_project`` rows by ``project = key`` (the dated
    sections through a LATERAL over ``b``, one ordered scan per kind and
    limit; hot arcs by heat), plus ``o``, P's few other rows, selected by
    ``member`` through the partial GIN index; each section is the top of
    both, ranked. The text is the same for every request, so the driver
    parses and prepares it once; only the request's key, keys, repo, window
    and ``top_n`` are bind parameters, so nothing of one project's data can
    reach another's answer. The picked rows are joined back one primary-key
    read each (a LATERAL the planner cannot turn into a hash join over the
    whole table).
    """
    e = aliased(Entry, name="e")
    repo = _P_REPO if with_repo else None
    own = _render(and_(single_project(e), primary_member(_P_KEY, repo, _UNIQUE, of=e)), dialect)
    x = aliased(Entry, name="x")
    others = _render(and_(other_projects(x), member(_P_KEY, repo, _UNIQUE, keys=_P_KEYS, of=x)), dialect)
    active = {t: _render(_active_signal(Entry.__table__.alias(t)), dialect) for t in ("e", "o")}
    fleet = _render(and_(e.kind == "signal", or_(e.scope == "fleet", func.cardinality(e.projects) == 0)), dialect)
    signal = "(b.part <> 'own_signal' OR {t}.scope = 'project' AND {a})"
    windowed = [(kind, kind, MAX_RECENT) for kind in RECENT_KINDS] + [("own_signal", "signal", MAX_SIGNALS)]
    last = [("last", kind, 1) for kind in ACTIVITY_KINDS]
    rows = [f"('{p}', '{k}', {n}, %(since)s{'::timestamptz' if not i else ''})" for i, (p, k, n) in enumerate(windowed)]
    rows += [f"('{p}', '{k}', {n}, '-infinity')" for p, k, n in last]
    arc_order = "heat DESC, occurred_at DESC NULLS LAST, id"
    return f"""WITH u AS ({_render(_key_owned_query(_P_KEY, repo), dialect)}),
o AS MATERIALIZED (SELECT id, kind, heat, occurred_at, scope, status FROM entries x WHERE {others}),
b (part, kind, lim, since) AS (VALUES {", ".join(rows)}),
t AS (SELECT b.part, b.lim, x.id, x.occurred_at FROM b CROSS JOIN LATERAL (SELECT e.id, e.occurred_at FROM entries e WHERE e.kind = b.kind AND e.occurred_at >= b.since AND {own} AND {signal.format(t="e", a=active["e"])} ORDER BY e.occurred_at DESC, e.id LIMIT b.lim) x
 UNION ALL SELECT b.part, b.lim, o.id, o.occurred_at FROM b JOIN o ON o.kind = b.kind AND o.occurred_at >= b.since AND {signal.format(t="o", a=active["o"])}),
picked AS (SELECT id, part, ord FROM (SELECT id, part, lim, row_number() OVER (PARTITION BY part ORDER BY occurred_at DESC, id) AS ord FROM t) r WHERE ord <= lim
 UNION ALL (SELECT id, 'arc', row_number() OVER (ORDER BY {arc_order}) FROM ((SELECT e.id, e.heat, e.occurred_at FROM entries e WHERE e.kind = 'arc' AND {own} ORDER BY e.{arc_order.replace(", ", ", e.")} LIMIT %(top_n)s) UNION ALL SELECT id, heat, occurred_at FROM o WHERE kind = 'arc') a ORDER BY {arc_order} LIMIT %(top_n)s)
 UNION ALL (SELECT id, 'intent', 1 FROM (SELECT e.id, e.occurred_at FROM entries e WHERE e.kind = 'intent' AND e.scope = 'project' AND {own} UNION ALL SELECT id, occurred_at FROM o WHERE kind = 'intent' AND scope = 'project') i ORDER BY occurred_at DESC NULLS LAST, id LIMIT 1)
 UNION ALL (SELECT id, 'fleet_signal', row_number() OVER (ORDER BY occurred_at DESC, id) FROM entries e WHERE {fleet} AND {active["e"]} AND occurred_at >= %(since)s ORDER BY occurred_at DESC, id LIMIT {MAX_SIGNALS})
 UNION ALL (SELECT e.id, 'inject', row_number() OVER (ORDER BY e.id) FROM entries e WHERE e.kind = 'inject' AND (cardinality(e.projects) = 0 OR {own} OR e.id IN (SELECT id FROM o)) ORDER BY e.id LIMIT 200))
SELECT p.part, p.ord, (SELECT ok FROM u), {", ".join(f"e.{c.name}" for c in _COLUMNS[:-1])}, {_render(_feed_meta(e), dialect)}
FROM picked p CROSS JOIN LATERAL (SELECT * FROM entries e WHERE e.id = p.id LIMIT 1) e ORDER BY p.part, p.ord"""


# What the project feed reads of each row's metadata: an arc's cluster id, summary and
# region (its full frontmatter, with session signals, is several times larger), an
# intent's or inject block's whole metadata (few rows), nothing for the other kinds.
# Decoding every row's JSONB was a fifth of the statement's client-side cost.
def _feed_meta(of: Any = Entry) -> Any:
    return case(
        (of.kind == "arc", func.jsonb_build_object("cluster_id", of.meta["cluster_id"], "summary", of.meta["summary"], "region", of.meta["region"])),
        (of.kind.in_(("intent", "inject")), of.meta),
    )


def project_memory(
    session: Session,
    key: str,
    repo: str | None,
    *,
    top_n: int,
    since: dt.datetime,
) -> ProjectRows:
    """P's hot arcs, recent lessons/decisions/milestones, intent, signals; fleet signals; inject blocks.

    One statement, one round trip (``_project_sql``): each section reads at
    most its own limit of P's rows through an ordered index (a hot project of
    100,000 rows costs what a small one does), and only the picked rows are
    joined back for their text. Whether P holds its key's unnamed entries
    (unique key, or a pin to P) is an InitPlan of
    the same statement. Records carry only the metadata the feed reads
    (``_feed_meta``): an arc's cluster id, summary and region, an intent's or
    inject block's whole metadata, none for other kinds.
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
            or_(Entry.meta["cluster_id"].astext == cluster_id, Entry.vault_path.like(f"%/{escape_like(cluster_id)}.md")),
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


def escape_like(text: str) -> str:
    """``text`` with the LIKE wildcards (and the escape character) escaped, to match it literally in a pattern."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def arc_absorbing(session: Session, cluster_id: str) -> EntryRecord | None:
    """The live arc whose ``merged_from`` lists ``cluster_id`` (a merge recorded on the survivor)."""
    stmt = select(*_COLUMNS).where(Entry.kind == "arc", Entry.meta["merged_from"].contains([cluster_id])).order_by(Entry.vault_path).limit(1)
    row = session.execute(stmt).first()
    return _record_at(row, 0) if row is not None else None


def signals_of_source(session: Session, source: str) -> list[EntryRecord]:
    """The indexed signals whose ``source`` is exactly ``source`` (what ESCALATE and CLEAR act on)."""
    stmt = select(*_COLUMNS).where(Entry.kind == "signal", Entry.meta["source"].astext == source).order_by(Entry.vault_path, Entry.id)
    return [_record_at(r, 0) for r in session.execute(stmt)]


def project_entries(session: Session, key: str, repo: str | None, *, prefix: str = "") -> list[EntryRecord]:
    """Every entry of P (optionally under a vault prefix): the candidates of a project-filtered search.

    Whether P holds its key's unnamed entries is part of the same statement, as in the feed's.
    """
    stmt = select(*_COLUMNS).where(member(key, repo, key_owned_sql(key, repo)))
    if prefix:
        stmt = stmt.where(Entry.vault_path.like(escape_like(prefix.strip("/")) + "%"))
    return [_record_at(r, 0) for r in session.execute(stmt.order_by(Entry.vault_path, Entry.id))]


def records_at(session: Session, paths: Sequence[str] | None, *, prefix: str = "") -> list[EntryRecord]:
    """The entries indexed at ``paths`` (or, with None, at every path under ``prefix``): what a scope check reads."""
    stmt = select(*_COLUMNS)
    if paths is not None:
        if not paths:
            return []
        stmt = stmt.where(Entry.vault_path.in_(list(paths)))
    elif prefix:
        stmt = stmt.where(Entry.vault_path.like(escape_like(prefix.strip("/")) + "%"))
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
    """Every known project with counts by kind and last activity, using the feed's membership and uniqueness rules.

    Read from ``project_counts``, the deltas the triggers on ``entries`` keep
    (revision 0008), summed per (member key, repo, primary, kind) and matched
    to each project by ``repo_matches`` (with ``holds_unnamed``, the catalog's
    pins included): a few rows per project, whatever the
    history. A group's last activity is the newest ``occurred_at`` its rows
    brought, unless a removal took away one at least as new; only then is it
    read from the entries (``_group_last``), and the deltas are folded so the
    next read need not.
    """
    rows = list(session.scalars(select(Project).order_by(Project.id)))
    with_repo = {p.key for p in rows if p.repo}
    # A row with neither repo nor root only records that a key was mentioned; next to
    # a real repository of that key it is the same project, not a second one.
    projects = [p for p in rows if p.repo or p.root or p.key not in with_repo]
    unique = unique_keys(KnownProject(p.key, p.repo, p.root, tuple(p.aliases or ())) for p in projects)
    pins: dict[str, str] = dict(session.execute(select(ProjectPin.key, ProjectPin.repo)).all())
    groups_of: dict[str, list[_Group]] = {}
    deltas = dirty = 0
    for member_key, repo, is_primary, kind, n, count, last, gone in session.execute(text(_COUNT_GROUPS)):
        deltas += count
        if _is_dirty(last, gone):
            dirty += 1
            last = _group_last(session, member_key, repo, is_primary, kind)
        groups_of.setdefault(member_key, []).append(_Group(repo, is_primary, kind, n, last))
    if dirty or deltas > 2 * sum(len(v) for v in groups_of.values()) + COMPACT_AFTER_DELTAS:
        _compact_when_autocommit(session)
    out: list[ProjectSummary] = []
    for p in projects:
        counts: dict[str, int] = {}
        last_active: dt.datetime | None = None
        for g in groups_of.get(p.key, ()):
            held = holds_unnamed(p.repo, key_is_unique=unique.get(p.key, True), pin=pins.get(p.key))
            if not repo_matches(g.repo, g.is_primary, p.repo, key_is_unique=held):
                continue
            counts[g.kind] = counts.get(g.kind, 0) + g.n
            if g.kind in ACTIVITY_KINDS and g.last is not None and (last_active is None or g.last > last_active):
                last_active = g.last
        out.append(ProjectSummary(p.id, p.key, p.repo, sorted(p.aliases or []), counts, last_active or p.last_active))
    return out


@dataclass(frozen=True)
class _Group:
    """The entries of one (member key, repo, primary, kind): how many, and the newest ``occurred_at``."""

    repo: str | None
    is_primary: bool
    kind: str
    n: int
    last: dt.datetime | None


COMPACT_AFTER_DELTAS = 1000  # delta rows beyond twice the groups before a read folds them
_COUNT_GROUPS = (
    "SELECT member_key, repo, is_primary, kind, sum(n)::bigint, count(*), max(last), max(gone) FROM project_counts "
    "GROUP BY member_key, repo, is_primary, kind HAVING sum(n) <> 0"
)
_FOLD = """WITH folded AS (DELETE FROM project_counts RETURNING member_key, repo, is_primary, kind, n, last, gone)
INSERT INTO project_counts (member_key, repo, is_primary, kind, n, last, gone)
SELECT member_key, repo, is_primary, kind, sum(n), max(last), CASE WHEN max(gone) >= max(last) THEN max(gone) END FROM folded GROUP BY member_key, repo, is_primary, kind HAVING sum(n) <> 0
RETURNING id, member_key, repo, is_primary, kind, last, gone"""


def _is_dirty(last: dt.datetime | None, gone: dt.datetime | None) -> bool:
    """A removal took away a row at least as new as the newest one added: the newest left must be read."""
    return last is not None and gone is not None and gone >= last


def _group_last(session: Session, key: str, repo: str | None, is_primary: bool, kind: str) -> dt.datetime | None:
    """The newest ``occurred_at`` of one group's rows, read from the entries with its values inline (a plan for them)."""
    conds = [
        Entry.kind == kind,
        Entry.projects.contains([key]),
        Entry.occurred_at.is_not(None),
        Entry.repo == repo if repo is not None else Entry.repo.is_(None),
        Entry.project == key if is_primary else or_(Entry.project.is_(None), Entry.project != key),
    ]
    stmt = select(Entry.occurred_at).where(*conds).order_by(Entry.occurred_at.desc()).limit(1)
    conn = session.connection()
    return conn.exec_driver_sql(str(stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True})).replace("%", "%%")).scalar()


def compact_project_counts(session: Session) -> None:
    """Fold ``project_counts`` into one row per group and settle the last activity of groups whose newest row went.

    The fold is one statement over the rows committed before it, so
    concurrent writers (which only insert) and readers (which sum) never see
    a count change, and two folds at once cannot count a row twice (a row
    another one deleted is skipped). A group's newest row is then read after
    the fold, so it is at least as recent as every delta folded. ``GET
    /projects`` folds when the deltas pile up or a group's newest row was
    removed; a keeper tick or a reindex may call this too.
    """
    for row_id, key, repo, is_primary, kind, last, gone in session.execute(text(_FOLD)).all():
        if _is_dirty(last, gone):
            exact = _group_last(session, key, repo, is_primary, kind)
            session.execute(text("UPDATE project_counts SET last = :last, gone = NULL WHERE id = :id"), {"last": exact, "id": row_id})


def _compact_when_autocommit(session: Session) -> None:
    """Fold the deltas from a read path, only on an autocommit session (each statement commits alone; a refusal changes nothing)."""
    if session.connection().get_execution_options().get("isolation_level") != "AUTOCOMMIT":
        return
    try:
        compact_project_counts(session)
    except DBAPIError as exc:  # a read-only role: the sums stay exact, only slower
        log.warning("project counts not folded: %s", exc.orig)


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
        .where(Entry.kind == "arc", member(key, repo, key_owned_sql(key, repo)))
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
