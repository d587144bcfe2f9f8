"""Which vault files hold index entries, and how each is read (pure).

``records_for(vault_path, text)`` is the single dispatch both the full
``brain reindex`` and the incremental refresh after a write use, so the two
give the same rows by construction: a file's rows depend on its path and
text only. ``project_activity`` derives the projects table (key, repo, last
activity) from the same rows, so a wiped index comes back whole from the
vault alone.

Layout (DESIGN section 6): arcs ``clusters/<date>/<id>.md`` (``.merged.md``
tombstones are not live), lessons ``left/reference/lessons-<date>.md``,
decisions ``left/decisions/ADR-*.md``, signals ``amygdala/*.md``,
milestones ``left/projects/<p>/BLOCKS.md`` and ``daily/<date>.md``, the
keeper's intents ``brain-feed/intent.md`` and
``brain-feed/projects/<id>/intent.md``, inject blocks
``brain-feed/inject/*.md``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass

from brain_core.arcs import arc_record
from brain_core.entries import EntryRecord
from brain_core.feed import INJECT_DIR, PROJECT_INTENT_DIR, inject_record, intent_record
from brain_core.markers import (
    BLOCKS_PATH,
    DAILY_DIR,
    DECISIONS_DIR,
    LESSONS_DIR,
    PROJECTS_DIR,
    SIGNALS_DIR,
    decision_record,
    lesson_records,
    milestone_records,
    signal_record,
)

# Folders a full rebuild walks (files outside them hold no entries).
INDEXED_PREFIXES = (
    "clusters",
    LESSONS_DIR,
    DECISIONS_DIR,
    PROJECTS_DIR,
    SIGNALS_DIR,
    DAILY_DIR,
    "brain-feed/intent.md",
    PROJECT_INTENT_DIR,
    INJECT_DIR,
)
ACTIVITY_KINDS = ("arc", "lesson", "decision", "signal", "milestone")

_ARC = re.compile(r"^clusters/(?:[^/]+/)*[^/]+\.md$")
_LESSONS = re.compile(rf"^{re.escape(LESSONS_DIR)}/lessons-[^/]+\.md$")
_DECISION = re.compile(rf"^{re.escape(DECISIONS_DIR)}/ADR-[^/]+\.md$", re.I)
_SIGNAL = re.compile(rf"^{re.escape(SIGNALS_DIR)}/[^/]+\.md$")
_DAILY = re.compile(rf"^{re.escape(DAILY_DIR)}/[^/]+\.md$")
_PROJECT_INTENT = re.compile(rf"^{re.escape(PROJECT_INTENT_DIR)}/.+/intent\.md$")
_INJECT = re.compile(rf"^{re.escape(INJECT_DIR)}/[^/]+\.md$")


def kind_of_path(vault_path: str) -> str | None:
    """The kind of entries a vault file holds, or None when it holds none."""
    if _ARC.match(vault_path):
        return "arc"
    if _LESSONS.match(vault_path):
        return "lesson"
    if _DECISION.match(vault_path):
        return "decision"
    if _SIGNAL.match(vault_path):
        return "signal"
    if BLOCKS_PATH.match(vault_path) or _DAILY.match(vault_path):
        return "milestone"
    if vault_path == "brain-feed/intent.md" or _PROJECT_INTENT.match(vault_path):
        return "intent"
    if _INJECT.match(vault_path):
        return "inject"
    return None


def records_for(vault_path: str, text: str) -> list[EntryRecord]:
    """Every index entry one vault file holds (none for tombstones and unrelated files)."""
    kind = kind_of_path(vault_path)
    if kind == "arc":
        record = arc_record(text, vault_path)
        return [record] if record is not None else []
    if kind == "lesson":
        return lesson_records(text, vault_path)
    if kind == "decision":
        return [decision_record(text, vault_path)]
    if kind == "signal":
        return [signal_record(text, vault_path)]
    if kind == "milestone":
        return milestone_records(text, vault_path)
    if kind == "intent":
        return [intent_record(text, vault_path)]
    if kind == "inject":
        return [inject_record(text, vault_path)]
    return []


@dataclass(frozen=True)
class ProjectActivity:
    """One project as the vault shows it: key, repo slug (or None), latest entry time."""

    key: str
    repo: str | None
    last_active: dt.datetime | None


def project_activity(records: Iterable[EntryRecord]) -> list[ProjectActivity]:
    """The projects named by entries, with their last activity.

    A key seen with exactly one repo folds its repo-less mentions (secondary
    projects of merged arcs, markers that named only the key) into that
    repo; a key seen with several repos keeps them apart and drops the
    repo-less mentions, which could belong to either; a key never seen with
    a repo is a project of its own.
    """
    by_repo: dict[tuple[str, str], dt.datetime | None] = {}
    bare: dict[str, dt.datetime | None] = {}

    def later(a: dt.datetime | None, b: dt.datetime | None) -> dt.datetime | None:
        return b if a is None else a if b is None else max(a, b)

    for record in records:
        if record.kind not in ACTIVITY_KINDS:
            continue
        for key in record.projects:
            if key == record.project and record.repo:
                slot = (key, record.repo)
                by_repo[slot] = later(by_repo.get(slot), record.occurred_at) if slot in by_repo else record.occurred_at
            else:
                bare[key] = later(bare.get(key), record.occurred_at) if key in bare else record.occurred_at
    repos_of: dict[str, list[str]] = {}
    for key, repo in by_repo:
        repos_of.setdefault(key, []).append(repo)
    out = [ProjectActivity(key, repo, when) for (key, repo), when in by_repo.items()]
    for key, when in bare.items():
        repos = repos_of.get(key, [])
        if len(repos) == 1:
            index = next(i for i, p in enumerate(out) if p.key == key and p.repo == repos[0])
            out[index] = ProjectActivity(key, repos[0], later(out[index].last_active, when))
        elif not repos:
            out.append(ProjectActivity(key, None, when))
    return sorted(out, key=lambda p: (p.key, p.repo or ""))
