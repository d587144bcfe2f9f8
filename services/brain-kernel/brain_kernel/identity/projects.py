"""Project lookup: what a client means by ``project=<ref>`` (DESIGN section 3, ambiguity).

A reference is a short key (``api``) or an ``owner/name`` slug (``org1/api``).
A slug is exact. A short key is exact when one distinct project carries it
(as key or alias), ambiguous when several do, unknown when none does: the
uniqueness rule of ``brain_core.membership``, which the feed's membership
filter and ``GET /projects`` use too. A key the operator's catalog pins to
a repository (``project_pins``, ``brain_kernel.identity.pins``) resolves to that
repository however many others carry it (ADR 0021).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Text, any_, bindparam, select
from sqlalchemy.orm import Session

from brain_core.keys import parse_project_ref
from brain_core.membership import KnownProject, carriers
from brain_kernel.db.models import Project, ProjectPin
from brain_kernel.errors import BrainError

EXACT, UNKNOWN, AMBIGUOUS = "exact", "unknown", "ambiguous"


class AmbiguousProject(BrainError):
    """The short key names several repositories; ``candidates`` are their ids (HTTP 409)."""

    def __init__(self, ref: str, candidates: list[str]) -> None:
        super().__init__(f"project {ref!r} is ambiguous; use one of: {', '.join(candidates)}")
        self.candidates = candidates


@dataclass(frozen=True)
class ProjectLookup:
    """The answer to a project reference: status, key, repo, candidate ids, last activity."""

    status: str
    key: str
    repo: str | None = None
    candidates: list[str] = field(default_factory=list)
    last_active: dt.datetime | None = None

    @property
    def known(self) -> bool:
        """True when the reference names exactly one known project."""
        return self.status == EXACT


# Built once with bind parameters and run on the session's Core connection: plain
# columns, no ORM objects (this runs on every project feed request).
_LOOKUP = select(Project.id, Project.key, Project.repo, Project.root, Project.last_active, Project.aliases)
_BY_SLUG = _LOOKUP.where((Project.id == bindparam("slug", type_=Text)) | (Project.repo == bindparam("slug", type_=Text))).order_by(Project.id).limit(1)
_PIN = select(ProjectPin.repo).where(ProjectPin.key == bindparam("key", type_=Text)).scalar_subquery().label("pin")
_BY_KEY = (
    _LOOKUP.add_columns(_PIN)
    .where((Project.key == bindparam("key", type_=Text)) | (bindparam("key", type_=Text) == any_(Project.aliases)))
    .order_by(Project.id)
)


def lookup_project(db: Session, ref: str) -> ProjectLookup:
    """Resolve a short key or slug against known projects; InvalidKey for malformed refs."""
    key, slug = parse_project_ref(ref)
    if slug is not None:
        row = db.connection().execute(_BY_SLUG, {"slug": slug}).first()
        if row is None:
            return ProjectLookup(UNKNOWN, key, slug)
        return ProjectLookup(EXACT, row.key, row.repo or slug, [row.id], row.last_active)
    rows = db.connection().execute(_BY_KEY, {"key": key}).all()
    if not rows:
        return ProjectLookup(UNKNOWN, key)
    pin = rows[0].pin
    if pin is not None:  # the catalog's pin: the pinned repository, known yet or not
        row = next((r for r in rows if r.repo == pin), None)
        return ProjectLookup(EXACT, key, pin, [row.id if row is not None else pin], row.last_active if row is not None else None)
    by_id = {r.id: r for r in rows}
    distinct = [by_id[p.id] for p in carriers(key, (_known(r) for r in rows))]
    if not distinct:
        latest = max((r.last_active for r in rows if r.last_active), default=None)
        return ProjectLookup(EXACT, key, None, [r.id for r in rows], latest)
    if len(distinct) == 1:
        row = distinct[0]
        return ProjectLookup(EXACT, row.key, row.repo, [row.id], row.last_active)
    return ProjectLookup(AMBIGUOUS, key, None, sorted(r.id for r in distinct), None)


def _known(row: Any) -> KnownProject:
    return KnownProject(row.key, row.repo, row.root, tuple(row.aliases or ()))


def known_projects(db: Session) -> list[KnownProject]:
    """Every project row as the membership rules take it."""
    return [_known(r) for r in db.connection().execute(select(Project.key, Project.repo, Project.root, Project.aliases).order_by(Project.id))]


def resolve_project(db: Session, ref: str) -> ProjectLookup:
    """``lookup_project`` for a reader that needs one project: exact or unknown, else AmbiguousProject."""
    found = lookup_project(db, ref)
    if found.status == AMBIGUOUS:
        raise AmbiguousProject(ref.strip(), list(found.candidates))
    return found
