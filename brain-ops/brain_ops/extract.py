"""Extraction job: agent transcripts on disk -> a JSON bundle of resolved sessions.

Reads Claude Code transcripts (``<claude-dir>/*/<session_id>.jsonl``) and Codex
rollouts (``<codex-dir>/sessions/YYYY/MM/DD/rollout-*.jsonl``) line by line
through the pure parsers in ``brain_core.transcripts`` (a 200 MB file is never
held in memory), then resolves every session's project with the identity
resolver before anything groups them: the Codex ``repository_url`` is passed
as transcript evidence, git is consulted at most once per distinct folder.

A Claude subagent's transcript (``agent-<id>.jsonl``, flat or under
``<session>/subagents/``) is no session of its own: an arc is per session, so
its work (tool calls, turns, errors, time) is folded into the session its
lines name, which keeps that session's project; one whose session has no
transcript is counted as skipped, never guessed a project.

Safe to rerun: the job only reads transcripts; with a database it records
session rows and learned roots in batches, writing only those that are new or
changed, so an unchanged rerun writes nothing. Files that cannot be read, are
empty, or fall outside the window are counted, never fatal.

With a database it also stores each session's outcomes on its row
(``brain_kernel.trial.outcomes``: turns, duration, failed and repeated tool
calls, the markers it posted, and for a session that was served memory, how
many served entries its assistant later names). A session that was served a
block or a recall is in the trial whatever its length: below ``min_turns`` it
stays out of the bundle, yet its identity and outcomes are recorded, since
leaving out short sessions would drop exactly the sessions memory may have
shortened (ADR 0050). Only such a session's transcript keeps the end of its
assistant text, and only until its recall is counted, right after parsing.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from brain_core.identity import ProjectIdentity
from brain_core.keys import InvalidKey, parse_project_ref
from brain_core.progress import SILENT, Progress
from brain_core.transcripts import SessionSummary
from brain_core.trial import Injected, recall_used
from brain_kernel.errors import ConfigError
from brain_kernel.identity.resolver import IdentityResolver
from brain_kernel.identity.sessions import SessionRecord, record_sessions
from brain_kernel.identity.transcript_files import TranscriptFile, find_subagent_transcripts, find_transcripts, read_summary
from brain_kernel.settings import Settings
from brain_kernel.trial.outcomes import ASSISTANT_CHARS, injected_by_session, marker_counts, session_outcomes, store_outcomes

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.I)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_when(text: str | None, now: dt.datetime | None = None) -> dt.datetime | None:
    """A window bound: a duration back from now (``24h``, ``7d``, ``90m``), an ISO date or time, or None."""
    if text is None or not str(text).strip() or str(text).strip().lower() in ("all", "none", "0"):
        return None
    now = now or dt.datetime.now(dt.timezone.utc)
    match = _DURATION.match(str(text))
    if match:
        amount, unit = float(match.group(1)), _UNITS[match.group(2).lower()]
        return now - dt.timedelta(**{unit: amount})
    try:
        when = dt.datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise ConfigError(f"cannot read time {text!r}: use a duration such as 24h, 7d, 90m or an ISO date") from None
    return when.replace(tzinfo=dt.timezone.utc) if when.tzinfo is None else when


@dataclass
class ScanStats:
    """Counters of one scan; ``skipped`` is by reason, sessions and lines apart."""

    files_found: int = 0
    sessions_scanned: int = 0
    subagent_files: int = 0
    subagents_merged: int = 0
    skipped: Counter = field(default_factory=Counter)
    lines: Counter = field(default_factory=Counter)


def iter_summaries(
    files: list[TranscriptFile],
    *,
    since: dt.datetime | None,
    until: dt.datetime | None,
    min_turns: int,
    stats: ScanStats,
    progress: Progress = SILENT,
    subagents: dict[str, list[SessionSummary]] | None = None,
    trial: Mapping[str, Sequence[Injected]] | None = None,
) -> Iterator[tuple[TranscriptFile, SessionSummary]]:
    """Parse the files and yield the sessions inside the window with enough turns, their ``subagents`` folded in.

    A session of ``trial`` (served memory: the entries it was served) is yielded below ``min_turns`` too,
    counted as skipped all the same; one served entries is read with the end of its assistant text.
    """
    trial = trial or {}
    stats.files_found += len(files)
    total = len(files)
    for index, item in enumerate(files, 1):
        progress.step(index, total)
        if since is not None:
            try:
                mtime = dt.datetime.fromtimestamp(item.path.stat().st_mtime, dt.timezone.utc)
            except OSError:
                stats.skipped["unreadable"] += 1
                continue
            if mtime < since:
                # Nothing was written after ``since``, so no activity can fall in the window.
                stats.skipped["outside_window"] += 1
                continue
        stats.sessions_scanned += 1
        try:
            summary = read_summary(item, assistant_chars=ASSISTANT_CHARS if trial.get(item.session_id) else 0)
        except OSError:
            stats.skipped["unreadable"] += 1
            continue
        stats.lines["malformed"] += summary.lines_malformed
        stats.lines["non_utf8"] += summary.lines_non_utf8
        stats.lines["unknown_type"] += summary.lines_unknown
        if item.agent == "claude" and subagents:
            for sub in subagents.get(summary.session_id, ()):
                summary.fold_subagent(sub)
                stats.subagents_merged += 1
        if summary.lines_read == 0:
            stats.skipped["empty"] += 1
            continue
        if not summary.session_id or not summary.has_activity:
            stats.skipped["no_activity"] += 1
            continue
        last = summary.end or summary.start
        if (since is not None and last is not None and last < since) or (until is not None and summary.start is not None and summary.start > until):
            stats.skipped["outside_window"] += 1
            continue
        if summary.num_turns < min_turns:
            stats.skipped["below_min_turns"] += 1
            if summary.session_id not in trial:
                continue
        yield item, summary


def with_recall(
    summaries: Iterator[tuple[TranscriptFile, SessionSummary]], trial: Mapping[str, Sequence[Injected]], recalls: dict[str, int]
) -> Iterator[tuple[TranscriptFile, SessionSummary]]:
    """Count each trial session's recall used as it is parsed, then drop its assistant text (one session's at a time)."""
    for item, summary in summaries:
        served = trial.get(summary.session_id)
        if served is not None:
            recalls[summary.session_id] = recall_used(served, [summary.assistant_text])
        summary.assistant_text = ""
        yield item, summary


def read_subagents(files: list[TranscriptFile], sessions: set[str], *, since: dt.datetime | None, stats: ScanStats) -> dict[str, list[SessionSummary]]:
    """Subagent summaries by parent session id; one whose session is not in ``sessions`` is skipped."""
    stats.subagent_files += len(files)
    by_parent: dict[str, list[SessionSummary]] = {}
    for item in files:
        try:
            if since is not None and dt.datetime.fromtimestamp(item.path.stat().st_mtime, dt.timezone.utc) < since:
                continue  # nothing in the window: its session's own file says the rest
            summary = read_summary(item)
        except OSError:
            stats.skipped["unreadable"] += 1
            continue
        parent = summary.parent_session_id
        if not parent or parent not in sessions:
            stats.skipped["subagent_without_session"] += 1
            continue
        by_parent.setdefault(parent, []).append(summary)
    return by_parent


def session_entry(item: TranscriptFile, summary: SessionSummary, identity: ProjectIdentity) -> dict[str, Any]:
    """One session of the bundle: identity fields, then the activity fields."""
    entry = summary.activity()
    entry.update(
        {
            "project": identity.project,
            "repo": identity.repo,
            "worktree": identity.worktree,
            "root": identity.root,
            "project_source": identity.source,
            "transcript": str(item.path),
        }
    )
    return entry


def _project_filter(project: str | None) -> Callable[[ProjectIdentity], bool]:
    if not project:
        return lambda _identity: True
    try:
        key, slug = parse_project_ref(project)
    except InvalidKey as exc:
        raise ConfigError(str(exc)) from None
    if slug:
        return lambda identity: (identity.repo or "").lower() == slug
    return lambda identity: (identity.project or "").lower() == key


def run_extract(
    settings: Settings,
    *,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    claude_dir: Path | None = None,
    codex_dir: Path | None = None,
    project: str | None = None,
    min_turns: int = 5,
    db: Session | None = None,
    progress: Progress = SILENT,
    resolver: IdentityResolver | None = None,
) -> dict[str, Any]:
    """Extract sessions with resolved identities into a bundle dict (see the module docstring).

    With ``db`` the resolver reads the session index (all sessions at once)
    and learned roots, and this job records the session rows that are new or
    changed (``sessions_recorded`` counts the rows written); the caller commits.
    """
    claude = Path(claude_dir).expanduser() if claude_dir else settings.resolved_claude_dir
    codex = Path(codex_dir).expanduser() if codex_dir else settings.resolved_codex_dir
    wanted = _project_filter(project)
    resolver = resolver or IdentityResolver(settings, db, batch=db is not None)
    stats = ScanStats()
    files = find_transcripts(claude, codex)
    claude_sessions = {item.session_id for item in files if item.agent == "claude"}
    subagents = read_subagents(find_subagent_transcripts(claude), claude_sessions, since=since, stats=stats)
    # Sessions served memory and what they were served: read before the resolver's thread may use ``db``.
    trial = injected_by_session(db, [item.session_id for item in files]) if db is not None else {}
    recalls: dict[str, int] = {}
    found: list[tuple[TranscriptFile, SessionSummary]] = []
    # Path evidence is resolved once per distinct (folder, transcript URL). Git facts read
    # in-process cost well under a millisecond per repository: they are resolved when the pair
    # first appears (a thread would only contend with parsing for the interpreter). When git
    # itself must answer, one background thread resolves while the main thread parses, so the
    # processes' latency overlaps parsing; only that thread touches the resolver (and ``db``)
    # until the pool is shut down.
    pending: dict[tuple[str | None, str | None], Future[ProjectIdentity] | ProjectIdentity] = {}
    summaries = with_recall(
        iter_summaries(files, since=since, until=until, min_turns=min_turns, stats=stats, progress=progress, subagents=subagents, trial=trial),
        trial,
        recalls,
    )
    if resolver.git_in_process:
        for item, summary in summaries:
            found.append((item, summary))
            key = (summary.cwd, summary.repo_url)
            if key not in pending:
                pending[key] = resolver.resolve(summary.cwd, transcript_repo_url=summary.repo_url)
    else:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="brain-resolve") as pool:
            for item, summary in summaries:
                found.append((item, summary))
                key = (summary.cwd, summary.repo_url)
                if key not in pending:
                    pending[key] = pool.submit(resolver.resolve, summary.cwd, transcript_repo_url=summary.repo_url)
    chosen: dict[str, dict[str, Any]] = {}
    observed: dict[str, SessionSummary] = {}  # the summary each session's outcomes come from
    records: list[SessionRecord] = []
    resolved: dict[tuple[str | None, str | None], ProjectIdentity] = {}
    if db is not None:
        resolver.preload_sessions([summary.session_id for _, summary in found])
    for item, summary in found:
        key = (summary.cwd, summary.repo_url)
        identity = resolver.session_identity(summary.session_id, summary.cwd) if db is not None else None
        if identity is None and db is not None:
            # Path evidence again, now that the whole run's learned roots are known (git answers are cached).
            if key not in resolved:
                resolved[key] = resolver.resolve(summary.cwd, transcript_repo_url=summary.repo_url)
            identity = resolved[key]
        elif identity is None:
            answer = pending[key]
            identity = answer.result() if isinstance(answer, Future) else answer
        bundled = summary.num_turns >= min_turns  # else a trial session, recorded but not in the bundle
        if not wanted(identity):
            stats.skipped["other_project"] += bundled
            continue
        if bundled:
            entry = session_entry(item, summary, identity)
            previous = chosen.get(summary.session_id)
            if previous is not None:
                stats.skipped["duplicate"] += 1
                if (previous["end"] or "") >= (entry["end"] or ""):
                    continue
            chosen[summary.session_id] = entry
        elif summary.session_id in observed:
            continue
        observed[summary.session_id] = summary
        if db is not None and identity.source != "session":
            # A session the index already knew keeps its stored (stronger) source.
            records.append(SessionRecord(summary.session_id, identity, agent=summary.agent, started_at=summary.start))
            resolver.remember_session(summary.session_id, identity)
    recorded = outcomes_recorded = 0
    if db is not None:
        resolver.flush_learned()
        recorded = record_sessions(db, records) if records else 0
        markers = marker_counts(db, list(observed))
        outcomes = {sid: session_outcomes(s, markers=markers.get(sid), recall=recalls.get(sid)) for sid, s in observed.items()}
        outcomes_recorded = store_outcomes(db, outcomes)
    sessions = sorted(chosen.values(), key=lambda e: (e["start"] or "", e["session_id"]))
    skipped_by_reason = dict(sorted(stats.skipped.items()))
    return {
        "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "since": since.isoformat() if since else None,
        "until": until.isoformat() if until else None,
        "claude_dir": str(claude),
        "codex_dir": str(codex),
        "project": project,
        "min_turns": min_turns,
        "files_found": stats.files_found,
        "sessions_scanned": stats.sessions_scanned,
        "subagent_files": stats.subagent_files,
        "subagents_merged": stats.subagents_merged,
        "sessions_returned": len(sessions),
        "skipped": sum(skipped_by_reason.values()),
        "skipped_by_reason": skipped_by_reason,
        "lines_skipped": {k: stats.lines.get(k, 0) for k in ("malformed", "non_utf8", "unknown_type")},
        "git_calls": resolver.git_calls,
        "git_reads": resolver.git_reads,
        "git_processes": resolver.git_processes,
        "sessions_recorded": recorded,
        "outcomes_recorded": outcomes_recorded,
        "trial_sessions": sum(1 for sid in observed if sid in trial),
        "by_source": dict(sorted(Counter(s["project_source"] for s in sessions).items())),
        "sessions": sessions,
    }
