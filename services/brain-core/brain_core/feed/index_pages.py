"""The keeper's pages for people (pure): one project's index page and the router page over every project.

A person reads the vault in an editor or Obsidian, where it is laid out by
kind. These pages group it by project, each entry a link to the vault file
holding it: ``brain-feed/projects/<id>/INDEX.md`` and ``brain-feed/PROJECTS.md``.
They are derived from the index alone and carry no moment of their own (no
``generated:`` line), so the keeper rewrites one only when what it lists
changed, and a kernel that reindexed the same vault renders the same bytes.

Links are relative markdown links from the page to the file; when the vault
is an Obsidian vault each entry also gets a wiki link (vault path without
``.md``), which Obsidian resolves from the vault's root and keeps up to date
on a rename.
"""

from __future__ import annotations

import datetime as dt
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from brain_core.entries import EntryRecord
from brain_core.feed.sections import cluster_id_of, heat_text
from brain_core.redact import scrub
from brain_core.text import clip_words, one_line
from brain_core.vault import frontmatter
from brain_core.vault.layout import PROJECTS_ROUTER_FILE, project_index_path

TITLE_CHARS = 120
# The router page sits among the feed files, and upstream's client reads every top-level ``brain-feed/*.md`` as
# a feed entry, a file without frontmatter whole, unless its ``priority`` is not a whole number (UPSTREAM.md
# 0.21). The page is for people: a priority of ``none`` keeps it out of every session's context.
ROUTER_FRONTMATTER = frontmatter.render({"title": "Projects", "priority": "none"})
# The order counts are listed in; any other kind follows, by name.
COUNT_ORDER = ("arc", "decision", "lesson", "milestone", "signal")


@dataclass(frozen=True)
class ProjectPage:
    """What one project's index page lists, each section already ordered and free of withdrawn entries."""

    id: str
    key: str
    repo: str | None
    aliases: Sequence[str] = ()
    intent: str | None = None  # the intent's text (from its file in ``brain-feed/projects/<id>/intent.md``)
    intent_path: str | None = None
    arcs: Sequence[EntryRecord] = ()
    decisions: Sequence[EntryRecord] = ()
    lessons: Sequence[EntryRecord] = ()
    milestones: Sequence[EntryRecord] = ()
    signals: Sequence[EntryRecord] = ()


@dataclass(frozen=True)
class RouterRow:
    """One project's section of the router page."""

    id: str
    key: str
    repo: str | None
    counts: Mapping[str, int] = field(default_factory=dict)
    last_active: dt.datetime | None = None


def _escape(text: str) -> str:
    """Link text that cannot close the link or start another one."""
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def link(page: str, target: str, text: str, *, obsidian: bool) -> str:
    """A relative markdown link from ``page`` to the vault file ``target`` (and a wiki link in an Obsidian vault)."""
    rel = posixpath.relpath(target, posixpath.dirname(page))
    href = f"<{rel}>" if any(c in rel for c in " ()<>") else rel
    out = f"[{_escape(text)}]({href})"
    if obsidian:
        stem = target[:-3] if target.endswith(".md") else target
        out += f" · [[{stem}]]"
    return out


def _title(record: EntryRecord) -> str:
    """An entry's title on one line, scrubbed (titles of arcs are prompts)."""
    title = record.title or clip_words(record.content, TITLE_CHARS) or record.id
    return scrub(clip_words(one_line(title), TITLE_CHARS))


def _day(record: EntryRecord) -> str:
    return record.occurred_at.astimezone(dt.timezone.utc).date().isoformat() if record.occurred_at else "undated"


def _section(name: str, lines: list[str], empty: str) -> list[str]:
    return [f"## {name}", "", *(lines or [empty]), ""]


def render_project_index(page: ProjectPage, *, obsidian: bool, recent_days: int) -> str:
    """``brain-feed/projects/<id>/INDEX.md``: the project's memory, each entry linked to its vault file."""
    here = project_index_path(page.id)

    def item(r: EntryRecord, extra: str = "") -> str:
        return f"- {_day(r)} {link(here, r.vault_path, _title(r), obsidian=obsidian)}{extra}"

    head = [f"# {one_line(page.id)}", "", f"- Key: `{one_line(page.key)}`"]
    head.append(f"- Repository: `{one_line(page.repo)}`" if page.repo else "- Repository: none recorded")
    if page.aliases:
        head.append("- Aliases: " + ", ".join(f"`{one_line(a)}`" for a in page.aliases))
    head.append("- All projects: " + link(here, PROJECTS_ROUTER_FILE, "PROJECTS", obsidian=obsidian))
    head.append("")
    intent = [scrub(one_line(page.intent))] if page.intent else []
    if intent and page.intent_path:
        intent.append("")
        intent.append(link(here, page.intent_path, "intent.md", obsidian=obsidian))
    arcs = [
        f"- {link(here, a.vault_path, _title(a), obsidian=obsidian)} (heat {heat_text(a.heat)}, {one_line(a.status) or 'no status'}, `{cluster_id_of(a)}`)"
        for a in page.arcs
    ]
    signals = [item(s, f" ({one_line(s.severity) or 'info'})") for s in page.signals]
    body = [
        *head,
        *_section("Intent", intent, "No intent yet."),
        *_section("Hot arcs", arcs, "No arcs."),
        *_section("Decisions", [item(d) for d in page.decisions], "No decisions."),
        *_section(f"Lessons (last {recent_days} days)", [item(r) for r in page.lessons], "No recent lessons."),
        *_section(f"Milestones (last {recent_days} days)", [item(m) for m in page.milestones], "No recent milestones."),
        *_section("Active signals", signals, "No active signals."),
    ]
    return "\n".join(body).rstrip("\n") + "\n"


def counts_text(counts: Mapping[str, int]) -> str:
    """``3 arcs, 1 decision, ...`` in a fixed order; kinds with none left out."""
    kinds = [k for k in COUNT_ORDER if counts.get(k)] + sorted(k for k in counts if k not in COUNT_ORDER and counts[k])
    return ", ".join(f"{counts[k]} {k}{'' if counts[k] == 1 else 's'}" for k in kinds) or "no entries"


def _when(at: dt.datetime | None) -> str:
    return at.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if at else "never"


def router_order(rows: Sequence[RouterRow]) -> list[RouterRow]:
    """Most recently active first, then by id (a project never active last)."""
    floor = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    return sorted(rows, key=lambda r: (r.last_active is None, -(r.last_active or floor).timestamp(), r.id))


def render_router(rows: Sequence[RouterRow], unattributed: Mapping[str, int], unattributed_last: dt.datetime | None, *, obsidian: bool) -> str:
    """``brain-feed/PROJECTS.md``: one section per project, most recently active first; unattributed memory last."""
    here = PROJECTS_ROUTER_FILE
    lines = [ROUTER_FRONTMATTER.rstrip("\n"), "# Projects", ""]
    for r in router_order(rows):
        lines += [
            f"## {one_line(r.id)}",
            "",
            f"- Key: `{one_line(r.key)}`" + (f", repository `{one_line(r.repo)}`" if r.repo else ""),
            f"- Entries: {counts_text(r.counts)}",
            f"- Last activity: {_when(r.last_active)}",
            "- " + link(here, project_index_path(r.id), "Index", obsidian=obsidian),
            "",
        ]
    lines += ["## Unattributed", "", f"- Entries: {counts_text(unattributed)}", f"- Last activity: {_when(unattributed_last)}", ""]
    return "\n".join(lines).rstrip("\n") + "\n"
