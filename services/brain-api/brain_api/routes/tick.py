"""``POST /tick`` and ``GET /tick/{job_id}``: agents ask for a keeper tick and follow it (the MCP ``brain_tick`` tool).

Upstream's shapes, backed by Postgres (``brain_kernel.tick_queue``) instead
of request files: ``POST /tick`` queues a row and answers 202 with its
``job_id``; ``brain tick-drain`` runs the queued ticks, coalesced by flags,
and keeps each tick's summary on its requests' rows. ``request_path`` and
``path`` carried a file path upstream; they are now ``tick_requests/<job_id>``,
the table and key of the row. A job id matches exactly (upstream matched file
names by substring), and an id no row has answers 200 ``status: unknown``,
which the MCP tool counts on. Each handler runs its own transaction so that a
database failure, commit included, answers 503 with the reason, never 500.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from brain_api.deps import AuthDep
from brain_core.times import iso
from brain_kernel import tick_queue
from brain_kernel.db import unit_of_work

log = logging.getLogger("brain.tick")

router = APIRouter(tags=["tick"], dependencies=[AuthDep])

SOURCE_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"


def _factory(request: Request, name: str) -> sessionmaker[Session]:
    factory = getattr(request.app.state, name)
    if factory is None:
        raise HTTPException(status_code=503, detail="database is not configured")
    return factory


def _unavailable(exc: SQLAlchemyError) -> HTTPException:
    """503 with the database's one-line reason."""
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    reason = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    log.warning("tick queue unavailable: %s", reason)
    return HTTPException(status_code=503, detail=f"tick queue unavailable: {reason}")


@router.post("/tick", status_code=202)
def request_tick(
    request: Request,
    dry_run: Annotated[bool, Query(description="Compute and report, write nothing.")] = False,
    no_ai: Annotated[bool, Query(description="Derive intents without the LLM.")] = False,
    source: Annotated[str, Query(pattern=SOURCE_PATTERN, description="Who asks: 1-64 letters, digits, '.', '_' or '-'.")] = tick_queue.DEFAULT_SOURCE,
) -> dict[str, Any]:
    """Queue a keeper tick; ``brain tick-drain`` runs it. Every call queues a new request."""
    factory = _factory(request, "session_factory")
    try:
        with unit_of_work(factory) as session:
            job = tick_queue.enqueue(session, dry_run=dry_run, no_ai=no_ai, source=source)
    except SQLAlchemyError as exc:
        raise _unavailable(exc) from None
    return {
        "job_id": job.job_id,
        "requested_at": iso(job.requested_at),
        "request_path": job.path,
        "dry_run": job.dry_run,
        "no_ai": job.no_ai,
        "status": job.status,
    }


@router.get("/tick/{job_id}")
def get_tick(request: Request, job_id: Annotated[str, Path(min_length=1, max_length=64)]) -> dict[str, Any]:
    """A tick request's status (pending, running, completed, failed) and outcome; ``unknown`` when no request has this id."""
    factory = _factory(request, "read_session_factory")
    try:
        with factory() as session:
            job = tick_queue.get(session, job_id)
    except SQLAlchemyError as exc:
        raise _unavailable(exc) from None
    if job is None:
        return {"job_id": job_id, "status": "unknown"}
    return job.as_dict()
