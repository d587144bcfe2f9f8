"""``GET /feed``: the global feed (unchanged shape) and the per-project feed (``?project=P``).

The global feed serves the keeper's files in ``brain-feed/`` plus the hottest
arcs and fleet inject blocks from the index. The project feed is
``brain_kernel.feed.answers.project_answer``: a stored answer when one is
still exact, else a lookup, one indexed statement and pure assembly, then
the answer is stored (ADR 0010). No vault file is read on this path and no
answer is kept in the process, so every replica answers every project from
the same rows.

``format=markdown`` answers the project's memory block instead
(``brain_kernel.feed.answers.project_block``, ADR 0040), under the same scope
rules; without a project, the fleet's block (fleet-wide signals, focus, hot
arcs and inject blocks: what a session in no project reads). ``cwd=`` names the project by a folder the server resolves (never for
a token bound to projects, ADR 0033); a folder in no known project is a 422,
never the fleet feed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response
from pydantic import Field
from sqlalchemy.orm import Session

from brain_api.deps import AuthDep, ClockDep, PrincipalDep, ReadSessionDep, SettingsDep, UnitOfWorkDep, VaultDep
from brain_api.responses import Answer, errors
from brain_core.feed.block import DEFAULT_MAX_BYTES, LABEL_CHARS, MAX_MAX_BYTES, MIN_MAX_BYTES, Rendered, neutral, parse_stale
from brain_core.feed.envelope import stamp_answer
from brain_core.identity import normalise_worktree
from brain_core.trial import CONTROL, control_block
from brain_kernel.feed.answers import DEFAULT_LESSON_DAYS, DEFAULT_TOP_N, fleet_block, global_answer, project_answer, provenance, serve_project_block
from brain_kernel.identity.resolver import IdentityResolver
from brain_kernel.identity.sessions import get_session
from brain_kernel.scope import Scope
from brain_kernel.settings import Settings
from brain_kernel.trial.records import BLOCK, Served, arm_of, record

router = APIRouter(tags=["feed"], dependencies=[AuthDep])

ANSWER_HEADER = "X-Brain-Feed"  # "stored": a stored answer still exact; "live": computed for this request
MARKDOWN = "text/markdown; charset=utf-8"
RESTRICTED_CWD = "cwd is not resolved for a token bound to projects; send project="


class FeedItem(Answer):
    """One feed entry as clients read it (``brain_core.feed.envelope.FeedEntry``)."""

    id: str
    title: str
    content: str
    priority: int = Field(description="Higher is injected sooner.")
    ttl: int = Field(description="Seconds a client may keep it.")
    severity: str
    metadata: dict[str, Any] = Field(description="The entry's facts; the kernel's scope (project or fleet), project and entry_id among them.")


class HotArc(Answer):
    """One arc under ``arcs``: the structured record of a hot arc."""

    cluster_id: str
    title: str
    summary: str | None
    heat: float
    region: str | None
    status: str | None
    project: str | None
    projects: list[str]
    repo: str | None
    vault_path: str
    last_active: str | None
    entry_id: str


class InjectBlock(Answer):
    """One inject block under ``blocks``."""

    id: str
    title: str
    content: str
    priority: int
    ttl: int
    severity: str
    target: list[str] = Field(description="Projects it is for; all for every project.")
    scope: str = Field(description="fleet or project.")
    project: str | None
    entry_id: str


class FeedProject(Answer):
    """The project a project feed is of."""

    key: str | None
    repo: str | None
    known: bool = Field(description="False: no memory yet (the feed says so in one entry).")
    last_active: str | None


class Feed(Answer):
    """``format=json``: the feed (upstream's shape); with a project, ``project`` and ``scope`` too."""

    hot_arcs: list[FeedItem] = Field(description="The hot-arcs entry (ids starting hot-arcs).")
    inject_blocks: list[FeedItem] = Field(description="Entries whose id starts inject.")
    entries: list[FeedItem] = Field(description="Every other entry, highest priority first.")
    entry_count: int
    vault_root: str
    arcs: list[HotArc]
    blocks: list[InjectBlock]
    project: FeedProject | None = Field(None, description="Project feed only.")
    scope: str | None = Field(None, description="Project feed only: project.")
    hash: str = Field(description="Changes when the feed does (generated_at aside).")
    generated_at: str


class Provenance(Answer):
    """One entry of the block that carries the commit and paths it was written against (ADR 0042)."""

    entry_id: str
    commit: str
    paths: list[str]


class FeedProvenance(Answer):
    """``format=provenance``: the commits and paths of the project block's entries."""

    project: str
    entries: list[Provenance]


# Documented, not a response_model (ADR 0059): the project feed is served as the stored JSON bytes and the block as text
# (tests/api/test_openapi.py holds real answers to the models).
FEED_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "format=json: the feed; format=provenance: the block's entries' commits and paths; format=markdown: the memory block.",
        "model": Feed | FeedProvenance,
        "content": {"text/markdown": {"schema": {"type": "string", "description": "The memory block (ADR 0040), at most max_bytes UTF-8 bytes."}}},
    },
    **errors(403, 409),
}


def _reject(field: str, reason: str) -> HTTPException:
    return HTTPException(status_code=422, detail=[{"loc": ["query", field], "msg": reason, "type": "value_error"}])


@router.get("/feed", responses=FEED_ANSWERS)
def get_feed(
    request: Request,
    db: ReadSessionDep,
    vault: VaultDep,
    clock: ClockDep,
    principal: PrincipalDep,
    settings: SettingsDep,
    uow: UnitOfWorkDep,
    project: Annotated[str | None, Query(max_length=300, description="Short key or owner/name slug; omit for the global feed.")] = None,
    top_n: Annotated[int, Query(ge=1, le=100, description="Hot arcs of the project to include.")] = DEFAULT_TOP_N,
    lesson_days: Annotated[int, Query(ge=1, le=365, description="Days of lessons, decisions, milestones and signals.")] = DEFAULT_LESSON_DAYS,
    format_: Annotated[
        Literal["json", "markdown", "provenance"],
        Query(alias="format", description="json (the feed), markdown (the memory block) or provenance (the block's entries' commits and paths)."),
    ] = "json",
    worktree: Annotated[str | None, Query(max_length=255, description="markdown: rank this worktree's arcs and entries first.")] = None,
    max_bytes: Annotated[int, Query(ge=MIN_MAX_BYTES, le=MAX_MAX_BYTES, description="markdown: the block's size cap in UTF-8 bytes.")] = DEFAULT_MAX_BYTES,
    session_id: Annotated[
        str | None, Query(max_length=300, description="markdown: the session served (recorded, given its trial arm; a registered one lends its worktree).")
    ] = None,
    cwd: Annotated[str | None, Query(max_length=4096, description="A folder the server resolves to the project (instead of project).")] = None,
    stale: Annotated[
        str | None,
        Query(max_length=32768, description='markdown: JSON {"<entry id>": {"paths": [...], "since": "<commit>", "commits": N}} from the checkout.'),
    ] = None,
) -> Any:
    """The global feed, or with ``project`` that project's memory plus labelled fleet-wide signals.

    A known project's answer is stored in the index with the snapshot it was
    read in and served again while no write has touched what it depends on
    (``X-Brain-Feed: stored``); ``Cache-Control: no-cache`` computes it afresh.
    A token bound to projects gets only those (403 outside them; without
    ``project``, its one project's feed, or 403 when it has several).
    """
    now = clock()
    root = str(vault.root)
    scope = Scope(db, principal)
    try:
        worktree = normalise_worktree(worktree)
    except ValueError as exc:
        raise _reject("worktree", str(exc)) from None
    try:
        flagged = parse_stale(stale) if stale is not None else None
    except ValueError as exc:
        raise _reject("stale", str(exc)) from None
    if cwd is not None:
        project, cwd_worktree = _project_of_cwd(cwd, project=project, settings=settings, db=db, scope=scope)
        worktree = worktree or cwd_worktree
    if project is None:
        project = scope.default_project()  # a token bound to one project gets that project's feed
    # The registered session reading a block: its worktree ranks, its agent picks the inject blocks (ADR 0070), and
    # the block is recorded against it, so it must be a session the token reads.
    reader = get_session(db, session_id) if session_id and format_ in ("markdown", "provenance") else None
    scope.check_session(session_id, reader)
    agent = reader.agent if reader is not None else None
    if project is None:
        if format_ == "provenance":
            raise _reject("format", "format=provenance needs a project: send project= or cwd=")
        if format_ == "markdown":  # the fleet's block: what a session in no project reads
            served = fleet_block(db, top_n=top_n, lesson_days=lesson_days, now=now, max_bytes=max_bytes, scope=scope, agent=agent)
            return _block_answer(served, "the fleet", session_id, agent, settings=settings, uow=uow)
        return global_answer(db, vault, now=now, scope=scope)
    if format_ in ("markdown", "provenance"):
        served = serve_project_block(  # same refusals as the JSON project feed
            db,
            project,
            top_n=top_n,
            lesson_days=lesson_days,
            now=now,
            max_bytes=max_bytes,
            worktree=worktree,
            session=reader,
            scope=scope,
            stale=flagged,
        )
        if format_ == "provenance":  # read by the connector, which checks them against its checkout (ADR 0042)
            return {"project": project.strip(), "entries": provenance(db, served.entry_ids)}
        return _block_answer(served, project.strip(), session_id, agent, settings=settings, uow=uow)
    answer = project_answer(  # malformed: 422, ambiguous: 409 (the app's error handlers)
        db,
        project,
        top_n=top_n,
        lesson_days=lesson_days,
        vault_root=root,
        now=now,
        fresh="no-cache" in request.headers.get("cache-control", "").lower(),
        scope=scope,
    )
    return Response(stamp_answer(answer.body, now), media_type="application/json", headers={ANSWER_HEADER: answer.source})


def _block_answer(served: Rendered, label: str, session_id: str | None, agent: str | None, *, settings: Settings, uow: Callable[[], Any]) -> Response:
    """The block as answered; served to a session, it is its trial arm's and it is recorded (ADR 0050)."""
    if session_id:
        assignment = arm_of(settings, repo=served.repo, project=served.key, session_id=session_id)
        if assignment.arm == CONTROL:  # a control session reads no memory: the frame and one neutral line (ADR 0050)
            # named as the treatment's frame names it (owner/name, else the key), whatever the request's spelling
            served = Rendered(control_block(neutral(served.repo or served.key or label, LABEL_CHARS)), (), False, served.key, served.repo)
        text = served.text
        record(
            uow,
            kind=BLOCK,
            assignment=assignment,
            served=Served(text, served.entry_ids, served.cut),
            session_id=session_id,
            agent=agent,
            project=served.key,
            repo=served.repo,
        )
    return Response(served.text.encode("utf-8"), media_type=MARKDOWN)


def _project_of_cwd(cwd: str, *, project: str | None, settings: Settings, db: Session, scope: Scope) -> tuple[str, str | None]:
    """The project id (repo, else key) and worktree of a folder resolved on the server; 422 with the reason otherwise."""
    if project is not None:
        raise _reject("cwd", "send project= or cwd=, not both")
    if scope.restricted:  # ADR 0033: a server folder is never resolved on the word of a token bound to projects
        raise _reject("cwd", RESTRICTED_CWD)
    folder = cwd.strip()
    if not folder or "\x00" in folder:
        raise _reject("cwd", "cwd must be a folder path")
    identity = IdentityResolver(settings, db, learn=False).resolve_path(folder)
    if identity.project is None:
        raise _reject("cwd", f"cwd {folder} is not in a known project")
    return identity.repo or identity.project, identity.worktree
