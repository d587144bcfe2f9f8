"""``GET /entries``, ``GET /entries/{entry_id}``, ``POST /entries/{entry_id}/retract`` and ``/expire``: curation
(ADR 0048, 0060).

An entry is named by its stable id (``kind:vault_path[#anchor]``, what
``POST /marker`` answers as ``entry_id`` and feed metadata carry; percent-encode
its ``#``), or a decision by its ``ADR-NNNN``. The work is
``brain_kernel.curation.service``; a retraction writes the vault, follows the
file into the index in the request's transaction and appends the audit record.
A token bound to projects finds only its projects' entries: any other id is
answered as one that does not exist (404, ADR 0033).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query
from pydantic import BaseModel, Field, StrictStr

from brain_api.deps import AuthDep, ClockDep, PrincipalDep, ReadSessionDep, UnitOfWorkDep, VaultDep
from brain_api.responses import Answer, AnsweredRoute, errors
from brain_core.curation import MAX_REASON_CHARS, CurationInvalid
from brain_kernel.curation import service
from brain_kernel.scope import Scope

router = APIRouter(tags=["entries"], dependencies=[AuthDep], route_class=AnsweredRoute)

EntryId = Annotated[str, Path(max_length=1000, description="An entry id (percent-encode '#'), or ADR-NNNN for a decision.")]


class RetractIn(BaseModel):
    """Body of ``POST /entries/{entry_id}/retract``."""

    reason: StrictStr = Field(..., min_length=1, max_length=MAX_REASON_CHARS, description="Why the entry is withdrawn (recorded in the vault).")


class ExpireIn(BaseModel):
    """Body of ``POST /entries/{entry_id}/expire``."""

    reason: StrictStr = Field(..., min_length=1, max_length=MAX_REASON_CHARS, description="Why the entry expires early (recorded in the vault).")
    at: StrictStr | None = Field(
        None,
        max_length=64,
        description="When it expires: an ISO 8601 moment, or a date (through that day, UTC); default now. Never later than its valid_until.",
    )


class Retracted(Answer):
    """Who withdrew an entry, when and why."""

    reason: str | None
    by: str | None = Field(description="The token's name, or operator.")
    at: str | None


class EntryView(Answer):
    """An entry as curation shows it (``brain_kernel.curation.service.view``)."""

    entry_id: str = Field(description="The stable id: kind:vault_path[#anchor].")
    adr: str | None = Field(description="ADR-NNNN of a decision file.")
    kind: str
    title: str
    content: str
    project: str | None
    projects: list[str]
    repo: str | None
    scope: str = Field(description="project or fleet.")
    vault_path: str
    occurred_at: str | None
    status: str | None = Field(description="What the vault records: superseded, retracted, or null.")
    state: str = Field(description="live, superseded, retracted or expired.")
    valid_until: str | None = Field(description="The moment it leaves the feed (ISO 8601), or null.")
    supersedes: list[str]
    superseded_by: list[str]
    retracted: Retracted | None


class HistoryEvent(Answer):
    """One event of an entry's curation history; the keys beside action and at depend on the action."""

    action: str = Field(description="written, supersedes, superseded, reinstated, retracted, expires or expired.")
    at: str | None
    by: str | None = None
    reason: str | None = None
    entries: list[str] | None = Field(None, description="supersedes: the entries it replaced.")
    superseded_by: list[str] | None = None
    retracted_successor: str | None = Field(None, description="reinstated: the successor whose retraction brought it back (ADR 0060).")
    recorded_at: str | None = Field(None, description="expires, expired: when an early expiry was recorded (at is the moment it takes effect).")


class EntryHistory(Answer):
    """Answer of ``GET /entries/{entry_id}`` and of a retraction: the entry as it now stands, and its history."""

    entry: EntryView
    history: list[HistoryEvent] = Field(description="Oldest first.")


class EntryList(Answer):
    """Answer of ``GET /entries``."""

    project: str | None = Field(description="The project listed; null: every project the token reads.")
    kind: str | None
    state: str
    count: int
    entries: list[EntryView] = Field(description="Newest first.")


NOT_FOUND = {404: "No entry has this id (or the token may not read it)."}


def _invalid(exc: CurationInvalid, field: str) -> HTTPException:
    return HTTPException(status_code=422, detail=[{"loc": [field], "msg": str(exc), "type": "value_error"}])


def _not_found(exc: service.EntryNotFound) -> HTTPException:
    return HTTPException(status_code=404, detail=str(exc))


@router.get("/entries", response_model=EntryList, responses=errors(403, 409))
def list_entries(
    db: ReadSessionDep,
    clock: ClockDep,
    principal: PrincipalDep,
    project: Annotated[
        str | None, Query(min_length=1, max_length=300, description="Short key or owner/name slug; a token bound to one project: its own.")
    ] = None,
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


@router.get("/entries/{entry_id:path}", response_model=EntryHistory, responses=errors(described=NOT_FOUND))
def get_entry(entry_id: EntryId, db: ReadSessionDep, clock: ClockDep, principal: PrincipalDep) -> dict[str, Any]:
    """One entry with its history: written, what it supersedes, superseded by, retracted (why, by which token, when), expiry."""
    try:
        return service.entry_answer(db, entry_id, scope=Scope(db, principal), now=clock())
    except service.EntryNotFound as exc:
        raise _not_found(exc) from None


@contextmanager
def _curation_answers() -> Iterator[None]:
    """A curation action's refusals as HTTP answers. Entered before the unit of work, so a refusal rolls the index
    back first; a vault write that failed is a 503, and a retry records the action whole (as a marker's)."""
    try:
        yield
    except service.EntryNotFound as exc:
        raise _not_found(exc) from None
    except CurationInvalid as exc:
        raise _invalid(exc, "body") from None
    except service.NotCuratable as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    except OSError as exc:
        raise HTTPException(status_code=503, detail=f"vault write failed: {exc.strerror or exc}") from None


@router.post("/entries/{entry_id:path}/retract", response_model=EntryHistory, responses=errors(403, described=NOT_FOUND))
def retract_entry(entry_id: EntryId, body: RetractIn, uow: UnitOfWorkDep, vault: VaultDep, clock: ClockDep, principal: PrincipalDep) -> dict[str, Any]:
    """Withdraw an entry from feeds and search, recorded in the vault and the audit log; a second call changes nothing."""
    now = clock()
    with _curation_answers(), uow() as db:
        record = service.retract(db, vault, entry_id, body.reason, scope=Scope(db, principal), now=now)
    return service.answer_of(record, now)


@router.post("/entries/{entry_id:path}/expire", response_model=EntryHistory, responses=errors(403, described=NOT_FOUND))
def expire_entry(entry_id: EntryId, body: ExpireIn, uow: UnitOfWorkDep, vault: VaultDep, clock: ClockDep, principal: PrincipalDep) -> dict[str, Any]:
    """Expire an entry early (now, or at a given moment no later than its valid_until), recorded in the vault and the
    audit log; it leaves the feed and stays searchable, marked. An entry already expired changes nothing (ADR 0060)."""
    now = clock()
    with _curation_answers(), uow() as db:
        record = service.expire(db, vault, entry_id, body.reason, body.at, scope=Scope(db, principal), now=now)
    return service.answer_of(record, now)
