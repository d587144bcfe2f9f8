"""The project feed (pure): one project's memory from index rows already filtered to it.

``project_feed`` takes P's rows (``ProjectMemory``, read by one statement in
``brain_kernel.feed.feed_repo``) and assembles P's intent and focus line, hot arcs,
recent lessons, decisions and milestones, P's signals, then fleet-wide
signals and the inject blocks that reach P, every entry's metadata saying
``scope`` (``project`` or ``fleet``) and ``project``. An unknown project gets
a short "no project memory yet" entry and the fleet-wide part only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from brain_core.entries import EntryRecord
from brain_core.feed.envelope import DEFAULT_TTL, PRIORITY, FeedEntry, envelope
from brain_core.feed.intent import derive_intent, focus_line
from brain_core.feed.sections import HOT_ARCS_TITLE, day, decisions_markdown, digest, hot_arc_item, hot_arcs_table, inject_item, lessons_markdown
from brain_core.membership import inject_applies, inject_is_fleet, inject_is_live, inject_reaches_agent
from brain_core.text import int_or, one_line
from brain_core.times import iso, parse_time


@dataclass(frozen=True)
class ProjectRef:
    """The project a feed is for: canonical id (slug, else key), key, repo, whether it is known."""

    key: str
    repo: str | None
    known: bool
    last_active: dt.datetime | None = None

    @property
    def id(self) -> str:
        """The project id: the repo slug when known, else the key."""
        return self.repo or self.key


@dataclass(frozen=True)
class ProjectMemory:
    """P's rows from the index, already filtered to P (signals and inject blocks may be fleet-wide)."""

    arcs: Sequence[EntryRecord] = ()
    lessons: Sequence[EntryRecord] = ()
    decisions: Sequence[EntryRecord] = ()
    milestones: Sequence[EntryRecord] = ()
    intent: EntryRecord | None = None
    project_signals: Sequence[EntryRecord] = ()
    fleet_signals: Sequence[EntryRecord] = ()
    inject: Sequence[EntryRecord] = ()
    repeats: Mapping[str, str] = field(default_factory=dict)  # a repeated lesson's id to its group's newest (``repeats``)

    def valid_until(self, lesson_days: int) -> dt.datetime | None:
        """When this memory stops being P's memory by the clock alone, or None if never.

        Only the windowed sections (lessons, decisions, milestones, signals of
        the last ``lesson_days`` days) change as time passes, and only by their
        oldest row leaving the window: a row can only enter through a write.
        """
        windowed = (*self.lessons, *self.decisions, *self.milestones, *self.project_signals, *self.fleet_signals)
        times = [r.occurred_at + dt.timedelta(days=lesson_days) for r in windowed if r.occurred_at is not None]
        times += [until for r in windowed if (until := parse_time(r.meta.get("valid_until"))) is not None]  # an entry expiring leaves too (ADR 0048)
        return min(times) if times else None


def _meta(scope: str, project: str | None, **extra: Any) -> dict[str, Any]:
    return {"scope": scope, "project": project, **extra}


def _signal_entry(signal: EntryRecord, *, fleet: bool, project: ProjectRef) -> FeedEntry:
    label = "Fleet signal" if fleet else f"Signal ({project.id})"
    return FeedEntry(
        id=f"signal:{signal.vault_path}",
        title=f"{label}: {one_line(signal.title)}",
        content=signal.content.strip(),
        priority=PRIORITY["signal"],
        ttl=DEFAULT_TTL,
        severity=(signal.severity or "info").lower(),
        metadata=_meta(
            "fleet" if fleet else "project",
            (signal.repo or signal.project) if fleet else project.id,
            vault_path=signal.vault_path,
            occurred_at=iso(signal.occurred_at),
            entry_id=signal.id,
        ),
    )


def intent_parts(project: ProjectRef, memory: ProjectMemory) -> tuple[str, str, str]:
    """P's focus line, intent text and where the intent came from (``keeper``, a marker's source, or ``derived``)."""
    top = memory.arcs[0] if memory.arcs else None
    focus = focus_line(digest(top) if top else None, day(project.last_active) if project.last_active else None)
    if memory.intent is not None and memory.intent.content.strip():
        return focus, memory.intent.content.strip(), str(memory.intent.meta.get("source") or "keeper")
    return focus, derive_intent([digest(a) for a in memory.arcs], subject=project.id), "derived"


def _inject_rank(block: EntryRecord) -> tuple[bool, int, float, str]:
    """A project's own blocks first, then the higher priority, then the newest: what a cap of a few keeps."""
    newest = block.occurred_at.timestamp() if block.occurred_at else float("-inf")
    return (inject_is_fleet(block), -int_or(block.meta.get("priority"), PRIORITY["inject"]), -newest, block.id)


def reaching_blocks(project: ProjectRef, memory: ProjectMemory, *, now: dt.datetime, key_is_unique: bool, agent: str | None = None) -> list[EntryRecord]:
    """The live inject blocks of ``memory`` that reach P (and a session of ``agent``, when known), ranked by ``_inject_rank``."""
    return sorted(
        (
            block
            for block in memory.inject
            if inject_applies(block, project.key, project.repo, key_is_unique=key_is_unique)
            and inject_is_live(block, now)
            and inject_reaches_agent(block, agent)
        ),
        key=_inject_rank,
    )


def fleet_blocks(inject: Sequence[EntryRecord], *, now: dt.datetime, agent: str | None = None) -> list[EntryRecord]:
    """The live inject blocks aimed at the whole fleet (and a session of ``agent``, when known), ranked by ``_inject_rank``."""
    return sorted((b for b in inject if inject_is_fleet(b) and inject_is_live(b, now) and inject_reaches_agent(b, agent)), key=_inject_rank)


def no_memory_entry(ref: str) -> FeedEntry:
    """The short entry an unknown project gets."""
    return FeedEntry(
        id="project-memory",
        title="Project Memory",
        content=f"No project memory yet for {ref}. Lessons, decisions and arcs recorded for it will appear here.",
        priority=PRIORITY["no-memory"],
        metadata=_meta("project", ref),
    )


def project_feed(
    project: ProjectRef,
    memory: ProjectMemory,
    *,
    now: dt.datetime,
    vault_root: str,
    lesson_days: int,
    top_n: int,
    key_is_unique: bool = True,
    ref: str | None = None,
) -> dict[str, Any]:
    """The feed of one project: its memory first, then fleet signals and inject blocks, all labelled."""
    pid = project.id
    entries: list[FeedEntry] = []
    if not project.known:
        entries.append(no_memory_entry(ref or pid))
    else:
        focus, intent_text, source = intent_parts(project, memory)
        entries.append(
            FeedEntry(
                id="project-intent",
                title=f"Project Intent: {pid}",
                content=f"{focus}\n\n{intent_text}",
                priority=PRIORITY["intent"],
                metadata=_meta("project", pid, focus=focus, source=source),
            )
        )
        entries.append(
            FeedEntry(
                id="hot-arcs",
                title=HOT_ARCS_TITLE,
                content=hot_arcs_table(memory.arcs),
                priority=PRIORITY["hot-arcs"],
                metadata=_meta("project", pid, top_n=top_n, count=len(memory.arcs), entry_ids=[a.id for a in memory.arcs]),
            )
        )
        recent_sections = (
            (memory.lessons, "lessons", "Recent Lessons", lambda records: lessons_markdown(records, repeats=memory.repeats)),
            (memory.decisions, "decisions", "Recent Decisions", decisions_markdown),
            (memory.milestones, "milestones", "Recent Milestones", lessons_markdown),
        )
        for records, section, title, render_section in recent_sections:
            if records:
                entries.append(
                    FeedEntry(
                        id=section,
                        title=title,
                        content=render_section(records),
                        priority=PRIORITY[section],
                        metadata=_meta("project", pid, days=lesson_days, count=len(records), entry_ids=[r.id for r in records]),
                    )
                )
        for signal in memory.project_signals:
            entries.append(_signal_entry(signal, fleet=False, project=project))
    for signal in memory.fleet_signals:
        entries.append(_signal_entry(signal, fleet=True, project=project))
    blocks: list[dict[str, Any]] = []
    for block in reaching_blocks(project, memory, now=now, key_is_unique=key_is_unique):
        fleet = inject_is_fleet(block)
        item = inject_item(block, "fleet" if fleet else "project", None if fleet else pid)
        blocks.append(item)
        entries.append(
            FeedEntry(
                id=f"inject:{item['id']}",
                title=item["title"],
                content=item["content"],
                priority=item["priority"],
                ttl=item["ttl"],
                severity=item["severity"],
                metadata=_meta(item["scope"], item["project"], target=item["target"], entry_id=block.id),
            )
        )
    return envelope(
        entries,
        now=now,
        vault_root=vault_root,
        extra={
            "arcs": [hot_arc_item(a) for a in memory.arcs] if project.known else [],
            "blocks": blocks,
            "project": {"key": project.key, "repo": project.repo, "known": project.known, "last_active": iso(project.last_active)},
            "scope": "project",
        },
    )
