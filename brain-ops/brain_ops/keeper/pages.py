"""The keeper's pages for people: each project's ``INDEX.md`` and the router ``PROJECTS.md`` (step 10).

Read from the index after the tick refreshed it, rendered by
``brain_core.feed.index_pages`` and handed to the tick's one ``FeedWriter``
(ADR 0039), which writes a page only when its text changed. A project's
intent is read from its intent file as this tick leaves it (the writer's
text), not from the index, which follows the intents only when the feed is
written: so the page a tick renders is the one a reindexed vault renders.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.orm import Session

from brain_core.feed.index_pages import ProjectPage, RouterRow, render_project_index, render_router
from brain_core.vault import frontmatter
from brain_core.vault.layout import PROJECTS_ROUTER_FILE, project_index_path, project_intent_path
from brain_kernel.feed import feed_repo
from brain_ops.keeper.feed_writer import FeedWriter

RECENT_DAYS = 30  # lessons and milestones an index page lists
PAGE_ROWS = 20  # per section
OBSIDIAN_DIR = ".obsidian"
SHOWN_KINDS = ("arc", "decision", "lesson", "milestone", "signal")  # the kinds people write; intents are the keeper's own


def _intent(feed: FeedWriter, project_id: str) -> tuple[str | None, str | None]:
    rel = project_intent_path(project_id)
    text = feed.text(rel)
    if not text:
        return None, None
    body = frontmatter.parse(text).body.strip()
    return (body or None), rel


def render_pages(session: Session, feed: FeedWriter, now: dt.datetime) -> dict[str, str]:
    """Every known project's index page and the router page, by vault path."""
    obsidian = feed.writes.vault.exists(OBSIDIAN_DIR)
    since = now - dt.timedelta(days=RECENT_DAYS)
    pages: dict[str, str] = {}
    rows: list[RouterRow] = []
    for p in feed_repo.list_projects(session):
        found = feed_repo.project_index_rows(session, p.key, p.repo, since=since, now=now, limit=PAGE_ROWS)
        intent, intent_path = _intent(feed, p.id)
        page = ProjectPage(
            id=p.id,
            key=p.key,
            repo=p.repo,
            aliases=p.aliases,
            intent=intent,
            intent_path=intent_path,
            arcs=found.arcs,
            decisions=found.decisions,
            lessons=found.lessons,
            milestones=found.milestones,
            signals=found.signals,
        )
        pages[project_index_path(p.id)] = render_project_index(page, obsidian=obsidian, recent_days=RECENT_DAYS)
        rows.append(RouterRow(p.id, p.key, p.repo, {k: n for k, n in p.counts.items() if k in SHOWN_KINDS}, p.last_active))
    counts, last = feed_repo.unattributed_counts(session)
    pages[PROJECTS_ROUTER_FILE] = render_router(rows, counts, last, obsidian=obsidian)
    return pages
