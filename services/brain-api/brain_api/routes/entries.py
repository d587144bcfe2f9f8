"""``GET /entries``, ``GET /entries/{entry_id}``, ``POST /entries/{entry_id}/retract``: curation (ADR 0048).

An entry is named by its stable id (``kind:vault_path[#anchor]``, what
``POST /marker`` answers as ``entry_id`` and feed metadata carry; percent-encode
its ``#``), or a decision by its ``ADR-NNNN``. The work is
``brain_kernel.curation.service``; a retraction writes the vault, follows the
file into the index in the request's transaction and appends the audit record.
A token bound to projects finds only its projects' entries: any other id is
answered as one that does not exist (404, ADR 0033).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query
from pydantic import BaseModel, Field, StrictStr

from brain_api.deps import AuthDep, ClockDep, PrincipalDep, ReadSessionDep, UnitOfWorkDep, VaultDep
from brain_core.curation import MAX_REASON_CHARS, CurationInvalid
from brain_kernel.curation import service
from brain_kernel.scope import Scope

router = APIRouter(tags=["entries"], dependencies=[AuthDep])

EntryId = Annotated[str, Path(max_length=1000, description="An entry id (percent-encode '#'), or ADR-NNNN for a decision.")]


class RetractIn(BaseModel):
    """Body of ``POST /entries/{entry_id}/retract``."""

    reason: StrictStr = Field(..., min_length=1, max_length=MAX_REASON_CHARS, description="Why the entry is withdrawn (recorded in the vault).")


def _invalid(exc: CurationInvalid, field: str) -> HTTPException:
    return HTTPException(status_code=422, detail=[{"loc": [field], "msg": str(exc), "type": "value_error"}])


def _not_found(exc: service.EntryNotFound) -> HTTPException:
    return HTTPException(status_code=404, detail=str(exc))


@router.get("/entries", responses={403: {}, 404: {}, 409: {}, 422: {}})
def list_entries(
    db: ReadSessionDep,
    clock: ClockDep,
    principal: PrincipalDep,
    project: Annotated[str | None, Query(max_length=300, description="Short key or owner/name slug; a token bound to one project: its own.")] = None,
    kind: Annotated[str | None, Query(max_length=32, description="lesson, milestone, signal, decision (default: these four), or arc, intent, inject.")] = None,
    state: Annotated[str, Query(max_length=32, description="live, superseded, retracted, expired or all.")] = service.ALL,
    limit: Annotated[int, Query(ge=1, le=service.MAX_LIMIT, description="At most this many, newest first.")] = service.DEFAULT_LIMIT,
) -> dict[str, Any]:
    """Entries for curation, newest first, each with its state (a token bound to projects: its projects' only)."""
    try:
        listing = service.list_entries(db, scope=Scope(db, principal), project=project, kind=kind, state=state, limit=limit, now=clock())
    except CurationInvalid as exc:
        raise _invalid(exc, "query") from None
    return {"project": listing.project, "kind": listing.kind, "state": listing.state, "count": len(listing.entries), "entries": listing.entries}


@router.get("/entries/{entry_id:path}", responses={404: {}})
def get_entry(entry_id: EntryId, db: ReadSessionDep, clock: ClockDep, principal: PrincipalDep) -> dict[str, Any]:
    """One entry with its history: written, what it supersedes, superseded by, retracted (why, by which token, when), expiry."""
    try:
        return service.entry_answer(db, entry_id, scope=Scope(db, principal), now=clock())
    except service.EntryNotFound as exc:
        raise _not_found(exc) from None


@router.post("/entries/{entry_id:path}/retract", responses={403: {}, 404: {}, 422: {}})
def retract_entry(entry_id: EntryId, body: RetractIn, uow: UnitOfWorkDep, vault: VaultDep, clock: ClockDep, principal: PrincipalDep) -> dict[str, Any]:
    """Withdraw an entry from feeds and search, recorded in the vault and the audit log; a second call changes nothing."""
    now = clock()
    try:
        with uow() as db:
            record = service.retract(db, vault, entry_id, body.reason, scope=Scope(db, principal), now=now)
    except service.EntryNotFound as exc:
        raise _not_found(exc) from None
    except CurationInvalid as exc:
        raise _invalid(exc, "body") from None
    except service.NotCuratable as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    return service.answer_of(record, now)
