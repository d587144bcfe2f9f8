"""Where documents live and move in the keeper's regions (pure): the scan set, the inbox drain, promotion,
demotion and graduation.

The scan (UPSTREAM.md 5.4 step 1) reads the region folders (``bridge``,
``left``, ``right``, ``frontal-lobe``, ``pineal``, ``amygdala``) and then
``clusters/<date>/``. ``_*`` files are skipped; in one folder a file is
suppressed when a ``.merged.md`` tombstone of the same canonical id (the
name without ``.md`` and every trailing ``.merged``) sits beside it; an arc
seen twice (an upstream promotion left a copy) counts once, the region copy
first. ``live_paths`` is that selection, shared by the keeper and a full
rebuild of the index, so both see the same documents.

Arcs move, never copy (upstream copied, UPSTREAM.md 8 item 8):

- working memory is ``clusters/`` and ``frontal-lobe/``: an arc there with
  heat at least PROMOTE moves to ``frontal-lobe/conscious/``; one in
  ``conscious/`` whose heat falls below DEMOTE moves to
  ``frontal-lobe/unconscious/`` (between the two it stays, so an arc hovering
  at a threshold does not move every tick);
- an arc cold (heat at most GRADUATE) and older than GRADUATE_AGE_DAYS
  graduates: from working memory it moves to its region's folder (``left``,
  ``right``, ``bridge``, ``amygdala``, ``pineal``), elsewhere it stays in its
  subfolder; either way it is stamped ``status: graduated``;
- arcs an operator or the inbox placed in a region folder keep their place.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from brain_core.text import text_or_none
from brain_core.vault.layout import CLUSTERS_DIR, INBOX_DIR, REGION_DIRS
from brain_core.vault.logs import valid_ref

CONSCIOUS_DIR = "frontal-lobe/conscious"
UNCONSCIOUS_DIR = "frontal-lobe/unconscious"
WORKING_MEMORY = (CLUSTERS_DIR, "frontal-lobe")
GRADUATED = "graduated"

# Region frontmatter value -> the folder an arc graduates into.
GRADUATION_DIRS = {
    "left-hemisphere": "left",
    "right-hemisphere": "right",
    "bridge": "bridge",
    "amygdala": "amygdala",
    "pineal": "pineal",
}

# Inbox note tags -> destination folder (the first tag found in this map wins; default ``left``).
INBOX_TAGS: dict[str, str] = {
    **dict.fromkeys(("architecture", "infrastructure", "deployment", "code", "bug", "fix", "ci", "database", "api", "security"), "left"),
    "research": "left/research",
    "incident": "left/incidents",
    "decision": "left/decisions",
    "reference": "left/reference",
    "idea": "right/ideas",
    "strategy": "right/strategy",
    "creative": "right/creative",
    "vision": "right",
    "risk": "right/risk",
    "life": "right/life",
    "brain-system": "bridge",
    "cross-cutting": "bridge",
}
INBOX_DEFAULT = "left"


def canonical_id(vault_path: str) -> str:
    """A document's canonical id: its file name without ``.md`` and every trailing ``.merged``."""
    name = vault_path.rsplit("/", 1)[-1]
    name = name[:-3] if name.endswith(".md") else name
    while name.endswith(".merged"):
        name = name[: -len(".merged")]
    return name


def _folder(vault_path: str) -> str:
    return vault_path.rsplit("/", 1)[0] if "/" in vault_path else ""


def _region_rank(vault_path: str) -> int:
    top = vault_path.split("/", 1)[0]
    return REGION_DIRS.index(top) if top in REGION_DIRS else len(REGION_DIRS)


@dataclass(frozen=True)
class ScanSet:
    """The scan's selection: live documents in scan order, and what it left out."""

    live: tuple[str, ...]
    suppressed: tuple[str, ...] = ()  # raw files beside their own ``.merged.md`` tombstone
    duplicates: tuple[str, ...] = ()  # second copies of an arc already seen
    tombstones: tuple[str, ...] = ()


def live_paths(paths: Iterable[str], arc_like: Iterable[str] = ()) -> ScanSet:
    """Select the documents a tick reads (module docstring); ``arc_like`` paths take part in the dedupe.

    Only documents that can be arcs are deduplicated by canonical id (log files of
    lessons or milestones never share a name with an arc).
    """
    ordered = sorted(set(paths), key=lambda p: (_region_rank(p), p))
    candidates = set(arc_like)
    tomb = {(_folder(p), canonical_id(p)) for p in ordered if p.endswith(".merged.md")}
    live: list[str] = []
    suppressed: list[str] = []
    duplicates: list[str] = []
    seen: set[str] = set()
    for path in ordered:
        name = path.rsplit("/", 1)[-1]
        if name.startswith("_") or path.endswith(".merged.md"):
            continue
        if (_folder(path), canonical_id(path)) in tomb:
            suppressed.append(path)
            continue
        if path in candidates:
            cid = canonical_id(path)
            if cid in seen:
                duplicates.append(path)
                continue
            seen.add(cid)
        live.append(path)
    return ScanSet(tuple(live), tuple(suppressed), tuple(duplicates), tuple(p for p in ordered if p.endswith(".merged.md")))


def in_working_memory(vault_path: str) -> bool:
    """True for ``clusters/...`` and ``frontal-lobe/...`` paths, where heat moves arcs."""
    return vault_path.split("/", 1)[0] in WORKING_MEMORY


def graduation_dir(region: Any) -> str:
    """The folder an arc of ``region`` graduates into (``left`` for anything unknown)."""
    return GRADUATION_DIRS.get(str(region or "").strip().lower(), "left")


@dataclass(frozen=True)
class Placement:
    """Where an arc goes this tick: its new path (None: it stays) and why."""

    path: str | None = None
    action: str | None = None  # "promote", "demote", "graduate"
    graduate: bool = False  # stamp ``status: graduated``


def place(
    vault_path: str, *, heat: int, status: str | None, age_days: int | None, region: Any, promote: int, demote: int, graduate: int, graduate_age_days: int
) -> Placement:
    """The move (if any) of one arc under the rules of the module docstring."""
    name = vault_path.rsplit("/", 1)[-1]
    working = in_working_memory(vault_path)
    if status != GRADUATED and heat <= graduate and age_days is not None and age_days > graduate_age_days:
        target = f"{graduation_dir(region)}/{name}" if working else None
        return Placement(target, "graduate", graduate=True)
    if not working or status == GRADUATED:
        return Placement()
    folder = _folder(vault_path)
    if heat >= promote and folder != CONSCIOUS_DIR:
        return Placement(f"{CONSCIOUS_DIR}/{name}", "promote")
    if folder == CONSCIOUS_DIR and heat < min(demote, promote):
        return Placement(f"{UNCONSCIOUS_DIR}/{name}", "demote")
    return Placement()


def _tags(meta: Mapping[str, Any]) -> list[str]:
    raw = meta.get("tags")
    if isinstance(raw, str):
        values: Sequence[Any] = raw.split(",")
    elif isinstance(raw, (list, tuple)):
        values = raw
    else:
        values = []
    return [str(v).strip().lstrip("#").lower() for v in values if str(v).strip()]


def inbox_destination(meta: Mapping[str, Any]) -> str:
    """The folder an inbox note moves to: the first of its tags found in ``INBOX_TAGS``, else ``left``."""
    return next((INBOX_TAGS[t] for t in _tags(meta) if t in INBOX_TAGS), INBOX_DEFAULT)


INBOX_SOURCE = "inbox"  # an arc's ``project_source`` when its project is the one its inbox note named


def drained_changes(meta: Mapping[str, Any], folder: str) -> dict[str, Any]:
    """The frontmatter keys an inbox note gets as it moves to ``folder``: its region, ``status: active`` when it has
    none and, when it names a project and is not attributed yet, ``projects`` and ``project_source``.

    In the inbox a note's ``project``/``repo`` are what its inline markers count for (a scoped token's note is its
    project's, ADR 0033). In a region folder it reads as an arc, and an arc's ``project`` is trusted only beside
    ``projects`` or ``project_source`` (upstream wrote a folder's basename there), so without them the note and
    its markers would turn fleet-wide the moment it moved.
    """
    changes: dict[str, Any] = {"region": region_of_folder(folder)} if meta.get("region") != region_of_folder(folder) else {}
    if not meta.get("status"):
        changes["status"] = "active"
    project, _repo = valid_ref(text_or_none(meta.get("project")), text_or_none(meta.get("repo")))
    if project is not None and "projects" not in meta and "project_source" not in meta:
        changes["projects"] = [project.lower()]
        changes["project_source"] = INBOX_SOURCE
    return changes


def region_of_folder(folder: str) -> str:
    """The ``region`` value of a note drained into ``folder``."""
    top = folder.split("/", 1)[0]
    return {"left": "left-hemisphere", "right": "right-hemisphere"}.get(top, top)


_INBOX_NOTE = re.compile(rf"^{re.escape(INBOX_DIR)}/(?!_)(?!README\.md$)[^/]+\.md$", re.I)


def is_inbox_note(vault_path: str) -> bool:
    """A note waiting in ``raw/inbox/`` (not a README or an ``_`` file)."""
    return bool(_INBOX_NOTE.match(vault_path))


def clash_free(name: str, taken: bool, stamp: str) -> str:
    """``name`` or, when ``taken``, ``<stem>-<stamp>.md`` (upstream's ``-HHMMSS``)."""
    if not taken:
        return name
    stem = name[:-3] if name.endswith(".md") else name
    return f"{stem}-{stamp}.md"
