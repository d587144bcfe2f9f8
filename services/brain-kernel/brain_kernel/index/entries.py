"""The index: entries and projects derived from the vault, written and refreshed here.

All SQL about the ``entries`` and ``projects`` tables' writes lives here;
services and jobs call these functions with a session and never commit (the
entry point owns the transaction). Writes are upserts keyed by the stable ids
of ``brain_core.entries``, so every job can rerun safely.

Two ways the vault reaches the index, through the same per-file parser
(``brain_core.vault.records.records_for``) and the same upsert, so they give
the same rows (tests/test_reindex.py compares them):

- ``brain_kernel.index.changes.sync_changes`` after a write (every writer of
  the vault): those files' old rows are replaced by what the files hold now
  (none when a file is gone or became a ``.merged.md`` tombstone), with
  their file stats and search documents;
- ``rebuild`` (``brain reindex``): every file's rows are upserted, then the
  rows this pass did not rewrite are deleted, but only those last written
  before the pass began. The keeper's tick does the same with the files that
  changed (``write_file_records``, then ``drop_paths_not_in``).

Why a rebuild never drops an acknowledged write (ADR 0011): the pass reads
the database clock before it reads the first file (``scan_point``), and
every upsert stamps its rows with the database clock at the moment it runs
(``clock_timestamp()``), which for a marker is after its vault write. A row
stamped before the scan began was written to the vault before the scan
began, so the scan saw it and rewrote it unless its file no longer holds it;
a row stamped after is kept. Both times come from one clock, the database's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import String, any_, delete, literal, not_, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.feed.collect import mitigate, mitigation_sources
from brain_core.heat import arc_facts
from brain_core.membership import carriers
from brain_core.text import storable
from brain_core.vault import frontmatter
from brain_core.vault.layout import is_tombstone, kind_of_path
from brain_core.vault.records import (
    ActivityTally,
    KeptKey,
    ProjectActivity,
    attributable_by_session,
    attributed,
    entry_line_spans,
    kept_keys,
    parsed_document,
    parsed_records,
    project_activity,
    records_for,
    skipped_entries,
)
from brain_core.vault.regions import live_paths
from brain_kernel import idempotency
from brain_kernel.db.engine import defer_indexes, restore_indexes
from brain_kernel.db.models import Entry, Project, SessionRow
from brain_kernel.feed.snapshots import collect
from brain_kernel.identity.projects import known_projects
from brain_kernel.index.filestats import StatRow, digest, forget, known_paths, save, stat_files
from brain_kernel.search import search_docs
from brain_kernel.vault_store import Vault

Progress = Callable[[int, int], None]  # (files read, files in all), as the CLI's progress reporter takes

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
        }
    )


def _plain(value: Any) -> Any:
    """A value as it reads back from its column (JSON through a round trip, arrays as lists)."""
    if isinstance(value, (dict, list, tuple)):
        return json.loads(json.dumps(value, default=str))
    return value


def _unchanged(session: Session, rows: list[dict[str, Any]]) -> set[str]:
    """Ids of ``rows`` the table already holds exactly (read without locking them)."""
    names = [n for n in COMPARED_COLUMNS if n != "id"]
    held = {r[0]: r[1:] for r in session.connection().exec_driver_sql(_HELD_ENTRIES, {"ids": [r["id"] for r in rows]})}
    same = set()
    for row in rows:
        old = held.get(row["id"])
        if old is not None and all(_plain(row[n]) == _plain(v) for n, v in zip(names, old, strict=True)):
            same.add(row["id"])
    return same


STAGED_ROWS = 200  # from this many rows an upsert goes through COPY and one statement (a marker's few rows do not)
_STAGE_COLUMNS = ", ".join(COMPARED_COLUMNS)
_STAGE_TYPES = ("text", "varchar", "text", "text", "text", "text[]", "text", "varchar", "varchar", "varchar", "float8", "text", "timestamptz", "jsonb")
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
class ReindexSummary:
    """What a rebuild or refresh did."""

    files: int = 0
    entries: int = 0
    removed: int = 0
    projects: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    keys_restored: int = 0  # idempotency keys the vault's markers kept that the table lacked (ADR 0035)

    def count(self, records: Iterable[EntryRecord]) -> None:
        """Add ``records`` to the counts by kind."""
        for record in records:
            self.by_kind[record.kind] = self.by_kind.get(record.kind, 0) + 1

    def as_dict(self) -> dict[str, object]:
        """The JSON summary the command prints."""
        return {
            "files": self.files,
            "entries": self.entries,
            "removed": self.removed,
            "projects": self.projects,
            "by_kind": dict(sorted(self.by_kind.items())),
            "skipped": self.skipped,
            "keys_restored": self.keys_restored,
        }


ARC_CAPABLE_KINDS = ("arc", "region", "signal")


def live_vault_files(listed: Iterable[str]) -> list[str]:
    """The files that can hold entries (``filestats.stat_files``'s paths) as the keeper scans them: tombstoned
    raw files and second copies of an arc left out (``regions.live_paths`` decides, in its own order), so a
    full rebuild indexes the documents a tick reads."""
    paths = list(listed)
    return list(live_paths(paths, [p for p in paths if kind_of_path(p) in ARC_CAPABLE_KINDS]).live)


def read_records(vault: Vault, rel: str, summary: ReindexSummary) -> list[EntryRecord]:
    """The entries of one file; an unreadable or unparsable file is skipped and reported."""
    try:
        text = vault.read_text(rel)
    except FileNotFoundError:
        return []
    except OSError as exc:
        summary.skipped.append(f"{rel}: {exc.strerror}")
        return []
    return _records_of(rel, text, summary)[0]


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
    RETURNING occurred_at
    """
)


def attribute_session(session: Session, session_id: str, key: str, repo: str | None) -> int:
    """Attribute the session's markers written before it was known (``with_evidence``, applied in place); returns how many.

    The feed triggers log the change, so the stored answers these rows reach are invalidated.
    """
    times = [t for (t,) in session.execute(_ATTRIBUTE_SESSION, {"sid": session_id, "project": key, "repo": repo})]
    if times:
        touch_project(session, key, repo, at=max((t for t in times if t is not None), default=None))
    return len(times)


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


_MITIGATE = text(
    """
    UPDATE entries SET status = 'mitigated',
           metadata = metadata || jsonb_build_object('mitigated_by', metadata ->> 'source', 'file_status', status),
           updated_at = clock_timestamp()
     WHERE kind = 'signal' AND (metadata ->> 'source') = ANY(:sources) AND status IS DISTINCT FROM 'mitigated'
    """
)
_UNMITIGATE = text(
    """
    UPDATE entries SET status = metadata ->> 'file_status', metadata = metadata - 'mitigated_by' - 'file_status',
           updated_at = clock_timestamp()
     WHERE kind = 'signal' AND status = 'mitigated' AND (metadata ->> 'mitigated_by') IS DISTINCT FROM 'verify'
       AND NOT ((metadata ->> 'source') = ANY(:sources))
    """
)


def mitigation_set(session: Session) -> set[str]:
    """The ``mitigates`` values of the resolved and graduated arcs the index holds."""
    stmt = select(Entry.id, Entry.status, Entry.meta["mitigates"]).where(Entry.kind == "arc", Entry.meta.has_key("mitigates"))
    rows = [EntryRecord(id=i, kind="arc", vault_path="", status=st, meta={"mitigates": m}) for i, st, m in session.execute(stmt)]
    return mitigation_sources(rows)


def apply_mitigation(session: Session, sources: set[str] | None = None) -> int:
    """Mark the signals of mitigated sources ``mitigated`` and restore the others; returns rows changed."""
    sources = mitigation_set(session) if sources is None else sources
    params = {"sources": sorted(sources)}
    return (session.execute(_MITIGATE, params).rowcount or 0) + (session.execute(_UNMITIGATE, params).rowcount or 0)


_VERIFIED = text(
    """
    UPDATE entries SET status = 'mitigated',
           metadata = metadata || jsonb_build_object('mitigated_by', 'verify', 'file_status', status), updated_at = clock_timestamp()
     WHERE kind = 'signal' AND id = ANY(:ids) AND status IS DISTINCT FROM 'mitigated'
    """
)
_UNVERIFIED = text(
    """
    UPDATE entries SET status = metadata ->> 'file_status', metadata = metadata - 'mitigated_by' - 'file_status', updated_at = clock_timestamp()
     WHERE kind = 'signal' AND status = 'mitigated' AND (metadata ->> 'mitigated_by') = 'verify' AND NOT (id = ANY(:ids))
    """
)


def set_verified(session: Session, ids: Iterable[str]) -> int:
    """Mark exactly ``ids`` as the signals this tick's verifier mitigated (earlier verifier marks are lifted)."""
    params = {"ids": sorted(set(ids))}
    return (session.execute(_VERIFIED, params).rowcount or 0) + (session.execute(_UNVERIFIED, params).rowcount or 0)


REBUILD_BATCH = 500  # files per batch: memory stays bounded by the batch, not the vault
REBUILD_BYTES = 4 << 20  # and text per batch (a day's log of a busy year is 1.6 MB; its search rows are seven times that)
PREPARE_APART_BYTES = 64 << 20  # a vault of this much text has its search segments made by a worker process


def rebuild(session: Session, vault: Vault, *, progress: Progress | None = None, key_ttl_seconds: int | None = None) -> ReindexSummary:
    """Make the index what the vault holds now, keeping writes acknowledged meanwhile (no commit).

    Files are read, parsed and written in batches (memory bounded by a batch,
    not by the vault); unchanged rows are not rewritten; rows of files no
    longer live are deleted; the mitigation set is applied once at the end.
    The file stats are refreshed too, so the next tick reads only what
    changes after this. Into an empty index (a first build) the tables'
    secondary indexes are built once after the load (``db.defer_indexes``),
    and the tables stay locked until the caller commits. Each batch is
    written on a writer thread while the next one is read and parsed.

    ``key_ttl_seconds``: the idempotency keys the markers' text keeps, of
    writes younger than that, are remembered again (``idempotency.restore``,
    one statement a batch; a key the table holds is left as it is), so a
    client replaying its markers after the database was lost writes nothing
    (ADR 0035).
    """
    summary = ReindexSummary()
    started = scan_point(session)
    deferred = defer_indexes(session, "entries")  # a first build into an empty index: its indexes built once, after the load
    stats = stat_files(vault)
    files = live_vault_files(stats)  # one walk of the vault lists and stats its files
    known = known_paths(session)  # the files the file stats knew, for the rows of those gone
    tally = ActivityTally()
    fresh = deferred is not None

    live = set(files)
    # The searchable files that hold no entries (day dashboards, feed files, notes) are read in the same batches,
    # for their search segments only: a large vault's are all made by the worker, and ``finish`` reads nothing again.
    others = {rel: stamp for rel, stamp in search_docs.searchable_files(vault) if rel not in live}

    def stamp_of(rel: str) -> search_docs.Stamp | None:
        stat = stats.get(rel)
        return (stat.size, stat.mtime_ns) if stat is not None else others.get(rel)

    size_of = lambda rel: (stamp_of(rel) or (0, 0))[0]  # noqa: E731
    keys_since = started - dt.timedelta(seconds=key_ttl_seconds) if key_ttl_seconds else None
    paths = [*files, *others]
    # Fed the texts read here (each file is read once); a first build samples the listing for its common codes.
    documents = search_docs.DocumentsBuild(session, vault, ((rel, size_of(rel)) for rel in paths if search_docs.indexable(rel)))

    def write(
        batch: list[str],
        records: list[EntryRecord],
        entries: list[StatRow],
        texts: list[tuple[str, str]],
        spans: dict[str, search_docs.Spans],
        prepared: Future[dict[str, search_docs.Prepared]] | None,
        kept: list[KeptKey],
    ) -> None:
        part = write_file_records(session, batch, records, before=started, tally=tally, fresh=fresh)
        if kept and key_ttl_seconds:
            summary.keys_restored += idempotency.restore(session, kept, ttl_seconds=key_ttl_seconds)
        summary.entries += part.entries
        summary.removed += part.removed
        for kind, n in part.by_kind.items():
            summary.by_kind[kind] = summary.by_kind.get(kind, 0) + n
        save(session, entries)
        stamps = {rel: stamp for rel, _ in texts if (stamp := stamp_of(rel)) is not None}
        documents.add(texts, stamps, spans, prepared.result() if prepared is not None else None)
        summary.files += len(batch)

    done = 0
    # One batch is written on the writer's thread while the next is read and parsed here (which touches no
    # row: the session is the writer's until its batch is done); the database's work overlaps the parsing.
    # A large vault's search segments (splitting, lowering, gram codes) are made by a worker process
    # beside this one: the interpreter's lock held here no longer bounds the pass.
    helper = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) if sum(map(size_of, paths)) >= PREPARE_APART_BYTES else None
    # A rerun's worker makes only the segments of documents the index does not hold as read: a hint read on a
    # connection of its own (this session is the writer's), which ``_write`` tests again under the row locks.
    # Not into an empty index: its tables are locked by this transaction until it commits.
    hint = helper is not None and documents.deferred is None and not documents.recode
    peek = search_docs.peek_connection(session) if hint else None
    with (
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="reindex-write") as writer,
        helper or contextlib.nullcontext(),
        peek or contextlib.nullcontext(),
    ):
        inflight: Future[None] | None = None
        for batch in search_docs.batches(paths, REBUILD_BATCH, size_of, REBUILD_BYTES):
            records: list[EntryRecord] = []
            entries: list[StatRow] = []
            texts: list[tuple[str, str]] = []
            spans: dict[str, search_docs.Spans] = {}  # each log split once: its records' entries give the search segments
            kept: list[KeptKey] = []
            for rel in batch:
                text_ = _read(vault, rel, summary)
                done += 1
                if progress is not None:
                    progress(done, len(paths))
                if text_ is None:
                    continue
                texts.append((rel, text_))
                if rel not in live:
                    continue  # searched, holds no entry
                found, meta = _records_of(rel, text_, summary)
                records.extend(found)
                spans[rel] = entry_line_spans(rel, text_)  # the split _records_of just made (kept by the parser)
                if keys_since is not None:
                    kept.extend(kept_keys(rel, text_, found, since=keys_since))
                stat = stats.get(rel)
                if stat is not None:
                    entries.append(StatRow(rel, stat.size, stat.mtime_ns, digest(text_), kind_of_path(rel), arc_facts_of(rel, text_, stat.mtime_ns, meta=meta)))
            prepared = None
            if helper is not None:
                todo = [(rel, t, spans.get(rel)) for rel, t in texts]
                todo = todo if peek is None else search_docs.not_indexed(peek, todo)
                prepared = helper.submit(search_docs.prepare_texts, todo, documents.left_out)
            if inflight is not None:
                inflight.result()  # the batch before, written (its error raised here)
            inflight = writer.submit(write, [rel for rel in batch if rel in live], records, entries, texts, spans, prepared, kept)
        if inflight is not None:
            inflight.result()
    restore_indexes(session, deferred or [])
    summary.removed += drop_paths_not_in(session, files, before=started)
    forget(session, [p for p in known if p not in live])
    apply_mitigation(session)
    summary.projects = record_activity(session, tally.result())
    documents.finish(vault)  # GET /vault/search is served from it from now on
    collect(session)
    return summary


def _read(vault: Vault, rel: str, summary: ReindexSummary) -> str | None:
    try:
        return vault.read_listed(rel)  # a path the walk listed
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        summary.skipped.append(f"{rel}: {getattr(exc, 'strerror', None) or exc}")
        return None


def _records_of(rel: str, text_: str, summary: ReindexSummary) -> tuple[list[EntryRecord], Mapping[str, Any] | None]:
    """The file's rows, and its frontmatter when its kind's rows come from it (parsed once, for ``arc_facts_of``
    too); what it held but could not give (a bad file, a log entry's bad stamp) goes to ``summary.skipped``."""
    meta = None
    try:
        doc = parsed_document(rel, text_)
        if doc is not None:
            meta, records = doc.meta, parsed_records(rel, doc)
        else:
            records = records_for(rel, text_)
    except Exception as exc:  # one bad file must not stop a rebuild of the whole vault
        summary.skipped.append(f"{rel}: {type(exc).__name__}: {exc}")
        return [], meta
    summary.skipped.extend(f"{rel}: {problem}" for problem in skipped_entries(rel, text_))
    return records, meta


def arc_facts_of(rel: str, text_: str, mtime_ns: int, *, meta: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The facts the file stats keep of a file that is an arc (None for any other file); ``meta``: its frontmatter, already parsed."""
    kind = kind_of_path(rel)
    if kind not in ARC_CAPABLE_KINDS:
        return None
    if meta is None:
        meta = frontmatter.parse(text_).meta
    if not (kind == "arc" or (meta.get("cluster_id") and meta.get("type") != "signal")) or is_tombstone(rel) or meta.get("merged_into"):
        return None
    return arc_facts(meta, mtime=file_time(mtime_ns))


def file_time(mtime_ns: int) -> dt.datetime:
    """A file's mtime (nanoseconds) as an aware time: what an arc's facts in the file stats hold as ``mtime``."""
    return dt.datetime.fromtimestamp(mtime_ns / 1e9, tz=dt.timezone.utc)
