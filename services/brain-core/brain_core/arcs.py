"""Arcs: clustering plan, arc file format and the arc parser (pure).

An arc is a thread of work: sessions of one canonical project close in time.
``plan_clusters`` groups resolved sessions by canonical project (the repo slug
when known, else the project key; unresolved sessions only with sessions of
the very same folder, so they never join a project), then splits each group
where the gap between sessions exceeds ``gap_minutes``; a session that resumes
a compacted conversation bridges a longer gap (``bridge_minutes``), because it
is the same work by definition.

Cluster ids are a hash of the sorted session ids, so the same sessions always
give the same id and the same file: a rerun rewrites nothing. ``render_arc``
writes arc files through the one frontmatter codec; ``refresh_changes``
computes the targeted frontmatter edits when an existing arc gains sessions;
``arc_last_active`` is the one rule for an arc's last activity, shared by heat
and the arc's index row (``brain_core.vault.records.arc_record_of``).

The prompts and title hints a bundle carries are scrubbed of secrets again
as they are read (``ArcSession.from_mapping``): a bundle written by an
older extract, or by hand, never puts a secret into an arc's title or body.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from brain_core.identity import SOURCES
from brain_core.redact import scrub
from brain_core.text import clip_words, int_or, table_cell
from brain_core.times import parse_time
from brain_core.transcripts import is_boilerplate
from brain_core.vault import frontmatter
from brain_core.vault.layout import arc_path

DEFAULT_GAP_MINUTES = 240
DEFAULT_BRIDGE_MINUTES = 24 * 60
TITLE_CHARS = 80
DEFAULT_REGION = "frontal-lobe"
DEFAULT_STATUS = "active"


@dataclass(frozen=True)
class ArcSession:
    """One extracted session as the clustering needs it (identity already resolved)."""

    session_id: str
    agent: str = "claude"
    project: str | None = None
    repo: str | None = None
    worktree: str | None = None
    project_source: str = "unresolved"
    cwd: str | None = None
    git_branch: str | None = None
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    num_user_turns: int = 0
    num_assistant_turns: int = 0
    num_tool_calls: int = 0
    first_user_prompt: str = ""
    last_user_prompt: str = ""
    top_tools: Mapping[str, int] = field(default_factory=dict)
    compactions: int = 0
    resumed: bool = False
    joy_markers: int = 0
    error_markers: int = 0
    title_hint: str | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ArcSession:
        """Build from one session of an extract bundle (unknown keys ignored)."""

        def _int(key: str) -> int:
            return int_or(data.get(key) or 0, 0)

        tools = data.get("top_tools") or {}
        if isinstance(tools, list):  # tolerate a list of names
            tools = {str(name): 1 for name in tools}
        return cls(
            session_id=str(data["session_id"]),
            agent=str(data.get("agent") or "claude"),
            project=data.get("project") or None,
            repo=data.get("repo") or None,
            worktree=data.get("worktree") or None,
            project_source=str(data.get("project_source") or "unresolved"),
            cwd=data.get("cwd") or None,
            git_branch=data.get("git_branch") or None,
            start=parse_time(data.get("start")),
            end=parse_time(data.get("end")) or parse_time(data.get("start")),
            num_user_turns=_int("num_user_turns"),
            num_assistant_turns=_int("num_assistant_turns"),
            num_tool_calls=_int("num_tool_calls"),
            first_user_prompt=scrub(str(data.get("first_user_prompt") or "")),
            last_user_prompt=scrub(str(data.get("last_user_prompt") or "")),
            top_tools={str(k): int(v) for k, v in dict(tools).items() if isinstance(v, (int, float))},
            compactions=_int("compactions"),
            resumed=bool(data.get("resumed")),
            joy_markers=_int("joy_markers"),
            error_markers=_int("error_markers"),
            title_hint=scrub(str(data["title_hint"])) if data.get("title_hint") else None,
        )


def group_key(session: ArcSession, repos_by_key: Mapping[str, set[str]] | None = None) -> str:
    """The canonical project a session clusters under: repo slug, else project key, else its own folder.

    A session known only by its key (layout, catalog without repo) joins the
    repo of that key when exactly one repo in ``repos_by_key`` has it; with
    two candidates (``org1/api``, ``org2/api``) it stays apart.
    """
    if session.repo:
        return f"repo:{session.repo.lower()}"
    if session.project:
        candidates = (repos_by_key or {}).get(session.project.lower(), set())
        if len(candidates) == 1:
            return f"repo:{next(iter(candidates))}"
        return f"project:{session.project.lower()}"
    return f"unresolved:{session.cwd or session.session_id}"


def repos_by_key(sessions: Iterable[ArcSession]) -> dict[str, set[str]]:
    """Short key -> the repo slugs seen with it."""
    found: dict[str, set[str]] = {}
    for session in sessions:
        if session.repo and session.project:
            found.setdefault(session.project.lower(), set()).add(session.repo.lower())
    return found


def cluster_id_for(session_ids: Iterable[str]) -> str:
    """Stable id of a cluster: a hash of its sorted, distinct session ids."""
    joined = "\n".join(sorted(set(session_ids)))
    return "arc-" + hashlib.sha1(joined.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class ArcPlan:
    """One arc to write: its sessions and everything derived from them."""

    cluster_id: str
    sessions: tuple[ArcSession, ...]
    title: str
    project: str | None
    projects: tuple[str, ...]
    repo: str | None
    worktrees: tuple[str, ...]
    cwd: str | None
    git_branch: str | None
    project_source: str
    created: str | None
    signals: dict[str, Any]

    @property
    def date(self) -> str:
        """The date folder: the day the arc's first session started (UTC)."""
        return (self.created or "1970-01-01")[:10]

    @property
    def vault_path(self) -> str:
        """Where a new arc goes: ``clusters/<date>/<cluster_id>.md``."""
        return arc_path(self.date, self.cluster_id)

    @property
    def session_ids(self) -> list[str]:
        """The arc's session ids, sorted."""
        return sorted(s.session_id for s in self.sessions)


def _sort_key(session: ArcSession) -> tuple[dt.datetime, str]:
    return (session.start or dt.datetime.min.replace(tzinfo=dt.timezone.utc), session.session_id)


def plan_clusters(
    sessions: Iterable[ArcSession],
    *,
    gap_minutes: int = DEFAULT_GAP_MINUTES,
    bridge_minutes: int = DEFAULT_BRIDGE_MINUTES,
) -> list[ArcPlan]:
    """Group sessions into arcs: canonical project, then time gap, then compaction bridges."""
    unique: dict[str, ArcSession] = {}
    for session in sessions:
        unique.setdefault(session.session_id, session)
    known = repos_by_key(unique.values())
    groups: dict[str, list[ArcSession]] = {}
    for session in unique.values():
        groups.setdefault(group_key(session, known), []).append(session)
    gap = dt.timedelta(minutes=gap_minutes)
    bridge = dt.timedelta(minutes=max(bridge_minutes, gap_minutes))
    plans: list[ArcPlan] = []
    for key in sorted(groups):
        members = sorted(groups[key], key=_sort_key)
        current: list[ArcSession] = []
        last_end: dt.datetime | None = None
        for session in members:
            if current and last_end is not None and session.start is not None:
                allowed = bridge if session.resumed else gap
                if session.start - last_end > allowed:
                    plans.append(build_plan(current))
                    current = []
                    last_end = None
            current.append(session)
            end = session.end or session.start
            if end is not None and (last_end is None or end > last_end):
                last_end = end
        if current:
            plans.append(build_plan(current))
    return sorted(plans, key=lambda p: (p.created or "", p.cluster_id))


def _most_common(values: Iterable[str | None]) -> str | None:
    """The most frequent value; the first seen wins a tie (sessions are in time order)."""
    top = Counter(v for v in values if v).most_common(1)  # ties keep insertion order
    return top[0][0] if top else None


def _strongest_source(sources: Iterable[str]) -> str:
    present = set(sources)
    ranked = [s for s in SOURCES if s in present]
    return ranked[0] if ranked else "unresolved"


def compute_signals(sessions: Sequence[ArcSession]) -> dict[str, Any]:
    """Activity figures the keeper scores heat from (recency, volume, sessions, joy)."""
    starts = [s.start for s in sessions if s.start]
    ends = [s.end or s.start for s in sessions if s.end or s.start]
    tools: Counter = Counter()
    for s in sessions:
        tools.update(s.top_tools)
    return {
        "sessions": len(sessions),
        "agents": sorted({s.agent for s in sessions}),
        "user_turns": sum(s.num_user_turns for s in sessions),
        "assistant_turns": sum(s.num_assistant_turns for s in sessions),
        "tool_calls": sum(s.num_tool_calls for s in sessions),
        "top_tools": dict(sorted(tools.items(), key=lambda kv: (-kv[1], kv[0]))[:5]),
        "joy_markers": sum(s.joy_markers for s in sessions),
        "error_markers": sum(s.error_markers for s in sessions),
        "compactions": sum(s.compactions for s in sessions),
        "first_active": min(starts).isoformat() if starts else None,
        "last_active": max(ends).isoformat() if ends else None,
        "minutes": round(sum(((s.end or s.start) - s.start).total_seconds() / 60 for s in sessions if s.start), 1),
    }


def build_plan(sessions: Sequence[ArcSession]) -> ArcPlan:
    """Derive an arc (id, title, identity fields, signals) from its sessions."""
    ordered = sorted(sessions, key=_sort_key)
    first = ordered[0]
    projects = tuple(sorted({s.project for s in ordered if s.project}))
    repos = [s.repo for s in ordered if s.repo]
    project = _most_common(s.project for s in ordered)
    branch = next((s.git_branch for s in reversed(ordered) if s.git_branch), None)
    return ArcPlan(
        cluster_id=cluster_id_for(s.session_id for s in ordered),
        sessions=tuple(ordered),
        title=arc_title(ordered),
        project=project,
        projects=projects,
        repo=repos[0] if repos else None,
        worktrees=tuple(sorted({s.worktree for s in ordered if s.worktree})),
        cwd=_most_common(s.cwd for s in ordered),
        git_branch=branch,
        project_source=_strongest_source(s.project_source for s in ordered) if project else "unresolved",
        created=first.start.isoformat() if first.start else None,
        signals=compute_signals(ordered),
    )


# -- titles -------------------------------------------------------------------

_BARE_PATH = re.compile(r"^(?:[~.]?/|[A-Za-z]:\\)?[\w.\-~]+(?:[/\\][\w.\-~ ]*)+/?$")
_URL_ONLY = re.compile(r"^(?:https?|file|ssh)://\S+$", re.I)
_HEADING = re.compile(r"^\s*#{1,6}\s")
_NOISE_LINE = re.compile(r"^\s*(```|~~~|[-=*_]{3,}\s*$|\||>|\$ |[\[{(]\s*$)")
_LOW_VALUE = frozenset({"yes", "y", "no", "ok", "okay", "continue", "go", "go on", "proceed", "do it", "next", "retry", "again", "thanks", "thank you", "done"})


def _title_line(text: str) -> str | None:
    """The first line of a prompt that reads as a title, or None."""
    if not text or is_boilerplate(text):
        return None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or _HEADING.match(line) or _NOISE_LINE.match(line):
            continue  # pasted markdown headings, fences, tables, quotes, shell lines
        if _BARE_PATH.match(line) or _URL_ONLY.match(line):
            continue
        words = re.findall(r"[A-Za-z]{2,}", line)
        if len(words) < 2 or line.lower().strip(" .!?") in _LOW_VALUE:
            continue
        return line
    return None


def arc_title(sessions: Sequence[ArcSession]) -> str:
    """A title that means something: the first real prompt, else a summary hint, else the project."""
    for session in sessions:
        for text in (session.first_user_prompt, session.last_user_prompt):
            line = _title_line(text)
            if line:
                return clip_words(line, TITLE_CHARS)
    for session in sessions:
        if session.title_hint and _title_line(session.title_hint):
            return clip_words(session.title_hint, TITLE_CHARS)
    first = sessions[0] if sessions else None
    project = next((s.project for s in sessions if s.project), None)
    day = first.start.date().isoformat() if first and first.start else "undated"
    if project:
        branch = next((s.git_branch for s in sessions if s.git_branch), None)
        return f"Work on {project}" + (f" ({branch})" if branch else "") + f", {day}"
    return f"Unattributed work, {day}"


# -- rendering ----------------------------------------------------------------


def arc_meta(plan: ArcPlan) -> dict[str, Any]:
    """The frontmatter of a new arc, keys in DESIGN section 6 order."""
    return {
        "cluster_id": plan.cluster_id,
        "title": plan.title,
        "region": DEFAULT_REGION,
        "status": DEFAULT_STATUS,
        "heat": 0.0,
        "source_sessions": plan.session_ids,
        "project": plan.project,
        "projects": list(plan.projects),
        "repo": plan.repo,
        "worktrees": list(plan.worktrees),
        "cwd": plan.cwd,
        "git_branch": plan.git_branch,
        "project_source": plan.project_source,
        "created": plan.created,
        "signals": plan.signals,
        "edges": [],
        "synthesized": False,
    }


def arc_body(plan: ArcPlan) -> str:
    """The markdown body of a new arc: what was asked, and the sessions it holds."""
    where = plan.repo or plan.project or "unattributed"
    lines = [f"# {plan.title}", "", f"Project: {where}" + (f" (worktrees: {', '.join(plan.worktrees)})" if plan.worktrees else ""), ""]
    lines += ["## Sessions", "", "| Session | Agent | Start | Minutes | Turns | Tools | Folder | Branch |", "|---|---|---|---|---|---|---|---|"]
    for s in plan.sessions:
        minutes = round(((s.end or s.start) - s.start).total_seconds() / 60, 1) if s.start else 0
        lines.append(
            "| "
            + " | ".join(
                table_cell(v)
                for v in (
                    s.session_id,
                    s.agent,
                    s.start.isoformat(timespec="minutes") if s.start else "",
                    minutes,
                    s.num_user_turns + s.num_assistant_turns,
                    s.num_tool_calls,
                    s.cwd,
                    s.git_branch,
                )
            )
            + " |"
        )
    prompts = [(s.session_id, s.first_user_prompt, s.last_user_prompt) for s in plan.sessions if s.first_user_prompt]
    if prompts:
        lines += ["", "## Prompts", ""]
        for sid, first, last in prompts:
            lines.append(f"- {sid[:8]} first: {table_cell(first)}")
            if last and last != first:
                lines.append(f"- {sid[:8]} last: {table_cell(last)}")
    return "\n".join(lines) + "\n"


def render_arc(plan: ArcPlan) -> str:
    """The whole arc file (frontmatter through the codec, then the body)."""
    return frontmatter.render(arc_meta(plan), "\n" + arc_body(plan))


def _add_signals(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(old)
    for key in ("sessions", "user_turns", "assistant_turns", "tool_calls", "joy_markers", "error_markers", "compactions", "minutes"):
        try:
            merged[key] = round(float(old.get(key) or 0) + float(new.get(key) or 0), 1)
            if key != "minutes":
                merged[key] = int(merged[key])
        except (TypeError, ValueError):
            merged[key] = new.get(key)
    merged["agents"] = sorted(set(old.get("agents") or []) | set(new.get("agents") or []))
    tools: Counter = Counter()
    for source in (old.get("top_tools") or {}, new.get("top_tools") or {}):
        if isinstance(source, Mapping):
            tools.update({str(k): int(v) for k, v in source.items() if isinstance(v, (int, float))})
    merged["top_tools"] = dict(sorted(tools.items(), key=lambda kv: (-kv[1], kv[0]))[:5])
    firsts = [v for v in (old.get("first_active"), new.get("first_active")) if v]
    lasts = [v for v in (old.get("last_active"), new.get("last_active")) if v]
    merged["first_active"] = min(firsts, key=lambda v: parse_time(v) or dt.datetime.max.replace(tzinfo=dt.timezone.utc)) if firsts else None
    merged["last_active"] = max(lasts, key=lambda v: parse_time(v) or dt.datetime.min.replace(tzinfo=dt.timezone.utc)) if lasts else None
    return merged


def refresh_changes(meta: Mapping[str, Any], plan: ArcPlan) -> dict[str, Any]:
    """Frontmatter edits that fold ``plan``'s sessions into an existing arc; {} when nothing changes.

    Only session-derived keys change; title, heat, status, region, summary,
    edges and the arc's project stay as the keeper or a merge left them.
    When the plan holds every session the arc already has, signals are
    recomputed exactly; otherwise the new sessions' figures are added.
    """
    old_ids = {str(s) for s in (meta.get("source_sessions") or [])}
    plan_ids = set(plan.session_ids)
    ids = sorted(old_ids | plan_ids)
    old_signals = meta.get("signals") if isinstance(meta.get("signals"), Mapping) else {}
    if old_ids <= plan_ids:
        signals = {**old_signals, **plan.signals}
    else:
        fresh = [s for s in plan.sessions if s.session_id not in old_ids]
        signals = _add_signals(old_signals, compute_signals(fresh)) if fresh else dict(old_signals)
    projects = list(meta.get("projects") or [])
    for p in plan.projects:
        if p not in projects:
            projects.append(p)
    worktrees = sorted(set(meta.get("worktrees") or []) | set(plan.worktrees))
    wanted = {
        "source_sessions": ids,
        "projects": projects,
        "worktrees": worktrees,
        "git_branch": plan.git_branch or meta.get("git_branch"),
        "signals": signals,
    }
    if not meta.get("projects") and meta.get("project") and "project_source" not in meta:
        wanted.pop("projects")  # a legacy arc: leave attribution to the backfill
    return {k: v for k, v in wanted.items() if meta.get(k) != v}


# -- activity ----------------------------------------------------------------------


_SIGNAL_TIME_KEYS = ("last_active", "last_activity", "end", "last_seen", "ended")
_TIME_KEYS = ("last_active", "last_activity", "end", "last_seen", "ended", "updated", "created")


def arc_last_active(meta: Mapping[str, Any]) -> dt.datetime | None:
    """The arc's last activity, one rule for its heat and its index row.

    The latest activity time the cluster signals record; an older arc
    without them, the latest of its top-level time keys (``updated`` and
    ``created`` included).
    """
    signals = meta.get("signals")
    if isinstance(signals, Mapping):
        recorded = [t for t in (parse_time(signals.get(k)) for k in _SIGNAL_TIME_KEYS) if t is not None]
        if recorded:
            return max(recorded)
    known = [t for t in (parse_time(meta.get(k)) for k in _TIME_KEYS) if t is not None]
    return max(known) if known else None
