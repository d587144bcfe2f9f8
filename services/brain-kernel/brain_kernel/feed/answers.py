"""Project feed service: the answer to ``GET /feed?project=P``, stored or computed.

The steps, on a read session in autocommit mode:

1. parse the reference (a malformed one fails before any database read);
2. unless asked to compute afresh, look for a stored answer that is still
   exact (``snapshots.fetch``); that statement also returns the read
   point, taken before every read below;
3. look the project up (unknown: fleet signals only, never stored;
   ambiguous: the candidates, never stored);
4. read P's memory in one statement (``feed_repo.project_memory``), assemble
   it with the pure ``brain_core.feed``, and store the answer with the read
   point, the scopes it depends on and the moment its window moves (ADR 0010).

``warm`` computes and stores the default answers of the projects a keeper
tick just refreshed, so session starts after a tick still get stored answers.

The HTTP route only maps the outcome to a response.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from brain_core.feed.block import DEFAULT_MAX_BYTES, Rendered, Stale, render_fleet_block, serve_block
from brain_core.feed.envelope import answer_body
from brain_core.feed.keeper_files import global_feed
from brain_core.feed.project import ProjectMemory, ProjectRef, project_feed
from brain_core.feed.repeats import NEAR_DUPLICATE, repeat_of
from brain_core.keys import InvalidKey, parse_project_ref
from brain_core.vault.layout import FEED_DIR
from brain_kernel.db.models import Entry, SessionRow
from brain_kernel.feed import feed_repo, snapshots
from brain_kernel.feed.snapshots import SnapshotKey
from brain_kernel.identity.projects import EXACT, AmbiguousProject, ProjectLookup, resolve_project
from brain_kernel.scope import Scope
from brain_kernel.vault_store import Vault

log = logging.getLogger("brain.feed")

STORED, LIVE = "stored", "live"
DEFAULT_TOP_N = 10
DEFAULT_LESSON_DAYS = 14


@dataclass(frozen=True)
class FeedAnswer:
    """A project feed answer: its JSON body without ``generated_at``, and where it came from."""

    body: str
    source: str


def project_answer(
    db: Session,
    project: str,
    *,
    top_n: int,
    lesson_days: int,
    vault_root: str,
    now: dt.datetime,
    fresh: bool = False,
    scope: Scope | None = None,
) -> FeedAnswer:
    """The feed of ``project`` (key or slug); InvalidKey when malformed, AmbiguousProject when shared.

    ``fresh`` skips the stored answer (the result is still stored). ``scope``:
    OutOfScope (before any stored answer is read) for a project outside it.
    """
    ref = project.strip() if scope is None else scope.read_ref(project)
    asked_key, asked_slug = parse_project_ref(ref)
    key = SnapshotKey(ref, top_n, lesson_days, vault_root)
    if fresh:
        point = snapshots.read_point(db)
    else:
        stored, point = snapshots.fetch(db, key, now=now)
        if stored is not None:
            return FeedAnswer(stored, STORED)
    read = _read_memory(db, ref, top_n=top_n, since=now - dt.timedelta(days=lesson_days), now=now)
    found, subject, rows = read.found, read.subject, read.rows
    if rows is None:  # unknown: never stored, since any well-formed string is one
        payload = project_feed(subject, read.memory, now=now, vault_root=vault_root, lesson_days=lesson_days, top_n=top_n, ref=ref)
        return FeedAnswer(answer_body(payload), LIVE)
    payload = project_feed(
        subject,
        read.memory,
        now=now,
        vault_root=vault_root,
        lesson_days=lesson_days,
        top_n=top_n,
        key_is_unique=rows.key_is_unique,
        ref=ref,
    )
    body = answer_body(payload)
    scopes = {s for s in (asked_key, asked_slug, found.key, found.repo) if s}
    try:
        snapshots.store(db, key, point=point, scopes=scopes, valid_until=rows.memory.valid_until(lesson_days), body=body)
    except DBAPIError as exc:  # a read-only database still answers, just without storing
        log.warning("project feed answer not stored: %s", str(exc.orig or exc).splitlines()[0])
    return FeedAnswer(body, LIVE)


@dataclass(frozen=True)
class _Read:
    """A project looked up and its memory read: ``rows`` None when the project is unknown (fleet parts only)."""

    found: ProjectLookup
    subject: ProjectRef
    memory: ProjectMemory
    rows: feed_repo.ProjectRows | None


def _read_memory(db: Session, ref: str, *, top_n: int, since: dt.datetime, now: dt.datetime) -> _Read:
    """Look ``ref`` up (AmbiguousProject when shared) and read its memory: one statement when known."""
    found = resolve_project(db, ref)
    if found.status != EXACT:
        subject = ProjectRef(key=found.key, repo=found.repo, known=False)
        memory = ProjectMemory(fleet_signals=feed_repo.fleet_signals(db, since=since, now=now), inject=feed_repo.inject_blocks(db))
        return _Read(found, subject, memory, None)
    rows = feed_repo.project_memory(db, found.key, found.repo, top_n=top_n, since=since, now=now)
    subject = ProjectRef(key=found.key, repo=found.repo, known=True, last_active=rows.last_active or found.last_active)
    lessons = rows.memory.lessons
    near = feed_repo.near_lessons([r.id for r in lessons], min_cosine=NEAR_DUPLICATE, session=db) if len(lessons) > 1 else []
    return _Read(found, subject, dataclasses.replace(rows.memory, repeats=repeat_of(lessons, near)), rows)


def serve_project_block(
    db: Session,
    project: str,
    *,
    top_n: int,
    lesson_days: int,
    now: dt.datetime,
    max_bytes: int = DEFAULT_MAX_BYTES,
    worktree: str | None = None,
    session: SessionRow | None = None,
    scope: Scope | None = None,
    stale: Mapping[str, Stale] | None = None,
) -> Rendered:
    """The memory block of ``project`` (ADR 0040): the rows the JSON project feed reads, rendered as markdown.

    Same refusals as ``project_answer`` (OutOfScope, InvalidKey, AmbiguousProject),
    each before P's rows are read. ``session``, the registered session
    reading it: of this project, it lends its worktree to the ranking when
    none is given; its agent leaves out inject blocks aimed at other agents
    (ADR 0070). Never stored: the block depends on the worktree and the byte
    budget, and the one statement behind it is what a stored JSON answer saves.
    """
    ref = project.strip() if scope is None else scope.read_ref(project)
    parse_project_ref(ref)  # malformed: InvalidKey before any read
    read = _read_memory(db, ref, top_n=top_n, since=now - dt.timedelta(days=lesson_days), now=now)
    found = read.found
    if worktree is None and session is not None and read.rows is not None and session.project == found.key and found.repo in (None, session.repo):
        worktree = session.worktree
    key_is_unique = read.rows.key_is_unique if read.rows is not None else True
    agent = session.agent if session is not None else None
    return serve_block(read.subject, read.memory, now=now, max_bytes=max_bytes, worktree=worktree, key_is_unique=key_is_unique, stale=stale, agent=agent)


def provenance(db: Session, entry_ids: Iterable[str]) -> list[dict[str, Any]]:
    """The commit and paths of those entries that carry them (ADR 0042), in the order given: what a checkout checks."""
    ids = list(dict.fromkeys(entry_ids))
    if not ids:
        return []
    stmt = select(Entry.id, Entry.meta["commit"].astext, Entry.meta["paths"]).where(Entry.id.in_(ids))
    found = {row[0]: row for row in db.execute(stmt)}
    out = []
    for entry in ids:
        row = found.get(entry)
        if row is not None and row[1] and isinstance(row[2], list) and row[2]:
            out.append({"entry_id": entry, "commit": row[1], "paths": [p for p in row[2] if isinstance(p, str)]})
    return out


def project_block(db: Session, project: str, **options: Any) -> str:
    """``serve_project_block``'s text alone, for readers that record nothing (the MCP resource)."""
    return serve_project_block(db, project, **options).text


def fleet_block(
    db: Session,
    *,
    top_n: int,
    lesson_days: int,
    now: dt.datetime,
    max_bytes: int = DEFAULT_MAX_BYTES,
    scope: Scope | None = None,
    agent: str | None = None,
) -> Rendered:
    """The memory block of a session in no project (ADR 0040): fleet-wide rows only, as the global feed's are.

    Those reach every project, so a token bound to projects may not have it (as the global feed).
    """
    if scope is not None:
        scope.require_unrestricted("the fleet memory block")
    memory = ProjectMemory(
        arcs=feed_repo.hot_arcs(db, limit=top_n),
        fleet_signals=feed_repo.fleet_signals(db, since=now - dt.timedelta(days=lesson_days), now=now),
        inject=feed_repo.inject_blocks(db),
    )
    return render_fleet_block(memory, now=now, max_bytes=max_bytes, agent=agent)


def feed_files(vault: Vault) -> list[tuple[str, str]]:
    """The keeper's top-level ``brain-feed/*.md`` files as (vault path, text), sorted by name."""
    folder = vault.path(FEED_DIR)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.md")):
        if path.name.startswith(".") or not vault.contains(path) or not path.is_file():
            continue  # a link out of the vault is never served (ADR 0021)
        try:
            out.append((f"{FEED_DIR}/{path.name}", path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue  # removed between listing and reading: the next read sees the new set
    return out


def global_answer(db: Session, vault: Vault, *, now: dt.datetime, scope: Scope | None = None) -> dict[str, Any]:
    """``GET /feed`` without a project: the keeper's files, the hottest arcs and the fleet inject blocks.

    Those reach every project, so a restricted ``scope`` may not have them (its callers ask for its project's feed).
    """
    if scope is not None:
        scope.require_unrestricted("the global feed")
    return global_feed(feed_files(vault), feed_repo.hot_arcs(db, limit=10), feed_repo.inject_blocks(db), now=now, vault_root=str(vault.root))


def warm(db: Session, projects: Iterable[str], *, vault_root: str, now: dt.datetime) -> dict[str, int]:
    """Store the default answer of each project unless an exact one is stored already.

    The keeper runs this after its refresh has committed (an answer read
    inside the refresh's own transaction would be stale the moment it
    commits), so the first session start after a tick is served a stored
    answer. Returns counts: ``computed`` (and stored), ``stored`` (already
    exact), ``skipped`` (ambiguous or malformed references).
    """
    counts = {"computed": 0, "stored": 0, "skipped": 0}
    for ref in projects:
        try:
            answer = project_answer(db, ref, top_n=DEFAULT_TOP_N, lesson_days=DEFAULT_LESSON_DAYS, vault_root=vault_root, now=now)
        except (InvalidKey, AmbiguousProject):
            counts["skipped"] += 1
            continue
        counts["computed" if answer.source == LIVE else "stored"] += 1
    return counts
