"""SQL repository of idempotency keys: every marker write is remembered, durably and across replicas.

A write goes through three statements (ADR 0012), as SQL text (they run on every marker):

1. ``reserve`` inserts the key as ``pending``, and the entry point commits
   it before the vault is touched, with the moment the write is made
   (``created_at``). So a crash between the vault write and the request's
   commit leaves a trace the retry finds.
2. ``lock`` takes the key's row ``FOR UPDATE`` inside the request's
   transaction: a concurrent request for the same key waits until the first
   one commits (then replays its response) or dies (then takes over).
3. ``finish`` marks the key ``done`` with the response, in the request's
   transaction, so the answer and the index rows commit together.

Replays never refuse (``conflict`` is gone): the same key with another body
replays the original response and says so. Nothing lives in process memory.

``restore`` puts back, as ``done``, the keys a rebuild finds in the vault's
marker text (ADR 0035), never over a row the table holds.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from brain_core.vault.records import KeptKey
from brain_kernel.db.models import IdempotencyKey

PENDING, DONE = "pending", "done"
MARKER_SCOPE = "marker"  # the scope of every key a marker write reserves


@dataclass(frozen=True)
class KeyRow:
    """A remembered key: its state, the body it was first used with, when, and the stored response."""

    state: str
    body_hash: str
    created_at: dt.datetime
    status_code: int = 0
    response: dict[str, Any] | None = None


_TABLE = IdempotencyKey.__table__


# The three statements of every marker write as SQL text, run by the driver: the statement building and
# caching of the expression layer cost more than running them (a quarter of a marker's interpreter time).
_RESERVE = """INSERT INTO idempotency_keys (key, scope, state, body_hash, status_code, response, created_at, expires_at)
VALUES (%(key)s, %(scope)s, %(state)s, %(body_hash)s, 0, '{}', %(created_at)s, %(expires_at)s)
ON CONFLICT (key) DO NOTHING RETURNING key"""
_RENEW = """UPDATE idempotency_keys SET scope = %(scope)s, state = %(state)s, body_hash = %(body_hash)s, status_code = 0, response = '{}',
    created_at = %(created_at)s, expires_at = %(expires_at)s
 WHERE key = %(key)s AND expires_at <= now() RETURNING key"""
_LOCK = "SELECT state, body_hash, created_at, status_code, response FROM idempotency_keys WHERE key = %(key)s FOR UPDATE"
_FINISH = """UPDATE idempotency_keys SET state = %(state)s, status_code = %(status_code)s, response = %(response)s,
    body_hash = %(body_hash)s, expires_at = now() + make_interval(secs => %(ttl)s) WHERE key = %(key)s"""


# Keys a rebuild read from the vault, as their writes left them (one statement for a batch of files). A row the
# table holds stays as it is: it is the live record of that key (a pending write's, or a newer write's).
# The rows go as one JSON document: arrays of JSON text cost psycopg a regex escape of every quote (two thirds of
# the statement's time for a batch of 1,500 keys).
_RESTORE = """INSERT INTO idempotency_keys (key, scope, state, body_hash, status_code, response, created_at, expires_at)
SELECT r.key, %(scope)s, %(state)s, r.body_hash, 201, r.response, r.at, r.at + make_interval(secs => %(ttl)s)
  FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(key text, body_hash text, response jsonb, at timestamptz)
ON CONFLICT (key) DO NOTHING"""


def _row(found: Any) -> KeyRow | None:
    return KeyRow(found.state, found.body_hash, found.created_at, found.status_code, dict(found.response or {})) if found is not None else None


def reserve(session: Session, key: str, *, scope: str, body_hash: str, ttl_seconds: int, at: dt.datetime) -> bool:
    """Remember ``key`` as pending, written at ``at``; True when this call created (or took over) the row.

    The caller commits it before the vault is written (a reservation is worth
    something only once durable). An expired row is taken over as a new write.
    """
    values = {
        "key": key,
        "scope": scope,
        "state": PENDING,
        "body_hash": body_hash,
        "created_at": at,
        "expires_at": at + dt.timedelta(seconds=ttl_seconds),
    }
    conn = session.connection()
    if conn.exec_driver_sql(_RESERVE, values).first() is not None:
        return True
    return conn.exec_driver_sql(_RENEW, values).first() is not None


def held(session: Session, keys: Sequence[str]) -> set[str]:
    """Which of ``keys`` have a row (pending or done, expired or not): one statement."""
    rows = session.connection().exec_driver_sql("SELECT key FROM idempotency_keys WHERE key = ANY(%(keys)s)", {"keys": list(keys)})
    return {key for (key,) in rows}


def lock(session: Session, key: str) -> KeyRow | None:
    """The key's row, locked until the caller's transaction ends (waits for a concurrent writer of the key)."""
    return _row(session.connection().exec_driver_sql(_LOCK, {"key": key}).first())


def finish(session: Session, key: str, *, status_code: int, response: dict[str, Any], body_hash: str, ttl_seconds: int) -> None:
    """Mark the key done with its response (committed with the caller's transaction); its lifetime starts now.

    ``body_hash`` is the written body's: under a race of two bodies on one key, the request that writes may not be
    the one that reserved, and a replay's ``body_mismatch`` must compare with what was written.
    """
    params = {"key": key, "state": DONE, "status_code": status_code, "response": Jsonb(response), "body_hash": body_hash, "ttl": float(ttl_seconds)}
    session.connection().exec_driver_sql(_FINISH, params)


def restore(session: Session, kept: Iterable[KeptKey], *, ttl_seconds: int) -> int:
    """Remember the keys the vault keeps as ``done`` with their responses, from their write's moment for the TTL;
    returns how many rows were added (a key the table holds is left as it is)."""
    latest: dict[str, KeptKey] = {}
    for k in kept:  # one key written twice (taken over once expired): its later write is the one remembered
        if k.key not in latest or latest[k.key].at < k.at:
            latest[k.key] = k
    if not latest:
        return 0
    rows = [{"key": k.key, "body_hash": k.body_hash, "response": k.response, "at": k.at.isoformat()} for k in latest.values()]
    params = {"scope": MARKER_SCOPE, "state": DONE, "ttl": float(ttl_seconds), "rows": json.dumps(rows)}
    return session.connection().exec_driver_sql(_RESTORE, params).rowcount or 0


def purge_expired(session: Session, *, limit: int = 100) -> int:
    """Delete up to ``limit`` keys past their expiry, skipping rows other transactions hold."""
    expired = select(_TABLE.c.key).where(_TABLE.c.expires_at <= func.now()).limit(limit).with_for_update(skip_locked=True)
    return session.execute(delete(_TABLE).where(_TABLE.c.key.in_(expired.scalar_subquery()))).rowcount or 0
