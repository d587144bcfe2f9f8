"""The index's entries and projects: rows written, deleted and attributed here.

All SQL about the ``entries`` and ``projects`` tables' writes lives here;
services and jobs call these functions with a session and never commit (the
entry point owns the transaction). Writes are upserts keyed by the stable ids
of ``brain_core.entries``, so every job can rerun safely.

Two ways the vault reaches the index, through the same per-file parser
(``brain_core.vault.records.records_for``) and the same upsert, so they give
the same rows (tests/kernel/test_reindex.py compares them):

- ``brain_kernel.index.changes.sync_changes`` after a write (every writer of
  the vault): those files' old rows are replaced by what the files hold now
  (none when a file is gone or became a ``.merged.md`` tombstone), with
  their file stats and search documents;
- ``brain_kernel.index.rebuild.rebuild`` (``brain reindex``): every file's rows are upserted, then the
  rows this pass did not rewrite are deleted, but only those last written
  before the pass began. The keeper's tick does the same with the files that
  changed, through the one path (``sync_changes``, then ``drop_missing``).

Why a rebuild never drops an acknowledged write (ADR 0011): the pass reads
the database clock before it reads the first file (``scan_point``), and
every upsert stamps its rows with the database clock at the moment it runs
(``clock_timestamp()``), which for a marker is after its vault write. A row
stamped before the scan began was written to the vault before the scan
began, so the scan saw it and rewrote it unless its file no longer holds it;
a row stamped after is kept. Both times come from one clock, the database's.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import String, any_, delete, literal, not_, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from brain_core.chunks import entry_doc
from brain_core.entries import EntryRecord
from brain_core.feed.collect import mitigate
from brain_core.jsonable import SORTED_KEYS, JobSummary
from brain_core.membership import carriers
from brain_core.text import storable
from brain_core.vault.records import (
    ActivityTally,
    ProjectActivity,
    attributable_by_session,
    attributed,
    project_activity,
)
from brain_kernel.db.engine import text_array
from brain_kernel.db.models import Entry, Project, SessionRow
from brain_kernel.feed.feed_repo import entry_records
from brain_kernel.identity.projects import known_projects

COMPARED_COLUMNS = (
    "id",
    "kind",
    "title",
    "content",
    "project",
    "projects",
    "repo",
    "scope",
    "status",
    "severity",
    "heat",
    "vault_path",
    "occurred_at",
    "metadata",
    "embed_hash",  # follows from the columns before it; compared so a row indexed before it existed is rewritten
)


# -- rows ------------------------------------------------------------------------------


def _row(record: EntryRecord) -> dict[str, object]:
    """The record as a row Postgres can hold (``storable``: a NUL read from a file is no stop of the pass)."""
    return storable(
        {
            "id": record.id,
            "kind": record.kind,
            "title": record.title,
            "content": record.content,
            "project": record.project,
            "projects": list(record.projects),
            "repo": record.repo,
            "scope": record.scope,
            "status": record.status,
            "severity": record.severity,
            "heat": record.heat,
            "vault_path": record.vault_path,
            "occurred_at": record.occurred_at,
            "metadata": record.meta,
            "embed_hash": _embed_hash(record),
        }
    )


def _embed_hash(record: EntryRecord) -> str | None:
    """The hash of what the search index holds for the entry, its text and labels (None for kinds it does not
    embed): ADR 0046, ADR 0068."""
    doc = entry_doc(record)
    return doc.index_hash if doc is not None else None


def _plain(value: Any) -> Any:
    """A value as it reads back from its column (JSON through a round trip, arrays as lists)."""
    if isinstance(value, (dict, list, tuple)):
        return json.loads(json.dumps(value, default=str))
    return value


def _unchanged(session: Session, rows: list[dict[str, Any]]) -> set[str]:
    """Ids of ``rows`` the table already holds exactly (read without locking them)."""
    names = [n for n in COMPARED_COLUMNS if n != "id"]
    held = {r[0]: r[1:] for r in session.connection().exec_driver_sql(_HELD_ENTRIES, {"ids": text_array(r["id"] for r in rows)})}
    same = set()
    for row in rows:
        old = held.get(row["id"])
        if old is not None and all(_plain(row[n]) == _plain(v) for n, v in zip(names, old, strict=True)):
            same.add(row["id"])
    return same


STAGED_ROWS = 200  # from this many rows an upsert goes through COPY and one statement (a marker's few rows do not)
_STAGE_COLUMNS = ", ".join(COMPARED_COLUMNS)
_STAGE_TYPES = ("text", "varchar", "text", "text", "text", "text[]", "text", "varchar", "varchar", "varchar", "float8", "text", "timestamptz", "jsonb")
_STAGE_TYPES += ("varchar",)  # embed_hash
_CREATE_STAGE = f"CREATE TEMP TABLE IF NOT EXISTS entries_stage ON COMMIT DELETE ROWS AS SELECT {_STAGE_COLUMNS} FROM entries WITH NO DATA"
_COMPARED_ROW = ", ".join(n for n in COMPARED_COLUMNS if n != "id")
_HELD_ENTRIES = f"SELECT id, {_COMPARED_ROW} FROM entries WHERE id = ANY(%(ids)s::text[])"


def _distinct(left: str, right: str) -> str:
    return f"ROW({', '.join(f'{left}.{n}' for n in COMPARED_COLUMNS if n != 'id')}) IS DISTINCT FROM ROW({', '.join(f'{right}.{n}' for n in COMPARED_COLUMNS if n != 'id')})"


# Every entry write's conflict rule: a row is rewritten (and stamped with the database clock) only when it changes.
_ON_CONFLICT = f"""ON CONFLICT (id) DO UPDATE SET {", ".join(f"{n} = excluded.{n}" for n in COMPARED_COLUMNS if n != "id")}, updated_at = clock_timestamp()
 WHERE {_distinct("entries", "excluded")}"""


# New and changed rows only (the join leaves unchanged ones unread by the upsert, so neither rewritten nor
# locked); the conflict clause covers a row another writer inserted or changed since the join read it.
_MERGE_STAGE = f"""INSERT INTO entries ({_STAGE_COLUMNS}, updated_at)
SELECT {", ".join(f"s.{n}" for n in COMPARED_COLUMNS)}, clock_timestamp()
  FROM entries_stage s LEFT JOIN entries e ON e.id = s.id
 WHERE e.id IS NULL OR {_distinct("e", "s")}
{_ON_CONFLICT}"""


# A few rows (a marker's): the upsert as SQL text, a single row through a plain execute (the expression layer's
# statement building, and psycopg's pipelined executemany for one row, cost more than running it). By the
# conflict rule a tick or a rebuild over a vault that did not change writes nothing (no dead tuples, no feed
# invalidation).
_UPSERT_ENTRY = f"""INSERT INTO entries ({_STAGE_COLUMNS}, updated_at)
VALUES ({", ".join(f"%({n})s::{t}" for n, t in zip(COMPARED_COLUMNS, _STAGE_TYPES, strict=True))}, clock_timestamp())
{_ON_CONFLICT}"""


# Into a table a first build fills (``fresh``): no row to compare with but this pass's own, which the conflict
# clause covers (the join would read a table the planner takes for empty).
_INSERT_STAGE = f"""INSERT INTO entries ({_STAGE_COLUMNS}, updated_at)
SELECT {", ".join(f"s.{n}" for n in COMPARED_COLUMNS)}, clock_timestamp() FROM entries_stage s
{_ON_CONFLICT}"""


def _upsert_staged(session: Session, rows: list[dict[str, Any]], fresh: bool = False) -> None:
    """The rows COPYed into a temporary table, then merged by one statement (the same rule as the upsert)."""
    latest = {r["id"]: r for r in rows}  # an id given twice: its last row, as consecutive upserts would leave it
    conn = session.connection()
    conn.exec_driver_sql(_CREATE_STAGE)
    conn.exec_driver_sql("TRUNCATE entries_stage")
    cursor = conn.connection.driver_connection.cursor()  # the session's own connection and transaction
    with cursor.copy(f"COPY entries_stage ({_STAGE_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(_STAGE_TYPES)
        for row in latest.values():
            copy.write_row([Jsonb(row[n]) if n == "metadata" else row[n] for n in COMPARED_COLUMNS])
    conn.exec_driver_sql(_INSERT_STAGE if fresh else _MERGE_STAGE)


def upsert_entries(session: Session, records: Iterable[EntryRecord], *, fresh: bool = False) -> int:
    """Insert or replace entries by id; returns how many were given.

    Rows the table already holds exactly are skipped before the upsert: an
    unchanged row is neither rewritten nor locked, so a long rebuild or tick
    never makes a marker's refresh of the same file wait for it. Many rows
    go through COPY and one merge statement (``_upsert_staged``), a few
    through a pre-read and a batch of upserts; both leave the same rows.
    ``fresh``: rows the table cannot hold yet, so none is read first: a first
    build's (``write_file_records``), a marker's newly reserved write (its id
    is new). The conflict rule still leaves an unchanged row as it is.
    """
    rows = [_row(r) for r in records]
    if len(rows) >= STAGED_ROWS:
        for start in range(0, len(rows), 20_000):
            _upsert_staged(session, rows[start : start + 20_000], fresh)
        return len(rows)
    for start in range(0, len(rows), 1000):
        batch = rows[start : start + 1000]
        same = set() if fresh else _unchanged(session, batch)
        changed = [r for r in batch if r["id"] not in same]
        if changed:
            params = [{**r, "metadata": Jsonb(r["metadata"])} for r in changed]
            session.connection().exec_driver_sql(_UPSERT_ENTRY, params[0] if len(params) == 1 else params)  # one: no pipeline
    return len(rows)


def delete_entries_at(session: Session, vault_paths: Iterable[str], *, keep_ids: Iterable[str] = (), before: dt.datetime | None = None) -> int:
    """Remove the entries of the given vault files, except ``keep_ids`` and rows written at or after ``before``."""
    paths = sorted(set(vault_paths))
    if not paths:
        return 0
    keep = sorted(set(keep_ids))
    removed = 0
    for start in range(0, len(paths), 500):
        stmt = delete(Entry).where(Entry.vault_path.in_(paths[start : start + 500]))
        if keep:  # one array parameter: a batch of shared logs can keep more ids than a statement has parameters
            stmt = stmt.where(not_(Entry.id == any_(literal(keep, ARRAY(String)))))
        if before is not None:
            stmt = stmt.where(Entry.updated_at < before)
        removed += session.execute(stmt).rowcount or 0
    return removed


def drop_paths_not_in(session: Session, live: Iterable[str], *, before: dt.datetime) -> int:
    """Delete the rows of files no longer live (deleted, tombstoned, a second copy), written before ``before``."""
    keep = set(live)
    gone = [p for p in session.scalars(select(Entry.vault_path).distinct()) if p not in keep]
    return delete_entries_at(session, gone, before=before)


def scan_point(session: Session) -> dt.datetime:
    """The database clock now: taken before a pass reads its first file."""
    return session.execute(text("SELECT clock_timestamp()")).scalar_one()


def entry_rows(session: Session) -> list[dict[str, Any]]:
    """Every entry as a dict of the compared columns, ordered by id (what a rebuild and a refresh agree on)."""
    table = Entry.__table__
    stmt = select(*(table.c[name] for name in COMPARED_COLUMNS)).order_by(table.c.id)
    return [dict(row._mapping) for row in session.execute(stmt)]


# The project upsert as SQL text (it runs on every marker: the expression layer's building and caching of a
# statement cost more than running it). No aliases given keeps the known ones. A row the touch would leave as
# it is (its activity as late, its root and aliases the same) is neither written nor locked: markers to one
# project in one second would otherwise queue on its row until each commits.
_TOUCH_PROJECT = """INSERT INTO projects (id, key, repo, root, aliases, last_active)
SELECT %(id)s::text, %(key)s::text, %(repo)s::text, %(root)s::text, %(aliases)s::text[], %(last_active)s::timestamptz
 WHERE NOT EXISTS (SELECT 1 FROM projects p WHERE p.id = %(id)s::text
                      AND (%(last_active)s::timestamptz IS NULL OR p.last_active >= %(last_active)s::timestamptz)
                      AND (%(root)s::text IS NULL OR p.root = %(root)s::text)
                      AND (cardinality(%(aliases)s::text[]) = 0 OR p.aliases = %(aliases)s::text[]))
ON CONFLICT (id) DO UPDATE SET last_active = greatest(projects.last_active, excluded.last_active),
    root = coalesce(excluded.root, projects.root),
    aliases = CASE WHEN cardinality(excluded.aliases) = 0 THEN projects.aliases ELSE excluded.aliases END,
    updated_at = now()"""


def touch_project(
    session: Session,
    key: str,
    repo: str | None,
    *,
    at: dt.datetime | None = None,
    root: str | None = None,
    aliases: Iterable[str] = (),
) -> None:
    """Record a project (id = repo slug, else key); ``at`` (an entry's time) moves its last activity forward.

    A touch that would change nothing writes nothing and takes no row lock.
    """
    values = {
        "id": repo or key,
        "key": key,
        "repo": repo,
        "root": root,
        "aliases": sorted(set(aliases)),
        "last_active": at,
    }
    session.connection().exec_driver_sql(_TOUCH_PROJECT, values)


# -- from the vault ------------------------------------------------------------------------


@dataclass
class ReindexSummary(JobSummary):
    """What a rebuild or refresh did; ``as_dict`` is the JSON summary ``brain reindex`` prints."""

    files: int = 0
    entries: int = 0
    removed: int = 0
    projects: int = 0
    by_kind: dict[str, int] = field(default_factory=dict, metadata=SORTED_KEYS)
    skipped: list[str] = field(default_factory=list)
    keys_restored: int = 0  # idempotency keys the vault's markers kept that the table lacked (ADR 0035)

    def count(self, records: Iterable[EntryRecord]) -> None:
        """Add ``records`` to the counts by kind."""
        for record in records:
            self.by_kind[record.kind] = self.by_kind.get(record.kind, 0) + 1


def _dedupe(records: Iterable[EntryRecord]) -> list[EntryRecord]:
    return list({record.id: record for record in records}.values())


def with_evidence(session: Session, records: list[EntryRecord]) -> list[EntryRecord]:
    """Records as the index holds them: what their files say, plus evidence only the index has.

    An unattributed marker whose session the session index knows takes that
    session's project (source ``session``); an upstream arc whose legacy
    ``project:`` names exactly one known project (key or alias) takes it
    (source ``legacy``), and any other stays unattributed for the backfill.
    The vault is left as it is, so a rebuild derives the same rows again.
    """
    sids = {sid for r in records if (sid := attributable_by_session(r))}
    sessions: dict[str, tuple[str, str | None]] = {}
    if sids:
        stmt = select(SessionRow.session_id, SessionRow.project, SessionRow.repo).where(
            SessionRow.session_id.in_(sorted(sids)), SessionRow.project.is_not(None)
        )
        sessions = {sid: (project, repo) for sid, project, repo in session.execute(stmt)}
    legacy = [r for r in records if r.project is None and r.meta.get("legacy_project")]
    known = known_projects(session) if legacy else []
    out = []
    for record in records:
        sid = attributable_by_session(record)
        if sid in sessions:
            record = attributed(record, *sessions[sid], "session")
        elif record.project is None and record.meta.get("legacy_project"):
            found = carriers(str(record.meta["legacy_project"]).strip().lower(), known)
            if len(found) == 1:
                record = attributed(record, found[0].key, found[0].repo, "legacy")
        out.append(record)
    return out


_ATTRIBUTE_SESSION = text(
    """
    UPDATE entries SET project = :project, projects = ARRAY[:project], repo = :repo,
           metadata = metadata || '{"project_source": "session"}'::jsonb, updated_at = clock_timestamp()
     WHERE (metadata ->> 'session_id') = :sid AND project IS NULL AND cardinality(projects) = 0
       AND scope = 'project' AND kind IN ('lesson', 'milestone', 'decision', 'signal')
    RETURNING id, occurred_at
    """
)
_EMBED_HASHES = text("UPDATE entries e SET embed_hash = v.h FROM unnest(CAST(:ids AS text[]), CAST(:hashes AS varchar[])) AS v(id, h) WHERE e.id = v.id")


def attribute_session(session: Session, session_id: str, key: str, repo: str | None) -> int:
    """Attribute the session's markers written before it was known (``with_evidence``, applied in place); returns how many.

    The feed triggers log the change, so the stored answers these rows reach are invalidated.
    """
    rows = session.execute(_ATTRIBUTE_SESSION, {"sid": session_id, "project": key, "repo": repo}).all()
    if rows:
        # Their chunks are filed under no project until the next embed run relabels them (ADR 0068).
        moved = entry_records(session, Entry.id.in_([i for i, _ in rows]))
        session.execute(_EMBED_HASHES, {"ids": [r.id for r in moved], "hashes": [_embed_hash(r) for r in moved]})
        touch_project(session, key, repo, at=max((t for _, t in rows if t is not None), default=None))
    return len(rows)


def record_projects(session: Session, records: Iterable[EntryRecord]) -> int:
    """Register the projects the records name and move their last activity forward."""
    return record_activity(session, project_activity(records))


def record_activity(session: Session, activities: Iterable[ProjectActivity]) -> int:
    """``touch_project`` for each activity that would change its row (an unchanged row is not written, nor locked)."""
    wanted = list(activities)
    if not wanted:
        return 0
    held = dict(session.execute(select(Project.id, Project.last_active).where(Project.id.in_([a.repo or a.key for a in wanted]))).all())
    count = 0
    for a in wanted:
        pid = a.repo or a.key
        if pid in held and (a.last_active is None or (held[pid] is not None and held[pid] >= a.last_active)):
            continue
        touch_project(session, a.key, a.repo, at=a.last_active)
        count += 1
    return count


def write_file_records(
    session: Session,
    paths: Iterable[str],
    records: Iterable[EntryRecord],
    *,
    before: dt.datetime | None = None,
    mitigation: set[str] | None = None,
    tally: ActivityTally | None = None,
    fresh: bool = False,
) -> ReindexSummary:
    """Make the rows of exactly the files ``paths`` what ``records`` says (no commit).

    Rows those files no longer hold are deleted (except rows written at or
    after ``before``: a marker acknowledged while the pass ran), new and
    changed ones upserted, unchanged ones left alone. ``mitigation`` (the
    sources a full pass found mitigated) marks their signals as it writes.
    ``fresh``: the table held no row of these files when the pass began and
    nobody else writes it (a first build holds its lock): nothing to delete.
    """
    summary = ReindexSummary()
    rows = _dedupe(records)
    if mitigation:
        rows = mitigate(rows, mitigation)
    rows = with_evidence(session, rows)
    summary.removed = 0 if fresh else delete_entries_at(session, paths, keep_ids=[r.id for r in rows], before=before)
    summary.entries = upsert_entries(session, rows, fresh=fresh)
    summary.count(rows)
    if tally is not None:
        tally.add(rows)
    else:
        summary.projects = record_projects(session, rows)
    return summary
