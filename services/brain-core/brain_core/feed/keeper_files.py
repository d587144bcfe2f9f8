"""The keeper's feed files in ``brain-feed/`` and the global feed read from them (pure).

``brain tick`` renders ``hot-arcs.md`` (title "Active Hot Arcs", a table
with a Project column), ``signals.md``, ``lessons.md``, ``inject-blocks.md``,
the fleet ``intent.md`` and one intent per active project; ``GET /feed``
without a project serves one entry per file (``global_feed``). Clients read
id, priority, ttl and severity from each file's frontmatter.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any

from brain_core.entries import EntryRecord
from brain_core.feed.envelope import DEFAULT_TTL, PRIORITY, FeedEntry, envelope
from brain_core.feed.project import ProjectRef
from brain_core.feed.sections import HOT_ARCS_TITLE, cluster_id_of, day, hot_arc_item, hot_arcs_table, inject_item, lessons_markdown
from brain_core.membership import inject_is_fleet, signal_is_fleet
from brain_core.text import clip_words, int_or, one_line
from brain_core.times import iso
from brain_core.vault import frontmatter
from brain_core.vault.layout import FLEET_INTENT_FILE, HOT_ARCS_FILE, INJECT_FILE, LESSONS_FILE, SIGNALS_FILE

# The keeper's global feed files: name -> (id, title, priority). Clients read
# id, priority, ttl and severity from their frontmatter; higher priority is
# injected sooner.
FEED_FILES: dict[str, tuple[str, str, int]] = {
    FLEET_INTENT_FILE: ("operator-intent", "Operator Intent", PRIORITY["intent"]),
    SIGNALS_FILE: ("signals", "Active Signals", PRIORITY["signal"]),
    HOT_ARCS_FILE: ("hot-arcs", HOT_ARCS_TITLE, PRIORITY["hot-arcs"]),
    INJECT_FILE: ("inject-blocks", "Inject Blocks", PRIORITY["inject"]),
    LESSONS_FILE: ("lessons", "Recent Lessons", PRIORITY["lessons"]),
}

SEVERITY_ORDER = {"info": 0, "low": 0, "warning": 1, "alert": 1, "high": 2, "critical": 2, "nuclear": 3}


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


def _file(vault_path: str, now: dt.datetime, body: str, severity: str = "info", **extra: Any) -> str:
    ident, title, priority = FEED_FILES[vault_path]
    meta: dict[str, Any] = {"id": ident, "title": title, "priority": priority, "ttl": DEFAULT_TTL, "severity": severity}
    meta["generated"] = iso(now)
    meta.update(extra)
    return frontmatter.render(meta, body.rstrip("\n") + "\n")


def render_hot_arcs_file(arcs: Sequence[EntryRecord], now: dt.datetime) -> str:
    """``brain-feed/hot-arcs.md``: the top arcs of the whole fleet."""
    body = f"\n## Hot Arcs ({day(now)})\n\n{hot_arcs_table(arcs)}\n"
    return _file(HOT_ARCS_FILE, now, body, arcs=[cluster_id_of(a) for a in arcs])


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
    return _file(SIGNALS_FILE, now, body, severity=severity_max(s.severity for s in signals))


def render_lessons_file(lessons: Sequence[EntryRecord], now: dt.datetime) -> str:
    """``brain-feed/lessons.md``: the most recent lessons of the fleet, newest first."""
    body = "\n" + (lessons_markdown(lessons, with_project=True) or "No recent lessons.") + "\n"
    return _file(LESSONS_FILE, now, body)


def render_inject_file(blocks: Sequence[EntryRecord], now: dt.datetime) -> str:
    """``brain-feed/inject-blocks.md``: the blocks targeted at every session, for file-reading clients."""
    parts = [f"\n### {one_line(b.title)}\n\n{b.content.strip()}\n" for b in blocks]
    body = "".join(parts) if parts else "\nNo inject blocks.\n"
    return _file(INJECT_FILE, now, body)


def render_fleet_intent_file(intent: str, now: dt.datetime, *, source: str) -> str:
    """``brain-feed/intent.md``: the fleet intent, the fallback for sessions without a project."""
    return _file(FLEET_INTENT_FILE, now, f"\n{intent}\n", source=source)


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
    body. ``id`` and ``title`` default to the file stem, ``priority`` to 5,
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
        extra={"arcs": [hot_arc_item(a) for a in hot_arcs], "blocks": [inject_item(b, "fleet", None) for b in inject if inject_is_fleet(b)]},
    )
