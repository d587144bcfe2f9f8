"""``brain apply``: an AI answer's six sections applied to the vault and the index (UPSTREAM.md 5.6, project-aware).

The answer is parsed by ``brain_core.ai_output`` and every edit is a pure
text function of ``brain_core.vault.ai_edits``; this module finds the files,
holds the new texts of one run (a staged ``VaultWrites``: several edits of
one arc compose), writes them and keeps the index, the file stats and the
search index current in the same run. The feed files it redraws go to a
``FeedWriter``: its own, written at its end, or the tick's, which the tick
writes once after this (ADR 0039). Order as upstream: edges, merges (and splits), signals,
summaries, intent, health, then ``last-tick-diff.md``.

- **Edges**: both ends must be known arcs (upstream never checked targets);
  the strongest type per pair; an arc with any edge to the target keeps it.
- **Merges** keep every project: A absorbs B (``merge_arcs``), B becomes
  ``<id>.merged.md`` beside where it was, exactly once, and leaves the index
  (so every feed, search and the hot table) in the same run; ``GET /arcs/B``
  finds A through A's ``merged_from``. The title is a name.
- **Splits** are refused, with the reason: splitting regroups an arc's
  sessions, which is ``brain cluster``'s work.
- **ESCALATE/CLEAR** act on signals whose source is exactly the one named
  (the index finds them), keeping their other attributes.
- **Intent**: the fleet paragraph to ``brain-feed/intent.md``; a JSON map's
  projects (key or ``owner/name``, resolved against the known projects) to
  ``brain-feed/projects/<id>/intent.md``, through the keeper's renderers,
  capped at whole sentences and scrubbed of secrets.
- **Health**: one row in ``brain-feed/health.jsonl`` with the index's real
  arc, active signal and lesson counts (ADR 0017), once per answer.

Why a rerun changes nothing: every edit returns None when the file already
says it, a merge is skipped once A holds ``## Merged from <B>`` or B's
tombstone exists, feed files are compared without their stamps, and the
health row carries the answer's digest. ``dry_run`` computes the same summary
and writes nothing (no file, no index row). The function never commits.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from brain_core.ai_output import AIOutput, parse_ai_output
from brain_core.feed.collect import collect_signals
from brain_core.feed.intent import cap_intent, focus_line
from brain_core.feed.keeper_files import (
    hottest,
    render_dashboard,
    render_fleet_intent_file,
    render_hot_arcs_file,
    render_last_tick_diff,
    render_project_intent_file,
    render_signals_file,
)
from brain_core.feed.project import ProjectRef
from brain_core.feed.sections import digest
from brain_core.jsonable import JobSummary
from brain_core.progress import SILENT, Progress
from brain_core.redact import scrub
from brain_core.text import clip_words, one_line
from brain_core.times import iso
from brain_core.vault import frontmatter
from brain_core.vault.ai_edits import add_edge, add_summary, merge_arcs, merge_heading, set_signal
from brain_core.vault.layout import (
    CLUSTERS_DIR,
    FEED_DIR,
    FLEET_INTENT_FILE,
    HOT_ARCS_FILE,
    LAST_TICK_DIFF_FILE,
    SIGNALS_FILE,
    is_tombstone,
    kind_of_path,
    project_intent_path,
)
from brain_core.vault.regions import canonical_id, live_paths
from brain_kernel.db.engine import hold_keeper_lock
from brain_kernel.errors import ConfigError
from brain_kernel.feed import feed_repo
from brain_kernel.identity.projects import EXACT, lookup_project
from brain_kernel.index import filestats
from brain_kernel.index.changes import SyncSummary, sync_changes
from brain_kernel.index.rebuild import ARC_CAPABLE_KINDS
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_kernel.vault_writes import VaultWrites
from brain_ops.keeper.feed_writer import FeedWriter
from brain_ops.keeper.pages import render_pages

HEALTH_FILE = f"{FEED_DIR}/health.jsonl"
SUMMARY_MAX_CHARS = 400
SPLIT_REFUSAL = "splitting an arc regroups its sessions, which only brain cluster does; not applied"


@dataclass
class ApplySummary(JobSummary):
    """What one answer did (printed as JSON by ``brain apply``)."""

    dry_run: bool
    sections: list[int] = field(default_factory=list)
    edges_applied: int = 0
    merges_applied: int = 0
    signals_applied: int = 0
    summaries_applied: int = 0
    edges: list[dict[str, str]] = field(default_factory=list)
    merges: list[dict[str, Any]] = field(default_factory=list)
    splits: list[dict[str, str]] = field(default_factory=list)
    signals: list[dict[str, Any]] = field(default_factory=list)
    summaries: list[dict[str, str]] = field(default_factory=list)
    intent: dict[str, Any] = field(default_factory=dict)
    health: dict[str, Any] = field(default_factory=dict)
    refused: list[dict[str, str]] = field(default_factory=list)
    unparsed: list[dict[str, str]] = field(default_factory=list)
    files_written: list[str] = field(default_factory=list)
    vault_writes: int = 0
    index: dict[str, Any] = field(default_factory=dict)


class _Run:
    """The files of one apply: its staged writes (texts as this run has edited them) and the arcs it finds."""

    def __init__(self, session: Session, vault: Vault, *, dry_run: bool) -> None:
        self.session, self.vault = session, vault
        self.writes = VaultWrites(vault, staged=True, dry_run=dry_run)
        self._disk: list[str] | None = None

    def read(self, rel: str) -> str:
        return self.writes.read(rel)

    def put(self, rel: str, text: str) -> None:
        self.writes.write(rel, text, changed=True)

    def exists(self, rel: str) -> bool:
        return self.writes.exists(rel)

    def _live(self) -> list[str]:
        if self._disk is None:
            disk = filestats.stat_files(self.vault)
            self._disk = list(live_paths(disk, [p for p in disk if kind_of_path(p) in ARC_CAPABLE_KINDS]).live)
        return self._disk

    def find_arc(self, cluster_id: str) -> str | None:
        """The live file of an arc: the index's row, else the vault's first live file of that id."""
        record = feed_repo.arc_by_cluster_id(self.session, cluster_id)
        if record is not None and self.exists(record.vault_path):
            return record.vault_path
        for rel in self._live():
            if kind_of_path(rel) in ARC_CAPABLE_KINDS and canonical_id(rel) == cluster_id and self.exists(rel):
                return rel
        return None

    def tombstone_of(self, rel: str) -> str:
        folder = rel.rsplit("/", 1)[0]
        return f"{folder}/{canonical_id(rel)}.merged.md"

    def merged_into(self, cluster_id: str) -> str | None:
        """Where an arc already merged went (its tombstone's ``merged_into``), if a tombstone of it exists."""
        for rel, text in self.writes.texts.items():
            if is_tombstone(rel) and canonical_id(rel) == cluster_id:
                return str(frontmatter.parse(text).meta.get("merged_into") or "") or None
        survivor = feed_repo.arc_absorbing(self.session, cluster_id)
        return str(survivor.meta.get("cluster_id") or canonical_id(survivor.vault_path)) if survivor is not None else None


def _arc_id(run: _Run, rel: str) -> str:
    return str(frontmatter.parse(run.read(rel)).meta.get("cluster_id") or canonical_id(rel))


def _edges(run: _Run, out: AIOutput, summary: ApplySummary) -> None:
    for edge in out.edges:
        line = {"source": edge.source, "type": edge.type, "target": edge.target}
        src, tgt = run.find_arc(edge.source), run.find_arc(edge.target)
        if src is None or tgt is None:
            missing = edge.source if src is None else edge.target
            summary.refused.append({"section": "edges", "line": f"{edge.source} --{edge.type}--> {edge.target}", "reason": f"unknown arc {missing}"})
            continue
        new = add_edge(run.read(src), edge.type, _arc_id(run, tgt))
        if new is None:
            summary.edges.append({**line, "result": "exists"})
            continue
        run.put(src, new)
        summary.edges.append({**line, "result": "added"})
        summary.edges_applied += 1


def _merges(run: _Run, out: AIOutput, summary: ApplySummary) -> None:
    for merge in out.merges:
        item: dict[str, Any] = {"a": merge.a, "b": merge.b, "title": merge.title}
        a_rel, b_rel = run.find_arc(merge.a), run.find_arc(merge.b)
        if b_rel is None and a_rel is not None and run.merged_into(merge.b) == _arc_id(run, a_rel):
            summary.merges.append({**item, "result": "already merged"})
            continue
        reason = None
        if a_rel is None or b_rel is None:
            reason = f"unknown arc {merge.a if a_rel is None else merge.b}"
        elif a_rel == b_rel:
            reason = "both ids name the same arc"
        elif run.exists(run.tombstone_of(b_rel)):
            reason = f"{run.tombstone_of(b_rel)} exists already"
        if reason is not None:
            summary.refused.append({"section": "merges", "line": f"MERGE: {merge.a} + {merge.b}", "reason": reason})
            continue
        assert a_rel is not None and b_rel is not None
        a_id, b_id = _arc_id(run, a_rel), _arc_id(run, b_rel)
        texts = merge_arcs(run.read(a_rel), run.read(b_rel), a_id=a_id, b_id=b_id, title=merge.title)
        if texts is None:
            summary.merges.append({**item, "result": f"already merged ({merge_heading(b_id)} in {a_rel})"})
            continue
        created = sorted({str(frontmatter.parse(t).meta.get("created") or "")[:10] for t in (run.read(a_rel), texts.survivor, texts.tombstone)} - {""})
        run.put(a_rel, texts.survivor)  # (created: the days whose dashboards list A or B)
        run.writes.move(b_rel, run.tombstone_of(b_rel), texts.tombstone)  # staged: the tombstone written, then B removed
        meta = frontmatter.parse(texts.survivor).meta
        summary.merges.append(
            {**item, "result": "merged", "into": a_rel, "tombstone": run.tombstone_of(b_rel), "projects": meta.get("projects") or [], "created": created}
        )
        summary.merges_applied += 1
    for split in out.splits:
        reason = SPLIT_REFUSAL if run.find_arc(split.arc) is not None else f"unknown arc {split.arc}"
        summary.splits.append({"arc": split.arc, "detail": split.detail, "result": "refused", "reason": reason})


def _signals(run: _Run, out: AIOutput, summary: ApplySummary) -> None:
    for directive in out.signals:
        severity = "resolved" if directive.action == "clear" else str(directive.severity)
        item: dict[str, Any] = {"action": directive.action, "source": directive.source, "severity": severity, "reason": directive.reason}
        paths = sorted({r.vault_path for r in feed_repo.signals_of_source(run.session, directive.source)} | _pending_signal_paths(run, directive.source))
        paths = [p for p in paths if run.exists(p)]
        if not paths:
            summary.refused.append(
                {"section": "signals", "line": f"{directive.action.upper()}: {directive.source}", "reason": "no signal has that exact source"}
            )
            continue
        changed = 0
        files = []
        for rel in paths:
            result = set_signal(run.read(rel), directive.source, severity=severity, reason=scrub(directive.reason))
            if result is not None:
                run.put(rel, result[0])
                changed += result[1]
                files.append(rel)
        summary.signals.append({**item, "result": "changed" if changed else "unchanged", "signals": changed, "files": files})
        summary.signals_applied += 1 if changed else 0


def _pending_signal_paths(run: _Run, source: str) -> set[str]:
    """Files this run already edited that hold the source (an arc that absorbed a signal in this run)."""
    exact = re.compile(rf'source=(?:"{re.escape(source)}"|{re.escape(source)}(?=\s))')
    return {rel for rel, text in run.writes.texts.items() if not is_tombstone(rel) and exact.search(text)}


def _summary_text(text: str) -> str:
    """Upstream's summary sanitising: scrubbed, one line, ``|`` and ``"`` replaced, at most 400 characters."""
    return clip_words(one_line(scrub(text)).replace("|", "-").replace('"', "'"), SUMMARY_MAX_CHARS)


def _summaries(run: _Run, out: AIOutput, summary: ApplySummary) -> None:
    for arc, text in out.summaries:
        rel = run.find_arc(arc)
        if rel is None:
            summary.refused.append({"section": "summaries", "line": f"SUMMARY: {arc}", "reason": f"unknown arc {arc}"})
            continue
        new = add_summary(run.read(rel), _summary_text(text))
        if new is None:
            summary.summaries.append({"arc": arc, "result": "has a summary"})
            continue
        run.put(rel, new)
        summary.summaries.append({"arc": arc, "result": "added"})
        summary.summaries_applied += 1


def _feed_write(feed: FeedWriter, rel: str, text: str, summary: ApplySummary) -> bool:
    if not feed.put(rel, text):
        return False
    summary.files_written.append(rel)
    return True


def _intent(run: _Run, feed: FeedWriter, out: AIOutput, summary: ApplySummary, now: dt.datetime) -> None:
    result: dict[str, Any] = {"fleet": None, "projects": {}}
    if out.intent:
        intent = cap_intent(scrub(out.intent))
        result["fleet"] = "written" if _feed_write(feed, FLEET_INTENT_FILE, render_fleet_intent_file(intent, now, source="llm"), summary) else "unchanged"
    for name, text in sorted(out.project_intents.items()):
        try:
            found = lookup_project(run.session, name)
        except ValueError:
            found = None
        if found is None or found.status != EXACT or not (found.repo or found.key):
            summary.refused.append({"section": "intent", "line": name, "reason": "not exactly one known project"})
            continue
        ref = ProjectRef(found.key, found.repo, True, found.last_active)
        top = feed_repo.top_arcs(run.session, ref.key, ref.repo, limit=1)
        focus = focus_line(digest(top[0]) if top else None, (ref.last_active or now).strftime("%Y-%m-%d"))
        rendered = render_project_intent_file(ref, cap_intent(scrub(text)), focus, now, source="llm")
        result["projects"][ref.id] = "written" if _feed_write(feed, project_intent_path(ref.id), rendered, summary) else "unchanged"
    summary.intent = result


def _active_signals(session: Session, settings: Settings, now: dt.datetime) -> list[Any]:
    return collect_signals(feed_repo.entries_of_kinds(session, ["signal"]), now, stale_days=settings.stale_signal_days).kept


def _health(run: _Run, out: AIOutput, summary: ApplySummary, settings: Settings, now: dt.datetime, answer_sha: str) -> dict[str, Any]:
    row = {
        "timestamp": iso(now),
        "score": out.health.score,
        "reason": scrub(out.health.reason),
        "arcs": feed_repo.count_of_kind(run.session, "arc"),
        "signals": len(_active_signals(run.session, settings, now)),
        "lessons": feed_repo.count_of_kind(run.session, "lesson"),
        "answer_sha256": answer_sha,
    }
    summary.health = {k: row[k] for k in ("score", "reason", "arcs", "signals", "lessons")}
    return row


def _recorded(vault: Vault, answer_sha: str) -> bool:
    if not vault.exists(HEALTH_FILE):
        return False
    return f'"answer_sha256": "{answer_sha}"' in vault.read_text(HEALTH_FILE)


def _indexed(summary: ApplySummary, result: SyncSummary) -> None:
    """``summary.index`` counts one follow of the derived stores: the arcs' and, when this run writes its feed, the intents'."""
    index = summary.index or {"refreshed": True, "files": 0, "entries_written": 0, "removed": 0}
    summary.index = {
        "refreshed": True,
        "files": index["files"] + result.files,
        "entries_written": index["entries_written"] + result.entries,
        "removed": index["removed"] + result.removed,
    }


def apply_ai_output(
    session: Session,
    vault: Vault,
    settings: Settings,
    text: str,
    *,
    now: dt.datetime | None = None,
    dry_run: bool = False,
    progress: Progress = SILENT,
    feed: FeedWriter | None = None,
) -> ApplySummary:
    """Apply one AI answer (module docstring); writes nothing with ``dry_run``; never commits.

    ``feed``: a tick's feed files, which this answer's redrawn files join and the tick writes; without it they are written here.
    """
    now = now or dt.datetime.now(dt.timezone.utc)
    if not dry_run and not settings.vault_keeper:
        # Merges, edges and summaries are arc edits, the keeper's only on a vault shared by git (ADR 0057).
        raise ConfigError("this kernel is not the vault's keeper (BRAIN_VAULT_KEEPER=false): apply the answer where the keeper runs, or --dry-run")
    if not dry_run:
        hold_keeper_lock(session)  # not beside a tick: both rewrite arcs and the feed files (it reads them after this)
    out = parse_ai_output(text)
    summary = ApplySummary(dry_run=dry_run, sections=out.sections, refused=list(out.refused), unparsed=list(out.unparsed))
    run = _Run(session, vault, dry_run=dry_run)
    own_feed, feed = feed is None, feed or FeedWriter(run.writes)
    progress.say(f"applying sections {out.sections}: {len(out.edges)} edges, {len(out.merges)} merges, {len(out.signals)} signal directives")
    _edges(run, out, summary)
    _merges(run, out, summary)
    _signals(run, out, summary)
    _summaries(run, out, summary)
    answer_sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if dry_run:  # the intents' focus lines and the counts as the index stands (it is not changed)
        _intent(run, feed, out, summary, now)
        _health(run, out, summary, settings, now, answer_sha)
        summary.files_written = sorted(set(summary.files_written) | set(run.writes.touched))
        summary.index = {"refreshed": False}
        return summary
    touched = run.writes.flush()  # new texts first, removals last (a crash leaves a copy, never a loss)
    if touched:  # the derived stores follow, from the texts the run holds (the kernel's one path)
        _indexed(summary, sync_changes(session, vault, run.writes.changes(touched)))
    _intent(run, feed, out, summary, now)  # after the index followed the merges: a focus line names the survivor
    _dashboards(session, feed, summary)
    health_row = _health(run, out, summary, settings, now, answer_sha)  # counted after the index followed the edits
    _refresh_feed(session, feed, summary, settings, now, health_row)
    if own_feed:  # a tick renders its pages itself, after this answer
        for rel, page in render_pages(session, feed, now).items():
            _feed_write(feed, rel, page, summary)
    if own_feed and (synced := feed.write(session).index) is not None:
        _indexed(summary, synced)
    summary.vault_writes = run.writes.total
    if 5 in out.sections and not _recorded(vault, answer_sha):
        vault.append(HEALTH_FILE, json.dumps(health_row, sort_keys=True) + "\n")
        summary.vault_writes += 1
        summary.files_written.append(HEALTH_FILE)
    summary.files_written = sorted(set(summary.files_written) | set(touched))
    return summary


def _dashboards(session: Session, feed: FeedWriter, summary: ApplySummary) -> None:
    """``clusters/<date>/_dashboard.md`` of the days whose arcs a merge changed (the keeper only redraws days it changed)."""
    days = sorted({day for m in summary.merges if m.get("result") == "merged" for day in m.get("created", [])})
    by_day: dict[str, list[Any]] = {}
    for record in feed_repo.arcs_created_on(session, days):
        by_day.setdefault(str(record.meta.get("created") or "")[:10], []).append(record)
    for day in days:
        rel = f"{CLUSTERS_DIR}/{day}/_dashboard.md"
        if feed.text(rel) is not None:  # one there (or one the tick's pass draws)
            _feed_write(feed, rel, render_dashboard(day, hottest(by_day.get(day, []))), summary)


def _refresh_feed(session: Session, feed: FeedWriter, summary: ApplySummary, settings: Settings, now: dt.datetime, health: dict[str, Any]) -> None:
    """After a change, the hot table and the signal list from the index, and the tick diff (each only when it differs)."""
    applied = summary.edges_applied + summary.merges_applied + summary.signals_applied + summary.summaries_applied
    if not applied:
        return
    files = {
        HOT_ARCS_FILE: render_hot_arcs_file(feed_repo.hot_arcs(session, limit=10), now, blurb_chars=settings.hot_arc_blurb_chars),
        SIGNALS_FILE: render_signals_file(_active_signals(session, settings, now), now),
        LAST_TICK_DIFF_FILE: render_last_tick_diff(
            now,
            {"edges_added": summary.edges_applied, "signals_changed": summary.signals_applied, "merges_executed": summary.merges_applied},
            health=f"{health['score']}/10 — {health['reason']}",
        ),
    }
    for rel, text in files.items():
        _feed_write(feed, rel, text, summary)
