"""Curation of entries (pure): superseded, retracted and expired entries, and the audit record of each action.

The state of an entry lives in the vault (ADR 0048) and is read back with the
entry's own file, so ``brain reindex`` derives it from the vault alone:

- **superseded**: a marker names the entries it replaces (``attrs.supersedes``);
  the replaced entry's file records it (an appended curation record in a shared
  log, ``status: superseded`` and ``superseded_by`` in a file's frontmatter);
- **retracted**: ``POST /entries/{id}/retract`` records it the same way, with
  the reason, the token's name and the moment;
- **expired**: a marker's ``attrs.valid_until`` (a date or a moment) or
  ``attrs.ttl_days``, kept with the entry as ``valid_until``; nothing is
  written when the moment passes, the clock decides. ``POST
  /entries/{id}/expire`` moves that moment earlier, never later (ADR 0060).

Retracting a successor takes back what it claimed (ADR 0060): each entry it
superseded is **reinstated** (live again, a decision's own status restored)
unless a successor still standing supersedes it too, in which case only the
retracted successor leaves its ``superseded_by``.

Superseded and retracted entries leave feeds and search; expired ones leave
the feed and stay searchable, marked. Every action appends one line to
``audit/curation-YYYY-MM.jsonl`` (``audit_line``).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from typing import Any

from brain_core.text import has_lone_surrogate_char
from brain_core.times import iso, parse_time

LIVE, SUPERSEDED, RETRACTED, EXPIRED = "live", "superseded", "retracted", "expired"
# Actions that undo a supersession when its successor is retracted (ADR 0060): the entry is live again, or it
# stays superseded by another successor and only the retracted one leaves its ``superseded_by``.
REINSTATED, SUCCESSOR_RETRACTED = "reinstated", "successor_retracted"
STATUS_BEFORE = "status_before_superseded"  # a file's own status (a decision's ``accepted``), kept while superseded
STATES = (LIVE, SUPERSEDED, RETRACTED, EXPIRED)
WITHDRAWN = (SUPERSEDED, RETRACTED)  # statuses that take an entry out of feeds and search
CURATED_KINDS = ("lesson", "milestone", "signal", "decision")  # the marker kinds: what a client wrote, it may withdraw
CURATION = "curation"  # the ``kind`` of a curation record in a shared log's ``brain`` comment
MAX_REASON_CHARS = 1000
MAX_SUPERSEDES = 20
MAX_REF_CHARS = 600
MAX_TTL_DAYS = 36_500
AUDIT_DIR = "audit"

_ADR = re.compile(r"^ADR-(\d{1,6})$", re.I)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SPLIT = re.compile(r"[,\s]+")
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class CurationInvalid(ValueError):
    """A curation request that must be refused (422) before anything is written."""


def adr_number_of(ref: str) -> int | None:
    """The number of an ``ADR-NNNN`` reference (any case, any zero padding), else None."""
    match = _ADR.match(ref.strip())
    return int(match.group(1)) if match else None


def usable_ref(ref: Any) -> str | None:
    """An entry reference as text (an entry id or ``ADR-NNNN``), or None when it cannot be one."""
    if not isinstance(ref, str):
        return None
    text = ref.strip()
    if not text or len(text) > MAX_REF_CHARS or _CONTROL.search(text) or has_lone_surrogate_char(text):
        return None
    return text


def supersedes_refs(value: Any) -> tuple[str, ...]:
    """The references a marker's ``attrs.supersedes`` names: a list, or one string (commas or spaces between several).

    Read leniently, as every marker attr (a payload is never refused for it):
    what cannot be a reference is left out, and at most ``MAX_SUPERSEDES`` are kept.
    """
    if isinstance(value, str):
        items: list[Any] = [part for part in _SPLIT.split(value) if part]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        return ()
    out = [ref for item in items if (ref := usable_ref(item)) is not None]
    return tuple(dict.fromkeys(out))[:MAX_SUPERSEDES]


def expiry_attrs(attrs: Mapping[str, Any]) -> tuple[dt.datetime | None, float | None]:
    """(``valid_until`` as a moment, ``ttl_days`` as a number) of a marker's attrs; unusable values read as absent.

    A date alone means the entry is valid through that day (UTC): it expires at the next midnight.
    """
    until = None
    raw = attrs.get("valid_until")
    if isinstance(raw, str) and raw.strip() and not _CONTROL.search(raw):
        text = raw.strip()
        until = parse_time(text)
        if until is not None and _DATE_ONLY.match(text):
            # Through that day; the last day a datetime holds (9999-12-31, "never") has no next midnight.
            until = until + dt.timedelta(days=1) if until.date() < dt.date.max else until.replace(hour=23, minute=59, second=59)
    ttl = attrs.get("ttl_days")
    days: float | None = None
    if isinstance(ttl, (int, float)) and not isinstance(ttl, bool):
        days = float(ttl)
    elif isinstance(ttl, str):
        try:
            days = float(ttl.strip())
        except ValueError:
            days = None
    if days is not None and not (0 < days <= MAX_TTL_DAYS):
        days = None
    return until, days


def valid_until(until: dt.datetime | None, ttl_days: float | None, at: dt.datetime) -> str | None:
    """The moment an entry written at ``at`` expires (the earlier of the two), as ISO text; None when it never does."""
    moments = [m for m in (until, at + dt.timedelta(days=ttl_days) if ttl_days is not None else None) if m is not None]
    return iso(min(moments)) if moments else None


def state_of(status: str | None, meta: Mapping[str, Any], now: dt.datetime) -> str:
    """An entry's curation state from its row: retracted, superseded, expired (by ``now``) or live."""
    lowered = (status or "").lower()
    if lowered == RETRACTED:
        return RETRACTED
    if lowered == SUPERSEDED:
        return SUPERSEDED
    until = parse_time(meta.get("valid_until"))
    if until is not None and until <= now:
        return EXPIRED
    return LIVE


def expiry_moment(value: Any, now: dt.datetime) -> dt.datetime:
    """The moment an early expiry names: ``now`` when absent; a date alone means through that day (UTC), as
    ``attrs.valid_until`` does; CurationInvalid for anything else."""
    if value is None:
        return now
    if isinstance(value, str) and value.strip() and not _CONTROL.search(value) and len(value) <= 64:
        until, _ = expiry_attrs({"valid_until": value})
        if until is not None:
            return until
    raise CurationInvalid("at must be an ISO 8601 moment or date")


def superseded_changes(meta: Mapping[str, Any], successor: str, *, at: dt.datetime, by: str) -> dict[str, Any]:
    """The frontmatter keys a file gets when ``successor`` supersedes it; its own status is kept the first time
    (``status_before_superseded``) so a reinstatement can restore it (ADR 0060)."""
    before = list(supersedes_refs(meta.get("superseded_by")))
    names = [*before, successor] if successor not in before else before
    changes: dict[str, Any] = {
        "status": SUPERSEDED,
        "superseded_by": names[0] if len(names) == 1 else names,
        "superseded_at": iso(at),
        "superseded_by_token": by,
    }
    status = meta.get("status")
    if isinstance(status, str) and status.strip() and status.strip().lower() not in WITHDRAWN and STATUS_BEFORE not in meta:
        changes[STATUS_BEFORE] = status
    return changes


def unsuperseded_changes(meta: Mapping[str, Any], successor: str, *, at: dt.datetime, by: str) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    """(action, keys to set, keys to drop) when ``successor`` is retracted and no longer supersedes a file.

    ``reinstated`` when no other successor is named: the status goes back to
    what it was (``status_before_superseded``, else no status) and the file
    says when, by whom and after which successor; ``superseded_at`` stays, so
    the history still shows the supersession. ``successor_retracted`` when
    others remain: only the list shrinks.
    """
    left = [name for name in supersedes_refs(meta.get("superseded_by")) if name != successor]
    if left:
        return SUCCESSOR_RETRACTED, {"superseded_by": left[0] if len(left) == 1 else left}, ()
    changes: dict[str, Any] = {"reinstated_at": iso(at), "reinstated_by": by, "reinstated_after": successor}
    drop: tuple[str, ...] = ("superseded_by", STATUS_BEFORE)
    prior = meta.get(STATUS_BEFORE)
    if isinstance(prior, str) and prior.strip():
        changes["status"] = prior
    else:
        drop = (*drop, "status")
    return REINSTATED, changes, drop


def reason_text(reason: Any) -> str:
    """A retraction's reason as it is recorded: trimmed, required, at most ``MAX_REASON_CHARS`` characters."""
    if not isinstance(reason, str) or not reason.strip():
        raise CurationInvalid("reason is required")
    text = reason.replace("\r\n", "\n").replace("\r", "\n").strip()
    if len(text) > MAX_REASON_CHARS:
        raise CurationInvalid(f"reason is longer than {MAX_REASON_CHARS} characters")
    if "\x00" in text or has_lone_surrogate_char(text):
        raise CurationInvalid("reason contains a NUL byte or a lone surrogate")
    return text


def audit_path(at: dt.datetime) -> str:
    """The month's audit log: one JSON line per curation action, appended only."""
    return f"{AUDIT_DIR}/curation-{at.astimezone(dt.timezone.utc):%Y-%m}.jsonl"


def audit_line(
    action: str,
    entry_id: str,
    *,
    at: dt.datetime,
    by: str | None,
    project: str | None,
    vault_path: str,
    reason: str | None = None,
    successor: str | None = None,
    retracted_successor: str | None = None,
    valid_until: str | None = None,
    valid_until_before: str | None = None,
) -> str:
    """One audit record: what (action, entry, file, project), who (a token's name, never its secret), when, why.

    ``retracted_successor`` names the successor whose retraction reinstated the
    entry; ``valid_until`` (and the one it replaced) the moment an early expiry set.
    """
    record = {
        "at": iso(at),
        "action": action,
        "entry_id": entry_id,
        "vault_path": vault_path,
        "project": project,
        "by": by or None,
        "reason": reason,
        "superseded_by": successor,
        "retracted_successor": retracted_successor,
        "valid_until": valid_until,
        "valid_until_before": valid_until_before,
    }
    return json.dumps({k: v for k, v in record.items() if v is not None}, ensure_ascii=False, sort_keys=True) + "\n"
