"""``POST /marker``: agents post lessons, milestones, signals and decisions (UPSTREAM.md 1.6).

The body keeps upstream's shape (``{type, content, attrs}``) and rules: only
the type, the content and the shape of ``attrs`` refuse a request (400 with
upstream's reason; 422 for a body that is not a JSON object with string type
and content); every attr of any JSON type is accepted. Every write is keyed:
the ``X-Idempotency-Key`` header, else the body hash. A reused key answers
the original response with ``idempotent_replay: true`` (and
``body_mismatch: true`` when the body differs), 201 either way, so a
client's outbox is never wedged. The answer adds ``project``. The work is
``brain_kernel.marker_service.post_marker`` inside the request's transaction,
opened and committed on the handler's own thread; the search index follows
the file after the commit, off the request (``brain_kernel.search.follower``),
and the entry is embedded a moment later (ADR 0067).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, StrictStr

from brain_api.deps import AuthDep, ClockDep, PrincipalDep, SettingsDep, UnitOfWorkDep, VaultDep
from brain_api.responses import Answer, errors
from brain_core.markers import MarkerInvalid
from brain_kernel import marker_service

router = APIRouter(tags=["markers"], dependencies=[AuthDep])


class MarkerIn(BaseModel):
    """Body of ``POST /marker``."""

    type: StrictStr = Field(..., description="lesson, milestone, signal or decision.", examples=["lesson"])
    content: StrictStr = Field(..., description="The marker text (markdown, at most 4096 characters).")
    attrs: Any = Field(
        None,
        description="Attributes of any JSON type; the kernel reads project, repo, worktree, cwd, session_id, source, "
        "severity, title, scope (a free label), status, target, fleet (a signal for every project), supersedes (entry ids "
        "or ADR-NNNN it replaces), valid_until (a date or moment) and ttl_days (it leaves the feed then).",
        examples=[{"session_id": "3f2a9c1e", "source": "claude-code"}],
    )


class MarkerOut(Answer):
    """Answer of ``POST /marker``."""

    ok: bool
    marker_type: str
    action: str
    vault_path: str
    written_bytes: int
    idempotency_key: str
    body_hash: str
    project: str | None
    entry_id: str | None = Field(None, description="The entry's stable id (GET /entries/{id}); a decision also answers to its ADR-NNNN.")
    supersedes: list[str] | None = Field(None, description="Present when attrs.supersedes named entries: the ids it replaced (ADR 0048).")
    idempotent_replay: bool | None = Field(None, description="Present (true) when the answer replays an earlier write.")
    body_mismatch: bool | None = Field(None, description="Present (true) on a replay whose body differs from the original's.")


# Documented, not a response_model (ADR 0059): the stored answer is replayed as it was written (tests/api/test_openapi.py
# holds real answers to the model).
@router.post(
    "/marker",
    status_code=201,
    responses={
        201: {"model": MarkerOut},
        **errors(400, 403, described={400: "Refused for upstream's reasons: the marker type, its content, the shape of attrs."}),
    },
)
def post_marker(
    request: Request,
    body: MarkerIn,
    uow: UnitOfWorkDep,
    settings: SettingsDep,
    vault: VaultDep,
    clock: ClockDep,
    principal: PrincipalDep,
    x_idempotency_key: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    """Write one marker to the vault and the index (or replay an earlier write of the same key)."""
    try:
        with uow() as db:  # opened and committed on this thread (deps.get_unit_of_work): one thread hop a request
            outcome = marker_service.submit(
                db,
                vault,
                settings,
                body.type,
                body.content,
                body.attrs,
                header_key=x_idempotency_key,
                now=clock(),
                locator=request.app.state.transcripts,
                principal=principal,
            )
    except MarkerInvalid as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from None
    except OSError as exc:  # the reservation stays pending: a retry finds whatever reached the vault
        raise HTTPException(status_code=503, detail=f"vault write failed: {exc.strerror or exc}") from None
    path = marker_service.written_path(outcome)
    if path and request.app.state.search_follower is not None:  # indexed for search after the commit, off this request
        request.app.state.search_follower.notify(path)
    if path and request.app.state.embed_follower is not None:  # and embedded a moment later (ADR 0067)
        request.app.state.embed_follower.notify(path)
    return JSONResponse(outcome.body, status_code=outcome.status_code)
