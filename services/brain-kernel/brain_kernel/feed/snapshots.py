"""SQL repository of the project feed snapshots: stored answers, exact invalidation, collection.

A project feed answer is stored with the Postgres snapshot its first read ran
in (``read_point``). Triggers on ``entries`` and ``projects`` (revision 0003)
log every writing transaction's id under the scopes it touched: the project
keys of the rows, their aliases and slugs, and ``*`` for rows that reach every
project (fleet-wide signals, inject blocks). A stored answer is served while

- it is still inside its time window (``valid_until``: when its oldest
  windowed lesson, decision, milestone or signal leaves ``lesson_days``),
- it was read after the collection horizon (``built_xmin >= horizon``), and
- no logged change of its scopes comes from a transaction its snapshot did
  not see (``pg_visible_in_snapshot``).

Writers never wait on readers or on each other (the log is insert-only, one
row per transaction and scope), and a write committed while an answer was
being computed always invalidates it, because the snapshot recorded is the
earliest one the answer read. ``collect`` (run by every index refresh)
advances the horizon and drops what it makes unreachable. Nothing is kept in
process memory (ADR 0010).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy.orm import Session

FLEET_SCOPE = "*"

# This statement's snapshot (text) and its xmin, as bigint like the logged xids.
_XMIN = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
_READ_POINT = f"SELECT pg_current_snapshot()::text, {_XMIN}"

_FETCH = f"""
{_READ_POINT}, (
SELECT s.body FROM feed_snapshots s
 WHERE s.ref = %(ref)s AND s.top_n = %(top_n)s AND s.lesson_days = %(lesson_days)s AND s.vault_root = %(vault_root)s
   AND s.valid_until > %(now)s
   AND s.built_xmin >= (SELECT horizon FROM feed_horizon WHERE id = 1)
   AND NOT EXISTS (
       SELECT 1 FROM feed_changes c
        WHERE c.scope = ANY (s.scopes) AND c.xid >= s.built_xmin
          AND NOT pg_visible_in_snapshot(c.xid::text::xid8, s.built::pg_snapshot)))
"""

_STORE = """
WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))
INSERT INTO feed_snapshots (ref, top_n, lesson_days, vault_root, scopes, built, built_xmin, valid_until, body)
SELECT %(ref)s, %(top_n)s, %(lesson_days)s, %(vault_root)s, %(scopes)s, %(built)s, %(built_xmin)s,
       COALESCE(%(valid_until)s, 'infinity'::timestamptz), %(body)s FROM relaxed
ON CONFLICT (ref, top_n, lesson_days, vault_root) DO UPDATE
   SET scopes = excluded.scopes, built = excluded.built, built_xmin = excluded.built_xmin,
       valid_until = excluded.valid_until, body = excluded.body, created_at = now()
"""

_COLLECT = (
    f"UPDATE feed_horizon SET horizon = GREATEST(horizon, pending), pending = GREATEST(pending, {_XMIN}) WHERE id = 1",
    "DELETE FROM feed_snapshots WHERE valid_until <= now() OR built_xmin < (SELECT horizon FROM feed_horizon WHERE id = 1)",
    "DELETE FROM feed_changes WHERE xid < (SELECT horizon FROM feed_horizon WHERE id = 1)",
)


@dataclass(frozen=True)
class ReadPoint:
    """The database snapshot an answer is read in: its text form and its xmin."""

    snapshot: str
    xmin: int


# The answer's shape, part of every stored answer's key: an answer a kernel stored that built it otherwise (an older
# version's, before an upgrade) is never served. Raise it when the project feed's answer changes.
ANSWER_FORMAT = 2


def stored_root(vault_root: str) -> str:
    """The ``vault_root`` column of a stored answer's key: the vault root and the answer's format."""
    return f"{vault_root}#{ANSWER_FORMAT}"


@dataclass(frozen=True)
class SnapshotKey:
    """What identifies a stored answer: the reference as sent, the parameters, the vault root (and the format)."""

    ref: str
    top_n: int
    lesson_days: int
    vault_root: str

    def params(self) -> dict[str, object]:
        return {"ref": self.ref, "top_n": self.top_n, "lesson_days": self.lesson_days, "vault_root": stored_root(self.vault_root)}


def fetch(session: Session, key: SnapshotKey, *, now: dt.datetime) -> tuple[str | None, ReadPoint]:
    """The stored answer for ``key`` if it is still exact at ``now`` (else None), and this statement's read point.

    ``now`` is the clock the caller computes answers with, so a stored answer
    expires exactly when a fresh one would differ. One indexed statement. On
    a miss the read point is the one to store the recomputed answer with: it
    was taken before any of its reads.
    """
    snapshot, xmin, body = session.connection().exec_driver_sql(_FETCH, key.params() | {"now": now}).one()
    return body, ReadPoint(str(snapshot), int(xmin))


def read_point(session: Session) -> ReadPoint:
    """The snapshot of this statement: take it before the first read of an answer to store."""
    snapshot, xmin = session.connection().exec_driver_sql(_READ_POINT).one()
    return ReadPoint(str(snapshot), int(xmin))


def store(
    session: Session,
    key: SnapshotKey,
    *,
    point: ReadPoint,
    scopes: Iterable[str],
    valid_until: dt.datetime | None,
    body: str,
) -> None:
    """Store (or replace) the answer for ``key``, read at ``point``, depending on ``scopes`` and ``*``.

    The statement commits without waiting for the WAL flush
    (``synchronous_commit`` off for its own transaction only): a stored
    answer lost in a crash is recomputed at the next read, and the flush was
    a fifth of a recomputed request.
    """
    params = key.params() | {
        "scopes": sorted({*scopes, FLEET_SCOPE}),
        "built": point.snapshot,
        "built_xmin": point.xmin,
        "valid_until": valid_until,
        "body": body,
    }
    session.connection().exec_driver_sql(_STORE, params)


_TOUCH = (
    "INSERT INTO feed_changes (scope, xid) SELECT DISTINCT s, pg_current_xact_id()::text::bigint "
    "FROM entries e CROSS JOIN LATERAL unnest(e.projects) AS s WHERE e.id = ANY(%(ids)s) ON CONFLICT DO NOTHING"
)


def touch(session: Session, entry_ids: Iterable[str]) -> None:
    """Log a change of these entries' projects that no column of theirs shows, so their stored answers go.

    A lesson's new vector groups it with its repeats (ADR 0048), and only the
    search index holds it: the triggers that log row changes do not see it.
    """
    ids = sorted(set(entry_ids))
    if ids:
        session.connection().exec_driver_sql(_TOUCH, {"ids": ids})


def collect(session: Session) -> int:
    """Advance the horizon, drop snapshots it makes unreachable and the change log below it.

    The horizon moves to the read point of the previous collection (every
    transaction below it had finished then), and this collection's read
    point becomes the next one: answers read since the previous collection
    stay servable, and the log keeps about two collection intervals.

    Returns how many stored answers were dropped. Safe next to concurrent
    readers and writers: an answer read before the horizon is never served
    again, and every change dropped was visible to every answer that can
    still be served.
    """
    conn = session.connection()
    conn.exec_driver_sql(_COLLECT[0])
    dropped = conn.exec_driver_sql(_COLLECT[1]).rowcount or 0
    conn.exec_driver_sql(_COLLECT[2])
    return dropped
