"""Monotonic event totals in Postgres (ADR 0054): what every process of the kernel did, counted once.

Ticks run in CronJob pods and the ops loop, markers arrive through the API
and the MCP server, embeddings are written by ``brain embed`` and the API:
no single process sees them all, so a process-local counter would answer
differently per replica and per worker. ``bump`` adds to a row in the
caller's transaction (the count commits or rolls back with the event);
``totals`` reads them for ``GET /metrics``. Rows are never deleted.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from brain_kernel.db.models import EventCount

TICK_RUNS = "tick_runs"
MARKERS = "markers"
INJECTIONS = "injections"
EMBEDDINGS_WRITTEN = "embeddings_written"

_TABLE = EventCount.__table__


def bump(session: Session, name: str, label: str = "", by: int = 1) -> None:
    """Add ``by`` to the (name, label) total in the session's transaction."""
    if by <= 0:
        return
    statement = insert(_TABLE).values(name=name, label=label, value=by)
    session.execute(statement.on_conflict_do_update(index_elements=["name", "label"], set_={"value": _TABLE.c.value + statement.excluded.value}))


def totals(session: Session) -> dict[str, dict[str, int]]:
    """Every total: name -> label -> value."""
    out: dict[str, dict[str, int]] = {}
    for name, label, value in session.execute(select(_TABLE.c.name, _TABLE.c.label, _TABLE.c.value)):
        out.setdefault(name, {})[label] = int(value)
    return out
