"""SQL repository of idempotency keys: replays answered from Postgres, shared by every worker.

A write claims its key with ``INSERT ... ON CONFLICT DO NOTHING`` inside the
request's transaction. The unique index makes a concurrent replay of the same
key wait until the first transaction ends: after a commit it finds the row and
replays the stored response, after a rollback its own insert goes through and
it does the work itself. So exactly one request per key writes, across
workers and replicas, with no lock held in process memory (ADR 0005).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from brain_kernel.models import IdempotencyKey


@dataclass(frozen=True)
class Claim:
    """The outcome of claiming a key: ``new`` (do the work), ``replay`` or ``conflict``."""

    state: str
    status_code: int = 0
    response: dict[str, Any] | None = None


def claim(session: Session, key: str, *, scope: str, body_hash: str, ttl_seconds: int) -> Claim:
    """Claim ``key`` for this transaction, or report the stored outcome of an earlier claim."""
    table = IdempotencyKey.__table__
    expires = func.now() + dt.timedelta(seconds=ttl_seconds)
    fresh = {"scope": scope, "body_hash": body_hash, "status_code": 0, "response": {}, "expires_at": expires}
    # A row can vanish between the statements (purged when expired), hence the retry.
    for _ in range(3):
        inserted = session.execute(insert(table).values(key=key, **fresh).on_conflict_do_nothing(index_elements=["key"]).returning(table.c.key)).first()
        if inserted is not None:
            return Claim("new")
        # An expired key is taken over in place; the row lock serialises concurrent takers.
        renewed = session.execute(
            update(table).where(table.c.key == key, table.c.expires_at <= func.now()).values(created_at=func.now(), **fresh).returning(table.c.key)
        ).first()
        if renewed is not None:
            return Claim("new")
        row = session.execute(select(table.c.scope, table.c.body_hash, table.c.status_code, table.c.response).where(table.c.key == key)).first()
        if row is None:
            continue
        if row.scope != scope or row.body_hash != body_hash:
            return Claim("conflict")
        return Claim("replay", row.status_code, dict(row.response))
    raise RuntimeError(f"idempotency key {key!r} could not be claimed")


def record_response(session: Session, key: str, *, status_code: int, response: dict[str, Any]) -> None:
    """Store the response of a claimed key so replays can return it."""
    table = IdempotencyKey.__table__
    session.execute(update(table).where(table.c.key == key).values(status_code=status_code, response=response))


def purge_expired(session: Session, *, limit: int = 100) -> int:
    """Delete up to ``limit`` keys past their expiry, skipping rows other transactions hold."""
    table = IdempotencyKey.__table__
    expired = select(table.c.key).where(table.c.expires_at <= func.now()).limit(limit).with_for_update(skip_locked=True)
    return session.execute(delete(table).where(table.c.key.in_(expired.scalar_subquery()))).rowcount or 0
