"""Curation actions and reads: find an entry by id or ``ADR-NNNN``, retract it, supersede it, list and show entries.

Every action writes the vault first, never rewriting what was there (ADR
0048): a shared log gets an appended curation record naming the entry, a
signal or decision file a frontmatter status (an atomic edit of those keys
only, under the file's lock). The file then goes through the one path to
the derived stores (``sync_changes``, ADR 0038), and one line is appended to
the month's audit log (``audit/curation-YYYY-MM.jsonl``). Two requests on one
entry take its advisory lock in turn, so an entry is retracted once.

Scope (ADR 0033): a token bound to projects finds only its projects' entries
(and the fleet-wide signals it reads, which it may not curate); any other id
is answered exactly as an id that does not exist.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, text
from sqlalchemy.orm import Session

from brain_core import curation
from brain_core.entries import KINDS, EntryRecord
from brain_core.feed.repeats import NEAR_DUPLICATE, repeat_of
from brain_core.markers import Attribution
from brain_core.membership import signal_is_fleet
from brain_core.redact import scrub
from brain_core.text import article
from brain_core.times import iso, parse_time
from brain_core.vault import frontmatter, logs, records
from brain_core.vault.layout import LOG_KINDS
from brain_kernel.auth import Principal
from brain_kernel.curation import states
from brain_kernel.errors import BrainError
from brain_kernel.feed import feed_repo
from brain_kernel.identity.projects import resolve_project
from brain_kernel.index.changes import sync_changes
from brain_kernel.scope import Scope
from brain_kernel.vault_store import Vault

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
ALL = "all"
NOT_FOUND = "entry not found"  # one answer for a missing id and another project's: it names neither (ADR 0033)
OPERATOR = "operator"  # who acts when auth is off (the local operator): there is no token name


class EntryNotFound(BrainError):
    """No entry with that id, or one outside the token's projects: the same answer (HTTP 404)."""


class NotCuratable(BrainError):
    """An entry the curation routes cannot change (an arc, an intent, an inline marker, a fleet signal): HTTP 422."""


def actor(principal: Principal) -> str:
    """Who the audit log and the vault name: the token's name (a digest prefix, never its secret), else the operator."""
    return principal.name or OPERATOR


def _entry_named(db: Session, ref: Any) -> EntryRecord | None:
    """The entry ``ref`` names (an entry id, or ``ADR-NNNN`` for a decision file), whatever the scope; None when none."""
    usable = curation.usable_ref(ref)
    if usable is None:
        return None
    number = curation.adr_number_of(usable)
    return feed_repo.decision_numbered(db, number) if number is not None else feed_repo.entry_by_id(db, usable)


def find_entry(db: Session, ref: Any, scope: Scope) -> EntryRecord:
    """The entry ``ref`` names (an entry id, or ``ADR-NNNN`` for a decision file); EntryNotFound when none the scope reads."""
    record = _entry_named(db, ref)
    if record is None or not scope.admits(record):
        raise EntryNotFound(NOT_FOUND)
    return record


def check_curatable(record: EntryRecord, scope: Scope) -> None:
    """NotCuratable for what the curation routes do not change; OutOfScope for a fleet signal and a scoped token."""
    if record.kind not in curation.CURATED_KINDS or record.meta.get("inline"):
        raise NotCuratable(f"{'a marker inside a document' if record.meta.get('inline') else article(record.kind)} is not curated here: edit its file")
    if scope.restricted and record.kind == "signal" and signal_is_fleet(record):
        scope.refuse_fleet("a change to a fleet-wide signal")


def _lock(db: Session, entry_id: str) -> EntryRecord | None:
    """Take the entry's advisory lock for this transaction and read it again (another action may just have committed)."""
    hold(db, [entry_id])
    return feed_repo.entry_by_id(db, entry_id)


def hold(db: Session, entry_ids: Sequence[str]) -> None:
    """Take the advisory locks of entries a write is about to curate, in one order, before it writes anything: a marker
    that supersedes waits here for another curating the same entry, not while holding its own rows of a shared log."""
    for entry_id in sorted(set(entry_ids)):
        db.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:id, 48))"), {"id": entry_id})


def _sync_curated(db: Session, vault: Vault, curated: Sequence[EntryRecord]) -> None:
    """Bring the index up to date with curation records just written: a file of its own whole, in a shared log only
    the curated entries' rows. The log's other rows may be another writer's, not committed yet (a marker appended
    beside them), and re-writing them would wait on that writer while it waits on this transaction's locks."""
    ids = {r.id for r in curated}
    logs = sorted({r.vault_path for r in curated if r.kind in LOG_KINDS})
    own = sorted({r.vault_path for r in curated if r.kind not in LOG_KINDS})
    appended = {}
    for path in logs:
        try:
            text_ = vault.read_text(path)
        except FileNotFoundError:
            own.append(path)  # gone: the whole-file sync drops its rows
            continue
        appended[path] = [r for r in records.records_for(path, text_) if r.id in ids]
    sync_changes(db, vault, own, appended=appended)


def adr_name(record: EntryRecord) -> str | None:
    """``ADR-NNNN`` of a decision file, else None."""
    number = record.meta.get("adr")
    return f"ADR-{number:04d}" if record.kind == "decision" and isinstance(number, int) and not record.meta.get("inline") else None


def _record_state(
    vault: Vault,
    record: EntryRecord,
    action: str,
    *,
    at: dt.datetime,
    by: str,
    reason: str | None = None,
    successor: str | None = None,
    until: str | None = None,
) -> str:
    """Write ``action`` into the entry's file: an appended record in a shared log, else the file's frontmatter keys.

    Returns the action written: a retracted successor's record on a file is
    ``reinstated`` or ``successor_retracted`` by what else supersedes it.
    """
    if not vault.exists(record.vault_path):
        raise EntryNotFound(NOT_FOUND)
    if record.kind in LOG_KINDS:
        if action == curation.SUCCESSOR_RETRACTED:  # the log's record says which of the two it is, as the file's does
            left = [name for name in curation.supersedes_refs(record.meta.get("superseded_by")) if name != successor]
            action = curation.SUCCESSOR_RETRACTED if left else curation.REINSTATED
        who = Attribution(record.project, record.repo)
        entry = {"id": record.id, "title": record.title, "kind": record.kind}
        text = logs.render_curation_entry(action, entry, at=at, who=who, by=by, reason=reason, successor=successor, valid_until=until)
        vault.append(record.vault_path, text, separate=True)
        return action
    written = action

    def edit(old: str) -> str:
        nonlocal written
        meta = frontmatter.parse(old).meta
        drop: tuple[str, ...] = ()
        if action == curation.RETRACTED:
            changes: dict[str, Any] = {"status": curation.RETRACTED, "retracted_reason": reason, "retracted_by": by, "retracted_at": iso(at)}
        elif action == curation.SUPERSEDED:
            changes = curation.superseded_changes(meta, successor or "", at=at, by=by)
        elif action == curation.EXPIRED:
            changes = {"valid_until": until, "expired_reason": reason, "expired_by": by, "expired_recorded_at": iso(at)}
        else:
            written, changes, drop = curation.unsuperseded_changes(meta, successor or "", at=at, by=by)
        return frontmatter.update(old, changes, drop)

    vault.rewrite_locked(record.vault_path, edit)
    return written


def _audit(
    vault: Vault,
    action: str,
    record: EntryRecord,
    *,
    at: dt.datetime,
    by: str,
    reason: str | None = None,
    successor: str | None = None,
    retracted_successor: str | None = None,
    until: str | None = None,
    until_before: str | None = None,
) -> None:
    line = curation.audit_line(
        action,
        record.id,
        at=at,
        by=by,
        project=record.repo or record.project,
        vault_path=record.vault_path,
        reason=reason,
        successor=successor,
        retracted_successor=retracted_successor,
        valid_until=until,
        valid_until_before=until_before,
    )
    vault.append(curation.audit_path(at), line)


def _in_vault(vault: Vault, record: EntryRecord) -> EntryRecord:
    """The entry as its file now says, which is ahead of the index when an earlier attempt wrote the vault and
    then failed (its transaction rolled back): a retry reads what was written and does not write it again."""
    try:
        text = vault.read_text(record.vault_path)
    except FileNotFoundError:
        raise EntryNotFound(NOT_FOUND) from None
    return next((r for r in records.records_for(record.vault_path, text) if r.id == record.id), record)


def retract(db: Session, vault: Vault, ref: Any, reason: Any, *, scope: Scope, now: dt.datetime) -> EntryRecord:
    """Withdraw an entry from feeds and search (CurationInvalid, EntryNotFound, NotCuratable before anything is written),
    and reinstate what it superseded (ADR 0060).

    A second retraction of the same entry writes nothing and answers its
    state; a retry after a failure writes only what its file does not already
    say. The caller commits.
    """
    why = scrub(curation.reason_text(reason))
    record = find_entry(db, ref, scope)
    check_curatable(record, scope)
    repeats = repeats_of(db, record, now=now)  # the block's one line: its rewordings go with it (ADR 0071)
    hold(db, [record.id, *(r.id for r in repeats)])  # one order for every lock this retraction takes
    current = _lock(db, record.id)
    if current is None:
        raise EntryNotFound(NOT_FOUND)
    if current.status == curation.RETRACTED:
        return current
    by = actor(scope.principal)
    rewordings = [r for repeat in repeats if (r := _retract_repeat(db, vault, repeat, why, by=by, now=now)) is not None]
    written = _in_vault(vault, current)
    if written.status != curation.RETRACTED:
        _record_state(vault, current, curation.RETRACTED, at=now, by=by, reason=why)
    else:  # an earlier attempt's record stands: its reason and moment are the ones the vault keeps
        why = written.meta.get("retracted_reason") or why
    revived = _reinstate_superseded(db, vault, current, at=now, by=by)
    _sync_curated(db, vault, [current, *rewordings, *(r for r, _ in revived)])
    for withdrawn in (current, *rewordings):
        _audit(vault, curation.RETRACTED, withdrawn, at=now, by=by, reason=why)
    name = adr_name(current) or current.id
    for old, action in revived:
        _audit(vault, action, old, at=now, by=by, retracted_successor=name)
    return feed_repo.entry_by_id(db, current.id) or current


def _retract_repeat(db: Session, vault: Vault, record: EntryRecord, why: str, *, by: str, now: dt.datetime) -> EntryRecord | None:
    """Write the retraction of a repeat of the entry being retracted, with its reason (its lock already held): the
    entry, for the caller's one index sync and audit; None when there is nothing to do (retracted, or gone)."""
    current = _lock(db, record.id)
    if current is None or current.status == curation.RETRACTED or not vault.exists(current.vault_path):
        return None
    if _in_vault(vault, current).status != curation.RETRACTED:
        _record_state(vault, current, curation.RETRACTED, at=now, by=by, reason=why)
    return current


def expire(db: Session, vault: Vault, ref: Any, reason: Any, at: Any = None, *, scope: Scope, now: dt.datetime) -> EntryRecord:
    """Expire an entry early, at ``at`` (default ``now``; a date means through that day), ADR 0060.

    Never later than the entry's own ``valid_until``, nor a named moment before the entry was written
    (CurationInvalid). An
    entry already expired by ``now``, or already due at that very moment,
    writes nothing and answers its state, so a retry changes nothing; a retry
    after a failed attempt that reached the vault keeps that attempt's record
    and writes only the audit line it lost. Refusals as a retraction's, before
    anything is written. The caller commits.
    """
    why = scrub(curation.reason_text(reason))
    moment = curation.expiry_moment(at, now)
    record = find_entry(db, ref, scope)
    check_curatable(record, scope)
    current = _lock(db, record.id)
    if current is None:
        raise EntryNotFound(NOT_FOUND)
    before = parse_time(current.meta.get("valid_until"))
    if before is not None and before <= now:
        return current
    if at is not None and current.occurred_at is not None and moment < current.occurred_at:
        # An entry never valid is a retraction's case; a history with "expired" before "written" would be false.
        raise curation.CurationInvalid(f"at is before the entry was written ({iso(current.occurred_at)}): to withdraw it altogether, retract it")
    by = actor(scope.principal)
    until = iso(moment)
    written = _in_vault(vault, current)
    if written.meta.get("valid_until") != current.meta.get("valid_until") and written.meta.get("expired_reason"):
        meta = written.meta  # the file is ahead of the index: an earlier attempt's record stands
        by, why, until = str(meta.get("expired_by") or by), str(meta["expired_reason"]), meta.get("valid_until")
    elif before is not None and moment > before:
        raise curation.CurationInvalid(f"at is later than the entry's valid_until ({iso(before)}): an early expiry never extends it")
    elif before is not None and moment == before:
        return current
    else:
        _record_state(vault, current, curation.EXPIRED, at=now, by=by, reason=why, until=until)
    _sync_curated(db, vault, [current])
    _audit(vault, curation.EXPIRED, current, at=now, by=by, reason=why, until=until, until_before=current.meta.get("valid_until"))
    return feed_repo.entry_by_id(db, current.id) or current


def _reinstate_superseded(db: Session, vault: Vault, successor: EntryRecord, *, at: dt.datetime, by: str) -> list[tuple[EntryRecord, str]]:
    """Take ``successor``'s name off every entry it superseded (it is being retracted); (entry, action) of each changed.

    Each entry is read under its lock and from its file (a retry finds its
    earlier record and writes nothing twice). A retracted entry stays as it
    is. The entries are found whatever the retracting token's scope: the
    supersession was the successor's claim, and its retraction takes it back.
    """
    name = adr_name(successor) or successor.id
    out: list[tuple[EntryRecord, str]] = []
    for ref in successor.meta.get("supersedes") or []:
        found = _entry_named(db, ref)
        if found is None or found.id == successor.id:
            continue
        current = _lock(db, found.id)
        if current is None or current.status == curation.RETRACTED or not vault.exists(current.vault_path):
            continue
        indexed = name in curation.supersedes_refs(current.meta.get("superseded_by"))
        written = _in_vault(vault, current)
        if name in curation.supersedes_refs(written.meta.get("superseded_by")):
            out.append((current, _record_state(vault, written, curation.SUCCESSOR_RETRACTED, at=at, by=by, successor=name)))
        elif indexed and written.meta.get("reinstated_after") == name:  # an earlier attempt wrote it: audit it now
            out.append((current, curation.REINSTATED))
        elif indexed:
            out.append((current, curation.SUCCESSOR_RETRACTED))
    return out


REPEATS_READ = 200  # a project's newest live lessons a lesson's repeats are sought among (the block reads fewer)


def repeats_of(db: Session, record: EntryRecord, *, now: dt.datetime) -> list[EntryRecord]:
    """The live lessons the memory block shows as one line with ``record``: its re-posts and rewordings
    (``brain_core.feed.repeats``), of its project. Curating that line curates them all (ADR 0071)."""
    if record.kind != "lesson":
        return []
    newest = feed_repo.live_lessons_like(db, record, now=now, limit=REPEATS_READ)
    if record.id not in {r.id for r in newest}:
        return []  # already withdrawn, or older than every lesson read: the block shows it with none
    near = feed_repo.near_lessons([r.id for r in newest], min_cosine=NEAR_DUPLICATE, session=db)
    group = repeat_of(newest, near)
    head = group.get(record.id, record.id)
    return [r for r in newest if r.id != record.id and group.get(r.id, r.id) == head]


def resolve_supersedes(db: Session, refs: Sequence[str], scope: Scope, *, now: dt.datetime) -> list[EntryRecord]:
    """The entries a marker's ``supersedes`` names that the writer may curate, with a lesson's repeats (the block's one
    line: ADR 0071); any other reference is left out, as an unknown one is (a marker is never refused for an attr,
    and a scoped token learns nothing of another project)."""
    out: dict[str, EntryRecord] = {}
    for ref in refs:
        try:
            record = find_entry(db, ref, scope)
            check_curatable(record, scope)
        except BrainError:  # not found, not curatable, a fleet signal for a scoped token
            continue
        out.setdefault(record.id, record)
        for repeat in repeats_of(db, record, now=now):
            out.setdefault(repeat.id, repeat)
    return list(out.values())


def supersede(db: Session, vault: Vault, successor: EntryRecord, olds: Sequence[EntryRecord], *, by: str, now: dt.datetime) -> list[str]:
    """Mark ``olds`` superseded by ``successor`` (already written); returns the ids marked now.

    An entry already marked by this successor (a retry of the same marker) or
    retracted is left as it is, with no audit record. The caller commits.
    """
    name = adr_name(successor) or successor.id
    marked: list[EntryRecord] = []
    for old in olds:
        if old.id == successor.id:
            continue
        current = _lock(db, old.id)
        if current is None or current.status == curation.RETRACTED:
            continue
        if name in curation.supersedes_refs(current.meta.get("superseded_by")):
            continue
        if name not in curation.supersedes_refs(_in_vault(vault, current).meta.get("superseded_by")):
            _record_state(vault, current, curation.SUPERSEDED, at=now, by=by, successor=name)
        # else an earlier attempt wrote it and rolled back: the index and the audit line it lost are still to do
        marked.append(current)
    if marked:
        _sync_curated(db, vault, marked)
        for record in marked:
            _audit(vault, curation.SUPERSEDED, record, at=now, by=by, successor=name)
    return [r.id for r in marked]


# -- reads ------------------------------------------------------------------------------------------------


def view(record: EntryRecord, now: dt.datetime) -> dict[str, Any]:
    """An entry as the curation routes show it: what it is, its state and what its file says of its curation."""
    meta = record.meta
    retracted = None
    if record.status == curation.RETRACTED:
        retracted = {"reason": meta.get("retracted_reason"), "by": meta.get("retracted_by"), "at": meta.get("retracted_at")}
    return {
        "entry_id": record.id,
        "adr": adr_name(record),
        "kind": record.kind,
        "title": record.title,
        "content": record.content,
        "project": record.project,
        "projects": list(record.projects),
        "repo": record.repo,
        "scope": record.scope,
        "vault_path": record.vault_path,
        "occurred_at": iso(record.occurred_at),
        "status": record.status,
        "state": curation.state_of(record.status, meta, now),
        "valid_until": meta.get("valid_until"),
        "supersedes": list(meta.get("supersedes") or []),
        "superseded_by": list(meta.get("superseded_by") or []),
        "retracted": retracted,
    }


def history(record: EntryRecord, now: dt.datetime) -> list[dict[str, Any]]:
    """The entry's curation history, oldest first, as its vault text records it."""
    meta = record.meta
    events: list[dict[str, Any]] = [{"action": "written", "at": iso(record.occurred_at)}]
    if meta.get("supersedes"):
        events.append({"action": "supersedes", "at": iso(record.occurred_at), "entries": list(meta["supersedes"])})
    if meta.get("superseded_by"):
        events.append(
            {
                "action": curation.SUPERSEDED,
                "at": meta.get("superseded_at"),
                "by": meta.get("superseded_by_token"),
                "superseded_by": list(meta["superseded_by"]),
            }
        )
    if meta.get("reinstated_at"):  # superseded, then its successor was retracted (ADR 0060)
        after = meta.get("reinstated_after")
        if not meta.get("superseded_by") and meta.get("superseded_at"):
            events.append(
                {"action": curation.SUPERSEDED, "at": meta["superseded_at"], "by": meta.get("superseded_by_token"), "superseded_by": [after] if after else None}
            )
        events.append({"action": curation.REINSTATED, "at": meta["reinstated_at"], "by": meta.get("reinstated_by"), "retracted_successor": after})
    if record.status == curation.RETRACTED:
        events.append({"action": curation.RETRACTED, "at": meta.get("retracted_at"), "by": meta.get("retracted_by"), "reason": meta.get("retracted_reason")})
    if meta.get("valid_until"):
        expired = curation.state_of(None, meta, now) == curation.EXPIRED
        event = {"action": curation.EXPIRED if expired else "expires", "at": meta["valid_until"]}
        if meta.get("expired_reason"):  # moved earlier by POST /entries/{id}/expire: who, when and why
            event.update(by=meta.get("expired_by"), reason=meta["expired_reason"], recorded_at=meta.get("expired_recorded_at"))
        events.append(event)
    return sorted(events, key=lambda e: e.get("at") or "")


def _state_filter(state: str, now: dt.datetime) -> list[ColumnElement[bool]]:
    moment = states.now_text(now)
    if state == ALL:
        return []
    if state == curation.LIVE:
        sql = states.live_sql("entries", ":now")
    elif state == curation.EXPIRED:
        sql = f"NOT {states.withdrawn_sql('entries')} AND {states.expired_sql('entries', ':now')}"
    else:
        return [text("entries.status = :state").bindparams(state=state)]
    return [text(sql).bindparams(now=moment)]


@dataclass(frozen=True)
class Listing:
    """``GET /entries``: the project listed (None: every project the scope reads), the filters and the entries."""

    project: str | None
    kind: str | None
    state: str
    entries: list[dict[str, Any]]


def list_entries(
    db: Session,
    *,
    scope: Scope,
    project: str | None,
    kind: str | None,
    state: str,
    limit: int,
    now: dt.datetime,
) -> Listing:
    """Entries for curation, newest first: of one project (a restricted token: one of its own; AmbiguousProject,
    OutOfScope, InvalidKey as the feed's), of one kind (default: the marker kinds) and one state (default: all)."""
    if kind is not None and kind not in KINDS:
        raise curation.CurationInvalid(f"kind must be one of {', '.join(KINDS)}")
    if state != ALL and state not in curation.STATES:
        raise curation.CurationInvalid(f"state must be one of {', '.join((*curation.STATES, ALL))}")
    ref = project.strip() if project is not None else scope.default_project()
    where = _state_filter(state, now)
    if ref:
        found = scope.check(ref) if scope.restricted else resolve_project(db, ref)
        if not found.known:
            return Listing(ref, kind, state, [])
        where.append(feed_repo.member(found.key, found.repo, feed_repo.key_owned_sql(found.key, found.repo)))
    kinds = [kind] if kind is not None else list(curation.CURATED_KINDS)
    rows = feed_repo.curation_list(db, kinds=kinds, where=where, limit=limit)
    return Listing(ref, kind, state, [view(r, now) for r in rows if scope.admits(r)])


def entry_answer(db: Session, ref: Any, *, scope: Scope, now: dt.datetime) -> dict[str, Any]:
    """``GET /entries/{id}``: the entry and its history (EntryNotFound outside the scope, as for a missing id)."""
    record = find_entry(db, ref, scope)
    return {"entry": view(record, now), "history": history(record, now)}


def answer_of(record: EntryRecord, now: dt.datetime, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The answer of an action: the entry as it now stands, and its history."""
    return {"entry": view(record, now), "history": history(record, now), **(extra or {})}
