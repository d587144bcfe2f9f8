"""The keeper tick (``brain tick``), deterministic half: upstream's steps (UPSTREAM.md 5.4), project-aware.

Steps, in upstream's order:

0. **Inbox drain**: ``raw/inbox/*.md`` notes move to the folder their first
   known tag names (``brain_core.vault.regions.INBOX_TAGS``), with ``region``
   set and ``status: active`` added when missing.
1. **Scan** of the region folders, then ``clusters/<date>/``, with
   ``.merged.md`` suppression and one copy per arc (``regions.live_paths``,
   the same selection a full reindex uses).
2. **Replay boost**: an arc named by a newer arc's ``replayed_from`` gets +1.
3. **Heat** (``brain_core.heat``, upstream's formula) and status, for arcs
   only (upstream's defect 8); ``created`` backfilled and ``heat`` inserted
   when missing, with targeted frontmatter edits (every other byte stays).
4. **Promote and demote** as moves between ``clusters/`` and
   ``frontal-lobe/{conscious,unconscious}/``; 6. **graduate** by region;
   (5. workflow templates are not built: see ADR 0014).
7. **Mitigation set**; 8. **inline markers** collected from every scanned
   document, each with the project of the arc holding it; signal files
   posted through ``POST /marker`` take part like inline signals.
9. **Verifier**: only operator-allowed commands, no shell, once per tick
   (``brain_kernel.verifier``).
10. **Feed files**: ``hot-arcs.md``, ``signals.md``, ``inject.md``,
    ``lessons.md``, ``intent.md``, per-project intents, ``last-tick-diff.md``;
    11. ``clusters/<date>/_dashboard.md``. A file is rewritten only when its
    content changed, so a tick over a vault where nothing crossed a threshold
    writes nothing.

Then the index is refreshed from the same records (``replace_all``). With
``dry_run`` everything is computed and reported, and nothing is written:
no file, no move, no index row, no verifier run. The function never
commits; the command does. The LLM half of the tick is issue 15's.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.feed.collect import collect_injects, collect_signals, mitigate, mitigated
from brain_core.feed.intent import derive_intent, focus_line
from brain_core.feed.keeper_files import (
    render_dashboard,
    render_fleet_intent_file,
    render_hot_arcs_file,
    render_inject_file,
    render_last_tick_diff,
    render_lessons_file,
    render_project_intent_file,
    render_signals_file,
    same_content,
)
from brain_core.feed.project import ProjectRef
from brain_core.feed.sections import digest
from brain_core.heat import REPLAY_MAX_AGE_DAYS, HeatRules, age_days, arc_activity, heat_of, status_of
from brain_core.membership import KnownProject, belongs, key_is_unique
from brain_core.times import iso, parse_time
from brain_core.vault import frontmatter
from brain_core.vault.layout import (
    CLUSTERS_DIR,
    FLEET_INTENT_FILE,
    HOT_ARCS_FILE,
    INBOX_DIR,
    INJECT_FILE,
    LAST_TICK_DIFF_FILE,
    LEGACY_FEED_FILES,
    LESSONS_FILE,
    SIGNALS_FILE,
    kind_of_path,
    project_intent_path,
)
from brain_core.vault.records import document_records, project_activity, records_for
from brain_core.vault.regions import GRADUATED, canonical_id, clash_free, inbox_destination, is_inbox_note, place, region_of_folder
from brain_kernel.index import live_vault_files, replace_all, scan_point
from brain_kernel.projects import known_projects
from brain_kernel.settings import Settings
from brain_kernel.vault import Vault
from brain_kernel.verifier import ERROR, FAIL, PASS, SKIP, Verifier
from brain_ops.intent import project_intents

HOT_ARCS = 10
ACTIVE_HOURS = 72
LESSON_DAYS = 7
MAX_LESSONS = 30
INTENT_ARCS = 5
ARC_CAPABLE = ("arc", "region", "signal")  # kinds of files that can hold an arc (a region doc or incident arc with a cluster_id)

# Upstream's stats keys (UPSTREAM.md 5.4), every one always present.
STATS_KEYS = (
    "inbox_drained",
    "inbox_errors",
    "arcs_scanned",
    "created_backfilled",
    "heat_changes",
    "promotions",
    "demotions",
    "templates_written",
    "graduations",
    "hot_arcs_written",
    "signals_collected",
    "signals_written",
    "signals_tombstoned_stale",
    "signals_tombstoned_cleared",
    "signals_tombstoned_mitigated",
    "signals_deduped",
    "signals_verified_pass",
    "signals_verified_fail",
    "signals_verified_skip",
    "signals_verified_error",
    "inject_blocks_collected",
    "lessons_collected",
)

Progress = Callable[[str], None]
_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})")
_SIGNAL_LINE = re.compile(r"^- \*\*\[", re.M)


@dataclass
class TickSummary:
    """What a tick did (printed as JSON by ``brain tick``)."""

    now: str
    dry_run: bool
    stats: dict[str, int | bool] = field(default_factory=dict)  # upstream's stats keys (UPSTREAM.md 5.4)
    arcs_scanned: int = 0
    arcs_updated: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    moves: list[dict[str, str]] = field(default_factory=list)
    moves_refused: list[str] = field(default_factory=list)
    hot_arcs: list[str] = field(default_factory=list)
    signals: int = 0
    lessons: int = 0
    inject_blocks: int = 0
    active_projects: list[str] = field(default_factory=list)
    intent_sources: dict[str, int] = field(default_factory=dict)
    llm_calls: int = 0
    llm_error: str | None = None
    files_written: list[str] = field(default_factory=list)
    vault_writes: int = 0
    skipped: list[str] = field(default_factory=list)
    index: dict[str, Any] = field(default_factory=dict)
    feed_answers: dict[str, int] = field(default_factory=dict)  # ``brain tick`` fills it after the commit (project_feeds.warm)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The JSON summary."""
        return dict(self.__dict__)


@dataclass
class _Doc:
    """One scanned document as the tick holds it."""

    path: str
    text: str
    doc: frontmatter.Document
    kind: str | None
    mtime: dt.datetime | None
    source: str | None = None  # where it was read, when a dry run only pretends it moved

    @property
    def is_arc(self) -> bool:
        return self.kind == "arc" or (self.kind in ARC_CAPABLE and bool(self.doc.meta.get("cluster_id")) and self.doc.meta.get("type") != "signal")


class _Writer:
    """Every vault write of one tick: nothing in a dry run, a count and the feed files' names otherwise."""

    def __init__(self, vault: Vault, summary: TickSummary, *, dry_run: bool) -> None:
        self.vault, self.summary, self.dry_run = vault, summary, dry_run

    def write(self, rel: str, text: str, *, feed: bool = False) -> bool:
        """Write ``text`` unless the file already says it; True when it was (or would be) written."""
        try:
            old = self.vault.read_text(rel) if self.vault.exists(rel) else None
        except OSError:
            old = None
        if old == text or (feed and same_content(old, text)):
            return False
        if not self.dry_run:
            self.vault.write_atomic(rel, text)
            self.summary.vault_writes += 1
        if feed:
            self.summary.files_written.append(rel)
        return True

    def move(self, source: str, target: str, text: str | None) -> bool:
        """Move a file (False, reported, when the target name is taken)."""
        if self.vault.exists(target):
            self.summary.moves_refused.append(f"{source} -> {target}: target exists")
            return False
        if not self.dry_run:
            self.vault.move(source, target, text)
            self.summary.vault_writes += 1
        return True

    def remove(self, rel: str) -> None:
        if not self.dry_run and self.vault.remove(rel):
            self.summary.vault_writes += 1


def _mtime(vault: Vault, rel: str) -> dt.datetime | None:
    try:
        return dt.datetime.fromtimestamp(vault.mtime(rel), tz=dt.timezone.utc)
    except OSError:
        return None


# -- step 0: the inbox ------------------------------------------------------------------------


def drain_inbox(vault: Vault, writer: _Writer, stats: dict[str, Any], now: dt.datetime) -> dict[str, str]:
    """Move each inbox note to its tag's folder; returns {new path: old path} (what a dry run reads where)."""
    moved: dict[str, str] = {}
    if not vault.exists(INBOX_DIR):
        return moved
    for path in sorted(vault.iter_files(INBOX_DIR)):
        rel = vault.rel(path)
        if not is_inbox_note(rel):
            continue
        try:
            text = vault.read_text(rel)
            meta = frontmatter.parse(text).meta
            folder = inbox_destination(meta)
            name = rel.rsplit("/", 1)[-1]
            target = f"{folder}/{name}"
            target = f"{folder}/{clash_free(name, vault.exists(target) or target in moved, now.strftime('%H%M%S'))}"
            changes: dict[str, Any] = {"region": region_of_folder(folder)} if meta.get("region") != region_of_folder(folder) else {}
            if not meta.get("status"):
                changes["status"] = "active"
            if not writer.move(rel, target, frontmatter.update(text, changes) if changes else None):
                stats["inbox_errors"] += 1
                continue
        except (OSError, UnicodeDecodeError):
            stats["inbox_errors"] += 1
            continue
        stats["inbox_drained"] += 1
        moved[target] = rel
    return moved


# -- steps 1 to 6: scan, replay, heat, moves ---------------------------------------------------


def scan(vault: Vault, inbox_moves: dict[str, str], summary: TickSummary) -> list[_Doc]:
    """Read every live document (step 1); in a dry run, drained notes are read from the inbox."""
    docs: list[_Doc] = []
    for rel in live_vault_files(vault, extra=inbox_moves):
        source = inbox_moves.get(rel) if not vault.exists(rel) else None
        try:
            text = vault.read_text(source or rel)
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            summary.skipped.append(f"{rel}: {exc}")
            continue
        kind = kind_of_path(rel)
        doc = frontmatter.parse(text) if kind in ARC_CAPABLE else frontmatter.Document()
        docs.append(_Doc(rel, text, doc, kind, _mtime(vault, source or rel), source))
    return docs


def replay_boosts(arcs: list[_Doc], now: dt.datetime) -> dict[str, int]:
    """Step 2: canonical id -> +1 per arc whose ``replayed_from`` names it, created within 14 days."""
    boosts: dict[str, int] = {}
    for arc in arcs:
        target = arc.doc.meta.get("replayed_from")
        if not target:
            continue
        created = parse_time(arc.doc.meta.get("created"))
        if created is not None and now - created > dt.timedelta(days=REPLAY_MAX_AGE_DAYS):
            continue
        boosts[str(target)] = boosts.get(str(target), 0) + 1
    return boosts


def _backfilled_created(arc: _Doc) -> str | None:
    """``created: YYYY-MM-DD`` for an arc without a valid one: the date in its id, its name, else its mtime."""
    if parse_time(arc.doc.meta.get("created")) is not None:
        return None
    for source in (str(arc.doc.meta.get("cluster_id") or ""), arc.path.rsplit("/", 1)[-1]):
        match = _DATE.search(source)
        if match and parse_time(match.group(1)) is not None:
            return match.group(1)
    return arc.mtime.date().isoformat() if arc.mtime else None


def _heat_value(raw: Any) -> float | None:
    try:
        return float(raw)
    except (TypeError, ValueError):
        return None


def keep_arc(arc: _Doc, now: dt.datetime, rules: HeatRules, boosts: dict[str, int], writer: _Writer, summary: TickSummary) -> None:
    """Steps 3, 4 and 6 for one arc: created, heat and status edits, then its move; updates ``arc`` in place."""
    stats = summary.stats
    meta = arc.doc.meta
    changes: dict[str, Any] = {}
    created = _backfilled_created(arc)
    if created is not None:
        changes["created"] = created
        stats["created_backfilled"] += 1
    activity = arc_activity(meta | changes, mtime=arc.mtime)
    status = status_of(activity, now)
    names = {str(meta.get("cluster_id") or ""), canonical_id(arc.path)} - {""}
    heat = heat_of(activity, now, rules, replay_boost=sum(boosts.get(n, 0) for n in names), status=status)
    old_heat = _heat_value(meta.get("heat"))
    if old_heat is None or old_heat != heat:
        changes["heat"] = heat
        stats["heat_changes"] += 1
    placement = place(
        arc.path,
        heat=heat,
        status=status,
        age_days=age_days(activity, now),
        region=meta.get("region"),
        promote=rules.promote,
        demote=rules.demote,
        graduate=rules.graduate,
        graduate_age_days=rules.graduate_age_days,
    )
    if placement.graduate:
        status = GRADUATED
    if status is not None and status != (str(meta.get("status")).strip().lower() if meta.get("status") else None):
        changes["status"] = status
    summary.statuses[status or "none"] = summary.statuses.get(status or "none", 0) + 1
    text = frontmatter.update(arc.text, changes) if changes else arc.text
    source = arc.source or arc.path
    if placement.path is not None and placement.path != arc.path:
        if writer.move(source, placement.path, text if changes or arc.source else None):
            key = {"promote": "promotions", "demote": "demotions", "graduate": "graduations"}[placement.action or "promote"]
            stats[key] += 1
            summary.moves.append({"from": arc.path, "to": placement.path, "why": placement.action or ""})
            arc.path, arc.source = placement.path, (source if writer.dry_run else None)
        elif changes:
            writer.write(source, text)
    elif placement.graduate:
        stats["graduations"] += 1
        if changes:
            writer.write(source, text)
    elif changes:
        writer.write(source, text)
    if changes:
        summary.arcs_updated += 1
        arc.text = text
        arc.doc = frontmatter.Document(meta=meta | changes, body=arc.doc.body, has_frontmatter=True)
        arc.kind = kind_of_path(arc.path)


# -- steps 7 to 11 ------------------------------------------------------------------------------


def _records(docs: list[_Doc], summary: TickSummary) -> list[EntryRecord]:
    records: list[EntryRecord] = []
    for d in docs:
        try:
            if d.is_arc or d.kind == "region":
                records.extend(document_records(d.doc, d.path, "arc" if d.is_arc else d.kind))
            else:
                records.extend(records_for(d.path, d.text))
        except Exception as exc:  # one bad file must not stop the tick
            summary.skipped.append(f"{d.path}: {type(exc).__name__}: {exc}")
    return records


def verify_signals(records: list[EntryRecord], kept_ids: set[str], verifier: Verifier, stats: dict[str, Any]) -> list[EntryRecord]:
    """Step 9: run each kept signal's allowed verify command; exit 0 mitigates it."""
    out = []
    for r in records:
        command = r.meta.get("verify") if r.kind == "signal" and r.id in kept_ids else None
        if command:
            outcome = verifier.check(str(command))
            stats[{PASS: "signals_verified_pass", FAIL: "signals_verified_fail", SKIP: "signals_verified_skip", ERROR: "signals_verified_error"}[outcome]] += 1
            if outcome == PASS:
                r = mitigated(r, "verify")
        out.append(r)
    return out


def _hottest(records: list[EntryRecord]) -> list[EntryRecord]:
    floor = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    return sorted(records, key=lambda r: (-r.heat, -(r.occurred_at or floor).timestamp(), r.id))


def _signal_lines(text: str | None) -> set[str]:
    return {ln for ln in (text or "").splitlines() if _SIGNAL_LINE.match(ln)}


def dashboards(arcs: list[EntryRecord], dates: set[str]) -> dict[str, str]:
    """``clusters/<date>/_dashboard.md`` for each date folder: the arcs created that day, hottest first."""
    by_day: dict[str, list[EntryRecord]] = {}
    for a in arcs:
        created = str(a.meta.get("created") or "")[:10]
        if created in dates:
            by_day.setdefault(created, []).append(a)
    return {f"{CLUSTERS_DIR}/{day}/_dashboard.md": render_dashboard(day, _hottest(by_day.get(day, []))) for day in sorted(dates)}


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
    """One deterministic keeper pass (module docstring); writes nothing with ``dry_run``; never commits."""
    now = now or dt.datetime.now(dt.timezone.utc)
    summary = TickSummary(now=iso(now) or "", dry_run=dry_run)
    stats: dict[str, Any] = dict.fromkeys(STATS_KEYS, 0)
    stats["dry_run"] = dry_run
    summary.stats = stats
    say = progress or (lambda _msg: None)
    writer = _Writer(vault, summary, dry_run=dry_run)
    rules = HeatRules(
        promote=settings.promote_heat,
        demote=settings.demote_heat,
        graduate=settings.graduate_heat,
        graduate_age_days=settings.graduate_age_days,
        decay_start_days=settings.decay_start_days,
        decay_interval_days=settings.decay_interval_days,
    )

    scan_started = scan_point(session)
    say("draining the inbox")
    inbox_moves = drain_inbox(vault, writer, stats, now)
    say("scanning the vault")
    docs = scan(vault, inbox_moves, summary)
    arcs = [d for d in docs if d.is_arc]
    stats["arcs_scanned"] = summary.arcs_scanned = len(arcs)
    boosts = replay_boosts(arcs, now)
    say(f"scoring {len(arcs)} arcs")
    for n, arc in enumerate(arcs, 1):
        keep_arc(arc, now, rules, boosts, writer, summary)
        if progress is not None and n % 1000 == 0:
            progress(f"scored {n} of {len(arcs)} arcs")

    say("collecting markers")
    records = mitigate(_records(docs, summary), None)
    signals = collect_signals(records, now, stale_days=settings.stale_signal_days)
    records = verify_signals(records, {r.id for r in signals.kept}, Verifier.from_settings(settings, dry_run=dry_run), stats)
    verified_out = {r.id for r in records if r.kind == "signal" and r.meta.get("mitigated_by") == "verify"}
    kept_signals = [s for s in signals.kept if s.id not in verified_out]
    stats.update(
        signals_collected=signals.collected,
        signals_deduped=signals.deduped,
        signals_tombstoned_cleared=signals.cleared,
        signals_tombstoned_mitigated=signals.mitigated + len(verified_out),
        signals_tombstoned_stale=signals.stale,
        signals_written=len(kept_signals),
    )
    blocks, stats["inject_blocks_collected"] = collect_injects(records, now, stale_days=settings.stale_inject_days)
    stats["lessons_collected"] = sum(1 for r in records if r.kind == "lesson")
    arc_records = _hottest([r for r in records if r.kind == "arc"])
    hot = arc_records[:HOT_ARCS]
    stats["hot_arcs_written"] = len(hot)
    summary.hot_arcs = [digest(a).cluster_id for a in hot]
    lessons = sorted(
        (r for r in records if r.kind == "lesson" and r.occurred_at and r.occurred_at >= now - dt.timedelta(days=LESSON_DAYS)),
        key=lambda r: (r.occurred_at, r.id),
        reverse=True,
    )[:MAX_LESSONS]
    summary.signals, summary.lessons, summary.inject_blocks = len(kept_signals), len(lessons), len(blocks)

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
        project_arcs[pid] = [a for a in arc_records if belongs(a, ref.key, ref.repo, key_is_unique=unique)][:INTENT_ARCS]
    if use_ai and not settings.llm_base_url:
        summary.notes.append("no LLM configured (BRAIN_LLM_BASE_URL / INFERENCE_URL): deterministic tick, intents derived from hot arcs")
    result = project_intents(settings, {pid: [digest(a) for a in arcs_] for pid, arcs_ in project_arcs.items()}, use_ai=use_ai, transport=llm_transport)
    summary.active_projects = sorted(refs)
    summary.llm_calls, summary.llm_error = result.llm_calls, result.error
    for source in result.sources.values():
        summary.intent_sources[source] = summary.intent_sources.get(source, 0) + 1

    say("writing the feed")
    old_signals = vault.read_text(SIGNALS_FILE) if vault.exists(SIGNALS_FILE) else None
    files: dict[str, str] = {
        HOT_ARCS_FILE: render_hot_arcs_file(hot, now, blurb_chars=settings.hot_arc_blurb_chars),
        SIGNALS_FILE: render_signals_file(kept_signals, now),
        INJECT_FILE: render_inject_file(blocks, now),
        LESSONS_FILE: render_lessons_file(lessons, now),
        FLEET_INTENT_FILE: render_fleet_intent_file(derive_intent([digest(a) for a in hot]), now, source="derived"),
    }
    for pid, ref in sorted(refs.items()):
        top = project_arcs[pid][0] if project_arcs[pid] else None
        focus = focus_line(digest(top) if top else None, (ref.last_active or now).strftime("%Y-%m-%d"))
        files[project_intent_path(ref.id)] = render_project_intent_file(ref, result.intents[pid], focus, now, source=result.sources[pid])
    for rel, text in files.items():
        writer.write(rel, text, feed=True)
    changed = {
        "signals_changed": len(_signal_lines(old_signals) ^ _signal_lines(files[SIGNALS_FILE])),
        **{k: stats[k] for k in ("heat_changes", "promotions", "demotions", "graduations", "inbox_drained")},
    }
    if any(changed.values()) or not vault.exists(LAST_TICK_DIFF_FILE):
        writer.write(LAST_TICK_DIFF_FILE, render_last_tick_diff(now, changed), feed=True)
    for rel in LEGACY_FEED_FILES:
        if vault.exists(rel):
            writer.remove(rel)
            summary.files_written.append(f"{rel} (removed)")
    dates = {p.name for p in vault.path(CLUSTERS_DIR).iterdir() if p.is_dir() and _DATE.fullmatch(p.name)} if vault.exists(CLUSTERS_DIR) else set()
    for rel, text in dashboards(arc_records, dates).items():
        writer.write(rel, text)

    if dry_run:
        summary.index = {"refreshed": False}
        return summary
    say("refreshing the index")
    intents = [r for rel in files if kind_of_path(rel) == "intent" for r in records_for(rel, files[rel])]
    index = replace_all(session, [r for r in records if r.kind != "intent" or r.vault_path not in files] + intents, scan_started=scan_started)
    summary.index = index.as_dict() | {"refreshed": True, "skipped": summary.skipped + index.skipped}
    return summary
