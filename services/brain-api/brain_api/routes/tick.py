"""``POST /tick`` and ``GET /tick/{job_id}``: agents ask for a keeper tick and follow it (the MCP ``brain_tick`` tool).

Upstream's shapes, backed by Postgres (``brain_kernel.ticks.tick_queue``) instead
of request files: ``POST /tick`` queues a row and answers 202 with its
``job_id``; ``brain tick-drain`` runs the queued ticks, coalesced by flags,
and keeps each tick's summary on its requests' rows. ``request_path`` and
``path`` carried a file path upstream; they are now ``tick_requests/<job_id>``,
the table and key of the row. A job id matches exactly (upstream matched file
names by substring), and an id no row has answers 200 ``status: unknown``,
which the MCP tool counts on. A database outage answers 503 with the reason
(the app's handler), never 500.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import Field

from brain_api.deps import AuthDep, PrincipalDep, ReadSessionDep, SessionDep
from brain_api.responses import Answer, AnsweredRoute
from brain_core.times import iso
from brain_kernel.scope import Scope
from brain_kernel.ticks import tick_queue

router = APIRouter(tags=["tick"], dependencies=[AuthDep], route_class=AnsweredRoute)

SOURCE_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"


class TickQueued(Answer):
    """Answer of ``POST /tick``."""

    job_id: str
    requested_at: str
    request_path: str = Field(description="tick_requests/<job_id>: the row that holds the request.")
    dry_run: bool
    no_ai: bool
    status: str = Field(description="pending.")


class TickStatus(Answer):
    """Answer of ``GET /tick/{job_id}``: ``job_id`` and ``status`` alone when no request has this id (``unknown``)."""

    job_id: str
    requested_at: str | None = None
    dry_run: bool | None = None
    no_ai: bool | None = None
    source: str | None = None
    status: str = Field(description="pending, running, completed, failed, or unknown.")
    started_at: str | None = None
    finished_at: str | None = None
    result: dict[str, Any] | None = Field(None, description="The tick's summary once it ran (cut to its projects for a token bound to projects).")
    error: str | None = Field(None, description="Why it failed.")
    path: str | None = Field(None, description="tick_requests/<job_id>.")


@router.post("/tick", status_code=202, response_model=TickQueued)
def request_tick(
    db: SessionDep,
    dry_run: Annotated[bool, Query(description="Compute and report, write nothing.")] = False,
    no_ai: Annotated[bool, Query(description="Derive intents without the LLM.")] = False,
    source: Annotated[str, Query(pattern=SOURCE_PATTERN, description="Who asks: 1-64 letters, digits, '.', '_' or '-'.")] = tick_queue.DEFAULT_SOURCE,
) -> dict[str, Any]:
    """Queue a keeper tick; ``brain tick-drain`` runs it. Every call queues a new request."""
    job = tick_queue.enqueue(db, dry_run=dry_run, no_ai=no_ai, source=source)
    return {
        "job_id": job.job_id,
        "requested_at": iso(job.requested_at),
        "request_path": job.path,
        "dry_run": job.dry_run,
        "no_ai": job.no_ai,
        "status": job.status,
    }


@router.get("/tick/{job_id}", response_model=TickStatus)
def get_tick(db: ReadSessionDep, principal: PrincipalDep, job_id: Annotated[str, Path(min_length=1, max_length=64)]) -> dict[str, Any]:
    """A tick request's status (pending, running, completed, failed) and outcome; ``unknown`` when no request has this id.

    A token bound to projects reads the outcome cut to its projects: counts,
    its projects and its hot arcs; a failure's message is left out (ADR 0033).
    """
    job = tick_queue.get(db, job_id)
    if job is None:
        return {"job_id": job_id, "status": "unknown"}
    answer = job.as_dict()
    scope = Scope(db, principal)
    if scope.restricted:
        answer["result"] = scope.cut_tick_result(answer["result"])
        answer["error"] = "the tick failed (an unrestricted token reads why)" if answer["error"] else None
    return answer
