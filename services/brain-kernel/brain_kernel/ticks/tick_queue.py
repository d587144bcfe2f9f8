"""SQL repository of the tick queue: keeper ticks requested through ``POST /tick``, run by ``brain tick-drain``.

Upstream kept one JSON file per request under ``brain-feed/ticks/`` and found
a job by substring match on file names; here a request is a row of
``tick_requests`` keyed by a random 12-hex-digit id, looked up by exact match,
with its outcome (the tick summary or the error) kept on the row. A request
moves ``pending`` -> ``running`` (claimed by one drain) -> ``completed`` or
``failed``. Claims use ``FOR UPDATE SKIP LOCKED`` and mark the rows
``running``, so two drains never run the same request, whether they overlap
or follow each other. Functions take a session and never commit: the entry
point owns the transaction.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, func, null, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from brain_core.jsonable import json_object
from brain_kernel.db.models import TickRequest

PENDING, RUNNING, COMPLETED, FAILED = "pending", "running", "completed", "failed"
# A request still running this long after its claim belongs to a drain that died (ticks are bounded far below).
STALE_RUNNING = dt.timedelta(hours=1)
FINISHED = (COMPLETED, FAILED)
DEFAULT_SOURCE = "brain-api"
# Where a request lives, for answers that carried upstream's file path: a table and a key now.
PATH_PREFIX = "tick_requests/"

_TABLE = TickRequest.__table__
_ENQUEUE_ATTEMPTS = 5


@dataclass(frozen=True)
class TickJob:
    """One tick request as stored."""

    job_id: str
    requested_at: dt.datetime
    dry_run: bool
    no_ai: bool
    source: str
    status: str
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    result: dict[str, Any] | None = None
    error: str | None = None

    @property
    def path(self) -> str:
        """Where the request is kept: ``tick_requests/<job_id>`` (a row, not upstream's file)."""
        return request_path(self.job_id)

    def as_dict(self) -> dict[str, Any]:
        """The JSON answer of ``GET /tick/{job_id}``: the fields, then ``path``."""
        return {**json_object(self), "path": self.path}


def request_path(job_id: str) -> str:
    """The address of a request: ``tick_requests/<job_id>``."""
    return f"{PATH_PREFIX}{job_id}"


def new_job_id() -> str:
    """A fresh job id: 12 lowercase hex characters (48 random bits)."""
    return secrets.token_hex(6)


def _job(row: Row[Any]) -> TickJob:
    return TickJob(
        job_id=row.job_id,
        requested_at=row.requested_at,
        dry_run=row.dry_run,
        no_ai=row.no_ai,
        source=row.source,
        status=row.status,
        started_at=row.started_at,
        finished_at=row.finished_at,
        result=row.result,
        error=row.error,
    )


def enqueue(session: Session, *, dry_run: bool, no_ai: bool, source: str = DEFAULT_SOURCE) -> TickJob:
    """Insert a new pending request under a fresh id and return it."""
    for _ in range(_ENQUEUE_ATTEMPTS):
        # ON CONFLICT DO NOTHING: a clash of random ids (about 1 in 2**48 per pair) draws again
        # instead of aborting the caller's transaction.
        stmt = (
            insert(_TABLE)
            .values(job_id=new_job_id(), dry_run=dry_run, no_ai=no_ai, source=source, status=PENDING)
            .on_conflict_do_nothing(index_elements=["job_id"])
            .returning(*_TABLE.c)
        )
        row = session.execute(stmt).first()
        if row is not None:
            return _job(row)
    raise RuntimeError(f"no free tick job id after {_ENQUEUE_ATTEMPTS} attempts")


def get(session: Session, job_id: str) -> TickJob | None:
    """The request with exactly this id, or None."""
    row = session.execute(select(*_TABLE.c).where(_TABLE.c.job_id == job_id)).first()
    return _job(row) if row is not None else None


def _claimable() -> Any:
    """Pending requests, and running ones a drain claimed over ``STALE_RUNNING`` ago (that drain died: no tick runs that long)."""
    stale = func.now() - STALE_RUNNING
    return (_TABLE.c.status == PENDING) | ((_TABLE.c.status == RUNNING) & (_TABLE.c.started_at < stale))


def claim_pending(session: Session, *, limit: int | None = None) -> list[TickJob]:
    """Mark claimable requests ``running`` (oldest first) and return them; rows another transaction holds are skipped."""
    # The lock is taken in a CTE, evaluated once, so the UPDATE touches exactly the rows locked.
    # A row another drain claimed and committed meanwhile fails the re-checked status test.
    locked = select(_TABLE.c.job_id).where(_claimable()).order_by(_TABLE.c.requested_at, _TABLE.c.job_id).with_for_update(skip_locked=True)
    if limit is not None:
        locked = locked.limit(limit)
    claimed = locked.cte("claimed")
    stmt = update(_TABLE).where(_TABLE.c.job_id == claimed.c.job_id, _claimable()).values(status=RUNNING, started_at=func.now()).returning(*_TABLE.c)
    jobs = [_job(row) for row in session.execute(stmt)]
    return sorted(jobs, key=lambda j: (j.requested_at, j.job_id))  # RETURNING has no order


def finish(session: Session, job_ids: Iterable[str], *, status: str, result: dict[str, Any] | None = None, error: str | None = None) -> int:
    """Record the outcome of running requests (``completed`` with a result or ``failed`` with an error); returns rows changed."""
    if status not in FINISHED:
        raise ValueError(f"a request finishes as {' or '.join(FINISHED)}, not {status!r}")
    ids = sorted(set(job_ids))
    if not ids:
        return 0
    # Only rows still running: a request finishes once, by the drain that claimed it. A missing
    # result is SQL NULL, not the JSON ``null`` the JSONB type would write for None.
    values = {"status": status, "finished_at": func.now(), "result": result if result is not None else null(), "error": error}
    stmt = update(_TABLE).where(_TABLE.c.job_id.in_(ids), _TABLE.c.status == RUNNING).values(**values)
    return session.execute(stmt).rowcount or 0


def counts(session: Session) -> dict[str, int]:
    """How many requests are in each status (absent statuses are left out)."""
    rows = session.execute(select(_TABLE.c.status, func.count()).group_by(_TABLE.c.status))
    return {status: int(n) for status, n in rows}
