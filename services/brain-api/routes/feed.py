"""``GET /feed``: the global feed (unchanged shape) and the per-project feed (``?project=P``).

The global feed serves the keeper's files in ``brain-feed/`` plus the hottest
arcs and fleet inject blocks from the index. The project feed is served from
the index alone: a project lookup, one indexed statement, then pure
assembly in ``brain_core.feed``; no vault file is read on this path and no
answer is cached in the process, so every replica answers every project
from the same rows.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from brain_api.deps import AuthDep, ReadSessionDep, VaultDep
from brain_core.feed import ProjectMemory, ProjectRef, global_feed, project_feed
from brain_core.keys import InvalidKey
from brain_kernel import feed_repo
from brain_kernel.projects import AMBIGUOUS, EXACT, lookup_project
from brain_kernel.vault import Vault

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


@router.get("/feed")
def get_feed(
    db: ReadSessionDep,
    vault: VaultDep,
    project: Annotated[str | None, Query(max_length=300, description="Short key or owner/name slug; omit for the global feed.")] = None,
    top_n: Annotated[int, Query(ge=1, le=100, description="Hot arcs of the project to include.")] = 10,
    lesson_days: Annotated[int, Query(ge=1, le=365, description="Days of lessons, decisions, milestones and signals.")] = 14,
) -> Any:
    """The global feed, or with ``project`` that project's memory plus labelled fleet-wide signals."""
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
    try:
        found = lookup_project(db, project)
    except InvalidKey as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
    if found.status == AMBIGUOUS:
        return JSONResponse(
            {
                "detail": f"project {project!r} is ambiguous; use one of: {', '.join(found.candidates)}",
                "candidates": list(found.candidates),
            },
            status_code=409,
        )
    since = now - dt.timedelta(days=lesson_days)
    if found.status != EXACT:
        ref = ProjectRef(key=found.key, repo=found.repo, known=False)
        memory = ProjectMemory(fleet_signals=feed_repo.fleet_signals(db, since=since), inject=feed_repo.inject_blocks(db))
        return JSONResponse(project_feed(ref, memory, now=now, vault_root=root, lesson_days=lesson_days, top_n=top_n, ref=project.strip()))
    rows = feed_repo.project_memory(db, found.key, found.repo, top_n=top_n, since=since)
    ref = ProjectRef(key=found.key, repo=found.repo, known=True, last_active=rows.last_active or found.last_active)
    payload = project_feed(
        ref, rows.memory, now=now, vault_root=root, lesson_days=lesson_days, top_n=top_n, key_is_unique=rows.key_is_unique, ref=project.strip()
    )
    return JSONResponse(payload)  # plain JSON types already: skip the generic encoder
