"""The keeper's feed files in ``brain-feed/`` and the global feed read from them (pure).

``brain tick`` renders upstream's files (UPSTREAM.md 4.4): ``hot-arcs.md``
(title "Active Hot Arcs", upstream's table plus a Project column),
``inject.md``, ``signals.md``, the fleet ``intent.md`` and
``last-tick-diff.md``; the kernel adds ``lessons.md``, one intent per active
project and each ``clusters/<date>/_dashboard.md``. ``GET /feed`` without a
project serves one entry per file (``global_feed``). Clients read id,
priority, ttl and severity from each file's frontmatter.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from brain_core.entries import EntryRecord
from brain_core.feed.envelope import DEFAULT_TTL, PRIORITY, FeedEntry, envelope
from brain_core.feed.project import ProjectRef, fleet_blocks
from brain_core.feed.sections import HOT_ARC_BLURB_CHARS, HOT_ARCS_TITLE, day, digest, heat_text, hot_arc_item, hot_arcs_table, inject_item, lessons_markdown
from brain_core.membership import inject_is_fleet, inject_targets, signal_is_fleet
from brain_core.redact import scrub
from brain_core.text import clip_words, int_or, one_line, table_cell
from brain_core.times import iso
from brain_core.vault import frontmatter
from brain_core.vault.layout import FLEET_INTENT_FILE, HOT_ARCS_FILE, INJECT_FILE, LAST_TICK_DIFF_FILE, LESSONS_FILE, SIGNALS_FILE

# The keeper's global feed files (UPSTREAM.md 4.4): name -> (id, title, priority, ttl, severity).
# Clients read id, priority, ttl and severity from the frontmatter; higher priority is
# injected sooner. ``lessons.md`` is the kernel's own addition (the fleet's recent lessons).
FEED_FILES: dict[str, tuple[str, str, int, int, str]] = {
    HOT_ARCS_FILE: ("hot-arcs", HOT_ARCS_TITLE, 10, 3600, "info"),
    INJECT_FILE: ("inject", "Brain Inject", 9, 3600, "info"),
    SIGNALS_FILE: ("signals", "Active Signals", 8, 3600, "warning"),
    FLEET_INTENT_FILE: ("operator-intent", "Operator Intent", 7, 1800, "info"),
    LESSONS_FILE: ("lessons", "Recent Lessons", 6, 3600, "info"),
    LAST_TICK_DIFF_FILE: ("last-tick-diff", "last-tick-diff", 5, 7200, "info"),
}
NO_SIGNALS = "No active signals."
NO_INJECT = "No inject blocks."
HOT_ARCS_FOOTER = (
    "These are the operator's active work threads, hottest first. To go deeper:\n"
    "call `brain_get_arc(cluster_id)` for one arc, `brain_search_arcs(query)` to find arcs, `kb_search(query)` for everything else."
)

SEVERITY_ORDER = {"info": 0, "low": 0, "warning": 1, "alert": 1, "high": 2, "critical": 2, "nuclear": 3}

# Lines that only say when a file was made: a file whose other lines are unchanged is not rewritten.
_VOLATILE = re.compile(r"^(?:generated: .*|## What the operator is likely doing \(.*\)|## Tick Diff \u2014 .*)$", re.M)


def same_content(old: str | None, new: str) -> bool:
    """True when ``new`` differs from ``old`` only in the lines that stamp when it was made."""
    return old is not None and _VOLATILE.sub("", old) == _VOLATILE.sub("", new)


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


def _file(vault_path: str, body: str, *, ident: str | None = None, severity: str | None = None, **extra: Any) -> str:
    default_id, title, priority, ttl, default_severity = FEED_FILES[vault_path]
    meta: dict[str, Any] = {"id": ident or default_id, "title": title, "priority": priority, "ttl": ttl, "severity": severity or default_severity}
    meta.update({k: v for k, v in extra.items() if v is not None})
    return frontmatter.render(meta, "\n" + body.strip("\n") + "\n")


def render_hot_arcs_file(arcs: Sequence[EntryRecord], now: dt.datetime, *, blurb_chars: int = HOT_ARC_BLURB_CHARS) -> str:
    """``brain-feed/hot-arcs.md``: the fleet's top arcs in upstream's table, plus the Project column."""
    body = f"## Hot Arcs \u2014 {day(now)}\n\n{hot_arcs_table(arcs, blurb_chars=blurb_chars)}\n\n{HOT_ARCS_FOOTER}"
    return _file(HOT_ARCS_FILE, body, ident=f"hot-arcs-{day(now)}")


def signal_scope_label(signal: EntryRecord) -> str:
    """How a signal line says whose it is: ``fleet``, or ``project: <slug or key>``."""
    return "fleet" if signal_is_fleet(signal) else f"project: {signal.repo or signal.project}"


def render_signals_file(signals: Sequence[EntryRecord], now: dt.datetime) -> str:
    """``brain-feed/signals.md``: ``- **[sev]** (source) first line _(scope)_`` per active signal."""
    if not signals:
        return _file(SIGNALS_FILE, NO_SIGNALS, severity="info")
    lines = [f"## Signals \u2014 {day(now)}", ""]
    for s in signals:
        source = str(s.meta.get("source") or "unknown")
        first = one_line(next((ln for ln in s.content.splitlines() if ln.strip()), s.title))
        lines.append(f"- **[{(s.severity or 'info').lower()}]** ({source}) {clip_words(first, 300)} _({signal_scope_label(s)})_")
    return _file(SIGNALS_FILE, "\n".join(lines), severity=severity_max(s.severity for s in signals))


def render_inject_file(blocks: Sequence[EntryRecord], now: dt.datetime) -> str:
    """``brain-feed/inject.md``: ``**[<target>]** <content>`` per unique block aimed at the whole fleet.

    Upstream's clients read this file in the global feed and inject every block in it into every session, so a
    project's blocks (its arcs', its notes', those aimed at one project) stay out: its project feed serves them.
    """
    fleet = [b for b in blocks if inject_is_fleet(b)]
    if not fleet:
        return _file(INJECT_FILE, NO_INJECT)
    return _file(INJECT_FILE, "\n".join(f"**[{','.join(inject_targets(b))}]** {b.content.strip()}\n" for b in fleet))


def render_lessons_file(lessons: Sequence[EntryRecord], now: dt.datetime) -> str:
    """``brain-feed/lessons.md``: the most recent lessons of the fleet, newest first."""
    return _file(LESSONS_FILE, lessons_markdown(lessons, with_project=True) or "No recent lessons.")


def render_fleet_intent_file(intent: str, now: dt.datetime, *, source: str) -> str:
    """``brain-feed/intent.md``: the fleet intent, the fallback for sessions without a project."""
    body = f"## What the operator is likely doing ({now.astimezone(dt.timezone.utc):%Y-%m-%d %H:%M} UTC)\n\n{scrub(intent)}"
    return _file(FLEET_INTENT_FILE, body, source=source, generated=iso(now))


def render_last_tick_diff(now: dt.datetime, counts: Mapping[str, Any], *, health: str | None = None) -> str:
    """``brain-feed/last-tick-diff.md``: upstream's four lines, then what the deterministic pass moved."""
    lines = [
        f"## Tick Diff \u2014 {iso(now)}",
        "",
        f"Edges added: {int(counts.get('edges_added', 0))}",
        f"Signals changed: {int(counts.get('signals_changed', 0))}",
        f"Merges executed: {int(counts.get('merges_executed', 0))}",
        f"Health score: {health or 'n/a (deterministic tick)'}",
        "",
        *(f"{label}: {int(counts.get(key, 0))}" for key, label in DIFF_LINES),
    ]
    return _file(LAST_TICK_DIFF_FILE, "\n".join(lines))


DIFF_LINES = (
    ("heat_changes", "Heat changes"),
    ("promotions", "Promotions"),
    ("demotions", "Demotions"),
    ("graduations", "Graduations"),
    ("inbox_drained", "Inbox notes drained"),
)


def hottest(records: Sequence[EntryRecord]) -> list[EntryRecord]:
    """Arcs in the dashboards' order: hottest first, then the most recently active, then by id."""
    floor = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    return sorted(records, key=lambda r: (-r.heat, -(r.occurred_at or floor).timestamp(), r.id))


def render_dashboard(date: str, arcs: Sequence[EntryRecord]) -> str:
    """``clusters/<date>/_dashboard.md``: the arcs that began that day, wherever they now live."""
    lines = [f"# Cluster Dashboard \u2014 {date}", "", "| Arc | Heat | Region | Status | Title |", "|---|---|---|---|---|"]
    for a in arcs:
        d = digest(a)
        lines.append(f"| [[{d.cluster_id}]] | {heat_text(d.heat)} | {table_cell(d.region or '?')} | {table_cell(d.status or '?')} | {table_cell(d.title)} |")
    return "\n".join(lines) + "\n"


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
        "focus": scrub(focus),
    }
    return frontmatter.render(meta, f"\n{scrub(intent)}\n")  # derived from arc titles, i.e. prompts: scrubbed


def _meta_text(value: Any) -> str | None:
    """A frontmatter value as upstream's metadata carries it: text (lists and mappings as JSON)."""
    if value is None:
        return None
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def feed_file_entry(vault_path: str, text: str) -> FeedEntry | None:
    """A feed entry from one ``brain-feed/*.md`` file, as upstream serves it (UPSTREAM.md 1.4).

    None for files upstream skips: no frontmatter, empty frontmatter, empty
    body; and for a page whose ``priority`` is ``none`` (no feed file: the
    keeper's ``PROJECTS.md``, which agentihooks' file fallback drops by it). ``id`` and ``title`` default to the file stem, ``priority`` to 5,
    ``ttl`` to 3600 and ``severity`` to ``info`` only when the key is absent
    (a key present but empty gives ""), an unreadable number to its default;
    ``metadata`` is the whole frontmatter as text, plus the kernel's
    ``vault_path``, ``scope`` and ``project``.
    """
    doc = frontmatter.parse(text)
    body = doc.body.strip()
    if not doc.has_frontmatter or not doc.meta or not body:
        return None
    meta = doc.meta
    priority = meta.get("priority")
    if isinstance(priority, str) and priority.strip().lower() == "none":
        return None  # a page for people among the feed files (PROJECTS.md): the client's file fallback drops it too
    stem = vault_path.rsplit("/", 1)[-1].removesuffix(".md")

    def present(key: str, default: str) -> str:
        return default if key not in meta else ("" if meta[key] is None else str(meta[key]))

    metadata: dict[str, Any] = {str(k): _meta_text(v) for k, v in meta.items()}
    metadata.update({"vault_path": vault_path, "scope": "fleet", "project": None})
    return FeedEntry(
        id=present("id", stem),
        title=present("title", stem),
        content=body,
        priority=int_or(meta.get("priority"), 5),
        ttl=int_or(meta.get("ttl"), DEFAULT_TTL),
        severity=present("severity", "info"),
        metadata=metadata,
    )


def global_feed(
    files: Sequence[tuple[str, str]],
    hot_arcs: Sequence[EntryRecord],
    inject: Sequence[EntryRecord],
    *,
    now: dt.datetime,
    vault_root: str,
) -> dict[str, Any]:
    """The global feed: one entry per keeper file in upstream's buckets; the index's records under ``arcs``, ``blocks``."""
    entries = [entry for path, text in files if (entry := feed_file_entry(path, text)) is not None]
    return envelope(
        entries,
        now=now,
        vault_root=vault_root,
        upstream=True,
        extra={"arcs": [hot_arc_item(a) for a in hot_arcs], "blocks": [inject_item(b, "fleet", None) for b in fleet_blocks(inject, now=now)]},
    )
