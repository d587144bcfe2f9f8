"""Injection records: every block or recall served to a session, and every MCP pull, as rows (ADR 0050, 0061).

``arm_of`` assigns a read its arm (``brain_core.trial.assign``) and
``record`` writes one row holding what was served (entry ids, bytes,
whether caps cut it, the text's hash) with the arm and the configuration
that produced it; the reader swaps a control session's memory for the
neutral block, no recall, or an MCP answer without memory. ``pull_identity``
is the project an MCP read is assigned by. Records are telemetry: a failure
to write one is logged and never fails the answer.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import IO, Any

from sqlalchemy import delete, insert, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from brain_core.keys import InvalidKey
from brain_core.trial import CONTROL, Assignment, TrialConfig, assign
from brain_kernel import event_counts
from brain_kernel.db.models import Injection
from brain_kernel.identity.projects import EXACT, AmbiguousProject
from brain_kernel.identity.sessions import get_session
from brain_kernel.scope import OutOfScope, Scope
from brain_kernel.settings import Settings

log = logging.getLogger("brain.trial")

BLOCK, RECALL, PULL = "block", "recall", "pull"  # a pull: a memory read through an MCP tool (ADR 0061)
MCP_AGENT = "mcp"  # the agent a pull names: the read came through the MCP server, whichever agent asked


def trial_config(settings: Settings) -> TrialConfig:
    """The trial as the settings set it (percentage 0: off)."""
    return TrialConfig(control_percent=settings.trial_control_percent, salt=settings.trial_salt)


def text_hash(text: str) -> str:
    """The served text's hash: 16 hex of SHA-256 over its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Served:
    """What a session was given: the text, the entries behind it, whether anything was cut."""

    text: str
    entry_ids: tuple[str, ...] = ()
    cut: bool = False


def record(
    uow: Callable[[], AbstractContextManager[Session]],
    *,
    kind: str,
    assignment: Assignment,
    served: Served,
    session_id: str | None,
    agent: str | None = None,
    project: str | None = None,
    repo: str | None = None,
) -> None:
    """Write one record in its own unit of work; a failure is logged, never raised (telemetry must not fail a read)."""
    row = {
        "kind": kind,
        "session_id": session_id,
        "agent": agent,
        "project": project,
        "repo": repo,
        "entry_ids": list(served.entry_ids),
        "bytes": len(served.text.encode("utf-8")),
        "cut": served.cut,
        "feed_hash": text_hash(served.text) if served.text else None,
        "arm": assignment.arm,
        "basis": assignment.basis,
        "seed": assignment.seed,
        "control_percent": assignment.control_percent,
        "salt_id": assignment.salt_id,
        "text_served": served.text if assignment.arm == CONTROL else None,
    }
    try:
        with uow() as db:
            db.execute(insert(Injection).values(**row))
            event_counts.bump(db, event_counts.INJECTIONS, kind)
    except SQLAlchemyError as exc:
        log.warning("injection record not written for session %s: %s", session_id, exc)


def arm_of(settings: Settings, *, repo: str | None, project: str | None, session_id: str | None) -> Assignment:
    """The session's arm under the current settings."""
    return assign(trial_config(settings), repo=repo, project=project, session_id=session_id)


@dataclass(frozen=True)
class Pull:
    """An MCP read about to be answered: the session asking (when it says), the project it is assigned by, its arm."""

    session_id: str | None
    project: str | None
    repo: str | None
    assignment: Assignment

    @property
    def withheld(self) -> bool:
        """A control project reads no memory (ADR 0050): the answer keeps its shape and loses its memory."""
        return self.assignment.arm == CONTROL


def pull_of(
    db: Session, settings: Settings, reach: Scope, about: tuple[str | None, str | None] | None, session_id: str | None, *, folder: str | None = None
) -> Pull:
    """An MCP read's arm (ADR 0061): by the reading session's stored project when the call names a session the kernel
    knows (and the scope reads), else by the project the read is about (``about``; a scope bound to one project: that
    one), else by ``folder``, the project of the folder the stdio server runs in (ADR 0066), else by the session id
    alone, else unassignable (answered as usual), as ``arm_of`` assigns."""
    key, repo = about if about is not None else (None, None)
    if key is None and reach.restricted and len(reach.members) == 1:
        key, repo = reach.members[0].key, reach.members[0].repo
    row = get_session(db, session_id) if session_id else None
    if row is not None and row.project and reach.allows_ref(row.project, row.repo):
        key, repo = row.project, row.repo
    elif key is None and folder:  # looked up only when nothing else names the project
        key, repo = folder_project(reach, folder) or (None, None)
    return Pull(session_id, key, repo, arm_of(settings, repo=repo, project=key, session_id=session_id))


def folder_project(reach: Scope, folder: str) -> tuple[str, str | None] | None:
    """The project a folder's reference names, when the kernel knows it as one and the scope reads it; else None.

    A hint, never a refusal: a folder outside the scope, unknown or ambiguous only leaves the read unassigned.
    """
    try:
        found = reach.check(folder)
    except (OutOfScope, InvalidKey, AmbiguousProject):
        return None
    return (found.key, found.repo) if found.status == EXACT else None


def record_pull(uow: Callable[[], AbstractContextManager[Session]], pull: Pull, served: Served) -> None:
    """One ``pull`` row (agent ``mcp``) as ``record`` writes it: logged, never raised, on a failure."""
    record(uow, kind=PULL, assignment=pull.assignment, served=served, session_id=pull.session_id, agent=MCP_AGENT, project=pull.project, repo=pull.repo)


# -- export and retention -----------------------------------------------------------------------------

COLUMNS = ("id", "at", "kind", "session_id", "agent", "project", "repo", "entry_ids", "bytes", "cut", "feed_hash", "arm", "basis", "seed")
COLUMNS += ("control_percent", "salt_id", "text_served")


def rows(db: Session, *, since: dt.datetime | None = None, batch: int = 1000) -> Iterator[dict[str, Any]]:
    """Every record (since ``since``), oldest first, as plain values; read in batches by id."""
    last = 0
    while True:
        stmt = select(*(getattr(Injection, c) for c in COLUMNS)).where(Injection.id > last).order_by(Injection.id).limit(batch)
        if since is not None:
            stmt = stmt.where(Injection.at >= since)
        found = db.execute(stmt).all()
        if not found:
            return
        for r in found:
            yield {c: (v.isoformat() if isinstance(v, dt.datetime) else v) for c, v in zip(COLUMNS, r, strict=True)}
        last = found[-1].id


def export_jsonl(db: Session, out: IO[str], *, since: dt.datetime | None = None) -> int:
    """Write the records as JSON lines; how many were written."""
    count = 0
    for row in rows(db, since=since):
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
        count += 1
    return count


def prune(db: Session, *, now: dt.datetime, retention_days: int) -> int:
    """Delete records older than the retention; how many went (0 days: keep everything)."""
    if retention_days <= 0:
        return 0
    result = db.execute(delete(Injection).where(Injection.at < now - dt.timedelta(days=retention_days)))
    return int(result.rowcount or 0)
