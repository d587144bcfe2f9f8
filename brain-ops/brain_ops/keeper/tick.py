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
   only (upstream scored standing documents too; ADR 0014); ``created`` backfilled and ``heat`` inserted
   when missing, with targeted frontmatter edits (every other byte stays).
4. **Promote and demote** as moves between ``clusters/`` and
   ``frontal-lobe/{conscious,unconscious}/``; 6. **graduate** by region;
   (5. workflow templates are not built: see ADR 0014).
7. **Mitigation set**; 8. **inline markers** collected from every scanned
   document, each with the project of the arc holding it; signal files
   posted through ``POST /marker`` take part like inline signals.
9. **Verifier**: only operator-allowed commands, no shell, once per tick
   (``brain_kernel.ticks.verifier``).
10. **Feed files**: ``hot-arcs.md``, ``signals.md``, ``inject.md``,
    ``lessons.md``, ``intent.md``, per-project intents, ``last-tick-diff.md``,
    the pages for people (``projects/<id>/INDEX.md``, ``PROJECTS.md``:
    ``brain_ops.keeper.pages``);
    11. ``clusters/<date>/_dashboard.md``. A file is rewritten only when its
    content changed, so a tick over a vault where nothing crossed a threshold
    writes nothing.

A kernel that is not the vault's keeper (``BRAIN_VAULT_KEEPER=false``, a
vault shared by ``brain sync``) makes none of the vault edits of steps 0 to 6
nor the LLM half's: it indexes and renders its own feed, and takes the
keeper's edits from the next pull (ADR 0057).

The index is refreshed from the files that changed (``index_changes``). With
``dry_run`` everything is computed and reported, and nothing is written:
no file, no move, no index row, no verifier run. The function never
commits; the command does. With an LLM endpoint and ``use_ai`` the LLM half
follows (``brain_ops.keeper.llm_tick``: prompt, one call, the answer applied).
Every write goes through one ``VaultWrites``; the feed files of steps 10 and
11 through one ``FeedWriter``, written once at the end of the tick, after the
LLM half (ADR 0039).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.feed.collect import collect_injects, collect_signals, mitigation_sources
from brain_core.feed.intent import derive_intent, focus_line
from brain_core.feed.keeper_files import (
    hottest,
    render_dashboard,
    render_fleet_intent_file,
    render_hot_arcs_file,
    render_inject_file,
    render_last_tick_diff,
    render_lessons_file,
    render_project_intent_file,
    render_signals_file,
)
from brain_core.feed.project import ProjectRef
from brain_core.feed.sections import digest
from brain_core.heat import REPLAY_MAX_AGE_DAYS, HeatRules, facts_at, plan_arc
from brain_core.jsonable import JobSummary
from brain_core.progress import SILENT, Progress
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
from brain_core.vault.records import ActivityTally, KeptKey, document_records, kept_keys, records_for
from brain_core.vault.regions import canonical_id, clash_free, drained_changes, inbox_destination, is_inbox_note, live_paths
from brain_kernel import idempotency
from brain_kernel.db.engine import hold_keeper_lock
from brain_kernel.feed import feed_repo
from brain_kernel.index import filestats
from brain_kernel.index.changes import ENTRIES, FILE_STATS, Changed, catch_up_search, drop_missing, sync_changes, sync_file_stats
from brain_kernel.index.entries import record_activity, scan_point
from brain_kernel.index.filestats import Stat
from brain_kernel.index.mitigation import apply_mitigation, set_verified
from brain_kernel.index.rebuild import ARC_CAPABLE_KINDS, arc_facts_of, file_time
from brain_kernel.settings import Settings
from brain_kernel.ticks.verifier import ERROR, FAIL, PASS, SKIP, Verifier
from brain_kernel.vault_store import Vault
from brain_kernel.vault_writes import VaultWrites
from brain_ops.keeper.feed_writer import FeedWriter
from brain_ops.keeper.intent import model_intent_current, project_intents, written_by_model
from brain_ops.keeper.llm_tick import run_llm_half
from brain_ops.keeper.pages import render_pages

HOT_ARCS = 10
ACTIVE_HOURS = 72
LESSON_DAYS = 7
MAX_LESSONS = 30
INTENT_ARCS = 5
REINDEX_BATCH = 500  # changed files re-indexed per batch (memory bounded by the batch)

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

_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})")
_SIGNAL_LINE = re.compile(r"^- \*\*\[", re.M)


@dataclass
class TickSummary(JobSummary):
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
    llm_tick: dict[str, Any] = field(default_factory=dict)  # the LLM half: prompt, call, apply (brain_ops.keeper.llm_tick)
    files_written: list[str] = field(default_factory=list)
    vault_writes: int = 0
    scanned_files: int = 0
    read_files: int = 0  # files whose size or mtime differed from their file stats (read and hashed)
    skipped: list[str] = field(default_factory=list)
    index: dict[str, Any] = field(default_factory=dict)
    feed_answers: dict[str, int] = field(default_factory=dict)  # ``brain tick`` fills it after the commit (project_feeds.warm)
    embeddings: dict[str, Any] = field(default_factory=dict)  # the embed step after the commit (``brain_kernel.search.embed_run.embed_pending``)
    notes: list[str] = field(default_factory=list)


@dataclass
class _File:
    """One live document as the tick holds it: where it is, what its file stats say, whether it changed."""

    path: str
    kind: str | None
    stat: Stat | None
    sha256: str
    facts: dict[str, Any] | None  # an arc's facts (``brain_core.heat.arc_facts``); None for other files
    changed: bool = False  # its content differs from what the index holds: re-read and re-index it
    moved_from: str | None = None
    old_facts: dict[str, Any] | None = None

    @property
    def is_arc(self) -> bool:
        return self.facts is not None


# -- step 0: the inbox ------------------------------------------------------------------------


def drain_inbox(vault: Vault, writes: VaultWrites, stats: dict[str, Any], now: dt.datetime) -> dict[str, str]:
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
            changes = drained_changes(meta, folder)
            if not writes.move(rel, target, frontmatter.update(text, changes) if changes else None):
                stats["inbox_errors"] += 1
                continue
        except (OSError, UnicodeDecodeError):
            stats["inbox_errors"] += 1
            continue
        stats["inbox_drained"] += 1
        moved[target] = rel
    return moved


# -- steps 1 to 6: scan, replay, heat, moves ---------------------------------------------------


def scan(writes: VaultWrites, session: Session, inbox_moves: dict[str, str], summary: TickSummary) -> tuple[list[_File], dict[str, filestats.StatRow]]:
    """Step 1: the live documents; only files whose size or mtime differ from their file stats are read.

    Returns the files in scan order and the file stats as they were. A file read
    whose hash matches its row is unchanged (only its stat is refreshed). A
    file is read as the tick's writes leave it: a dry run's moved inbox note
    with its new frontmatter, though the disk still holds it in the inbox.
    """
    vault = writes.vault
    disk = filestats.stat_files(vault)
    for target, source in inbox_moves.items():  # a dry run: the note is still in the inbox
        if target not in disk and (st := filestats.stat_one(vault, source)) is not None:
            disk[target] = st
    known = filestats.load(session)
    live = live_paths(disk, [p for p in disk if kind_of_path(p) in ARC_CAPABLE_KINDS]).live
    files: list[_File] = []
    for rel in live:
        stat, row = disk[rel], known.get(rel)
        held = rel in writes.texts  # a dry run's inbox move: not on disk yet
        if row is not None and row.stat == stat and not held:
            files.append(_File(rel, row.kind, stat, row.sha256, row.arc, old_facts=row.arc))
            continue
        try:
            text = writes.read(rel)
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            summary.skipped.append(f"{rel}: {exc}")
            continue
        sha = filestats.digest(text)
        if row is not None and row.sha256 == sha and not held:
            files.append(_File(rel, row.kind, stat, sha, row.arc, old_facts=row.arc))  # touched, not changed
            continue
        facts = arc_facts_of(rel, text, stat.mtime_ns)
        files.append(_File(rel, kind_of_path(rel), stat, sha, facts, changed=True, old_facts=row.arc if row else None))
    summary.scanned_files, summary.read_files = len(files), sum(1 for f in files if f.changed)
    return files, known


def replay_boosts(arcs: list[_File], now: dt.datetime) -> dict[str, int]:
    """Step 2: canonical id -> +1 per arc whose ``replayed_from`` names it, created within 14 days."""
    boosts: dict[str, int] = {}
    for arc in arcs:
        target = (arc.facts or {}).get("replayed_from")
        if not target:
            continue
        created = parse_time((arc.facts or {}).get("created"))
        if created is not None and now - created > dt.timedelta(days=REPLAY_MAX_AGE_DAYS):
            continue
        boosts[str(target)] = boosts.get(str(target), 0) + 1
    return boosts


def keep_arc(writes: VaultWrites, arc: _File, now: dt.datetime, rules: HeatRules, boosts: dict[str, int], summary: TickSummary) -> None:
    """Steps 3, 4 and 6 for one arc: the plan from its facts; its file is read and written only when the plan changes it."""
    stats = summary.stats
    facts = arc.facts or {}
    names = {str(facts.get("cluster_id") or ""), canonical_id(arc.path)} - {""}
    plan = plan_arc(facts, arc.path, now, rules, replay_boost=sum(boosts.get(n, 0) for n in names))
    summary.statuses[plan.status or "none"] = summary.statuses.get(plan.status or "none", 0) + 1
    if not plan.changes and not plan.move_to and not plan.graduated:
        return
    stats["created_backfilled"] += 1 if "created" in plan.changes else 0
    stats["heat_changes"] += 1 if "heat" in plan.changes else 0
    try:
        text = writes.read(arc.path)
    except OSError as exc:
        summary.skipped.append(f"{arc.path}: {exc}")
        return
    new_text = frontmatter.update(text, plan.changes) if plan.changes else text
    moved = False
    if plan.move_to is not None and writes.move(arc.path, plan.move_to, new_text if plan.changes else None):
        moved = True
        stats[{"promote": "promotions", "demote": "demotions", "graduate": "graduations"}[plan.action or "promote"]] += 1
        summary.moves.append({"from": arc.path, "to": plan.move_to, "why": plan.action or ""})
        arc.moved_from, arc.path = arc.path, plan.move_to
    elif plan.graduated:
        stats["graduations"] += 1
    if plan.changes and not moved:
        writes.write(arc.path, new_text, changed=True)
    if plan.changes or moved:
        summary.arcs_updated += 1 if plan.changes else 0
        arc.changed = True
        arc.kind = kind_of_path(arc.path)
        arc.facts = {**facts, **plan.changes}


# -- the index, from the files that changed ---------------------------------------------------


def _changes(writes: VaultWrites, files: list[_File], summary: TickSummary, keys: list[KeptKey], keys_since: dt.datetime | None) -> list[Changed]:
    """The files of one batch with the rows the tick parsed from them (an unreadable file keeps no rows)."""
    out: list[Changed] = []
    for f in files:
        text, records = "", []
        try:
            text = writes.read(f.path)
            f.sha256 = filestats.digest(text)
            if f.is_arc or f.kind == "region":
                records = document_records(frontmatter.parse(text), f.path, "arc" if f.is_arc else f.kind)
            else:
                records = records_for(f.path, text)
                if keys_since is not None:
                    keys.extend(kept_keys(f.path, text, records, since=keys_since))
        except Exception as exc:  # one bad file must not stop the tick
            summary.skipped.append(f"{f.path}: {type(exc).__name__}: {exc}")
        out.append(Changed(f.path, text, records=records))
    return out


def index_changes(
    session: Session,
    writes: VaultWrites,
    files: list[_File],
    known: dict[str, filestats.StatRow],
    scan_started: dt.datetime,
    summary: TickSummary,
    *,
    key_ttl_seconds: int | None = None,
) -> None:
    """Re-index the files that changed (in batches), drop the rows of files gone, keep the file stats current.

    Through the kernel's one path (``sync_changes``); the search index
    catches up once at the end of the tick (``catch_up_search``).
    ``key_ttl_seconds``: the idempotency keys the markers of those files keep
    are remembered when the table lacks them, as ``brain reindex`` does (ADR 0035).
    """
    vault = writes.vault
    changed = [f for f in files if f.changed]
    entries = removed = restored = 0
    tally = ActivityTally()
    keys_since = scan_started - dt.timedelta(seconds=key_ttl_seconds) if key_ttl_seconds else None
    for start in range(0, len(changed), REINDEX_BATCH):
        batch = changed[start : start + REINDEX_BATCH]
        keys: list[KeptKey] = []
        part = sync_changes(
            session,
            vault,
            _changes(writes, batch, summary, keys, keys_since),
            removed=[f.moved_from for f in batch if f.moved_from],
            stores=frozenset({ENTRIES}),
            before=scan_started,
            tally=tally,
        )
        if keys and key_ttl_seconds:
            restored += idempotency.restore(session, keys, ttl_seconds=key_ttl_seconds)
        entries, removed = entries + part.entries, removed + part.removed
    live = [f.path for f in files]
    removed += drop_missing(session, live, known, before=scan_started)
    rows = []
    for f in files:
        if not f.changed and f.path in known and known[f.path].stat == f.stat:
            continue
        stat = filestats.stat_one(vault, f.path) if not summary.dry_run else f.stat
        if stat is None:
            continue
        # The facts' mtime is the file's now (a file this tick wrote has a newer one), as a rebuild reads it.
        facts = {} if f.facts is None else facts_at(f.facts, file_time(stat.mtime_ns))
        rows.append(Changed(f.path, stat=stat, sha256=f.sha256, facts=facts, kind=f.kind))
    stats_written = sync_file_stats(session, vault, rows)
    record_activity(session, tally.result())
    summary.index = {
        "refreshed": not summary.dry_run,
        "files_reindexed": len(changed),
        "entries_written": entries,
        "removed": removed,
        "file_stats_rows": stats_written,
        "keys_restored": restored,
    }


def verify_signals(session: Session, signals: list[EntryRecord], verifier: Verifier, stats: dict[str, Any]) -> set[str]:
    """Step 9: run each kept signal's allowed verify command; exit 0 mitigates it (in the index too). Returns their ids."""
    passed: set[str] = set()
    for r in signals:
        command = r.meta.get("verify")
        if not command:
            stats["signals_verified_skip"] += 1  # upstream counts a signal with nothing to verify as skipped
            continue
        outcome = verifier.check(str(command))
        stats[{PASS: "signals_verified_pass", FAIL: "signals_verified_fail", SKIP: "signals_verified_skip", ERROR: "signals_verified_error"}[outcome]] += 1
        if outcome == PASS:
            passed.add(r.id)
    set_verified(session, passed)
    return passed


def _unverified(record: EntryRecord) -> EntryRecord:
    """A signal as its file says it, when only last tick's verifier had mitigated it (it is verified again)."""
    if record.meta.get("mitigated_by") != "verify":
        return record
    meta = {k: v for k, v in record.meta.items() if k not in ("mitigated_by", "file_status")}
    return replace(record, status=record.meta.get("file_status"), meta=meta)


def _signal_lines(text: str | None) -> set[str]:
    return {ln for ln in (text or "").splitlines() if _SIGNAL_LINE.match(ln)}


def _day_of(facts: dict[str, Any] | None) -> str:
    return str((facts or {}).get("created") or "")[:10]


def dashboards(session: Session, vault: Vault, arcs: list[_File]) -> dict[str, str]:
    """``clusters/<date>/_dashboard.md`` of the date folders whose arcs changed (or that have none yet).

    A dashboard lists the arcs created that day, hottest first, wherever they now live.
    """
    if not vault.exists(CLUSTERS_DIR):
        return {}
    folders = {p.name for p in vault.path(CLUSTERS_DIR).iterdir() if p.is_dir() and _DATE.fullmatch(p.name)}
    touched = {_day_of(a.facts) for a in arcs if a.changed} | {_day_of(a.old_facts) for a in arcs if a.changed}
    touched |= {d for d in folders if not vault.exists(f"{CLUSTERS_DIR}/{d}/_dashboard.md")}
    days = sorted(touched & folders)
    if not days:
        return {}
    by_day: dict[str, list[EntryRecord]] = {}
    for a in feed_repo.arcs_created_on(session, days):
        by_day.setdefault(str(a.meta.get("created") or "")[:10], []).append(a)
    return {f"{CLUSTERS_DIR}/{day}/_dashboard.md": render_dashboard(day, hottest(by_day.get(day, []))) for day in days}


def run_tick(
    session: Session,
    vault: Vault,
    settings: Settings,
    *,
    now: dt.datetime | None = None,
    use_ai: bool = True,
    dry_run: bool = False,
    progress: Progress = SILENT,
    llm_transport: httpx.BaseTransport | None = None,
) -> TickSummary:
    """One deterministic keeper pass (module docstring); writes nothing with ``dry_run``; never commits."""
    now = now or dt.datetime.now(dt.timezone.utc)
    summary = TickSummary(now=iso(now) or "", dry_run=dry_run)
    stats: dict[str, Any] = dict.fromkeys(STATS_KEYS, 0)
    stats["dry_run"] = dry_run
    summary.stats = stats
    say = progress.say
    writes = VaultWrites(vault, dry_run=dry_run)
    feed = FeedWriter(writes)  # written once, after the LLM half when there is one
    rules = HeatRules(
        promote=settings.promote_heat,
        demote=settings.demote_heat,
        graduate=settings.graduate_heat,
        graduate_age_days=settings.graduate_age_days,
        decay_start_days=settings.decay_start_days,
        decay_interval_days=settings.decay_interval_days,
    )

    if not dry_run:
        hold_keeper_lock(session)  # one keeper job at a time: a tick beside another tick or an apply waits for it
    scan_started = scan_point(session)
    savepoint = session.begin_nested() if dry_run else None  # a dry run computes in the database too, then rolls back
    llm_half = use_ai and bool(settings.llm_base_url) and settings.vault_keeper  # its merges are vault edits: the keeper's only
    use_ai = use_ai and not llm_half  # with the LLM half the intents come from its one call, derived until then
    try:
        _pass(session, settings, summary, writes, feed, rules, now=now, use_ai=use_ai, scan_started=scan_started, say=say, llm_transport=llm_transport)
        if llm_half:
            run_llm_half(session, vault, settings, summary, now=now, dry_run=dry_run, transport=llm_transport, progress=progress, feed=feed)
        for rel, text in render_pages(session, feed, now).items():  # after the LLM half: the intents as it left them
            feed.put(rel, text)
        _write_feed(session, feed, summary)
        if not dry_run:
            catch_up_search(session, vault)  # only files whose size or mtime changed are read
    finally:
        if savepoint is not None:
            savepoint.rollback()
    summary.vault_writes += writes.total
    summary.moves_refused.extend(writes.refused)
    return summary


def _write_feed(session: Session, feed: FeedWriter, summary: TickSummary) -> None:
    """Step 10's files, each once: a dry run writes none (its intents' rows, not their file stats); listed first in the summary."""
    stores = frozenset({ENTRIES} if summary.dry_run else {ENTRIES, FILE_STATS})
    written = feed.write(session, stores=stores).files
    summary.files_written = [*written, *(rel for rel in summary.files_written if rel not in written)]


def _pass(
    session: Session,
    settings: Settings,
    summary: TickSummary,
    writes: VaultWrites,
    feed: FeedWriter,
    rules: HeatRules,
    *,
    now: dt.datetime,
    use_ai: bool,
    scan_started: dt.datetime,
    say: Callable[[str], None],
    llm_transport: httpx.BaseTransport | None,
) -> None:
    stats, vault = summary.stats, writes.vault
    keeper = settings.vault_keeper  # a synced vault has one keeper: the others take its edits from the next pull (ADR 0057)
    if not keeper:
        summary.notes.append("not the vault's keeper (BRAIN_VAULT_KEEPER=false): inbox, arc heat, status and moves left to the keeper")
    say("draining the inbox")
    inbox_moves = drain_inbox(vault, writes, stats, now) if keeper else {}
    say("scanning the vault")
    files, known = scan(writes, session, inbox_moves if writes.dry_run else {}, summary)
    arcs = [f for f in files if f.is_arc]
    stats["arcs_scanned"] = summary.arcs_scanned = len(arcs)
    boosts = replay_boosts(arcs, now)
    say(f"scoring {len(arcs)} arcs ({summary.read_files} of {len(files)} files read)")
    for n, arc in enumerate(arcs if keeper else [], 1):
        keep_arc(writes, arc, now, rules, boosts, summary)
        if n % 5000 == 0:
            say(f"scored {n} of {len(arcs)} arcs")
    say("collecting markers")
    index_changes(session, writes, files, known, scan_started, summary, key_ttl_seconds=settings.idempotency_ttl_seconds)
    apply_mitigation(session, mitigation_sources(_arc_statuses(arcs)))

    signal_rows = [_unverified(r) for r in feed_repo.entries_of_kinds(session, ["signal"])]
    signals = collect_signals(signal_rows, now, stale_days=settings.stale_signal_days)
    verified = verify_signals(session, signals.kept, Verifier.from_settings(settings, dry_run=writes.dry_run), stats)
    kept_signals = [s for s in signals.kept if s.id not in verified]
    stats.update(
        signals_collected=signals.collected,
        signals_deduped=signals.deduped,
        signals_tombstoned_cleared=signals.cleared,
        signals_tombstoned_mitigated=signals.mitigated + len(verified),
        signals_tombstoned_stale=signals.stale,
        signals_written=len(kept_signals),
    )
    blocks, stats["inject_blocks_collected"] = collect_injects(feed_repo.entries_of_kinds(session, ["inject"]), now, stale_days=settings.stale_inject_days)
    stats["lessons_collected"] = feed_repo.count_of_kind(session, "lesson")
    hot = feed_repo.hot_arcs(session, limit=HOT_ARCS)
    stats["hot_arcs_written"] = len(hot)
    summary.hot_arcs = [digest(a).cluster_id for a in hot]
    lessons = feed_repo.recent_of_kind(session, "lesson", since=now - dt.timedelta(days=LESSON_DAYS), limit=MAX_LESSONS)
    summary.signals, summary.lessons, summary.inject_blocks = len(kept_signals), len(lessons), len(blocks)

    say("writing intents")
    refs = {p.id: ProjectRef(p.key, p.repo, True, p.last_active) for p in feed_repo.active_projects(session, since=now - dt.timedelta(hours=ACTIVE_HOURS))}
    project_arcs = {pid: feed_repo.top_arcs(session, ref.key, ref.repo, limit=INTENT_ARCS) for pid, ref in refs.items()}
    if use_ai and not settings.llm_base_url:
        summary.notes.append("no LLM configured (BRAIN_LLM_BASE_URL / INFERENCE_URL): deterministic tick, intents derived from hot arcs")
    result = project_intents(settings, {pid: [digest(a) for a in arcs_] for pid, arcs_ in project_arcs.items()}, use_ai=use_ai, transport=llm_transport)
    summary.active_projects = sorted(refs)
    summary.llm_calls, summary.llm_error = result.llm_calls, result.error
    for source in result.sources.values():
        summary.intent_sources[source] = summary.intent_sources.get(source, 0) + 1

    say("rendering the feed")
    old_signals = feed.text(SIGNALS_FILE)
    files_out: dict[str, str] = {
        HOT_ARCS_FILE: render_hot_arcs_file(hot, now, blurb_chars=settings.hot_arc_blurb_chars),
        SIGNALS_FILE: render_signals_file(kept_signals, now),
        INJECT_FILE: render_inject_file(blocks, now),
        LESSONS_FILE: render_lessons_file(lessons, now),
    }
    if not written_by_model(feed.text(FLEET_INTENT_FILE)):  # upstream's rule: only a model writes over a model's intent.md
        files_out[FLEET_INTENT_FILE] = render_fleet_intent_file(derive_intent([digest(a) for a in hot]), now, source="derived")
    max_age = dt.timedelta(hours=settings.intent_model_max_age_hours)
    for pid, ref in sorted(refs.items()):
        path = project_intent_path(ref.id)
        if result.sources[pid] == "derived" and model_intent_current(feed.text(path), now, max_age):
            _count_source(summary, "derived", "kept")  # the model's intent stays until a newer one, or until it is too old
            continue
        top = project_arcs[pid][0] if project_arcs[pid] else None
        focus = focus_line(digest(top) if top else None, (ref.last_active or now).strftime("%Y-%m-%d"))
        files_out[path] = render_project_intent_file(ref, result.intents[pid], focus, now, source=result.sources[pid])
    for rel, text in files_out.items():
        feed.put(rel, text)
    changed = {
        "signals_changed": len(_signal_lines(old_signals) ^ _signal_lines(files_out[SIGNALS_FILE])),
        **{k: stats[k] for k in ("heat_changes", "promotions", "demotions", "graduations", "inbox_drained")},
    }
    if any(changed.values()) or not vault.exists(LAST_TICK_DIFF_FILE):
        feed.put(LAST_TICK_DIFF_FILE, render_last_tick_diff(now, changed))
    for rel in LEGACY_FEED_FILES:
        if vault.exists(rel):
            writes.remove(rel)
            summary.files_written.append(f"{rel} (removed)")
    for rel, text in dashboards(session, vault, arcs).items():
        feed.put(rel, text, listed=False)


def _count_source(summary: TickSummary, old: str, new: str) -> None:
    """Move one intent from source ``old`` to ``new`` in the summary's counts."""
    if summary.intent_sources.get(old):
        summary.intent_sources[old] -= 1
        if not summary.intent_sources[old]:
            del summary.intent_sources[old]
    summary.intent_sources[new] = summary.intent_sources.get(new, 0) + 1


def _arc_statuses(arcs: list[_File]) -> list[EntryRecord]:
    """The arcs as the mitigation set reads them: status and ``mitigates``."""
    out = []
    for a in arcs:
        facts = a.facts or {}
        if facts.get("mitigates"):
            status = str(facts.get("status") or "").lower() or None
            out.append(EntryRecord(id=a.path, kind="arc", vault_path=a.path, status=status, meta={"mitigates": facts["mitigates"]}))
    return out
