"""``GET /feed``: the global feed (unchanged shape) and the per-project feed (``?project=P``).

The global feed serves the keeper's files in ``brain-feed/`` plus the hottest
arcs and fleet inject blocks from the index. The project feed is served from
the index alone: a stored answer when one is still exact (one indexed
statement, ``brain_kernel.feed_snapshots``), else a project lookup, one
indexed statement and pure assembly in ``brain_core.feed``, then the answer
is stored. No vault file is read on this path and no answer is kept in the
process, so every replica answers every project from the same rows.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DBAPIError

from brain_api.deps import AuthDep, ReadSessionDep, VaultDep
from brain_core.feed import ProjectMemory, ProjectRef, answer_body, global_feed, project_feed, stamp_answer
from brain_core.keys import InvalidKey, parse_project_ref
from brain_kernel import feed_repo, feed_snapshots
from brain_kernel.feed_snapshots import SnapshotKey
from brain_kernel.projects import AMBIGUOUS, EXACT, lookup_project
from brain_kernel.vault import Vault

log = logging.getLogger("brain.api.feed")
router = APIRouter(tags=["feed"], dependencies=[AuthDep])

FEED_DIR = "brain-feed"


def _feed_files(vault: Vault) -> list[tuple[str, str]]:
    """The top-level ``brain-feed/*.md`` files as (vault path, text), sorted by name."""
    folder = vault.path(FEED_DIR)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.md")):
        if path.name.startswith(".") or not path.is_file():
            continue
        try:
            out.append((f"{FEED_DIR}/{path.name}", path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue  # removed between listing and reading: the next read sees the new set
    return out


ANSWER_HEADER = "X-Brain-Feed"  # "stored": a stored answer still exact; "live": computed for this request


def _answer(body: str, now: dt.datetime, source: str) -> Response:
    return Response(stamp_answer(body, now), media_type="application/json", headers={ANSWER_HEADER: source})


@router.get("/feed")
def get_feed(
    request: Request,
    db: ReadSessionDep,
    vault: VaultDep,
    project: Annotated[str | None, Query(max_length=300, description="Short key or owner/name slug; omit for the global feed.")] = None,
    top_n: Annotated[int, Query(ge=1, le=100, description="Hot arcs of the project to include.")] = 10,
    lesson_days: Annotated[int, Query(ge=1, le=365, description="Days of lessons, decisions, milestones and signals.")] = 14,
) -> Any:
    """The global feed, or with ``project`` that project's memory plus labelled fleet-wide signals.

    A known project's answer is stored in the index with the snapshot it was
    read in and served again while no write has touched what it depends on
    (``X-Brain-Feed: stored``); ``Cache-Control: no-cache`` computes it afresh.
    """
    now = dt.datetime.now(dt.timezone.utc)
    root = str(vault.root)
    if project is None:
        return global_feed(
            _feed_files(vault),
            feed_repo.hot_arcs(db, limit=10),
            feed_repo.inject_blocks(db),
            now=now,
            vault_root=root,
        )
    ref = project.strip()
    try:
        asked_key, asked_slug = parse_project_ref(ref)
    except InvalidKey as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
    key = SnapshotKey(ref, top_n, lesson_days, root)
    if "no-cache" in request.headers.get("cache-control", "").lower():
        point = feed_snapshots.read_point(db)
    else:
        stored, point = feed_snapshots.fetch(db, key, now=now)
        if stored is not None:
            return _answer(stored, now, "stored")
    # ``point`` precedes every read below, so the answer stored is at least that fresh.
    found = lookup_project(db, ref)
    if found.status == AMBIGUOUS:
        return JSONResponse(
            {
                "detail": f"project {project!r} is ambiguous; use one of: {', '.join(found.candidates)}",
                "candidates": list(found.candidates),
            },
            status_code=409,
        )
    since = now - dt.timedelta(days=lesson_days)
    if found.status != EXACT:  # unknown: never stored, since any well-formed string is one
        subject = ProjectRef(key=found.key, repo=found.repo, known=False)
        memory = ProjectMemory(fleet_signals=feed_repo.fleet_signals(db, since=since), inject=feed_repo.inject_blocks(db))
        payload = project_feed(subject, memory, now=now, vault_root=root, lesson_days=lesson_days, top_n=top_n, ref=ref)
        return _answer(answer_body(payload), now, "live")
    rows = feed_repo.project_memory(db, found.key, found.repo, top_n=top_n, since=since)
    subject = ProjectRef(key=found.key, repo=found.repo, known=True, last_active=rows.last_active or found.last_active)
    payload = project_feed(
        subject, rows.memory, now=now, vault_root=root, lesson_days=lesson_days, top_n=top_n, key_is_unique=rows.key_is_unique, ref=ref
    )
    body = answer_body(payload)
    scopes = {s for s in (asked_key, asked_slug, found.key, found.repo) if s}
    try:
        feed_snapshots.store(db, key, point=point, scopes=scopes, valid_until=rows.memory.valid_until(lesson_days), body=body)
    except DBAPIError as exc:  # a read-only database still answers, just without storing
        log.warning("project feed answer not stored: %s", str(exc.orig or exc).splitlines()[0])
    return _answer(body, now, "live")
