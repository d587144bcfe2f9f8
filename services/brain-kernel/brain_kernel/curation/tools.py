"""Curation as tools answer it (the MCP server's ``brain_retract``, ``brain_expire`` and ``brain_supersede``): a dict, ``{"error": ...}`` on a refusal.

Each call is one unit of work, as ``POST /entries/{id}/retract`` and
``POST /marker`` are, under the same scope rule (ADR 0033, 0048): a scoped
principal's call on another project's entry answers ``entry not found``,
exactly as for an id that does not exist.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from brain_core.curation import CurationInvalid, supersedes_refs
from brain_core.markers import MarkerInvalid
from brain_kernel import marker_service
from brain_kernel.auth import Principal
from brain_kernel.curation import service
from brain_kernel.db.engine import unit_of_work
from brain_kernel.identity.transcript_files import TranscriptLocator
from brain_kernel.scope import OutOfScope, Scope
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault

REFUSALS = (service.EntryNotFound, service.NotCuratable, CurationInvalid, OutOfScope, MarkerInvalid)


def retract_tool(factory: sessionmaker[Session], vault: Vault, entry_id: str, reason: str, *, principal: Principal, now: dt.datetime) -> dict[str, Any]:
    """Retract an entry: ``{entry, history}`` as ``POST /entries/{id}/retract`` answers, or ``{"error": ...}``."""
    try:
        with unit_of_work(factory) as db:
            record = service.retract(db, vault, entry_id, reason, scope=Scope(db, principal), now=now)
    except REFUSALS as exc:
        return {"error": str(exc)}
    except OSError as exc:
        return {"error": f"vault write failed: {exc.strerror or exc}"}
    return service.answer_of(record, now)


def expire_tool(factory: sessionmaker[Session], vault: Vault, entry_id: str, reason: str, *, principal: Principal, now: dt.datetime) -> dict[str, Any]:
    """Expire an entry now: ``{entry, history}`` as ``POST /entries/{id}/expire`` answers, or ``{"error": ...}``."""
    try:
        with unit_of_work(factory) as db:
            record = service.expire(db, vault, entry_id, reason, scope=Scope(db, principal), now=now)
    except REFUSALS as exc:
        return {"error": str(exc)}
    except OSError as exc:
        return {"error": f"vault write failed: {exc.strerror or exc}"}
    return service.answer_of(record, now)


def superseding_attrs(db: Session, entry_id: str, attrs: Any, scope: Scope) -> dict[str, Any]:
    """A marker's attrs with ``entry_id`` first in its ``supersedes`` (EntryNotFound, NotCuratable as a retraction's)."""
    record = service.find_entry(db, entry_id, scope)
    service.check_curatable(record, scope)
    out = dict(attrs) if isinstance(attrs, Mapping) else {}
    out["supersedes"] = [record.id, *(ref for ref in supersedes_refs(out.get("supersedes")) if ref != record.id)]
    return out


def supersede_tool(
    factory: sessionmaker[Session],
    vault: Vault,
    settings: Settings,
    entry_id: str,
    type_: str,
    content: str,
    attrs: Any = None,
    *,
    principal: Principal,
    now: dt.datetime,
    locator: TranscriptLocator | None = None,
) -> dict[str, Any]:
    """Write a marker that takes ``entry_id``'s place (``POST /marker`` with ``attrs.supersedes``): its answer, or an error.

    Unlike a marker's lenient ``supersedes``, an entry the principal cannot
    curate is refused before anything is written: the tool names one entry,
    and the marker would be pointless without it.
    """
    try:
        with factory() as db:
            wanted = superseding_attrs(db, entry_id, attrs, Scope(db, principal))
        with unit_of_work(factory) as db:
            outcome = marker_service.submit(db, vault, settings, type_, content, wanted, now=now, locator=locator, principal=principal)
    except REFUSALS as exc:
        return {"error": str(exc)}
    except OSError as exc:  # the reservation stays pending: a retry finds whatever reached the vault
        return {"error": f"vault write failed: {exc.strerror or exc}"}
    marker_service.follow_marker(factory, vault, outcome)  # the search index, after the commit
    return outcome.body
