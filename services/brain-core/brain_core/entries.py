"""Index entries as plain values (pure).

Every vault entry the feed can serve (arc, lesson, decision, signal,
milestone, intent, inject block) becomes one ``EntryRecord``; the SQL
repository in ``brain_kernel.index.entries`` stores it. Ids are derived from the vault
(path, plus a stable anchor for entries that share a file, such as lessons),
so an incremental refresh and a full ``brain reindex`` produce the same rows.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from typing import Any

KINDS = ("arc", "lesson", "decision", "signal", "milestone", "intent", "inject")
SCOPES = ("project", "fleet")


@dataclass(frozen=True)
class EntryRecord:
    """One indexed entry. ``projects`` lists every project the entry belongs to."""

    id: str
    kind: str
    vault_path: str
    title: str = ""
    content: str = ""
    project: str | None = None
    projects: tuple[str, ...] = ()
    repo: str | None = None
    scope: str = "project"
    status: str | None = None
    severity: str | None = None
    heat: float = 0.0
    occurred_at: dt.datetime | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown entry kind {self.kind!r}")
        if self.scope not in SCOPES:
            raise ValueError(f"unknown scope {self.scope!r}")
        if self.project and self.project not in self.projects:
            object.__setattr__(self, "projects", (self.project, *self.projects))


def entry_id(kind: str, vault_path: str, anchor: str = "") -> str:
    """Stable id of an entry: kind, vault path and (for shared files) an anchor."""
    if not anchor:
        return f"{kind}:{vault_path}"
    digest = hashlib.sha1(anchor.encode("utf-8")).hexdigest()[:16]
    return f"{kind}:{vault_path}#{digest}"
