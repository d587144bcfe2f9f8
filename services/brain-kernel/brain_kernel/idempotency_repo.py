"""SQL repository of idempotency keys: every marker write is remembered, durably and across replicas.

A write goes through three statements (ADR 0012):

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
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from brain_kernel.models import IdempotencyKey

PENDING, DONE = "pending", "done"


@dataclass(frozen=True)
class KeyRow:
    """A remembered key: its state, the body it was first used with, when, and the stored response."""

    state: str
    body_hash: str
    created_at: dt.datetime
    status_code: int = 0
    response: dict[str, Any] | None = None


_TABLE = IdempotencyKey.__table__
_COLUMNS = (_TABLE.c.state, _TABLE.c.body_hash, _TABLE.c.created_at, _TABLE.c.status_code, _TABLE.c.response)


def _row(found: Any) -> KeyRow | None:
    return KeyRow(found.state, found.body_hash, found.created_at, found.status_code, dict(found.response or {})) if found is not None else None


def lookup(session: Session, key: str) -> KeyRow | None:
    """The key's row when it is remembered and not expired."""
    stmt = select(*_COLUMNS).where(_TABLE.c.key == key, _TABLE.c.expires_at > func.now())
    return _row(session.execute(stmt).first())


def reserve(session: Session, key: str, *, scope: str, body_hash: str, ttl_seconds: int, at: dt.datetime) -> bool:
    """Remember ``key`` as pending, written at ``at``; True when this call created (or took over) the row.

    The caller commits it before the vault is written (a reservation is worth
    something only once durable). An expired row is taken over as a new write.
    """
    values = {
        "scope": scope,
        "state": PENDING,
        "body_hash": body_hash,
        "status_code": 0,
        "response": {},
        "created_at": at,
        "expires_at": at + dt.timedelta(seconds=ttl_seconds),
    }
    inserted = session.execute(insert(_TABLE).values(key=key, **values).on_conflict_do_nothing(index_elements=["key"]).returning(_TABLE.c.key)).first()
    if inserted is not None:
        return True
    renewed = session.execute(update(_TABLE).where(_TABLE.c.key == key, _TABLE.c.expires_at <= func.now()).values(**values).returning(_TABLE.c.key)).first()
    return renewed is not None


def lock(session: Session, key: str) -> KeyRow | None:
    """The key's row, locked until the caller's transaction ends (waits for a concurrent writer of the key)."""
    return _row(session.execute(select(*_COLUMNS).where(_TABLE.c.key == key).with_for_update()).first())


def finish(session: Session, key: str, *, status_code: int, response: dict[str, Any], ttl_seconds: int) -> None:
    """Mark the key done with its response (committed with the caller's transaction); its lifetime starts now."""
    session.execute(
        update(_TABLE)
        .where(_TABLE.c.key == key)
        .values(state=DONE, status_code=status_code, response=response, expires_at=func.now() + dt.timedelta(seconds=ttl_seconds))
    )


def purge_expired(session: Session, *, limit: int = 100) -> int:
    """Delete up to ``limit`` keys past their expiry, skipping rows other transactions hold."""
    expired = select(_TABLE.c.key).where(_TABLE.c.expires_at <= func.now()).limit(limit).with_for_update(skip_locked=True)
    return session.execute(delete(_TABLE).where(_TABLE.c.key.in_(expired.scalar_subquery()))).rowcount or 0
