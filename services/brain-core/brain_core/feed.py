"""Feed assembly and the keeper's feed files (pure).

The feed is what every agent session reads at start. Two shapes share one
envelope ``{hot_arcs, inject_blocks, entries, generated_at, hash,
entry_count, vault_root}`` whose entries are ``{id, title, content, priority,
ttl, severity, metadata}``:

- the global feed (``GET /feed``), built from the keeper's files in
  ``brain-feed/`` (names in ``FEED_FILES``), unchanged for existing clients;
- the project feed (``GET /feed?project=P``), built from index rows that the
  repository already filtered to P (plus fleet-wide signals and inject
  blocks). It adds ``project`` and ``scope: "project"``, and every entry's
  metadata says ``scope`` (``project`` or ``fleet``) and ``project``.

Everything here takes ``EntryRecord`` values and returns plain data, so the
same functions serve the HTTP route, the keeper and the tests. The ``hash``
covers everything but ``generated_at``, so two reads of unchanged memory give
the same hash.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from brain_core import frontmatter
from brain_core.entries import EntryRecord, entry_id
from brain_core.times import iso, parse_time
from brain_core.intent import ArcDigest, blurb, clip_words, derive_intent, focus_line, one_line

HOT_ARCS_TITLE = "Active Hot Arcs"
HOT_ARCS_HEADER = "| Arc ID | Heat | Region | Status | Project | What it is |"
HOT_ARCS_RULE = "|---|---|---|---|---|---|"
DEFAULT_TTL = 3600

# Entry priorities, global and project feed alike: higher is injected sooner.
PRIORITY = {
    "intent": 12,
    "signal": 11,
    "hot-arcs": 10,
    "inject": 9,
    "lessons": 8,
    "decisions": 7,
    "milestones": 6,
    "no-memory": 12,
}

# The keeper's global feed files: name -> (id, title, priority). Clients read
# id, priority, ttl and severity from their frontmatter; higher priority is
# injected sooner.
FEED_FILES: dict[str, tuple[str, str, int]] = {
    "brain-feed/intent.md": ("operator-intent", "Operator Intent", PRIORITY["intent"]),
    "brain-feed/signals.md": ("signals", "Active Signals", PRIORITY["signal"]),
    "brain-feed/hot-arcs.md": ("hot-arcs", HOT_ARCS_TITLE, PRIORITY["hot-arcs"]),
    "brain-feed/inject-blocks.md": ("inject-blocks", "Inject Blocks", PRIORITY["inject"]),
    "brain-feed/lessons.md": ("lessons", "Recent Lessons", PRIORITY["lessons"]),
}
INJECT_FILE = "brain-feed/inject-blocks.md"
INJECT_DIR = "brain-feed/inject"
PROJECT_INTENT_DIR = "brain-feed/projects"
FLEET_TARGETS = {"all", "*", "fleet", "everyone"}
INACTIVE_SIGNAL_STATUSES = {"resolved", "cleared", "inactive", "expired", "closed", "done"}
SEVERITY_ORDER = {"info": 0, "low": 0, "warning": 1, "alert": 1, "high": 2, "critical": 2, "nuclear": 3}


@dataclass(frozen=True)
class FeedEntry:
    """One feed entry as clients read it."""

    id: str
    title: str
    content: str
    priority: int = 5
    ttl: int = DEFAULT_TTL
    severity: str = "info"
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (metadata copied one level deep; ``asdict``'s deep copy cost more than the rest of an entry)."""
        return {
            "id": self.id,
            "title": self.title,
            "content": self.content,
            "priority": self.priority,
            "ttl": self.ttl,
            "severity": self.severity,
            "metadata": dict(self.metadata),
        }


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

    def valid_until(self, lesson_days: int) -> dt.datetime | None:
        """When this memory stops being P's memory by the clock alone, or None if never.

        Only the windowed sections (lessons, decisions, milestones, signals of
        the last ``lesson_days`` days) change as time passes, and only by their
        oldest row leaving the window: a row can only enter through a write.
        """
        windowed = (*self.lessons, *self.decisions, *self.milestones, *self.project_signals, *self.fleet_signals)
        times = [r.occurred_at for r in windowed if r.occurred_at is not None]
        return min(times) + dt.timedelta(days=lesson_days) if times else None


# -- small helpers ----------------------------------------------------------


def _day(value: dt.datetime | None) -> str:
    return value.astimezone(dt.timezone.utc).date().isoformat() if value else "----------"


def _cell(text: Any) -> str:
    """A markdown table cell: one line, pipes escaped."""
    return one_line(str(text if text is not None else "")).replace("|", "\\|")


def cluster_id_of(record: EntryRecord) -> str:
    """The arc's cluster id: from its frontmatter, else its file name."""
    cid = record.meta.get("cluster_id")
    if cid:
        return str(cid)
    name = record.vault_path.rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".md") else name


def digest(record: EntryRecord) -> ArcDigest:
    """An arc record as the intent helpers see it."""
    summary = record.meta.get("summary")
    region = record.meta.get("region")
    return ArcDigest(
        cluster_id=cluster_id_of(record),
        title=record.title or cluster_id_of(record),
        heat=float(record.heat or 0.0),
        status=record.status,
        summary=str(summary) if summary else None,
        region=str(region) if region else None,
    )


def project_label(record: EntryRecord) -> str:
    """What the Project column shows: the repo slug (else key), plus any other projects of a merged arc."""
    primary = record.repo or record.project or ""
    others = [p for p in record.projects if p and p != record.project]
    label = ", ".join([primary, *others]) if primary else ", ".join(others)
    return label or "-"


def entry_belongs(record: EntryRecord, key: str, repo: str | None, *, key_is_unique: bool) -> bool:
    """The feed's membership rule in Python (``brain_kernel.feed_repo.member`` is the SQL twin)."""
    if key not in record.projects:
        return False
    no_repo_for_key = record.repo is None or record.project != key
    if repo:
        return record.repo == repo or (key_is_unique and no_repo_for_key)
    return no_repo_for_key if key_is_unique else record.repo is None


def severity_max(values: Iterable[str | None]) -> str:
    """The most severe of the given severities (info when none)."""
    best, rank = "info", -1
    for value in values:
        if not value:
            continue
        r = SEVERITY_ORDER.get(str(value).lower(), 0)
        if r > rank:
            best, rank = str(value).lower(), r
    return best


def signal_is_active(record: EntryRecord) -> bool:
    """A signal counts until it is marked resolved (or similar)."""
    return (record.status or "active").lower() not in INACTIVE_SIGNAL_STATUSES


def signal_is_fleet(record: EntryRecord) -> bool:
    """Fleet-wide signals: scope fleet, or no project at all."""
    return record.scope == "fleet" or not record.projects


def feed_hash(payload: Mapping[str, Any]) -> str:
    """A stable hash of a feed payload (``generated_at`` excluded)."""
    data = {k: v for k, v in payload.items() if k not in ("generated_at", "hash")}
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _envelope(
    *,
    hot_arcs: list[dict[str, Any]],
    inject_blocks: list[dict[str, Any]],
    entries: list[FeedEntry],
    now: dt.datetime,
    vault_root: str,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    ordered = sorted(entries, key=lambda e: -e.priority)  # stable: equal priorities keep their order
    payload: dict[str, Any] = {
        "hot_arcs": hot_arcs,
        "inject_blocks": inject_blocks,
        "entries": [e.to_dict() for e in ordered],
        "entry_count": len(ordered),
        "vault_root": vault_root,
    }
    if extra:
        payload.update(extra)
    payload["hash"] = feed_hash(payload)
    payload["generated_at"] = iso(now)
    return payload


def answer_body(payload: Mapping[str, Any]) -> str:
    """A feed payload as compact JSON without ``generated_at`` (what a stored answer keeps)."""
    data = {k: v for k, v in payload.items() if k != "generated_at"}
    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def stamp_answer(body: str, now: dt.datetime) -> bytes:
    """``answer_body`` output with ``generated_at`` appended: the bytes a client receives."""
    if not body.endswith("}"):
        raise ValueError("an answer body is a JSON object")
    sep = "" if body == "{}" else ","
    return f'{body[:-1]}{sep}"generated_at":{json.dumps(iso(now))}}}'.encode("utf-8")


# -- hot arcs ---------------------------------------------------------------


def hot_arcs_table(arcs: Sequence[EntryRecord]) -> str:
    """The markdown table of hot arcs, hottest first, blurb from summary else title."""
    lines = [HOT_ARCS_HEADER, HOT_ARCS_RULE]
    for record in arcs:
        d = digest(record)
        lines.append(
            "| "
            + " | ".join(
                [
                    _cell(d.cluster_id),
                    f"{d.heat:.1f}",
                    _cell(d.region or "-"),
                    _cell(d.status or "-"),
                    _cell(project_label(record)),
                    _cell(blurb(d)),
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def hot_arc_item(record: EntryRecord) -> dict[str, Any]:
    """One arc of the top-level ``hot_arcs`` list."""
    d = digest(record)
    return {
        "cluster_id": d.cluster_id,
        "title": d.title,
        "summary": d.summary,
        "heat": d.heat,
        "region": d.region,
        "status": d.status,
        "project": record.project,
        "projects": list(record.projects),
        "repo": record.repo,
        "vault_path": record.vault_path,
        "last_active": iso(record.occurred_at),
    }


# -- inject blocks ------------------------------------------------------------


def inject_targets(record: EntryRecord | Mapping[str, Any]) -> tuple[str, ...]:
    """The targets of an inject block, from its record or its frontmatter (``all`` when none is given)."""
    meta = record.meta if isinstance(record, EntryRecord) else record
    raw = meta.get("target", meta.get("targets"))
    if raw is None or raw == "":
        return ("all",)
    values = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    return tuple(str(v).strip().lower() for v in values if str(v).strip()) or ("all",)


def inject_is_fleet(record: EntryRecord | Mapping[str, Any]) -> bool:
    """True when the block targets every session."""
    return any(t in FLEET_TARGETS for t in inject_targets(record))


def inject_applies(record: EntryRecord, project: ProjectRef, *, key_is_unique: bool) -> bool:
    """Whether a block reaches P: targeted at all, at P's slug, or at P's key when that key is unique."""
    for target in inject_targets(record):
        if target in FLEET_TARGETS:
            return True
        if "/" in target:
            if project.repo and target == project.repo.lower():
                return True
        elif target == project.key.lower() and (key_is_unique or project.repo is None):
            return True
    return False


def inject_item(record: EntryRecord, scope: str, project: str | None) -> dict[str, Any]:
    """One block of the top-level ``inject_blocks`` list."""
    return {
        "id": str(record.meta.get("id") or record.id),
        "title": record.title,
        "content": record.content,
        "priority": _int(record.meta.get("priority"), PRIORITY["inject"]),
        "ttl": _int(record.meta.get("ttl"), DEFAULT_TTL),
        "severity": record.severity or "info",
        "target": list(inject_targets(record)),
        "scope": scope,
        "project": project,
    }


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


# -- records from feed files (used by reindex) ------------------------------


def inject_record(text: str, vault_path: str) -> EntryRecord:
    """The index record of one inject block file (``brain-feed/inject/<id>.md``)."""
    doc = frontmatter.parse(text)
    meta = dict(doc.meta)
    return EntryRecord(
        id=entry_id("inject", vault_path),
        kind="inject",
        vault_path=vault_path,
        title=str(meta.get("title") or meta.get("id") or vault_path.rsplit("/", 1)[-1][:-3]),
        content=doc.body.strip(),
        scope="fleet" if inject_is_fleet(meta) else "project",
        severity=str(meta.get("severity") or "info"),
        occurred_at=parse_time(meta.get("created") or meta.get("generated")),
        meta=meta,
    )


def intent_record(text: str, vault_path: str) -> EntryRecord:
    """The index record of an intent file (per project, or the fleet's ``brain-feed/intent.md``)."""
    doc = frontmatter.parse(text)
    meta = dict(doc.meta)
    project = meta.get("project")
    fleet = vault_path == "brain-feed/intent.md" or not project
    return EntryRecord(
        id=entry_id("intent", vault_path),
        kind="intent",
        vault_path=vault_path,
        title=str(meta.get("title") or "Operator Intent"),
        content=str(meta.get("intent") or doc.body.strip()),
        project=None if fleet else str(project),
        repo=None if fleet else (str(meta["repo"]) if meta.get("repo") else None),
        scope="fleet" if fleet else "project",
        occurred_at=parse_time(meta.get("generated")),
        meta={k: v for k, v in meta.items() if k in ("id", "focus", "source", "priority", "ttl", "severity", "generated")},
    )


# -- keeper files -------------------------------------------------------------


def _file(vault_path: str, now: dt.datetime, body: str, severity: str = "info", **extra: Any) -> str:
    ident, title, priority = FEED_FILES[vault_path]
    meta: dict[str, Any] = {"id": ident, "title": title, "priority": priority, "ttl": DEFAULT_TTL, "severity": severity}
    meta["generated"] = iso(now)
    meta.update(extra)
    return frontmatter.render(meta, body.rstrip("\n") + "\n")


def render_hot_arcs_file(arcs: Sequence[EntryRecord], now: dt.datetime) -> str:
    """``brain-feed/hot-arcs.md``: the top arcs of the whole fleet."""
    body = f"\n## Hot Arcs ({_day(now)})\n\n{hot_arcs_table(arcs)}\n"
    return _file("brain-feed/hot-arcs.md", now, body, arcs=[cluster_id_of(a) for a in arcs])


def render_signals_file(signals: Sequence[EntryRecord], now: dt.datetime) -> str:
    """``brain-feed/signals.md``: every active signal, fleet-wide ones labelled."""
    if not signals:
        body = "\nNo active signals.\n"
    else:
        lines = [""]
        for s in signals:
            scope = "fleet" if signal_is_fleet(s) else (s.repo or s.project or "-")
            lines.append(f"- **{(s.severity or 'info').upper()}** [{scope}] {one_line(s.title)}: {clip_words(s.content, 300)}")
        body = "\n".join(lines) + "\n"
    return _file("brain-feed/signals.md", now, body, severity=severity_max(s.severity for s in signals))


def render_lessons_file(lessons: Sequence[EntryRecord], now: dt.datetime) -> str:
    """``brain-feed/lessons.md``: the most recent lessons of the fleet, newest first."""
    body = "\n" + (lessons_markdown(lessons, with_project=True) or "No recent lessons.") + "\n"
    return _file("brain-feed/lessons.md", now, body)


def render_inject_file(blocks: Sequence[EntryRecord], now: dt.datetime) -> str:
    """``brain-feed/inject-blocks.md``: the blocks targeted at every session, for file-reading clients."""
    parts = [f"\n### {one_line(b.title)}\n\n{b.content.strip()}\n" for b in blocks]
    body = "".join(parts) if parts else "\nNo inject blocks.\n"
    return _file("brain-feed/inject-blocks.md", now, body)


def render_fleet_intent_file(intent: str, now: dt.datetime, *, source: str) -> str:
    """``brain-feed/intent.md``: the fleet intent, the fallback for sessions without a project."""
    return _file("brain-feed/intent.md", now, f"\n{intent}\n", source=source)


def project_intent_path(project: ProjectRef) -> str:
    """Where a project's intent lives: ``brain-feed/projects/<repo slug, else key>/intent.md``."""
    return f"{PROJECT_INTENT_DIR}/{project.id}/intent.md"


def render_project_intent_file(project: ProjectRef, intent: str, focus: str, now: dt.datetime, *, source: str) -> str:
    """A project's ``intent.md`` (frontmatter carries project, repo and the focus line)."""
    meta: dict[str, Any] = {
        "id": f"intent-{project.id.replace('/', '-')}",
        "title": f"Project Intent: {project.id}",
        "priority": PRIORITY["intent"],
        "ttl": DEFAULT_TTL,
        "severity": "info",
        "project": project.key,
        "repo": project.repo,
        "generated": iso(now),
        "source": source,
        "focus": focus,
    }
    return frontmatter.render(meta, f"\n{intent}\n")


# -- markdown bodies ----------------------------------------------------------


def lessons_markdown(lessons: Sequence[EntryRecord], *, with_project: bool = False) -> str:
    """One bullet per lesson (or milestone): date, (project,) title and content."""
    lines = []
    for lesson in lessons:
        where = f" [{lesson.repo or lesson.project or 'unattributed'}]" if with_project else ""
        title = one_line(lesson.title)
        content = one_line(lesson.content)
        text = content if not title or content.startswith(title) else f"{title}: {content}"
        lines.append(f"- {_day(lesson.occurred_at)}{where} {text}")
    return "\n".join(lines)


def _decisions_markdown(decisions: Sequence[EntryRecord]) -> str:
    lines = []
    for d in decisions:
        status = f" ({d.status})" if d.status else ""
        body = clip_words(d.content, 600)
        lines.append(f"- {_day(d.occurred_at)} **{one_line(d.title)}**{status}: {body}" if body else f"- {_day(d.occurred_at)} **{one_line(d.title)}**{status}")
    return "\n".join(lines)


# -- the global feed ----------------------------------------------------------


def feed_file_entry(vault_path: str, text: str) -> FeedEntry:
    """A feed entry from one ``brain-feed/*.md`` file (frontmatter id, priority, ttl, severity)."""
    doc = frontmatter.parse(text)
    meta = doc.meta
    default_id, default_title, default_priority = FEED_FILES.get(
        vault_path, (vault_path.rsplit("/", 1)[-1][:-3], vault_path.rsplit("/", 1)[-1][:-3], 5)
    )
    extra = {k: v for k, v in meta.items() if k not in ("id", "title", "priority", "ttl", "severity")}
    extra.update({"vault_path": vault_path, "scope": "fleet", "project": None})
    return FeedEntry(
        id=str(meta.get("id") or default_id),
        title=str(meta.get("title") or default_title),
        content=doc.body.strip(),
        priority=_int(meta.get("priority"), default_priority),
        ttl=_int(meta.get("ttl"), DEFAULT_TTL),
        severity=str(meta.get("severity") or "info"),
        metadata=extra,
    )


def global_feed(
    files: Sequence[tuple[str, str]],
    hot_arcs: Sequence[EntryRecord],
    inject: Sequence[EntryRecord],
    *,
    now: dt.datetime,
    vault_root: str,
) -> dict[str, Any]:
    """The global feed: one entry per keeper file (the inject digest is served as ``inject_blocks``)."""
    entries = [feed_file_entry(path, text) for path, text in files if path != INJECT_FILE]
    return _envelope(
        hot_arcs=[hot_arc_item(a) for a in hot_arcs],
        inject_blocks=[inject_item(b, "fleet", None) for b in inject if inject_is_fleet(b)],
        entries=entries,
        now=now,
        vault_root=vault_root,
    )


# -- the project feed ---------------------------------------------------------


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
        ),
    )


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
        top = memory.arcs[0] if memory.arcs else None
        focus = focus_line(digest(top) if top else None, _day(project.last_active) if project.last_active else None)
        if memory.intent is not None and memory.intent.content.strip():
            intent_text, source = memory.intent.content.strip(), str(memory.intent.meta.get("source") or "keeper")
        else:
            intent_text, source = derive_intent([digest(a) for a in memory.arcs], subject=pid), "derived"
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
                metadata=_meta("project", pid, top_n=top_n, count=len(memory.arcs)),
            )
        )
        recent_sections = (
            (memory.lessons, "lessons", "Recent Lessons", lessons_markdown),
            (memory.decisions, "decisions", "Recent Decisions", _decisions_markdown),
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
                        metadata=_meta("project", pid, days=lesson_days, count=len(records)),
                    )
                )
        for signal in memory.project_signals:
            entries.append(_signal_entry(signal, fleet=False, project=project))
    for signal in memory.fleet_signals:
        entries.append(_signal_entry(signal, fleet=True, project=project))
    blocks: list[dict[str, Any]] = []
    for block in memory.inject:
        if not inject_applies(block, project, key_is_unique=key_is_unique):
            continue
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
                metadata=_meta(item["scope"], item["project"], target=item["target"]),
            )
        )
    return _envelope(
        hot_arcs=[hot_arc_item(a) for a in memory.arcs] if project.known else [],
        inject_blocks=blocks,
        entries=entries,
        now=now,
        vault_root=vault_root,
        extra={
            "project": {"key": project.key, "repo": project.repo, "known": project.known, "last_active": iso(project.last_active)},
            "scope": "project",
        },
    )
