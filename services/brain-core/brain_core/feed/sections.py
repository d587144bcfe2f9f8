"""Feed sections both feeds share (pure): the hot arcs table and items, lesson, milestone and
decision bullets, inject block items.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from brain_core.entries import EntryRecord
from brain_core.feed.envelope import DEFAULT_TTL, PRIORITY
from brain_core.feed.intent import ArcDigest
from brain_core.feed.repeats import counted, times
from brain_core.membership import inject_targets
from brain_core.text import clip_words, int_or, one_line, table_cell, title_repeats
from brain_core.times import iso

HOT_ARCS_TITLE = "Active Hot Arcs"

HOT_ARCS_HEADER = "| Arc ID | Heat | Region | Status | Project | What it is |"

HOT_ARCS_RULE = "|---|---|---|---|---|---|"


def day(value: dt.datetime | None) -> str:
    """The UTC date of ``value`` (dashes when unknown)."""
    return value.astimezone(dt.timezone.utc).date().isoformat() if value else "----------"


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


HOT_ARC_BLURB_CHARS = 220
_BLURB_TRIM = " ,;:.\u2014-"


def hot_arc_blurb(record: EntryRecord, limit: int = HOT_ARC_BLURB_CHARS) -> str:
    """Upstream's hot-arcs blurb: summary, else title, else id; one line, ``|`` as ``-``, clipped with ``…``.

    Over ``limit`` characters it is cut at the last space when that space lies
    past 60% of the limit (else at the limit), trailing `` ,;:.—-`` trimmed.
    """
    d = digest(record)
    text = " ".join(str(d.summary or d.title or d.cluster_id).split()).replace("|", "-")
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    return cut.rstrip(_BLURB_TRIM) + "\u2026"


def heat_text(heat: float) -> str:
    """Heat as the frontmatter writes it: a whole number without a decimal point."""
    return f"{heat:g}"


def hot_arcs_table(arcs: Sequence[EntryRecord], *, blurb_chars: int = HOT_ARC_BLURB_CHARS) -> str:
    """The markdown table of hot arcs, hottest first: upstream's columns plus Project."""
    lines = [HOT_ARCS_HEADER, HOT_ARCS_RULE]
    for record in arcs:
        d = digest(record)
        cells = [d.cluster_id, heat_text(d.heat), d.region or "?", d.status or "?", project_label(record)]
        lines.append("| " + " | ".join([*(table_cell(c) for c in cells), hot_arc_blurb(record, blurb_chars)]) + " |")
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
        "entry_id": record.id,
    }


def inject_item(record: EntryRecord, scope: str, project: str | None) -> dict[str, Any]:
    """One block of the top-level ``inject_blocks`` list."""
    return {
        "id": str(record.meta.get("id") or record.id),
        "title": record.title,
        "content": record.content,
        "priority": int_or(record.meta.get("priority"), PRIORITY["inject"]),
        "ttl": int_or(record.meta.get("ttl"), DEFAULT_TTL),
        "severity": record.severity or "info",
        "target": list(inject_targets(record)),
        "scope": scope,
        "project": project,
        "entry_id": record.id,
    }


def lessons_markdown(lessons: Sequence[EntryRecord], *, with_project: bool = False, repeats: Mapping[str, str] | None = None) -> str:
    """One bullet per lesson (or milestone): date, (project,) title and content; a repeated lesson once, with its count."""
    lines = []
    for lesson, count in counted(lessons, repeats or {}):
        where = f" [{lesson.repo or lesson.project or 'unattributed'}]" if with_project else ""
        title = one_line(lesson.title)
        content = one_line(lesson.content)
        text = content if title_repeats(title, content) else f"{title}: {content}"
        lines.append(f"- {day(lesson.occurred_at)}{where} {text}{times(count)}")
    return "\n".join(lines)


def decisions_markdown(decisions: Sequence[EntryRecord]) -> str:
    """One bullet per decision: date, title, status and the content clipped on a word (the title left out when it only repeats the content)."""
    lines = []
    for d in decisions:
        status = f" ({d.status})" if d.status else ""
        body = clip_words(d.content, 600)
        if body and title_repeats(d.title, d.content):
            lines.append(f"- {day(d.occurred_at)} {body}{status}")
            continue
        lines.append(f"- {day(d.occurred_at)} **{one_line(d.title)}**{status}: {body}" if body else f"- {day(d.occurred_at)} **{one_line(d.title)}**{status}")
    return "\n".join(lines)
