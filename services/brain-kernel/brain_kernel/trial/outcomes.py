"""Session outcomes: what the kernel observed a session do, stored on its ``sessions`` row (ADR 0050).

``brain extract`` (with a database) fills ``sessions.outcomes`` from three
sources, each value labelled by how it was obtained::

    {"failed_tool_calls": {"value": 3, "how": "measured"}, "recall_used": {"value": 1, "how": "estimated"}, ...}

* the transcript (measured): turns, minutes from the first to the last
  timestamp, tool calls, failed tool calls, repeated failures of the same
  shell command (``brain_core.transcripts``);
* the markers the session posted (measured counts of entries whose metadata
  names the session): lessons, decisions, error signals (any severity but
  info, low and resolved; an unset severity is the default warning) and
  critical signals (critical or nuclear);
* the injection records (estimated): how many of the entries served to the
  session in a block, a recall or an MCP pull that named the session (ADR
  0061) its assistant's later text names, by id, title or a six-word phrase
  (``brain_core.trial.recall_used``). Only sessions with such a record get
  it; a control session's is 0 by design.

The SQL of these reads and of the write lives here; the caller owns the
transaction. The write changes a row only when its outcomes differ, so an
unchanged rerun of the job writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Text, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from brain_core.transcripts import SessionSummary
from brain_core.trial import Injected

MEASURED, ESTIMATED = "measured", "estimated"
# Every outcome, in the order a report shows them, with how it is obtained.
OUTCOMES: dict[str, str] = {
    "turns": MEASURED,
    "duration_minutes": MEASURED,
    "tool_calls": MEASURED,
    "failed_tool_calls": MEASURED,
    "repeated_failures": MEASURED,
    "lessons": MEASURED,
    "decisions": MEASURED,
    "error_signals": MEASURED,
    "critical_signals": MEASURED,
    "recall_used": ESTIMATED,
}
ASSISTANT_CHARS = 256 * 1024  # the end of a session's assistant text read for recall used
ENTRY_CHARS = 1000  # the start of an injected entry's text whose phrases count as naming it
_BATCH = 5000
_MARKERS = ("lessons", "decisions", "error_signals", "critical_signals")

_SERVED = text(
    """
    SELECT session_id, entry_ids FROM injections
     WHERE session_id = ANY(:sids) AND kind IN ('block', 'recall', 'pull')
     ORDER BY id
    """
).bindparams(bindparam("sids", type_=ARRAY(Text)))
_ENTRIES = text(f"SELECT id, title, left(content, {ENTRY_CHARS}) FROM entries WHERE id = ANY(:ids)").bindparams(bindparam("ids", type_=ARRAY(Text)))
_MARKER_COUNTS = text(
    """
    SELECT metadata ->> 'session_id' AS sid,
           count(*) FILTER (WHERE kind = 'lesson'),
           count(*) FILTER (WHERE kind = 'decision'),
           count(*) FILTER (WHERE kind = 'signal' AND coalesce(severity, 'warning') NOT IN ('info', 'low', 'resolved')),
           count(*) FILTER (WHERE kind = 'signal' AND severity IN ('critical', 'nuclear'))
      FROM entries
     WHERE kind IN ('lesson', 'decision', 'signal') AND (metadata ->> 'session_id') = ANY(:sids)
     GROUP BY 1
    """
).bindparams(bindparam("sids", type_=ARRAY(Text)))
_STORE = text(
    """
    UPDATE sessions AS s SET outcomes = v.outcomes::jsonb
      FROM unnest(:sids, :outcomes) AS v(session_id, outcomes)
     WHERE s.session_id = v.session_id AND s.outcomes IS DISTINCT FROM v.outcomes::jsonb
    RETURNING s.session_id
    """
).bindparams(bindparam("sids", type_=ARRAY(Text)), bindparam("outcomes", type_=ARRAY(Text)))
_READ = text("SELECT session_id, outcomes FROM sessions WHERE session_id = ANY(:sids) AND outcomes IS NOT NULL").bindparams(
    bindparam("sids", type_=ARRAY(Text))
)


def _batches(ids: Sequence[str]) -> list[list[str]]:
    unique = list(dict.fromkeys(i for i in ids if i))
    return [unique[n : n + _BATCH] for n in range(0, len(unique), _BATCH)]


def injected_by_session(db: Session, session_ids: Sequence[str]) -> dict[str, list[Injected]]:
    """The sessions among these served a block, a recall or a pull, each with the entries served (an empty list: none, as in control)."""
    served: dict[str, dict[str, None]] = {}
    for batch in _batches(session_ids):
        for sid, entry_ids in db.execute(_SERVED, {"sids": batch}):
            served.setdefault(sid, {}).update(dict.fromkeys(entry_ids or ()))
    wanted = sorted({e for ids in served.values() for e in ids})
    known: dict[str, Injected] = {}
    for batch in _batches(wanted):
        for entry_id, title, content in db.execute(_ENTRIES, {"ids": batch}):
            known[entry_id] = Injected(entry_id, title or "", content or "")
    # An entry gone from the index since it was served is still named by its id.
    return {sid: [known.get(e) or Injected(e) for e in ids] for sid, ids in served.items()}


def marker_counts(db: Session, session_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """Lessons, decisions, error signals and critical signals posted by each of these sessions (those with any)."""
    out: dict[str, dict[str, int]] = {}
    for batch in _batches(session_ids):
        for sid, *counts in db.execute(_MARKER_COUNTS, {"sids": batch}):
            out[sid] = dict(zip(_MARKERS, (int(c) for c in counts), strict=True))
    return out


def _labelled(name: str, value: float) -> dict[str, Any]:
    return {"value": value, "how": OUTCOMES[name]}


def session_outcomes(summary: SessionSummary, *, markers: Mapping[str, int] | None = None, recall: int | None = None) -> dict[str, Any]:
    """One session's outcomes, each ``{"value": ..., "how": "measured" | "estimated"}``; recall used only when given."""
    observed: dict[str, float] = {
        "turns": summary.num_turns,
        "duration_minutes": summary.duration_minutes,
        "tool_calls": summary.num_tool_calls,
        "failed_tool_calls": summary.failed_tool_calls,
        "repeated_failures": summary.repeated_failures,
        **{name: (markers or {}).get(name, 0) for name in _MARKERS},
    }
    if recall is not None:
        observed["recall_used"] = recall
    return {name: _labelled(name, value) for name, value in observed.items()}


def store_outcomes(db: Session, outcomes: Mapping[str, Mapping[str, Any]]) -> int:
    """Write each session's outcomes on its row (rows that exist; unchanged ones are not written); the rows written."""
    written = 0
    for batch in _batches(list(outcomes)):
        params = {"sids": batch, "outcomes": [json.dumps(outcomes[sid], sort_keys=True) for sid in batch]}
        written += len(db.execute(_STORE, params).all())
    return written


def read_outcomes(db: Session, session_ids: Sequence[str]) -> dict[str, dict[str, float]]:
    """The stored outcomes of these sessions as plain values (name to value), for those that have any."""
    out: dict[str, dict[str, float]] = {}
    for batch in _batches(session_ids):
        for sid, stored in db.execute(_READ, {"sids": batch}):
            out[sid] = {name: float(v["value"]) for name, v in (stored or {}).items() if isinstance(v, dict) and isinstance(v.get("value"), (int, float))}
    return out
