"""The trial's report: records and stored outcomes, grouped by arm and compared over projects (ADR 0050).

A session is in the trial when it was served a block: its arm is the arm of
its first block record, its unit of randomisation the identity that record
was assigned by (repository, else project key, else session id). Sessions
with no block record are not in the trial; an ``unassignable`` session is
counted apart and never compared. Only one trial period is read at a time:
the records whose percentage and salt id are the given ones (by default the
current settings'), since a new salt or percentage reshuffles the arms. The
outcomes are those ``brain extract`` stored on each session's row; a trial
session without them (not extracted yet) is counted apart as well.

The comparison itself is ``brain_core.trial.report``: project means, the
difference control minus treatment, and a cluster bootstrap interval.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from brain_core.trial import CONTROL, TREATMENT, UNASSIGNABLE, SessionOutcome, TrialConfig, identity_of, report
from brain_kernel.trial.outcomes import ESTIMATED, OUTCOMES, read_outcomes

ARMS = (TREATMENT, CONTROL, UNASSIGNABLE)

# Each session's first block record (the one its arm was given by), then only those of the period asked.
_FIRST_BLOCKS = text(
    """
    SELECT session_id, arm, repo, project FROM (
        SELECT DISTINCT ON (session_id) session_id, arm, repo, project, control_percent, salt_id, at
          FROM injections WHERE kind = 'block' AND session_id IS NOT NULL
         ORDER BY session_id, id
    ) AS first
     WHERE control_percent = :percent AND salt_id IS NOT DISTINCT FROM :salt_id AND (CAST(:since AS timestamptz) IS NULL OR at >= :since)
    """
)
# A period's sessions are those whose first block it holds, as its arms count them (``_FIRST_BLOCKS``): a session
# resumed after the salt or the percentage changed reads blocks in the new period but belongs to its first.
_PERIODS = text(
    """
    WITH first AS (
        SELECT DISTINCT ON (session_id) session_id, control_percent, salt_id
          FROM injections WHERE kind = 'block' AND session_id IS NOT NULL ORDER BY session_id, id
    )
    SELECT b.control_percent, b.salt_id, count(DISTINCT f.session_id), min(b.at), max(b.at)
      FROM injections b
      LEFT JOIN first f ON f.session_id = b.session_id AND f.control_percent = b.control_percent AND f.salt_id IS NOT DISTINCT FROM b.salt_id
     WHERE b.kind = 'block' AND b.session_id IS NOT NULL AND (CAST(:since AS timestamptz) IS NULL OR b.at >= :since)
     GROUP BY 1, 2 ORDER BY min(b.at)
    """
)


@dataclass(frozen=True)
class Period:
    """A trial period: the control percentage and the salt id its records carry."""

    control_percent: int
    salt_id: str | None

    @classmethod
    def of(cls, config: TrialConfig) -> Period:
        """The period a trial configuration writes."""
        return cls(config.control_percent, config.salt_id)


def periods(db: Session, *, since: dt.datetime | None = None) -> list[dict[str, Any]]:
    """Every period the block records hold (since ``since``), oldest first, with its sessions and time span."""
    return [
        {"control_percent": p, "salt_id": s, "sessions": n, "first": first.isoformat(), "last": last.isoformat()}
        for p, s, n, first, last in db.execute(_PERIODS, {"since": since})
    ]


def trial_outcomes(db: Session, period: Period, *, since: dt.datetime | None = None) -> tuple[list[SessionOutcome], dict[str, int]]:
    """The period's sessions with stored outcomes, by arm and unit; and by arm, how many trial sessions have none yet."""
    first = db.execute(_FIRST_BLOCKS, {"percent": period.control_percent, "salt_id": period.salt_id, "since": since}).all()
    stored = read_outcomes(db, [row.session_id for row in first])
    outcomes, missing = [], dict.fromkeys(ARMS, 0)
    for row in first:
        values = stored.get(row.session_id)
        if values is None:
            missing[row.arm] = missing.get(row.arm, 0) + 1
            continue
        _, unit = identity_of(row.repo, row.project, row.session_id)
        outcomes.append(SessionOutcome(project=unit or row.session_id, arm=row.arm, values=values))
    return outcomes, missing


def _number(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def trial_report(db: Session, period: Period, *, since: dt.datetime | None = None, current: Period | None = None, rounds: int = 2000) -> dict[str, Any]:
    """The report as JSON-ready values: the period, per arm projects and sessions, per outcome the comparison, the statement."""
    outcomes, missing = trial_outcomes(db, period, since=since)
    found = report(outcomes, list(OUTCOMES), rounds=rounds)
    arms = {arm: {"projects": found.projects.get(arm, 0), "sessions": found.sessions.get(arm, 0), "without_outcomes": missing.get(arm, 0)} for arm in ARMS}
    comparisons = [
        {
            "outcome": c.outcome,
            "how": OUTCOMES[c.outcome],
            "treatment_mean": _number(c.treatment_mean),
            "control_mean": _number(c.control_mean),
            "difference": _number(c.difference),
            "low": _number(c.low),
            "high": _number(c.high),
            "treatment_projects": c.treatment_projects,
            "control_projects": c.control_projects,
        }
        for c in found.comparisons
    ]
    notes = []
    if arms[UNASSIGNABLE]["sessions"] or missing.get(UNASSIGNABLE):
        notes.append("Unassignable sessions (no repository, project or session id) got the usual block and are not compared.")
    if any(missing.values()):
        notes.append(f"{sum(missing.values())} trial sessions have no outcomes yet: run `brain extract` with the database to add them.")
    notes.append("Recall used is estimated from the assistant's text and is 0 by design in control, which is served no entries.")
    return {
        "period": {"control_percent": period.control_percent, "salt_id": period.salt_id, "current": current is None or current == period},
        "since": since.isoformat() if since else None,
        "arms": arms,
        "confidence": found.confidence,
        "outcomes": comparisons,
        "statement": found.statement,
        "notes": notes,
        "periods": periods(db, since=since),
    }


def _cell(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def render_text(data: dict[str, Any]) -> str:
    """The report as a plain table: arms, then one line per outcome, then the statement and notes."""
    period, arms = data["period"], data["arms"]
    salt = period["salt_id"] or "none"
    lines = [f"Trial period: control {period['control_percent']}%, salt id {salt}" + ("" if period["current"] else " (not the current settings)")]
    lines.append(f"Records since {data['since']}" if data["since"] else "All records of the period")
    lines.append("")
    lines.append(f"{'':18}{'treatment':>11}{'control':>11}{'unassignable':>14}")
    for label, key in (("projects", "projects"), ("sessions", "sessions"), ("without outcomes", "without_outcomes")):
        lines.append(f"{label:18}" + "".join(f"{arms[arm][key]:>{w}}" for arm, w in ((TREATMENT, 11), (CONTROL, 11), (UNASSIGNABLE, 14))))
    lines.append("")
    width = f"{round(data['confidence'] * 100)}% interval"
    lines.append(f"{'outcome':20}{'how':11}{'treatment':>11}{'control':>11}{'difference':>12}  {width}")
    for c in data["outcomes"]:
        interval = f"[{_cell(c['low'], signed=True)}, {_cell(c['high'], signed=True)}]" if c["low"] is not None else "-"
        mark = "*" if c["how"] == ESTIMATED else ""
        lines.append(
            f"{c['outcome'] + mark:20}{c['how']:11}{_cell(c['treatment_mean']):>11}{_cell(c['control_mean']):>11}"
            f"{_cell(c['difference'], signed=True):>12}  {interval}"
        )
    lines.append("")
    lines.append("Difference: control minus treatment, over project means; * estimated.")
    lines.append(data["statement"])
    lines.extend(data["notes"])
    return "\n".join(lines) + "\n"
