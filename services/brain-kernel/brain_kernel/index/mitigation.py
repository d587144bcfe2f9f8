"""Signals mitigated by the arcs that say so, and by verify commands that passed: their status in the index."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.feed.collect import mitigation_sources
from brain_kernel.db.models import Entry

_MITIGATE = text(
    """
    UPDATE entries SET status = 'mitigated',
           metadata = metadata || jsonb_build_object('mitigated_by', metadata ->> 'source', 'file_status', status),
           updated_at = clock_timestamp()
     WHERE kind = 'signal' AND (metadata ->> 'source') = ANY(:sources) AND status IS DISTINCT FROM 'mitigated'
    """
)
_UNMITIGATE = text(
    """
    UPDATE entries SET status = metadata ->> 'file_status', metadata = metadata - 'mitigated_by' - 'file_status',
           updated_at = clock_timestamp()
     WHERE kind = 'signal' AND status = 'mitigated' AND (metadata ->> 'mitigated_by') IS DISTINCT FROM 'verify'
       AND NOT ((metadata ->> 'source') = ANY(:sources))
    """
)


def mitigation_set(session: Session) -> set[str]:
    """The ``mitigates`` values of the resolved and graduated arcs the index holds."""
    stmt = select(Entry.id, Entry.status, Entry.meta["mitigates"]).where(Entry.kind == "arc", Entry.meta.has_key("mitigates"))
    rows = [EntryRecord(id=i, kind="arc", vault_path="", status=st, meta={"mitigates": m}) for i, st, m in session.execute(stmt)]
    return mitigation_sources(rows)


def apply_mitigation(session: Session, sources: set[str] | None = None) -> int:
    """Mark the signals of mitigated sources ``mitigated`` and restore the others; returns rows changed."""
    sources = mitigation_set(session) if sources is None else sources
    params = {"sources": sorted(sources)}
    return (session.execute(_MITIGATE, params).rowcount or 0) + (session.execute(_UNMITIGATE, params).rowcount or 0)


_VERIFIED = text(
    """
    UPDATE entries SET status = 'mitigated',
           metadata = metadata || jsonb_build_object('mitigated_by', 'verify', 'file_status', status), updated_at = clock_timestamp()
     WHERE kind = 'signal' AND id = ANY(:ids) AND status IS DISTINCT FROM 'mitigated'
    """
)
_UNVERIFIED = text(
    """
    UPDATE entries SET status = metadata ->> 'file_status', metadata = metadata - 'mitigated_by' - 'file_status', updated_at = clock_timestamp()
     WHERE kind = 'signal' AND status = 'mitigated' AND (metadata ->> 'mitigated_by') = 'verify' AND NOT (id = ANY(:ids))
    """
)


def set_verified(session: Session, ids: Iterable[str]) -> int:
    """Mark exactly ``ids`` as the signals this tick's verifier mitigated (earlier verifier marks are lifted)."""
    params = {"ids": sorted(set(ids))}
    return (session.execute(_VERIFIED, params).rowcount or 0) + (session.execute(_UNVERIFIED, params).rowcount or 0)
