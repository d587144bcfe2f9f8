"""``POST /sessions``: a client registers a session's identity at hook time.

Clients know their project exactly when a session starts, so an explicit
``project``/``repo`` is stored as source ``attrs`` (normalised and validated);
otherwise the kernel resolves the posted ``cwd`` (git, catalog, learned roots,
layout). Posting the same session id again updates the stored identity. A
token bound to projects registers only its projects' sessions, never one
another project holds, and its ``cwd`` is recorded, not resolved (ADR 0033).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field, field_validator

from brain_api.deps import AuthDep, PrincipalDep, SessionDep, SettingsDep
from brain_api.responses import Answer, AnsweredRoute, errors
from brain_core import identity as core
from brain_core.keys import InvalidKey
from brain_kernel.identity.resolver import IdentityResolver
from brain_kernel.identity.sessions import get_session
from brain_kernel.scope import Scope

router = APIRouter(tags=["sessions"], dependencies=[AuthDep], route_class=AnsweredRoute)

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,199}$")
_AGENT = re.compile(r"^[a-z][a-z0-9_\-]{0,31}$")


class SessionRegistration(BaseModel):
    """Body of ``POST /sessions``."""

    session_id: str = Field(..., description="The agent's session id.", examples=["3f2a9c1e-7b7d-4e0a-9a51-2f6f1f0c8d11"])
    project: str | None = Field(None, description="Short key or owner/name slug, when the client knows it.")
    repo: str | None = Field(None, description="owner/name slug or a remote URL.")
    worktree: str | None = Field(None, description="Linked worktree name, when in one.")
    cwd: str = Field(..., max_length=4096, description="The session's working folder (may be empty).")
    agent: str | None = Field(None, description="claude, codex, ...")

    @field_validator("session_id")
    @classmethod
    def _session_id(cls, value: str) -> str:
        value = value.strip()
        if not _SESSION_ID.match(value):
            raise ValueError("session_id must be 1-200 letters, digits, '.', '_', ':' or '-'")
        return value

    @field_validator("agent")
    @classmethod
    def _agent(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().lower()
        if not _AGENT.match(value):
            raise ValueError("agent must be a short lower-case name such as 'claude' or 'codex'")
        return value

    @field_validator("cwd")
    @classmethod
    def _cwd(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("cwd contains a NUL byte")
        return value


class SessionIdentity(Answer):
    """Answer of ``POST /sessions``: the identity stored for the session (``brain whereis``'s shape plus the session)."""

    session_id: str
    agent: str | None
    created: bool = Field(description="False when the session was registered before (its identity is updated).")
    cwd: str | None
    project: str | None = Field(description="The short key; null when the folder is in no known project.")
    repo: str | None = Field(description="owner/name, when known.")
    root: str | None = Field(description="The main checkout's root.")
    worktree: str | None
    source: str = Field(description="How the project was resolved: attrs, session, git, catalog, learned, layout, ... or unresolved.")


def _culprit(body: SessionRegistration) -> str:
    """The body field an InvalidKey came from: the first that fails alone, else ``project`` (a conflict)."""
    checks = (
        ("worktree", lambda: core.normalise_worktree(body.worktree)),
        ("repo", lambda: core.from_attrs({"repo": body.repo}, None)),
        ("project", lambda: core.from_attrs({"project": body.project}, None)),
    )
    for name, check in checks:
        try:
            check()
        except InvalidKey:
            return name
    return "project"


def _reject(field: str, reason: str) -> HTTPException:
    return HTTPException(status_code=422, detail=[{"loc": ["body", field], "msg": reason, "type": "value_error"}])


@router.post("/sessions", response_model=SessionIdentity, responses=errors(403))
def register_session(body: SessionRegistration, db: SessionDep, settings: SettingsDep, principal: PrincipalDep) -> dict[str, Any]:
    """Record (or update) a session's identity; returns the stored identity (a token bound to projects: only theirs, else 403)."""
    resolver = IdentityResolver(settings, db)
    attrs = {"project": body.project, "repo": body.repo, "worktree": body.worktree}
    scope = Scope(db, principal)
    try:
        worktree = core.normalise_worktree(body.worktree)
        # A token bound to projects never has a server folder resolved on its word (ADR 0033): its
        # client names the project, else the session is its only project's.
        identity = resolver.resolve(None if scope.restricted else body.cwd, attrs=attrs)
    except InvalidKey as exc:
        raise _reject(_culprit(body), str(exc)) from None
    known = get_session(db, body.session_id)
    if identity.project is None and known is not None and known.project:
        # A resume, clear or compact in a folder that no longer resolves (a removed worktree, a cd out of the
        # repository) keeps the project the session had, so its later markers stay attributed.
        identity = core.ProjectIdentity(known.project, known.repo, known.root, known.worktree, body.cwd.strip() or None, "session")
    if scope.restricted:
        identity = _scoped_identity(scope, body, identity, known)
    if worktree:  # the client knows its worktree exactly, with or without a project (as markers do)
        identity = replace(identity, worktree=worktree)
    created = resolver.record_session(body.session_id, identity, agent=body.agent)
    return {"session_id": body.session_id, "agent": body.agent, "created": created, **identity.to_dict()}


def _scoped_identity(scope: Scope, body: SessionRegistration, identity: core.ProjectIdentity, known: Any) -> core.ProjectIdentity:
    """A restricted token's registration: inside its projects (or its only one), never over another project's session."""
    scope.check_session(body.session_id, known)
    member = scope.write_project(identity.project, identity.repo)
    assert member is not None  # restricted
    cwd = body.cwd.strip() or None
    if identity.project:  # a bare key names the token's own repository of that key, never another's
        return replace(identity, cwd=cwd, repo=identity.repo or member.repo)
    return core.ProjectIdentity(member.key, member.repo, None, None, cwd, "attrs")
