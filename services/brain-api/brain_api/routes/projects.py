"""``GET /projects``: known projects with repo, aliases, entry counts by kind and last activity."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from brain_api.deps import AuthDep, PrincipalDep, ReadSessionDep
from brain_api.responses import Answer, AnsweredRoute
from brain_core.times import iso
from brain_kernel.feed.feed_repo import list_projects
from brain_kernel.scope import Scope

router = APIRouter(tags=["projects"], dependencies=[AuthDep], route_class=AnsweredRoute)


class KnownProject(Answer):
    """One known project."""

    id: str = Field(description="The project's reference: its owner/name when known, else its key.")
    key: str
    repo: str | None
    aliases: list[str]
    counts: dict[str, int] = Field(description="Entries by kind (arc, lesson, decision, milestone, signal, ...).")
    total: int
    last_active: str | None = Field(description="ISO 8601 moment of its latest entry.")


class Projects(Answer):
    """Answer of ``GET /projects``."""

    count: int
    projects: list[KnownProject] = Field(description="Most recently active first.")


@router.get("/projects", response_model=Projects)
def get_projects(db: ReadSessionDep, principal: PrincipalDep) -> dict[str, Any]:
    """Every known project, most recently active first (a token bound to projects sees only those)."""
    scope = Scope(db, principal)
    projects = [p for p in list_projects(db) if scope.allows_ref(p.key, p.repo)]
    projects.sort(key=lambda p: (p.last_active is None, -(p.last_active.timestamp() if p.last_active else 0), p.id))
    return {
        "count": len(projects),
        "projects": [
            {
                "id": p.id,
                "key": p.key,
                "repo": p.repo,
                "aliases": p.aliases,
                "counts": p.counts,
                "total": sum(p.counts.values()),
                "last_active": iso(p.last_active),
            }
            for p in projects
        ],
    }
