"""``GET /feed``: the global feed (unchanged shape) and the per-project feed (``?project=P``).

The global feed serves the keeper's files in ``brain-feed/`` plus the hottest
arcs and fleet inject blocks from the index. The project feed is
``brain_kernel.feed.answers.project_answer``: a stored answer when one is
still exact, else a lookup, one indexed statement and pure assembly, then
the answer is stored (ADR 0010). No vault file is read on this path and no
answer is kept in the process, so every replica answers every project from
the same rows.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from brain_api.deps import AuthDep, ClockDep, PrincipalDep, ReadSessionDep, VaultDep
from brain_core.feed.envelope import stamp_answer
from brain_kernel.feed.answers import DEFAULT_LESSON_DAYS, DEFAULT_TOP_N, global_answer, project_answer
from brain_kernel.scope import Scope

router = APIRouter(tags=["feed"], dependencies=[AuthDep])

ANSWER_HEADER = "X-Brain-Feed"  # "stored": a stored answer still exact; "live": computed for this request


@router.get("/feed")
def get_feed(
    request: Request,
    db: ReadSessionDep,
    vault: VaultDep,
    clock: ClockDep,
    principal: PrincipalDep,
    project: Annotated[str | None, Query(max_length=300, description="Short key or owner/name slug; omit for the global feed.")] = None,
    top_n: Annotated[int, Query(ge=1, le=100, description="Hot arcs of the project to include.")] = DEFAULT_TOP_N,
    lesson_days: Annotated[int, Query(ge=1, le=365, description="Days of lessons, decisions, milestones and signals.")] = DEFAULT_LESSON_DAYS,
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
    if project is None:
        project = scope.default_project()  # a token bound to one project gets that project's feed
    if project is None:
        return global_answer(db, vault, now=now, scope=scope)
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
