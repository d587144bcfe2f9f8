"""The keeper tick (``brain tick``): heat and status, the feed files, per-project intent, the index.

One pass, safe to rerun:

1. **Heat.** Every live arc in ``clusters/`` gets heat and status from
   ``brain_core.heat``; only arcs whose values change are rewritten, with a
   targeted frontmatter edit (``brain_core.vault.frontmatter.update``: every other
   byte stays) written atomically.
2. **Feed files** in ``brain-feed/`` (names in ``brain_core.feed.keeper_files.FEED_FILES``):
   ``hot-arcs.md`` (top 10, "Active Hot Arcs", with a Project column),
   ``signals.md``, ``lessons.md``, ``inject-blocks.md`` and ``intent.md`` (the
   fleet intent, the fallback for sessions without a project).
3. **Per-project intent** for every project active in the last
   ``ACTIVE_HOURS`` hours, written to ``brain-feed/projects/<id>/intent.md``
   (id = repo slug, else key): derived from the project's hottest arcs, or
   from one LLM call for all of them (``brain_ops.intent``).
4. **Index refresh**: every row of the vault as it now is gets upserted (the
   same parser as ``brain reindex``), so new arcs written by ``brain cluster``
   are served from the next tick on; rows the scan did not see are deleted
   only when they were last written before the scan began
   (``brain_kernel.index.replace_all``), so a marker posted during the tick
   keeps its row.

``--dry-run`` computes everything and writes nothing (neither files nor
index). The function never commits; the command does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.feed.intent import derive_intent, focus_line
from brain_core.feed.keeper_files import (
    FEED_FILES,
    render_fleet_intent_file,
    render_hot_arcs_file,
    render_inject_file,
    render_lessons_file,
    render_project_intent_file,
    render_signals_file,
)
from brain_core.feed.project import ProjectRef
from brain_core.feed.sections import digest
from brain_core.heat import arc_activity, score
from brain_core.membership import KnownProject, belongs, inject_is_fleet, key_is_unique, signal_is_active
from brain_core.times import iso
from brain_core.vault import frontmatter
from brain_core.vault.layout import FLEET_INTENT_FILE, HOT_ARCS_FILE, INJECT_FILE, LESSONS_FILE, SIGNALS_FILE, is_tombstone, kind_of_path, project_intent_path
from brain_core.vault.records import arc_record_of, project_activity
from brain_kernel.index import ReindexSummary, read_records, replace_all, scan_point, vault_files
from brain_kernel.projects import known_projects
from brain_kernel.settings import Settings
from brain_kernel.vault import Vault
from brain_ops.intent import project_intents

HOT_ARCS = 10
ACTIVE_HOURS = 72
LESSON_DAYS = 7
MAX_LESSONS = 30
SIGNAL_DAYS = 14
MAX_SIGNALS = 30
INTENT_ARCS = 5

Progress = Callable[[str], None]


@dataclass
class TickSummary:
    """What a tick did (printed as JSON by ``brain tick``)."""

    now: str
    dry_run: bool
    stats: dict[str, int | bool] = field(default_factory=dict)  # upstream's stats keys (UPSTREAM.md 5.4)
    arcs_scanned: int = 0
    arcs_updated: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    hot_arcs: list[str] = field(default_factory=list)
    signals: int = 0
    lessons: int = 0
    inject_blocks: int = 0
    active_projects: list[str] = field(default_factory=list)
    intent_sources: dict[str, int] = field(default_factory=dict)
    llm_calls: int = 0
    llm_error: str | None = None
    files_written: list[str] = field(default_factory=list)
    index: dict[str, Any] = field(default_factory=dict)
    feed_answers: dict[str, int] = field(default_factory=dict)  # ``brain tick`` fills it after the commit (project_feeds.warm)

    def as_dict(self) -> dict[str, Any]:
        """The JSON summary."""
        return dict(self.__dict__)


def _changed(meta: dict[str, Any], heat: float, status: str) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    try:
        old_heat = float(meta.get("heat"))
    except (TypeError, ValueError):
        old_heat = None
    if old_heat is None or abs(old_heat - heat) >= 0.005:
        changes["heat"] = heat
    if str(meta.get("status") or "") != status:
        changes["status"] = status
    return changes


def score_arcs(vault: Vault, now: dt.datetime, summary: TickSummary, *, dry_run: bool, progress: Progress | None) -> dict[str, frontmatter.Document]:
    """Heat and status for every live arc; returns {vault path: the arc as it now is, parsed}."""
    docs: dict[str, frontmatter.Document] = {}
    for rel in vault_files(vault):
        if kind_of_path(rel) != "arc" or is_tombstone(rel):
            continue
        try:
            text = vault.read_text(rel)
        except OSError:
            continue
        doc = frontmatter.parse(text)
        if doc.meta.get("merged_into"):
            continue
        summary.arcs_scanned += 1
        result = score(arc_activity(doc.meta), now)
        summary.statuses[result.status] = summary.statuses.get(result.status, 0) + 1
        changes = _changed(doc.meta, result.heat, result.status)
        if changes:
            summary.arcs_updated += 1
            if not dry_run:
                vault.write_atomic(rel, frontmatter.update(text, changes))
            doc = frontmatter.Document(meta=doc.meta | changes, body=doc.body, has_frontmatter=True)
        docs[rel] = doc
        if progress is not None and summary.arcs_scanned % 1000 == 0:
            progress(f"scored {summary.arcs_scanned} arcs")
    return docs


def _newest(records: list[EntryRecord]) -> list[EntryRecord]:
    floor = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    return sorted(records, key=lambda r: (r.occurred_at or floor, r.id), reverse=True)


def _hottest(records: list[EntryRecord]) -> list[EntryRecord]:
    floor = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    return sorted(records, key=lambda r: (-r.heat, -(r.occurred_at or floor).timestamp(), r.id))


def run_tick(
    session: Session,
    vault: Vault,
    settings: Settings,
    *,
    now: dt.datetime | None = None,
    use_ai: bool = True,
    dry_run: bool = False,
    progress: Progress | None = None,
    llm_transport: httpx.BaseTransport | None = None,
) -> TickSummary:
    """One keeper pass (see the module docstring); writes nothing with ``dry_run``; never commits."""
    now = now or dt.datetime.now(dt.timezone.utc)
    summary = TickSummary(now=iso(now) or "", dry_run=dry_run)
    say = progress or (lambda _msg: None)

    scan_started = scan_point(session)
    say("scoring arcs")
    arc_docs = score_arcs(vault, now, summary, dry_run=dry_run, progress=progress)

    say("reading the vault")
    scratch = ReindexSummary()
    records: list[EntryRecord] = []
    for rel in vault_files(vault):
        kind = kind_of_path(rel)
        if kind == "arc":
            record = arc_record_of(arc_docs[rel], rel) if rel in arc_docs else None
            records.extend([record] if record is not None else [])
        elif kind != "intent":
            records.extend(read_records(vault, rel, scratch))
    arcs = _hottest([r for r in records if r.kind == "arc"])
    hot = arcs[:HOT_ARCS]
    summary.hot_arcs = [digest(a).cluster_id for a in hot]
    signals = _newest(
        [r for r in records if r.kind == "signal" and signal_is_active(r) and r.occurred_at and r.occurred_at >= now - dt.timedelta(days=SIGNAL_DAYS)]
    )[:MAX_SIGNALS]
    lessons = _newest([r for r in records if r.kind == "lesson" and r.occurred_at and r.occurred_at >= now - dt.timedelta(days=LESSON_DAYS)])[:MAX_LESSONS]
    blocks = [r for r in records if r.kind == "inject" and inject_is_fleet(r)]
    summary.signals, summary.lessons, summary.inject_blocks = len(signals), len(lessons), len(blocks)

    say("writing intents")
    activity = project_activity(records)
    # Uniqueness over every project the index knows (roots and aliases included) and the vault names.
    known = {p.id: p for p in (KnownProject(a.key, a.repo) for a in activity)} | {p.id: p for p in known_projects(session)}
    cutoff = now - dt.timedelta(hours=ACTIVE_HOURS)
    active = [p for p in activity if p.last_active and p.last_active >= cutoff]
    refs = {ProjectRef(p.key, p.repo, True, p.last_active).id: ProjectRef(p.key, p.repo, True, p.last_active) for p in active}
    project_arcs: dict[str, list[EntryRecord]] = {}
    for pid, ref in refs.items():
        unique = key_is_unique(ref.key, known.values())
        project_arcs[pid] = [a for a in arcs if belongs(a, ref.key, ref.repo, key_is_unique=unique)][:INTENT_ARCS]
    result = project_intents(settings, {pid: [digest(a) for a in arcs_] for pid, arcs_ in project_arcs.items()}, use_ai=use_ai, transport=llm_transport)
    summary.active_projects = sorted(refs)
    summary.llm_calls, summary.llm_error = result.llm_calls, result.error
    for source in result.sources.values():
        summary.intent_sources[source] = summary.intent_sources.get(source, 0) + 1

    files: dict[str, str] = {
        HOT_ARCS_FILE: render_hot_arcs_file(hot, now),
        SIGNALS_FILE: render_signals_file(signals, now),
        LESSONS_FILE: render_lessons_file(lessons, now),
        INJECT_FILE: render_inject_file(blocks, now),
        FLEET_INTENT_FILE: render_fleet_intent_file(derive_intent([digest(a) for a in hot]), now, source="derived"),
    }
    assert set(files) == set(FEED_FILES)
    for pid, ref in sorted(refs.items()):
        top = project_arcs[pid][0] if project_arcs[pid] else None
        focus = focus_line(digest(top) if top else None, (ref.last_active or now).strftime("%Y-%m-%d"))
        files[project_intent_path(ref.id)] = render_project_intent_file(ref, result.intents[pid], focus, now, source=result.sources[pid])
    if dry_run:
        summary.files_written = []
        summary.index = {"refreshed": False}
        return summary
    for rel, text in files.items():
        vault.write_atomic(rel, text)
    summary.files_written = sorted(files)

    say("refreshing the index")
    for rel in vault_files(vault):
        if kind_of_path(rel) == "intent":
            records.extend(read_records(vault, rel, scratch))
    index = replace_all(session, records, scan_started=scan_started)
    summary.index = index.as_dict() | {"refreshed": True, "skipped": scratch.skipped + index.skipped}
    return summary
