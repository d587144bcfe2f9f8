"""``POST /pulls``: an MCP memory read answered through the kernel's routes, recorded as a pull (ADR 0061).

``brain mcp --remote`` reads memory through the search, feed and vault
routes, which cannot tell an MCP read from any other; after building a
read's answer it posts it here, with the answer a control project reads
instead. The kernel assigns the read its arm as the in-process tools do
(``brain_kernel.trial.records.pull_of``), records the answer the arm gets,
and says which one to serve. A token bound to projects records only its
projects' reads (403 otherwise, as the feed answers).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field, StrictStr

from brain_api.deps import AuthDep, PrincipalDep, ReadSessionDep, SettingsDep, UnitOfWorkDep
from brain_api.responses import Answer, AnsweredRoute, errors
from brain_kernel.identity.projects import EXACT
from brain_kernel.identity.sessions import get_session
from brain_kernel.scope import Scope
from brain_kernel.trial import records

router = APIRouter(tags=["trial"], dependencies=[AuthDep], route_class=AnsweredRoute)

MAX_TEXT_CHARS = 2_000_000  # a kb_search answer of 200 hits with their previews is far below it
MAX_ENTRY_IDS = 1000


class PullIn(BaseModel):
    """Body of ``POST /pulls``: one read as the MCP server answered it, and as a control project would read it."""

    session_id: StrictStr | None = Field(None, min_length=1, max_length=300, description="The session asking, when the tool call named it.")
    project: StrictStr | None = Field(None, max_length=300, description="Short key or owner/name slug the read was about, if any.")
    folder: StrictStr | None = Field(
        None,
        max_length=300,
        description="The project of the folder the MCP server runs in (an owner/name slug): the read's arm when it names no project and no "
        "session the kernel knows (ADR 0066). A hint: unknown, ambiguous or out of scope, it is ignored.",
    )
    entry_ids: list[StrictStr] = Field(default_factory=list, max_length=MAX_ENTRY_IDS, description="The entries the answer shows.")
    text: StrictStr = Field(..., max_length=MAX_TEXT_CHARS, description="The answer as served with memory (its JSON, or a block's markdown).")
    withheld_text: StrictStr = Field(..., max_length=MAX_TEXT_CHARS, description="The answer a control project reads instead.")


class Pulled(Answer):
    """Answer of ``POST /pulls``: the read's arm and whether to serve the answer without memory."""

    arm: str = Field(description="treatment, control or unassignable.")
    withheld: bool = Field(description="True in control: serve withheld_text.")


@router.post("/pulls", response_model=Pulled, responses=errors(403, 409))
def post_pull(body: PullIn, db: ReadSessionDep, settings: SettingsDep, principal: PrincipalDep, uow: UnitOfWorkDep) -> dict[str, Any]:
    """Record an MCP read made through the routes (one ``injections`` row, kind pull) and answer its trial arm."""
    reach = Scope(db, principal)
    if body.session_id:
        reach.check_session(body.session_id, get_session(db, body.session_id))
    about = None
    if body.project is not None and body.project.strip():
        found = reach.check(body.project)  # malformed: 422, ambiguous: 409, out of scope: 403 (the app's handlers)
        about = (found.key, found.repo) if found.status == EXACT else None
    pull = records.pull_of(db, settings, reach, about, body.session_id, folder=body.folder)
    served = records.Served(body.withheld_text, ()) if pull.withheld else records.Served(body.text, tuple(body.entry_ids))
    records.record_pull(uow, pull, served)
    return {"arm": pull.assignment.arm, "withheld": pull.withheld}
