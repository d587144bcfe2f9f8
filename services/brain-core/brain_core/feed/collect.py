"""What the keeper collects from the scanned documents (pure): the mitigation set, live signals, live inject blocks.

UPSTREAM.md 5.4 steps 7 and 8, with its defects fixed:

- the mitigation set is every ``mitigates`` value of the arcs whose status is
  ``resolved`` or ``graduated``; a signal whose source is in it is mitigated
  (stored with status ``mitigated``, so no feed shows it);
- signals are deduplicated by (source, content hash); dropped are the
  resolved or ``(CLEARED: ...)`` ones (the marker anywhere in the content, not
  only its first line: upstream's CLEAR appends it at the end), the mitigated
  ones, and those neither ``nuclear`` nor ``critical`` whose parent was
  created more than ``stale_days`` ago (an undated one is kept); signal files
  written by ``POST /marker`` take part like inline ones; a signal inside a
  finished arc (resolved, graduated, merged) counts as stale, so an incident
  arc's nuclear signal expires once the arc graduates; a retracted or
  superseded signal counts as cleared, one past its ``valid_until`` as stale
  (ADR 0048);
- inject blocks are deduplicated by content hash; dropped are those of a
  finished arc (resolved, graduated, merged; not a derived ``complete``,
  ``membership.DONE_PARENT_STATUSES``) and those older than their
  ``ttl_days`` (else ``stale_days``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from brain_core.curation import EXPIRED, WITHDRAWN, state_of
from brain_core.entries import EntryRecord
from brain_core.membership import inject_is_live
from brain_core.vault.records import CLEARED, content_hash

MITIGATING_STATUSES = frozenset({"resolved", "graduated"})
LASTING_SEVERITIES = frozenset({"nuclear", "critical"})
MITIGATED = "mitigated"


def _values(raw: object) -> list[str]:
    if isinstance(raw, (list, tuple)):
        return [str(v).strip() for v in raw if str(v).strip()]
    if isinstance(raw, str):
        text = raw.strip().strip("[]")
        return [part.strip().strip("\"'") for part in text.split(",") if part.strip()]
    return []


def mitigation_sources(records: Iterable[EntryRecord]) -> set[str]:
    """The ``mitigates`` values of resolved or graduated arcs."""
    found: set[str] = set()
    for r in records:
        if r.kind == "arc" and (r.status or "").lower() in MITIGATING_STATUSES:
            found.update(_values(r.meta.get("mitigates")))
    return found


def mitigated(record: EntryRecord, why: str) -> EntryRecord:
    """The signal marked mitigated (``why``: the mitigating source or the verifier)."""
    return replace(record, status=MITIGATED, meta={**record.meta, "mitigated_by": why, "file_status": record.status})


def mitigate(records: Sequence[EntryRecord], sources: set[str] | None = None) -> list[EntryRecord]:
    """The records with every signal whose source the mitigation set holds marked mitigated."""
    sources = mitigation_sources(records) if sources is None else sources
    if not sources:
        return list(records)
    out = []
    for r in records:
        source = str(r.meta.get("source") or "")
        if r.kind == "signal" and source in sources and (r.status or "") != MITIGATED:
            r = mitigated(r, source)
        out.append(r)
    return out


def signal_key(record: EntryRecord) -> tuple[str, str]:
    """How signals are deduplicated: (source, first 16 hex of SHA-256 of the trimmed content)."""
    return (str(record.meta.get("source") or "unknown"), str(record.meta.get("hash") or content_hash(record.content)))


@dataclass
class SignalCollection:
    """The signals a tick keeps, and the counts of what it dropped (upstream's stats keys)."""

    kept: list[EntryRecord] = field(default_factory=list)
    collected: int = 0
    deduped: int = 0
    cleared: int = 0
    mitigated: int = 0
    stale: int = 0


def _verdict(r: EntryRecord, cutoff: dt.datetime, now: dt.datetime) -> str:
    """kept, or why a signal is dropped: mitigated, cleared (retracted and superseded too), stale (expired too)."""
    status = (r.status or "").lower()
    severity = (r.severity or "info").lower()
    if status == MITIGATED:
        return "mitigated"
    state = state_of(status, r.meta, now)  # curation (ADR 0048): withdrawn reads as cleared, expired as stale
    if status in ("resolved", "cleared") or severity == "resolved" or CLEARED in r.content or state in WITHDRAWN:
        return "cleared"
    if state == EXPIRED or status == "expired" or (severity not in LASTING_SEVERITIES and r.occurred_at is not None and r.occurred_at < cutoff):
        return "stale"  # "expired": inside a finished arc (``records.inline_records``)
    return "kept"


def collect_signals(records: Iterable[EntryRecord], now: dt.datetime, *, stale_days: int) -> SignalCollection:
    """Every signal, deduplicated, minus the cleared, mitigated and stale ones (module docstring).

    Of the copies of one signal (same source and content) the live one wins,
    whatever order the files come in: a stale copy left in an old arc never
    hides the same alert raised again in a current one.
    """
    out = SignalCollection()
    cutoff = now - dt.timedelta(days=stale_days)
    floor = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    best: dict[tuple[str, str], tuple[str, EntryRecord]] = {}
    for r in records:
        if r.kind != "signal":
            continue
        out.collected += 1
        key, verdict = signal_key(r), _verdict(r, cutoff, now)
        held = best.get(key)
        if held is None:
            best[key] = (verdict, r)
            continue
        out.deduped += 1
        rank = (verdict == "kept", r.occurred_at or floor, r.id)
        if rank > (held[0] == "kept", held[1].occurred_at or floor, held[1].id):
            best[key] = (verdict, r)
    for verdict, r in best.values():
        if verdict == "kept":
            out.kept.append(r)
        else:
            setattr(out, verdict, getattr(out, verdict) + 1)
    out.kept.sort(key=lambda r: (r.occurred_at or floor, r.id), reverse=True)
    return out


def collect_injects(records: Iterable[EntryRecord], now: dt.datetime, *, stale_days: int) -> tuple[list[EntryRecord], int]:
    """(live inject blocks, deduplicated by content, in id order; how many blocks there were)."""
    kept: list[EntryRecord] = []
    seen: set[str] = set()
    total = 0
    for r in sorted((r for r in records if r.kind == "inject"), key=lambda r: r.id):
        total += 1
        digest = content_hash(r.content)
        if digest in seen or not inject_is_live(r, now, stale_days=stale_days):
            continue
        seen.add(digest)
        kept.append(r)
    return kept, total
