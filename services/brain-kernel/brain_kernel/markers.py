"""Marker service: one validated marker into the vault and the index, once per idempotency key.

The steps, inside the caller's transaction (the entry point commits):

1. claim the idempotency key in Postgres (a replay returns the stored
   response and writes nothing; the same key with another body is a conflict);
2. attribute the marker: attrs project/repo, else the session index, else the
   cwd through the identity resolver, else unattributed (never a guess);
3. write the vault: lessons and milestones appended under ``flock`` in one
   ``O_APPEND`` write, signals and decisions created atomically under a name
   nobody else holds (ADR numbers claimed with ``O_EXCL``, see ADR 0004);
4. index the entry by parsing the text just written with the same parsers
   ``brain reindex`` uses, and move the project's last activity forward.

A failure after step 3 rolls the index back but leaves the vault entry; the
vault is the source of truth and ``brain reindex`` picks it up.
"""

from __future__ import annotations

import datetime as dt
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.markers import DEFAULT_SEVERITY, Attribution, MarkerRequest
from brain_core.vault import layout, logs, records
from brain_kernel import idempotency_repo
from brain_kernel.errors import BrainError
from brain_kernel.index import touch_project, upsert_entries
from brain_kernel.settings import Settings
from brain_kernel.vault import Vault

IDEMPOTENCY_SCOPE = "marker"
_MAX_NAME_ATTEMPTS = 1000
PURGE_ONE_IN = 64  # about one write in 64 also deletes a batch of expired keys


class IdempotencyConflict(BrainError):
    """The idempotency key was already used with a different body."""


@dataclass(frozen=True)
class MarkerOutcome:
    """What the HTTP layer answers: a status code and the JSON body."""

    status_code: int
    body: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Written:
    action: str
    vault_path: str
    written_bytes: int
    records: list[EntryRecord]


def attribute(db: Session, settings: Settings, req: MarkerRequest) -> Attribution:
    """The project a marker belongs to: attrs, session index, cwd resolution, else unattributed."""
    if req.identity is not None and req.identity.project:
        ident = req.identity
        return Attribution(ident.project, ident.repo, req.worktree or ident.worktree, ident.source)
    if req.session_id or req.cwd:
        from brain_kernel.identity import IdentityResolver

        ident = IdentityResolver(settings, db).resolve(req.cwd, session_id=req.session_id)
        if ident.project:
            return Attribution(ident.project, ident.repo, req.worktree or ident.worktree, ident.source)
    return Attribution(worktree=req.worktree)


def post_marker(
    db: Session,
    vault: Vault,
    settings: Settings,
    req: MarkerRequest,
    *,
    idempotency_key: str | None = None,
    now: dt.datetime | None = None,
) -> MarkerOutcome:
    """Write one marker (or replay an earlier write of the same key); never commits."""
    if idempotency_key is not None:
        if zlib.crc32(idempotency_key.encode()) % PURGE_ONE_IN == 0:
            idempotency_repo.purge_expired(db)  # garbage collection only: claim() handles expired keys itself
        claim = idempotency_repo.claim(db, idempotency_key, scope=IDEMPOTENCY_SCOPE, body_hash=req.body_hash, ttl_seconds=settings.idempotency_ttl_seconds)
        if claim.state == "conflict":
            raise IdempotencyConflict(f"idempotency key {idempotency_key!r} was already used with a different body")
        if claim.state == "replay":
            return MarkerOutcome(claim.status_code or 201, {**(claim.response or {}), "idempotent_replay": True})
    at = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc).replace(microsecond=0)
    who = attribute(db, settings, req)
    written = write_marker(vault, req, who, marker_id=uuid.uuid4().hex, at=at)
    upsert_entries(db, written.records)
    if who.project:
        touch_project(db, who.project, who.repo, at=at)
    body = {
        "ok": True,
        "marker_type": req.type,
        "action": written.action,
        "vault_path": written.vault_path,
        "written_bytes": written.written_bytes,
        "idempotency_key": idempotency_key,
        "body_hash": req.body_hash,
        "project": who.project,
    }
    if idempotency_key is not None:
        idempotency_repo.record_response(db, idempotency_key, status_code=201, response=body)
    return MarkerOutcome(201, body)


def write_marker(vault: Vault, req: MarkerRequest, who: Attribution, *, marker_id: str, at: dt.datetime) -> _Written:
    """Write the marker's vault text and return the index rows parsed back from it."""
    if req.type in ("lesson", "milestone"):
        path = layout.lesson_path(at) if req.type == "lesson" else layout.milestone_path(who.project, at)
        text = logs.render_log_entry(req.type, req, who, marker_id=marker_id, at=at)
        size = vault.append(path, text, header=logs.log_file_header(req.type, path))
        parse = records.lesson_records if req.type == "lesson" else records.milestone_records
        return _Written("appended", path, size, parse(text, path))
    if req.type == "signal":
        text = logs.render_signal(req, who, marker_id=marker_id, at=at)
        severity = req.severity or DEFAULT_SEVERITY
        for attempt in range(1, _MAX_NAME_ATTEMPTS + 1):
            path = layout.signal_path(req.title, severity, at, attempt)
            try:
                size = vault.create_exclusive(path, text)
            except FileExistsError:
                continue
            return _Written("created", path, size, [records.signal_record(text, path)])
        raise BrainError(f"no free signal file name for {req.title!r}")
    if req.type == "decision":
        for _ in range(_MAX_NAME_ATTEMPTS):
            number = vault.claim_number(layout.DECISIONS_DIR, start=next_adr_number(vault))
            path = layout.decision_path(number, req.title)
            text = logs.render_decision(req, who, number=number, marker_id=marker_id, at=at)
            try:
                size = vault.create_exclusive(path, text)
            except FileExistsError:
                continue
            return _Written("created", path, size, [records.decision_record(text, path)])
        raise BrainError("no free ADR number")
    raise ValueError(f"unknown marker type {req.type!r}")


def next_adr_number(vault: Vault) -> int:
    """One past the highest ADR number already in the vault, so numbering continues an old vault."""
    numbers = [layout.adr_number(p.name) for p in vault.iter_files(layout.DECISIONS_DIR)]
    return max([0, *(n for n in numbers if n is not None)]) + 1
