"""``POST /marker``: agents post lessons, milestones, signals and decisions.

The body keeps the upstream shape (``{type, content, attrs}``) and the answer
adds ``project``. Shape errors answer 422, rule violations 400 (both
``{"detail": ...}``, nothing written); a replayed ``X-Idempotency-Key``
answers the original response with ``idempotent_replay: true``; the same key
with another body answers 409. The work is ``brain_kernel.markers.post_marker``
inside the request's transaction.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, StrictStr

from brain_api.deps import AuthDep, ClockDep, SessionDep, SettingsDep, VaultDep
from brain_core.markers import MarkerInvalid, check_idempotency_key, parse_request
from brain_kernel import markers as service

router = APIRouter(tags=["markers"], dependencies=[AuthDep])


class MarkerIn(BaseModel):
    """Body of ``POST /marker``."""

    type: StrictStr = Field(..., description="lesson, milestone, signal or decision.", examples=["lesson"])
    content: StrictStr = Field(..., description="The marker text (markdown).")
    attrs: dict[str, StrictStr] | None = Field(
        None,
        description="String attributes: project, repo, worktree, cwd, session_id, source, severity, title, scope, status, target.",
        examples=[{"project": "the-cloud-clockwork/agentihooks", "session_id": "3f2a9c1e", "source": "claude-code"}],
    )


class MarkerOut(BaseModel):
    """Answer of ``POST /marker``."""

    ok: bool
    marker_type: str
    action: str
    vault_path: str
    written_bytes: int
    idempotency_key: str | None
    body_hash: str
    project: str | None
    idempotent_replay: bool | None = Field(None, description="Present (true) when the answer replays an earlier write.")


@router.post("/marker", status_code=201, responses={201: {"model": MarkerOut}, 400: {}, 409: {}, 422: {}})
def post_marker(
    body: MarkerIn,
    db: SessionDep,
    settings: SettingsDep,
    vault: VaultDep,
    clock: ClockDep,
    x_idempotency_key: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    """Write one marker to the vault and the index (or replay an earlier write of the same key)."""
    try:
        key = check_idempotency_key(x_idempotency_key)
        req = parse_request(body.type, body.content, body.attrs, max_chars=settings.marker_max_chars)
    except MarkerInvalid as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from None
    try:
        outcome = service.post_marker(db, vault, settings, req, idempotency_key=key, now=clock())
    except service.IdempotencyConflict as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    return JSONResponse(outcome.body, status_code=outcome.status_code)
