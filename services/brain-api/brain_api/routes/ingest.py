"""``POST /ingest`` and ``POST /ingest_with_files``: a message (and files) into inbox notes (UPSTREAM.md 1.9).

Form fields as upstream's: ``message`` (and repeated ``files``); ``producer``
is accepted and ignored, as upstream's server ignored it; ``project`` is
the kernel's addition. The work is ``brain_kernel.ingest.service.ingest``:
the answer is 200 with a failed fetch in ``errors``; only the scope's
refusals (403, 409, 422) and a database that cannot check them (503)
answer otherwise. The work is sync (its fetches block) and opens its
unit of work only for the scope check and the index follow, never across
a fetch. It runs on threads of its own, ``INGESTS_AT_ONCE`` at a time: a
fetch may take minutes (a slow page, a clone), and on the app's shared
thread pool 40 of them held every other route (the session start's
``GET /feed`` waited 55 s); more ingests wait their turn without a thread.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, File, Form, HTTPException, Request, UploadFile
from pydantic import Field

from brain_api.deps import AuthDep, ClockDep, PrincipalDep, SettingsDep, UnitOfWorkDep, VaultDep
from brain_api.responses import Answer, AnsweredRoute, errors
from brain_core.markers import has_lone_surrogate
from brain_kernel.ingest.service import MAX_FILES, MAX_MESSAGE_CHARS, Upload, ingest

router = APIRouter(tags=["ingest"], dependencies=[AuthDep], route_class=AnsweredRoute)

Message = Annotated[
    str, Form(max_length=MAX_MESSAGE_CHARS, description="The text to ingest: knowledge to keep and references (URLs, repositories, paths) to fetch.")
]
Project = Annotated[
    str | None,
    Form(max_length=300, description="The notes' project (short key or owner/name); a token bound to several projects must name one."),
]
Producer = Annotated[str | None, Form(max_length=200, description="Who sends it (accepted and ignored, as upstream's server did).")]


class Ingested(Answer):
    """Answer of ``POST /ingest`` and ``POST /ingest_with_files`` (upstream's keys, plus ``project``)."""

    batch_id: str
    obsidian_path: str | None = Field(description="The message's own note, when it kept any text.")
    vault_paths: list[str] = Field(description="Every note written, the files' and the fetched references' first.")
    semantic_text_preview: str
    errors: list[str] = Field(description="What could not be fetched or written (the rest was).")
    title: str
    tags: list[str]
    project: str | None
    classified_by: str = Field(description="How the message was classified: the LLM, or the rules when none answers.")


INGESTS_AT_ONCE = 4


def _limiter(request: Request) -> anyio.CapacityLimiter:
    """The app's ingest threads (made on the first ingest, in the app's event loop)."""
    state = request.app.state
    if getattr(state, "ingest_limiter", None) is None:
        state.ingest_limiter = anyio.CapacityLimiter(INGESTS_AT_ONCE)
    return state.ingest_limiter


INGEST_REFUSALS = errors(400, 403, 409, described={400: "The body cannot be parsed, or the message holds a lone surrogate."})


def _checked(message: str) -> str:
    if has_lone_surrogate([message]):
        raise HTTPException(status_code=400, detail="the message holds a lone surrogate (not valid Unicode text)")
    return message


@router.post("/ingest", response_model=Ingested, responses=INGEST_REFUSALS)
async def ingest_message(
    request: Request,
    settings: SettingsDep,
    vault: VaultDep,
    clock: ClockDep,
    uow: UnitOfWorkDep,
    principal: PrincipalDep,
    message: Message,
    project: Project = None,
    producer: Producer = None,
) -> dict[str, Any]:
    """Classify a message, fetch its references concurrently and write them and the message as inbox notes."""
    work = functools.partial(ingest, settings, vault, uow, _checked(message), principal=principal, now=clock(), project=project)
    return await anyio.to_thread.run_sync(work, limiter=_limiter(request))


@router.post("/ingest_with_files", response_model=Ingested, responses=INGEST_REFUSALS)
async def ingest_with_files(
    request: Request,
    settings: SettingsDep,
    vault: VaultDep,
    clock: ClockDep,
    uow: UnitOfWorkDep,
    principal: PrincipalDep,
    message: Message,
    files: Annotated[list[UploadFile], File(description=f"Files to keep as notes (text, utf-8; at most {MAX_FILES}).")] = [],  # noqa: B006
    project: Project = None,
    producer: Producer = None,
) -> dict[str, Any]:
    """Each uploaded file as an inbox note, then the message as ``POST /ingest`` takes it; the files' paths and errors come first."""
    uploads = [Upload(f.filename or "upload", await f.read()) for f in files]  # the body is bounded by BRAIN_MAX_BODY_BYTES
    work = functools.partial(ingest, settings, vault, uow, _checked(message), principal=principal, now=clock(), project=project, uploads=uploads)
    return await anyio.to_thread.run_sync(work, limiter=_limiter(request))
