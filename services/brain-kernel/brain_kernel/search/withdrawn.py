"""What the file search leaves out: withdrawn entries, read from their ``entries`` rows (ADR 0064).

A file that is one entry (a decision, a signal: its row's id is
``kind:vault_path``, no anchor) leaves the search whole once that row is
superseded or retracted. An entry of a shared log (an anchored id) leaves
only its own lines: they match nothing and no snippet's context reaches
them, while the rest of the log is searched as before. The rows say the
state (``brain_kernel.curation.states``); the files are not re-read for it.
Expired entries stay, and ``states`` marks a file that is one entry.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.orm import Session

from brain_core.curation import WITHDRAWN, state_of
from brain_core.entries import entry_id
from brain_core.textsearch import lines_of
from brain_core.vault.layout import kind_of_path
from brain_core.vault.records import entry_line_spans

# ``status IN (...)`` as written, so the partial index ``ix_entries_withdrawn`` (revision 0022) answers it:
# a read of the withdrawn rows only, whatever the size of the index.
_STATUSES = ", ".join(f"'{s}'" for s in WITHDRAWN)
_WITHDRAWN_ROWS = f"SELECT id, kind, vault_path FROM entries WHERE status IN ({_STATUSES})"
# By primary key: a day's log holds a thousand rows under one vault_path, and a log is no one entry anyway.
_FILE_STATES = "SELECT id, status, metadata ->> 'valid_until' FROM entries WHERE id = ANY(:ids)"
ONE_ENTRY_KINDS = ("decision", "signal")  # the curated kinds (ADR 0048) whose file is one entry


@dataclass(frozen=True)
class Withdrawn:
    """The files that are one withdrawn entry, and the withdrawn entries of logs by their file."""

    files: frozenset[str] = frozenset()
    entries: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def entry_ids(self) -> list[str]:
        return sorted(i for ids in self.entries.values() for i in ids)

    def allowed(self, path: str, body: str, within: Collection[int] | None = None) -> set[int] | None:
        """The lines of ``path`` a scan may match and show (of ``within``, when given); None for every line."""
        gone = self.entries.get(path)
        if not gone:
            return None if within is None else set(within)
        spans = entry_line_spans(path, body)
        out = set(within) if within is not None else set(range(1, len(lines_of(body)) + 1))
        for gone_id in gone:
            if gone_id in spans:
                first, last = spans[gone_id]
                out.difference_update(range(first, last + 1))
        return out


NOTHING = Withdrawn()


def withdrawn(session: Session) -> Withdrawn:
    """The withdrawn entries the search leaves out, from their rows."""
    files: set[str] = set()
    entries: dict[str, set[str]] = {}
    for row_id, kind, path in session.execute(text(_WITHDRAWN_ROWS)):
        if row_id == entry_id(kind, path):  # no anchor: the file is the entry
            files.add(path)
        else:
            entries.setdefault(path, set()).add(row_id)
    return Withdrawn(frozenset(files), {p: frozenset(ids) for p, ids in entries.items()})


def states(session: Session, paths: Iterable[str], now: dt.datetime) -> dict[str, str]:
    """Path -> ``live``, ``expired``, ``superseded`` or ``retracted``, for each of ``paths`` that is one curated entry."""
    ids = {entry_id(kind, path): path for path in paths if (kind := kind_of_path(path)) in ONE_ENTRY_KINDS}
    if not ids:
        return {}
    rows = session.execute(text(_FILE_STATES), {"ids": sorted(ids)})
    return {ids[found]: state_of(status, {"valid_until": valid_until}, now) for found, status, valid_until in rows}
