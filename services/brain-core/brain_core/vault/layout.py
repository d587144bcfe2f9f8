"""Where everything lives in the vault (pure): every folder name and path builder in one module.

The layout is upstream's (UPSTREAM.md section 4.1) plus the kernel's
per-project intents and inject blocks:

- arcs ``clusters/<date>/<cluster_id>.md`` (``<id>.merged.md`` is a merge tombstone);
- lessons ``left/reference/lessons-<date>.md``, decisions ``left/decisions/ADR-NNNN-<slug>.md``;
- milestones ``left/projects/<project>/BLOCKS.md`` or ``daily/<date>.md``;
- signals ``amygdala/<stamp>-<severity>-<slug>.md``;
- the keeper's feed files ``brain-feed/*.md``, per-project intents
  ``brain-feed/projects/<repo slug or key>/intent.md``, inject blocks
  ``brain-feed/inject/<id>.md``;
- the keeper's pages for people: ``brain-feed/projects/<id>/INDEX.md`` (one
  project's memory, linked) and ``brain-feed/PROJECTS.md`` (every project).

``kind_of_path`` says which kind of index entry a file holds; a full rebuild
walks ``INDEXED_PREFIXES`` only. Upstream vaults keep arcs in the region
folders too (``bridge``, ``left``, ``right``, ``frontal-lobe``, ``pineal``,
``amygdala``): a dated document there is an arc, another one is a
``region`` document, an arc only when its frontmatter has a ``cluster_id``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from brain_core.text import slugify

CLUSTERS_DIR = "clusters"
LESSONS_DIR = "left/reference"
DECISIONS_DIR = "left/decisions"
PROJECTS_DIR = "left/projects"
SIGNALS_DIR = "amygdala"
DAILY_DIR = "daily"
INBOX_DIR = "raw/inbox"
FEED_DIR = "brain-feed"
FLEET_INTENT_FILE = f"{FEED_DIR}/intent.md"
SIGNALS_FILE = f"{FEED_DIR}/signals.md"
HOT_ARCS_FILE = f"{FEED_DIR}/hot-arcs.md"
INJECT_FILE = f"{FEED_DIR}/inject.md"
LESSONS_FILE = f"{FEED_DIR}/lessons.md"
LAST_TICK_DIFF_FILE = f"{FEED_DIR}/last-tick-diff.md"
LEGACY_FEED_FILES = (f"{FEED_DIR}/inject-blocks.md",)  # written by earlier kernel versions; a tick removes them
INJECT_DIR = f"{FEED_DIR}/inject"
PROJECT_INTENT_DIR = f"{FEED_DIR}/projects"
PROJECTS_ROUTER_FILE = f"{FEED_DIR}/PROJECTS.md"
TOMBSTONE_SUFFIX = ".merged.md"

# Where an operator keeps the backfill's dry run and audit (docs/operations.md; the attribution page reads the dry run).
BACKFILL_DIR = "raw/backfill"

# The folders ``brain serve`` scaffolds in a new vault (the backfill's, so the documented `> .../dry-run.jsonl` works).
SCAFFOLD = (CLUSTERS_DIR, LESSONS_DIR, DECISIONS_DIR, PROJECTS_DIR, SIGNALS_DIR, DAILY_DIR, FEED_DIR, INBOX_DIR, BACKFILL_DIR)

# The region folders upstream's tick scans recursively (UPSTREAM.md 4.1): arcs live there too.
REGION_DIRS = ("bridge", "left", "right", "frontal-lobe", "pineal", SIGNALS_DIR)

# Folders (and files) a full rebuild walks; files outside them hold no entries.
INDEXED_PREFIXES = (
    CLUSTERS_DIR,
    *REGION_DIRS,
    DAILY_DIR,
    FLEET_INTENT_FILE,
    PROJECT_INTENT_DIR,
    INJECT_DIR,
)

_ARC = re.compile(rf"^{CLUSTERS_DIR}/(?:[^/]+/)*[^/]+\.md$")
_LESSONS = re.compile(rf"^{re.escape(LESSONS_DIR)}/lessons-[^/]+\.md$")
_DECISION = re.compile(rf"^{re.escape(DECISIONS_DIR)}/ADR-[^/]+\.md$", re.I)
_SIGNAL = re.compile(rf"^{re.escape(SIGNALS_DIR)}/[^/]+\.md$")
_DAILY = re.compile(rf"^{re.escape(DAILY_DIR)}/[^/]+\.md$")
_PROJECT_INTENT = re.compile(rf"^{re.escape(PROJECT_INTENT_DIR)}/.+/intent\.md$")
_INJECT = re.compile(rf"^{re.escape(INJECT_DIR)}/[^/]+\.md$")
_REGION_DOC = re.compile(rf"^(?:{'|'.join(re.escape(d) for d in REGION_DIRS)})/(?:[^/]+/)*(?!_)(?!README\.md$)[^/]+\.md$")
_DATED_NAME = re.compile(r"\d{4}-\d{2}-\d{2}")
BLOCKS_PATH = re.compile(rf"^{re.escape(PROJECTS_DIR)}/([^/]+)/BLOCKS\.md$")
_ADR_NAME = re.compile(r"^ADR-(\d+)(?:[-_.]|$)", re.I)
LOG_KINDS = ("lesson", "milestone")  # kinds whose files are shared logs of many entries


def _day(at: dt.datetime) -> str:
    return at.astimezone(dt.timezone.utc).date().isoformat()


def arc_path(date: str, cluster_id: str) -> str:
    """Where a new arc goes: ``clusters/<date>/<cluster_id>.md``."""
    return f"{CLUSTERS_DIR}/{date}/{cluster_id}.md"


def is_tombstone(vault_path: str) -> bool:
    """True for ``<id>.merged.md``: an arc merged into another."""
    return vault_path.endswith(TOMBSTONE_SUFFIX)


def lesson_path(at: dt.datetime) -> str:
    """The day's lesson log."""
    return f"{LESSONS_DIR}/lessons-{_day(at)}.md"


def milestone_path(project: str | None, at: dt.datetime) -> str:
    """Where a milestone goes: the project's BLOCKS.md when known, else the daily note."""
    if project:
        return f"{PROJECTS_DIR}/{project}/BLOCKS.md"
    return f"{DAILY_DIR}/{_day(at)}.md"


def signal_path(title: str, severity: str, at: dt.datetime, attempt: int = 1) -> str:
    """A signal file name, upstream's ``<YYYYMMDDTHHMMSSZ>-<severity>-<slug>.md``; attempts after the first get a
    ``-<n>`` suffix (collisions)."""
    suffix = "" if attempt <= 1 else f"-{attempt}"
    when = at.astimezone(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{SIGNALS_DIR}/{when}-{severity}-{slugify(title)}{suffix}.md"


def decision_path(number: int, title: str) -> str:
    """The file of ADR ``number``."""
    return f"{DECISIONS_DIR}/ADR-{number:04d}-{slugify(title)}.md"


def adr_number(name: str) -> int | None:
    """The number in an ``ADR-NNNN-...`` file name, or None."""
    match = _ADR_NAME.match(name.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def project_intent_path(project_id: str) -> str:
    """Where a project's intent lives: ``brain-feed/projects/<repo slug, else key>/intent.md``."""
    return f"{PROJECT_INTENT_DIR}/{project_id}/intent.md"


def project_index_path(project_id: str) -> str:
    """A project's index page, beside its intent: ``brain-feed/projects/<repo slug, else key>/INDEX.md``."""
    return f"{PROJECT_INTENT_DIR}/{project_id}/INDEX.md"


def blocks_project(vault_path: str) -> str | None:
    """The project folder name of a ``left/projects/<p>/BLOCKS.md`` path, else None."""
    match = BLOCKS_PATH.match(vault_path)
    return match.group(1) if match else None


def is_arc(kind: str | None, meta: Mapping[str, Any]) -> bool:
    """Upstream's is-arc for a file already read: an arc by its path (``kind``, from ``kind_of_path``), or a
    document with a ``cluster_id`` that is not a signal (an incident arc in amygdala/, an undated region arc)."""
    return kind == "arc" or bool(meta.get("cluster_id") and meta.get("type") != "signal")


def kind_of_path(vault_path: str) -> str | None:
    """The kind of entries a vault file holds, or None when it holds none."""
    if _ARC.match(vault_path):
        return "arc"
    if _LESSONS.match(vault_path):
        return "lesson"
    if _DECISION.match(vault_path):
        return "decision"
    if _SIGNAL.match(vault_path):
        return "signal"
    if BLOCKS_PATH.match(vault_path) or _DAILY.match(vault_path):
        return "milestone"
    if vault_path == FLEET_INTENT_FILE or _PROJECT_INTENT.match(vault_path):
        return "intent"
    if _INJECT.match(vault_path):
        return "inject"
    if _REGION_DOC.match(vault_path):
        # Upstream's is-arc: a dated file name, or (read from the file) a cluster_id.
        return "arc" if _DATED_NAME.search(vault_path.rsplit("/", 1)[-1]) else "region"
    return None
