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
tests/kernel/test_membership.py holds each pair equal over generated rows. The
project feed is one statement of SQL text (``PROJECT_SQL``, ADR 0022) that
writes the same rule as ``FEED_RULES``; tests/kernel/test_reads_at_scale.py holds
those equal to ``belongs`` too.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, any_, false, func, or_, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, aliased

from brain_core.chunks import PRODUCERS
from brain_core.entries import EntryRecord
from brain_core.feed.project import ProjectMemory
from brain_core.membership import INACTIVE_SIGNAL_STATUSES, KnownProject, holds_unnamed, repo_matches, unique_keys
from brain_core.vault.records import ACTIVITY_KINDS
from brain_kernel.curation.states import live_sql, now_text
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


def key_unique_sql(key: Any) -> ColumnElement[bool]:
    """``membership.key_is_unique`` in SQL (at most one distinct project carries ``key``): one InitPlan per statement."""
    return (
        select(func.count() <= 1)
        .where((Project.key == key) | (any_(Project.aliases) == key), Project.repo.is_not(None) | Project.root.is_not(None))
        .scalar_subquery()
    )


def key_owned_sql(key: Any, repo: Any) -> ColumnElement[bool]:
    """``membership.holds_unnamed`` in SQL for P = (key, repo), the pin read from ``project_pins``: ``member``'s ``unique``
    (``membership.owns_key``: P's repository carries its key even before it is known)."""
    # The pinned project when the key has a pin (pins are NOT NULL, so the comparison is never NULL), else whether the key is P's alone.
    pinned = select(ProjectPin.repo == repo if repo is not None else false()).where(ProjectPin.key == key).scalar_subquery()
    if repo is None:
        return func.coalesce(pinned, key_unique_sql(key))
    others = (
        select(func.count() == 0)
        .where(
            (Project.key == key) | (any_(Project.aliases) == key), Project.repo.is_not(None) | Project.root.is_not(None), Project.repo.is_distinct_from(repo)
        )
        .scalar_subquery()
    )
    return func.coalesce(pinned, others)


def member(key: Any, repo: Any, unique: bool | ColumnElement[bool], *, of: Any = Entry) -> ColumnElement[bool]:
    """``membership.belongs`` as a SQL condition: "this row belongs to project (key, repo)".

    ``key``/``repo`` are values (``repo`` None: P has no repo); ``unique`` is
    whether P holds the key's entries that name no repo
    (``membership.holds_unnamed``: the key is unique, or pinned to P), a
    Python bool or a SQL boolean the statement computes itself
    (``key_owned_sql``); ``of`` is the mapped table holding ``projects``,
    ``project`` and ``repo`` (entries, or embedded chunks).
    """
    has_key = of.projects.contains([key])
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


def fleet_signal() -> ColumnElement[bool]:
    return and_(Entry.kind == "signal", or_(Entry.scope == "fleet", func.cardinality(Entry.projects) == 0))


def active_signal() -> ColumnElement[bool]:
    return or_(Entry.status.is_(None), func.lower(Entry.status).not_in(sorted(INACTIVE_SIGNAL_STATUSES)))


@dataclass(frozen=True)
class ProjectRows:
    """What the project feed reads for P, P's last activity, and whether P holds its key's unnamed entries."""

    memory: ProjectMemory
    last_active: dt.datetime | None
    key_is_unique: bool = True  # membership.holds_unnamed: the key is unique, or pinned to P


# -- the project feed: one statement of SQL text, run through the driver (ADR 0022) -----------------------------


@dataclass(frozen=True)
class FeedRule:
    """The membership rule as the feed statement writes it for P, with a repo or without (SQL text over ``entries e``).

    ``held`` is ``membership.holds_unnamed`` (``key_owned_sql``'s text), which
    the statement computes once as ``u.ok``. P's rows are split as the indexes
    hold them: ``own``, rows that list exactly their own project (almost every
    row), read by ``project = key`` through ordered btrees; ``other``, every
    other row that lists a project (merged arcs), read through a partial GIN
    index. tests/kernel/test_reads_at_scale.py holds ``own OR other`` equal to
    ``belongs`` over generated rows, and never both.
    """

    held: str
    own: str
    other: str


_KEY_UNIQUE = "(SELECT count(*) <= 1 FROM projects p WHERE (p.key = %(key)s OR %(key)s = ANY (p.aliases)) AND (p.repo IS NOT NULL OR p.root IS NOT NULL))"
# A row listing exactly its own project is written ``IS TRUE`` (never NULL, so the same rows) because that is the
# form the planner estimates from revision 0008's expression statistics: guessed at 0.5 %, it priced the ordered
# scans as full ones. With ``project = key`` the row names a repo for the key exactly when it has one, so ``member``'s
# repo half reduces to one coalesce, which the planner does not guess at 0.5 % either (two repos share a key at most).
_SINGLE = "(e.projects = ARRAY[e.project]) IS TRUE AND e.project = %(key)s"
_OTHER = "e.projects <> ARRAY[e.project] AND cardinality(e.projects) > 0 AND e.projects @> %(keys)s::text[]"
_NO_REPO_FOR_KEY = "(e.repo IS NULL OR e.project IS NULL OR e.project <> %(key)s)"
FEED_RULES = {
    True: FeedRule(
        held=f"coalesce((SELECT n.repo = %(repo)s FROM project_pins n WHERE n.key = %(key)s), {_KEY_UNIQUE})",
        own=f"{_SINGLE} AND coalesce(e.repo = %(repo)s, (SELECT ok FROM u))",
        other=f"{_OTHER} AND (e.repo = %(repo)s OR (SELECT ok FROM u) AND {_NO_REPO_FOR_KEY})",
    ),
    False: FeedRule(
        held=f"coalesce((SELECT false FROM project_pins n WHERE n.key = %(key)s), {_KEY_UNIQUE})",
        own=f"{_SINGLE} AND coalesce(e.repo IS NULL, false)",
        other=f"{_OTHER} AND ((SELECT ok FROM u) AND {_NO_REPO_FOR_KEY} OR e.repo IS NULL)",
    ),
}


def _project_sql(with_repo: bool) -> str:
    """The project feed statement for P with a repo or without: the same text for every request.

    Each section reads only what it returns, through an index ordered for
    that read: P's ``own`` rows by ``project = key`` (the dated sections
    through a LATERAL over ``b``, one ordered scan per kind and limit; hot
    arcs by heat), plus ``o``, P's few ``other`` rows; each section is the
    top of both, ranked. Only the request's key, keys, repo, window and
    ``top_n`` are bind parameters, so the driver parses and prepares the text
    once and nothing of one project's data can reach another's answer. The moment
    (``now``) is bound too: superseded, retracted and expired entries leave the
    windowed sections and the fleet signals (``entry_live``, ADR 0048). The
    picked rows are joined back one primary-key read each (a LATERAL the
    planner cannot turn into a hash join over the whole table). Records carry
    only the metadata the feed reads: an intent's or inject block's whole
    metadata; for the other kinds an arc's cluster id, summary, region and
    worktrees and an entry's worktree (the memory block ranks by them, ADR
    0040), null where a row has none (an arc's full frontmatter, with session
    signals, is several times larger; decoding every row's JSONB was a fifth
    of the statement's client-side cost).
    """
    rule = FEED_RULES[with_repo]
    own = rule.own
    inactive = ",".join(f"'{s}'" for s in sorted(INACTIVE_SIGNAL_STATUSES))
    live = live_sql("e", "%(now)s")  # superseded, retracted and expired entries leave the feed (ADR 0048)

    def active(t: str) -> str:  # ``_active_signal``
        return f"({t}.status IS NULL OR lower({t}.status) NOT IN ({inactive}))"

    def signal(t: str) -> str:  # a row of a windowed section: for the project's signals, an active one of scope 'project'
        return f"(b.part <> 'own_signal' OR {t}.scope = 'project' AND {active(t)})"

    windows = [(kind, kind, MAX_RECENT) for kind in RECENT_KINDS] + [("own_signal", "signal", MAX_SIGNALS)]
    rows = [f"('{p}','{k}',{n},%(since)s{'::timestamptz' if not i else ''})" for i, (p, k, n) in enumerate(windows)]
    rows += [f"('last','{k}',1,'-infinity')" for k in ACTIVITY_KINDS]
    arc_order = "heat DESC, occurred_at DESC NULLS LAST, id"
    # Not to exceed 4,096 characters: psycopg parses a longer text anew on every execution. The inject blocks
    # are the newest 200 and need no rank here: the feed ranks them (``reaching_blocks``, ADR 0070).
    return f"""WITH u (ok) AS (SELECT {rule.held}),
o AS MATERIALIZED (SELECT id, kind, heat, occurred_at, scope, status FROM entries e WHERE {rule.other} AND {live}),
b (part, kind, lim, since) AS (VALUES {",".join(rows)}),
t AS (SELECT b.part, b.lim, x.id, x.occurred_at FROM b CROSS JOIN LATERAL (SELECT e.id, e.occurred_at FROM entries e
  WHERE e.kind = b.kind AND e.occurred_at >= b.since AND {own} AND {signal("e")} AND {live} ORDER BY e.occurred_at DESC, e.id LIMIT b.lim) x
 UNION ALL SELECT b.part, b.lim, o.id, o.occurred_at FROM b JOIN o ON o.kind = b.kind AND o.occurred_at >= b.since AND {signal("o")}),
picked AS (SELECT id, part, ord FROM (SELECT id, part, lim, row_number() OVER (PARTITION BY part ORDER BY occurred_at DESC, id) AS ord FROM t) r WHERE ord <= lim
 UNION ALL (SELECT id, 'arc', row_number() OVER (ORDER BY {arc_order}) FROM ((SELECT e.id, e.heat, e.occurred_at FROM entries e WHERE e.kind = 'arc' AND {own}
  ORDER BY e.heat DESC, e.occurred_at DESC NULLS LAST, e.id LIMIT %(top_n)s) UNION ALL SELECT id, heat, occurred_at FROM o WHERE kind = 'arc') a ORDER BY {arc_order} LIMIT %(top_n)s)
 UNION ALL (SELECT id, 'intent', 1 FROM (SELECT e.id, e.occurred_at FROM entries e WHERE e.kind = 'intent' AND e.scope = 'project' AND {own}
  UNION ALL SELECT id, occurred_at FROM o WHERE kind = 'intent' AND scope = 'project') i ORDER BY occurred_at DESC NULLS LAST, id LIMIT 1)
 UNION ALL (SELECT id, 'fleet_signal', row_number() OVER (ORDER BY occurred_at DESC, id) FROM entries e
  WHERE e.kind = 'signal' AND (e.scope = 'fleet' OR cardinality(e.projects) = 0) AND {active("e")} AND {live} AND occurred_at >= %(since)s ORDER BY occurred_at DESC, id LIMIT {MAX_SIGNALS})
 UNION ALL (SELECT e.id, 'inject', 1 FROM entries e
  WHERE e.kind = 'inject' AND (cardinality(e.projects) = 0 OR ({own}) OR e.id IN (SELECT id FROM o)) ORDER BY e.occurred_at DESC, e.id LIMIT 200))
SELECT part, ord, (SELECT ok FROM u), e.id, kind, vault_path, title, content, project, projects, repo, scope, status, severity, heat, occurred_at,
 CASE WHEN kind IN ('intent','inject') THEN metadata ELSE jsonb_build_object('cluster_id',metadata->'cluster_id','summary',metadata->'summary',
 'region',metadata->'region','worktrees',metadata->'worktrees','worktree',metadata->'worktree','valid_until',metadata->'valid_until') END
FROM picked p CROSS JOIN LATERAL (SELECT * FROM entries e WHERE e.id = p.id LIMIT 1) e ORDER BY p.part, p.ord"""


PROJECT_SQL = {with_repo: _project_sql(with_repo) for with_repo in (True, False)}


def project_memory(
    session: Session,
    key: str,
    repo: str | None,
    *,
    top_n: int,
    since: dt.datetime,
    now: dt.datetime,
) -> ProjectRows:
    """P's hot arcs, recent lessons/decisions/milestones, intent, signals; fleet signals; inject blocks.

    One statement, one round trip (``PROJECT_SQL``): each section reads at
    most its own limit of P's rows through an ordered index (a hot project of
    100,000 rows costs what a small one does), and only the picked rows are
    joined back for their text. Whether P holds its key's unnamed entries
    (unique key, or a pin to P) is an InitPlan of the same statement.
    """
    params: dict[str, Any] = {"key": key, "keys": [key], "since": since, "top_n": top_n, "now": now_text(now)}
    if repo is not None:
        params["repo"] = repo
    found: dict[str, list[EntryRecord]] = {}
    key_unique = True
    for row in session.connection().exec_driver_sql(PROJECT_SQL[repo is not None], params).all():
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


def live(now: dt.datetime | None) -> ColumnElement[bool]:
    """The row is live at ``now`` (the present when None): not superseded, retracted or expired (ADR 0048)."""
    return text(live_sql("entries", ":now")).bindparams(now=now_text(now or dt.datetime.now(dt.timezone.utc)))


_NEAR_LESSONS = text(
    """SELECT a.key, b.key FROM content_embeddings a JOIN content_embeddings b
        ON b.producer = a.producer AND b.chunk_idx = 0 AND b.key > a.key AND b.key = ANY(:ids)
     WHERE a.producer = :producer AND a.chunk_idx = 0 AND a.key = ANY(:ids) AND (a.embedding <=> b.embedding) <= :distance"""
)


def near_lessons(ids: Sequence[str], *, min_cosine: float, session: Session) -> list[tuple[str, str]]:
    """Pairs of these lessons whose first chunks' vectors are at least ``min_cosine`` apart in cosine (ADR 0048).

    One statement over the search index's rows of those lessons (a few dozen
    at most: a feed's recent lessons); lessons not embedded yet pair with none.
    """
    rows = session.execute(_NEAR_LESSONS, {"ids": list(ids), "producer": PRODUCERS["lesson"], "distance": 1.0 - min_cosine})
    return [(a, b) for a, b in rows]


def fleet_signals(session: Session, *, since: dt.datetime, now: dt.datetime | None = None) -> list[EntryRecord]:
    """Active, live fleet-wide signals since ``since``, newest first (what an unknown project still gets)."""
    stmt = (
        select(*_COLUMNS)
        .where(fleet_signal(), active_signal(), live(now), Entry.occurred_at >= since)
        .order_by(Entry.occurred_at.desc(), Entry.id)
        .limit(MAX_SIGNALS)
    )
    return [_record_at(r, 0) for r in session.execute(stmt)]


def inject_blocks(session: Session) -> list[EntryRecord]:
    """The newest 200 indexed inject blocks of no project (the caller filters by target and age); a project's own blocks reach only it."""
    stmt = (
        select(*_COLUMNS)
        .where(Entry.kind == "inject", func.cardinality(Entry.projects) == 0)
        .order_by(Entry.occurred_at.desc().nulls_last(), Entry.id)
        .limit(200)
    )
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


def entry_records(session: Session, *where: Any, order_by: Sequence[Any] = (Entry.id,), limit: int | None = None) -> list[EntryRecord]:
    """The indexed entries matching ``where``, as records, in ``order_by`` order (at most ``limit``)."""
    stmt = select(*_COLUMNS).where(*where).order_by(*order_by).limit(limit)
    return [_record_at(r, 0) for r in session.execute(stmt)]


def live_lessons_like(session: Session, record: EntryRecord, *, now: dt.datetime, limit: int) -> list[EntryRecord]:
    """The newest live lessons filed as ``record`` is (the same project and repository, or none), newest first."""
    same = [Entry.kind == "lesson", live(now)]
    same.append(Entry.project == record.project if record.project is not None else Entry.project.is_(None))
    same.append(Entry.repo == record.repo if record.repo is not None else Entry.repo.is_(None))
    return entry_records(session, *same, order_by=(Entry.occurred_at.desc().nulls_last(), Entry.id), limit=limit)


def entries_of_kinds(session: Session, kinds: Sequence[str]) -> list[EntryRecord]:
    """Every indexed entry of the given kinds, by id (what ``brain embed`` embeds)."""
    return entry_records(session, Entry.kind.in_(list(kinds)))


def entry_by_id(session: Session, entry_id: str) -> EntryRecord | None:
    """The indexed entry with this id, else None."""
    row = session.execute(select(*_COLUMNS).where(Entry.id == entry_id)).first()
    return _record_at(row, 0) if row is not None else None


def decision_numbered(session: Session, number: int) -> EntryRecord | None:
    """The decision file (not an inline marker) numbered ``number`` (``ADR-NNNN``); the first by path if two share it."""
    stmt = (
        select(*_COLUMNS)
        .where(Entry.kind == "decision", Entry.meta["adr"].astext == str(number), Entry.meta["inline"].is_(None))
        .order_by(Entry.vault_path)
        .limit(1)
    )
    row = session.execute(stmt).first()
    return _record_at(row, 0) if row is not None else None


def curation_list(
    session: Session,
    *,
    kinds: Sequence[str],
    where: Sequence[ColumnElement[bool]],
    limit: int,
) -> list[EntryRecord]:
    """Entries of ``kinds`` meeting every condition of ``where``, newest first (``GET /entries``)."""
    stmt = select(*_COLUMNS).where(Entry.kind.in_(list(kinds)), *where).order_by(Entry.occurred_at.desc().nulls_last(), Entry.id).limit(limit)
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


# A row with neither repo nor root only records that a key was mentioned; next to a real repository of that key it
# is the same project, not a second one: ``list_projects`` leaves it out, and ``count_projects`` does not count it.


def count_projects(session: Session) -> int:
    """How many projects ``list_projects`` lists (``brain status``, ``/metrics``), without reading their counts."""
    other = aliased(Project)
    mentioned_only = and_(Project.repo.is_(None), Project.root.is_(None), select(other.id).where(other.key == Project.key, other.repo.is_not(None)).exists())
    return int(session.execute(select(func.count()).select_from(Project).where(~mentioned_only)).scalar_one())


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
    projects = [p for p in rows if p.repo or p.root or p.key not in with_repo]  # a mention beside its repository is not one
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


def recent_of_kind(session: Session, kind: str, *, since: dt.datetime, limit: int, now: dt.datetime | None = None) -> list[EntryRecord]:
    """The newest live entries of ``kind`` since ``since`` (``ix_entries_kind_occurred``): the global feed's lessons."""
    stmt = select(*_COLUMNS).where(Entry.kind == kind, Entry.occurred_at >= since, live(now)).order_by(Entry.occurred_at.desc(), Entry.id.desc()).limit(limit)
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


# -- the keeper's pages for people (``brain_core.feed.index_pages``) ----------------------------------


@dataclass(frozen=True)
class IndexRows:
    """One project's live entries as its index page lists them."""

    arcs: list[EntryRecord]
    decisions: list[EntryRecord]
    lessons: list[EntryRecord]
    milestones: list[EntryRecord]
    signals: list[EntryRecord]


def project_index_rows(session: Session, key: str, repo: str | None, *, since: dt.datetime, now: dt.datetime, limit: int) -> IndexRows:
    """P's live entries by the feed's membership rule: hottest arcs, decisions, lessons and milestones since ``since``, active signals.

    Superseded, retracted and expired entries are left out (``entry_live``,
    ADR 0048), arcs included. Ties are broken by id so the same index lists
    the same rows in the same order.
    """
    mine = member(key, repo, key_owned_sql(key, repo))
    newest = (Entry.occurred_at.desc().nulls_last(), Entry.id)

    def rows(*conds: ColumnElement[bool], order: Sequence[Any] = newest) -> list[EntryRecord]:
        stmt = select(*_COLUMNS).where(mine, live(now), *conds).order_by(*order).limit(limit)
        return [_record_at(r, 0) for r in session.execute(stmt)]

    return IndexRows(
        arcs=rows(Entry.kind == "arc", order=(Entry.heat.desc(), *newest)),
        decisions=rows(Entry.kind == "decision"),
        lessons=rows(Entry.kind == "lesson", Entry.occurred_at >= since),
        milestones=rows(Entry.kind == "milestone", Entry.occurred_at >= since),
        signals=rows(Entry.kind == "signal", active_signal()),
    )


def unattributed_counts(session: Session) -> tuple[dict[str, int], dt.datetime | None]:
    """Entries of no project by kind (activity kinds only), and the newest one's ``occurred_at``."""
    stmt = (
        select(Entry.kind, func.count(), func.max(Entry.occurred_at))
        .where(func.cardinality(Entry.projects) == 0, Entry.kind.in_(ACTIVITY_KINDS))
        .group_by(Entry.kind)
    )
    counts: dict[str, int] = {}
    last: dt.datetime | None = None
    for kind, n, at in session.execute(stmt):
        counts[kind] = int(n)
        if at is not None and (last is None or at > last):
            last = at
    return counts, last
