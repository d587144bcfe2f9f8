"""The scope contract: what a principal (a scoped token) may read and write, decided in one place.

A request's principal is resolved once (``brain_kernel.auth.authenticate``)
and handed to every reader and writer as a ``Scope`` (ADR 0021). An
unrestricted scope changes nothing. A restricted one:

- ``check`` refuses a project reference outside its projects (``OutOfScope``,
  HTTP 403), and an ambiguous key lists only the candidates it may see;
- ``default_project`` names the project a request without one means (its
  only project), else refuses;
- ``members`` are its projects as (key, repo, holds the key's unnamed
  entries: unique key, or the catalog's pin to it) for the
  repositories' membership filter, so a search without a project is the
  union of its projects' searches;
- ``admits`` / ``admits_path`` say whether an entry or a vault file is its
  memory: an entry of one of its projects (``brain_core.membership.belongs``)
  or a fleet-wide signal; a file only when every entry the index holds for it
  is admitted. Unattributed files (feed files, inbox notes, READMEs) are not;
  ``hides_path`` is the reader's test, answered as "not found" (ADR 0033);
- ``write_project`` is the write rule (ADR 0033): what a restricted token
  writes is attributed to one of its projects (named, else its only one,
  else ``ProjectRequired``, a 422), never outside them (``OutOfScope``) and
  never fleet-wide (``refuse_fleet``); ``cut_tick_result`` cuts a keeper
  summary to its projects.

docs/security.md holds the table of every route and MCP tool with what a
restricted token may write there (tests/api/test_scope.py checks it is whole).

A token's project that nobody knows yet is kept as written, so it matches the
project once it appears; a bare key that two repositories share matches only
memory that names no repository (bind such a token by ``owner/name``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.keys import InvalidKey, parse_project_ref
from brain_core.membership import belongs, holds_unnamed, owns_key, signal_is_fleet
from brain_kernel.auth import EVERYONE, Principal
from brain_kernel.errors import BrainError
from brain_kernel.feed.feed_repo import arc_by_cluster_id, records_at
from brain_kernel.identity.pins import pins
from brain_kernel.identity.projects import AMBIGUOUS, EXACT, AmbiguousProject, ProjectLookup, known_projects, lookup_project


class OutOfScope(BrainError):
    """The principal asked for memory outside its projects (HTTP 403)."""


class ProjectRequired(BrainError):
    """A write by a token bound to several projects names none of them, or names one unreadably (HTTP 422)."""


# The keeper summary's fields a restricted token may read as they are: counts, flags and times.
_TICK_COUNTS = frozenset(
    {
        "now",
        "dry_run",
        "stats",
        "arcs_scanned",
        "arcs_updated",
        "statuses",
        "signals",
        "lessons",
        "inject_blocks",
        "llm_calls",
        "vault_writes",
        "scanned_files",
        "read_files",
    }
)


@dataclass(frozen=True)
class Member:
    """One of a scope's projects as the membership rule takes it."""

    key: str
    repo: str | None
    unique: bool

    @property
    def ref(self) -> str:
        return self.repo or self.key


class Scope:
    """A principal's reach over one database session (resolved lazily, once)."""

    def __init__(self, db: Session, principal: Principal = EVERYONE) -> None:
        self.db = db
        self.principal = principal

    @property
    def restricted(self) -> bool:
        return self.principal.restricted

    @cached_property
    def members(self) -> tuple[Member, ...]:
        """The principal's projects, resolved against the known projects (empty when unrestricted)."""
        if not self.restricted:
            return ()
        known = known_projects(self.db)
        pinned = pins(self.db)
        out: list[Member] = []
        for ref in self.principal.projects or ():
            found = lookup_project(self.db, ref)
            if found.status == EXACT:
                key, repo = found.key, found.repo
            else:
                key, repo = parse_project_ref(ref)
            # The token's own repository carries its key even before anyone knows it: another repository's
            # entries that name only the key are not its memory.
            unique = found.status != AMBIGUOUS and owns_key(key, repo, known)
            out.append(Member(key, repo, holds_unnamed(repo, key_is_unique=unique, pin=pinned.get(key))))
        return tuple(dict.fromkeys(out))

    def allows(self, found: ProjectLookup) -> bool:
        """Whether a looked-up project is one of the scope's."""
        if not self.restricted:
            return True
        for m in self.members:
            if m.repo and found.repo:
                if m.repo == found.repo:
                    return True
            elif m.key == found.key and not (found.repo and not m.repo and not m.unique):
                return True
        return False

    def allows_ref(self, key: str | None, repo: str | None) -> bool:
        """Whether a (key, repo) pair (a project row, a marker's attribution) is one of the scope's."""
        if not self.restricted:
            return True
        if not key:
            return False
        return self.allows(ProjectLookup(EXACT, key, repo))

    def check(self, ref: str) -> ProjectLookup:
        """Resolve ``ref`` (InvalidKey when malformed); OutOfScope outside the scope; AmbiguousProject (its candidates only).

        A short key a restricted token shares with repositories it cannot read
        resolves to its own one: a 409 listing one choice would tell it that
        another repository of that name exists (reads tell nothing of other projects).
        """
        return self._checked(ref)[0]

    def _checked(self, ref: str) -> tuple[ProjectLookup, bool]:
        """``check``'s answer, and whether a shared short key was narrowed to the token's one repository."""
        found = lookup_project(self.db, ref)
        if found.status == AMBIGUOUS:
            visible = [c for c in found.candidates if not self.restricted or self._candidate_allowed(c)]
            if self.restricted and not visible:
                raise OutOfScope(f"project {ref.strip()!r} is outside this token's projects")
            if self.restricted and len(visible) == 1:
                return self._checked(visible[0])[0], True
            raise AmbiguousProject(ref.strip(), visible)
        if not self.allows(found):
            raise OutOfScope(f"project {ref.strip()!r} is outside this token's projects")
        return found, False

    def _candidate_allowed(self, candidate: str) -> bool:
        try:
            key, slug = parse_project_ref(candidate)
        except InvalidKey:
            return False
        return self.allows(ProjectLookup(EXACT, key, slug))

    def read_ref(self, ref: str) -> str:
        """The reference a read of ``ref`` goes on with: ``ref`` itself, or, for a restricted token, the one repository
        ``check`` narrowed a shared short key to (what the read then resolves must be that one)."""
        ref = ref.strip()
        if not self.restricted:
            return ref
        found, narrowed = self._checked(ref)
        return found.repo if narrowed and found.repo else ref

    def default_project(self) -> str | None:
        """The project a request naming none means: None (everything) unrestricted, its one project, else OutOfScope."""
        if not self.restricted:
            return None
        if len(self.members) == 1:
            return self.members[0].ref
        raise OutOfScope("this token reaches several projects: name one with project=")

    def admits(self, record: EntryRecord) -> bool:
        """Whether an indexed entry is the scope's memory (its projects' entries, fleet-wide signals)."""
        if not self.restricted:
            return True
        if record.kind == "signal" and signal_is_fleet(record):
            return True
        return any(belongs(record, m.key, m.repo, key_is_unique=m.unique) for m in self.members)

    def admits_meta(self, project: str | None, projects: Iterable[str], repo: str | None) -> bool:
        """``admits`` for a chunk's metadata (project, projects, repo)."""
        if not self.restricted:
            return True
        record = EntryRecord("scope-check", "arc", "", project=project, projects=tuple(projects), repo=repo)
        return bool(record.projects) and self.admits(record)

    def admits_path(self, vault_path: str) -> bool:
        """Whether a vault file is the scope's: the index holds entries for it and admits every one."""
        if not self.restricted:
            return True
        return bool(self.admitted_paths([vault_path]))

    def admitted_paths(self, paths: Sequence[str] | None = None, *, prefix: str = "") -> set[str]:
        """Of ``paths`` (or every indexed path under ``prefix``), those whose every entry the scope admits."""
        by_path: dict[str, bool] = {}
        for record in records_at(self.db, paths, prefix=prefix):
            by_path[record.vault_path] = by_path.get(record.vault_path, True) and self.admits(record)
        return {path for path, ok in by_path.items() if ok}

    def hides_path(self, vault_path: str) -> bool:
        """Whether a reader must answer "not found" for this file: restricted, and not the scope's memory (ADR 0033)."""
        return self.restricted and not self.admits_path(vault_path)

    def write_project(self, key: str | None, repo: str | None, *, unreadable: str | None = None) -> Member | None:
        """The project a write is attributed to (None: unrestricted, the caller's own attribution stands).

        A restricted token's write names one of its projects (``key``/``repo``,
        else OutOfScope), or names none and is its only project's; with several
        projects and none named, or a project value it cannot use (``unreadable``:
        why, e.g. not a key or ``owner/name``, or contradicting the repo sent),
        ProjectRequired: a 422, never a silent re-filing to another project or to none.
        """
        if not self.restricted:
            return None
        if unreadable is not None:
            raise ProjectRequired(unreadable)
        if key:
            if not self.allows_ref(key, repo):
                raise OutOfScope(f"project {repo or key!r} is outside this token's projects")
            return next((m for m in self.members if m.key == key and (m.repo == repo or not (m.repo and repo))), Member(key, repo, True))
        if len(self.members) != 1:
            raise ProjectRequired("this token reaches several projects: name the project this write belongs to")
        return self.members[0]

    def note_owner(self, project: str | None) -> tuple[str, str | None] | None:
        """The (key, repo) a note (an inbox note, an ingested message) is filed under: the one named, else a restricted
        token's own (``write_project``), else None.

        A named project is looked up as the feed does: malformed 422, ambiguous
        409, outside a restricted token's projects 403; an unknown one is kept as
        named, so the note joins the project once it appears.
        """
        named = self.check(project.strip()) if project is not None and project.strip() else None
        member = self.write_project(named.key if named else None, named.repo if named else None)
        if member is not None:
            return member.key, member.repo
        return (named.key, named.repo) if named is not None else None

    def check_session(self, session_id: str | None, row: Any) -> None:
        """OutOfScope when a restricted token names a session (``row``, its registration) held by a project it cannot
        read: nothing it sends is written or recorded against that session, and the refusal names no project."""
        if self.restricted and row is not None and row.project and not self.allows_ref(row.project, row.repo):
            raise OutOfScope(f"session {session_id!r} is outside this token's projects")

    def refuse_fleet(self, what: str) -> None:
        """OutOfScope for a restricted principal writing something that would reach every project (ADR 0033)."""
        if self.restricted:
            raise OutOfScope(f"a token bound to projects cannot write {what}")

    def cut_tick_result(self, result: dict[str, Any] | None) -> dict[str, Any] | None:
        """A keeper summary as a restricted token may read it: counts, its projects' names and its arcs only.

        Every other field (file paths, moves, the LLM's prompt, notes, errors)
        can name another project's memory, so it is left out (ADR 0033).
        """
        if not self.restricted or result is None:
            return result
        out = {k: v for k, v in result.items() if k in _TICK_COUNTS}
        arcs = [cid for cid in result.get("hot_arcs") or () if isinstance(cid, str)]
        out["hot_arcs"] = [cid for cid in arcs if (arc := arc_by_cluster_id(self.db, cid)) is not None and self.admits(arc)]
        mine: list[str] = []
        for ref in result.get("active_projects") or ():
            try:
                key, repo = parse_project_ref(ref)
            except (InvalidKey, TypeError):
                continue
            if self.allows_ref(key, repo):
                mine.append(ref)
        out["active_projects"] = mine
        return out

    def require_unrestricted(self, what: str) -> None:
        """OutOfScope for a restricted principal: ``what`` reaches every project's memory."""
        if self.restricted:
            raise OutOfScope(f"{what} is not available to a token bound to projects")
