"""What one ``brain backfill`` run did: the JSON summary of DESIGN section 4 plus details."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from brain_core.jsonable import SORTED_KEYS, JobSummary


@dataclass(kw_only=True)
class BackfillSummary(JobSummary):
    """What one run did; ``as_dict`` is the JSON summary of DESIGN section 4 plus details, keys in the fields' order."""

    scanned: int = 0
    changed: int = 0
    unchanged: int = 0
    unresolved: int = 0
    by_source: Counter = field(default_factory=Counter, metadata=SORTED_KEYS)
    by_outcome: Counter = field(default_factory=Counter, metadata=SORTED_KEYS)
    dry_run: bool
    files_written: int = 0
    markers: dict[str, int] = field(default_factory=lambda: {"sessions": 0, "sessions_recorded": 0, "entries_retagged": 0, "files_rewritten": 0})
    index: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
