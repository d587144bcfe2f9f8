"""Backfill decisions (pure): the project of an existing arc, from what its sessions' evidence says now.

``brain backfill`` (``brain_ops.backfill.evidence``) gathers one ``SessionEvidence`` per
source session (the session index, the transcript found by id, the folder the
arc's own session table records) and hands them here:

* ``decide`` picks the arc's projects. Every project a session resolves to is
  kept; the primary is the one with most sessions, then most activity (the
  turns the arc recorded), then the smaller id, so a rerun decides the same.
  A session known only by its key (layout, catalog) joins the one repository
  of that key among the arc's sessions, as clustering does.
* No session resolving: the arc's legacy ``project:`` counts when it names
  exactly one known project (``legacy``, ADR 0012); else, when every session
  says "no project" (the home folder, a folder on disk outside any
  repository), the label is **cleared**, since a wrong project leaks memory;
  else no evidence survives and the arc is **unverifiable**: left as it is.
  An arc with no source sessions is a knowledge arc and stays unattributed.
* ``arc_changes`` turns a decision into edits of the five project keys only
  (``ARC_PROJECT_KEYS``), none when the file already says it: lists compare as
  sets (a merge's order is kept), and a ``project_source`` alone is never
  rewritten when the projects stand (the first run's evidence may since have
  reached the session index; the answer is the same).
* ``session_table`` reads the arc body's ``## Sessions`` table (folder and
  turns per session), which ``brain cluster`` writes.
* ``unattributed_markers`` lists a marker file's entries that name a session
  and no project; ``retag_markers`` writes their attribution (a log entry's
  tag and ``brain`` comment, a signal or decision file's project keys) and
  gives the text back only when the file's index rows then differ in exactly
  that attribution (same ids, titles, contents): no edit can change more.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from brain_core.entries import EntryRecord
from brain_core.identity import SOURCES, ProjectIdentity
from brain_core.markers import Attribution
from brain_core.membership import KnownProject, carriers
from brain_core.text import text_or_none
from brain_core.vault import frontmatter
from brain_core.vault.layout import LOG_KINDS, is_arc, kind_of_path
from brain_core.vault.logs import LogEntry, retag_entry
from brain_core.vault.records import decision_record, log_entries, signal_record_of

ARC_PROJECT_KEYS = ("project", "projects", "repo", "worktrees", "project_source")
LEGACY = "legacy"
UNRESOLVED = "unresolved"
RESOLVED, CLEARED, UNVERIFIABLE, KNOWLEDGE = "resolved", "cleared", "unverifiable", "knowledge"
_LIST_KEYS = ("projects", "worktrees")


@dataclass(frozen=True)
class SessionEvidence:
    """What is known of one source session: an identity (unresolved = evidence of no project) or None (nothing survives)."""

    session_id: str
    identity: ProjectIdentity | None
    activity: float = 0.0


@dataclass(frozen=True)
class ArcDecision:
    """The projects an arc holds after the backfill, and the evidence that decided."""

    outcome: str
    project: str | None = None
    projects: tuple[str, ...] = ()
    repo: str | None = None
    worktrees: tuple[str, ...] = ()
    source: str | None = None
    sessions_used: tuple[str, ...] = ()

    def values(self) -> dict[str, Any]:
        """The five keys as the arc's frontmatter should hold them."""
        return {
            "project": self.project,
            "projects": list(self.projects),
            "repo": self.repo,
            "worktrees": list(self.worktrees),
            "project_source": self.source,
        }


def source_sessions(meta: Mapping[str, Any]) -> list[str]:
    """The arc's source session ids, in file order, without blanks or repeats."""
    raw = meta.get("source_sessions")
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        return []
    return list(dict.fromkeys(str(s).strip() for s in raw if s is not None and str(s).strip()))


def legacy_label(meta: Mapping[str, Any]) -> str | None:
    """An upstream arc's basename ``project:`` (no ``projects``, no ``project_source``), lower case; else None."""
    if "projects" in meta or "project_source" in meta:
        return None
    label = text_or_none(meta.get("project"))
    return label.strip().lower() if label else None


def legacy_project(meta: Mapping[str, Any], known: Iterable[KnownProject]) -> KnownProject | None:
    """The one known project (key or alias) a legacy label names, else None (ADR 0012's ``legacy`` rule)."""
    label = legacy_label(meta)
    if label is None:
        return None
    found = carriers(label, known)
    return found[0] if len(found) == 1 else None


def _strongest(sources: Iterable[str]) -> str:
    present = set(sources)
    return next((s for s in SOURCES if s in present), UNRESOLVED)


def decide(evidence: Sequence[SessionEvidence], *, legacy: KnownProject | None = None) -> ArcDecision:
    """The arc's projects from its sessions' evidence (module docstring)."""
    if not evidence:
        return ArcDecision(KNOWLEDGE)
    resolved = [e for e in evidence if e.identity is not None and e.identity.project]
    if not resolved:
        if legacy is not None:
            return ArcDecision(RESOLVED, legacy.key, (legacy.key,), legacy.repo, (), LEGACY)
        if all(e.identity is not None for e in evidence):
            return ArcDecision(CLEARED, source=UNRESOLVED, sessions_used=tuple(e.session_id for e in evidence))
        return ArcDecision(UNVERIFIABLE)
    repos_of_key: dict[str, set[str]] = {}
    for e in resolved:
        assert e.identity is not None and e.identity.project is not None
        if e.identity.repo:
            repos_of_key.setdefault(e.identity.project, set()).add(e.identity.repo)
    groups: dict[str, list[SessionEvidence]] = {}
    repo_of: dict[str, str | None] = {}
    for e in resolved:
        ident = e.identity
        assert ident is not None and ident.project is not None
        repo = ident.repo
        if repo is None and len(repos_of_key.get(ident.project, ())) == 1:
            repo = next(iter(repos_of_key[ident.project]))
        gid = repo or ident.project
        groups.setdefault(gid, []).append(e)
        repo_of[gid] = repo
    ranked = sorted(groups, key=lambda g: (-len(groups[g]), -sum(e.activity for e in groups[g]), g))
    primary = ranked[0]
    members = groups[primary]
    key = members[0].identity.project  # type: ignore[union-attr]
    projects = sorted({e.identity.project for e in resolved})  # type: ignore[union-attr,misc]
    worktrees = sorted({e.identity.worktree for e in resolved if e.identity.worktree})  # type: ignore[union-attr,misc]
    return ArcDecision(
        RESOLVED,
        key,
        tuple(projects),  # type: ignore[arg-type]
        repo_of[primary],
        tuple(worktrees),  # type: ignore[arg-type]
        _strongest(e.identity.source for e in members),  # type: ignore[union-attr]
        tuple(e.session_id for e in resolved),
    )


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None and str(v) != ""]
    return [str(value)] if str(value) else []


def arc_changes(meta: Mapping[str, Any], decision: ArcDecision) -> dict[str, Any]:
    """The edits of ``ARC_PROJECT_KEYS`` that make the arc say ``decision``; {} when it already does."""
    if decision.outcome not in (RESOLVED, CLEARED):
        return {}
    wanted = decision.values()
    old_project = text_or_none(meta.get("project"))
    same_projects = (
        (old_project or None) == wanted["project"]
        and set(_as_list(meta.get("projects"))) == set(wanted["projects"])
        and (text_or_none(meta.get("repo")) or None) == wanted["repo"]
        and set(_as_list(meta.get("worktrees"))) == set(wanted["worktrees"])
    )
    if same_projects and text_or_none(meta.get("project_source")):
        return {}
    changes: dict[str, Any] = {}
    for key in ARC_PROJECT_KEYS:
        old = meta.get(key)
        new = wanted[key]
        if key in _LIST_KEYS:
            if set(_as_list(old)) == set(new) and (old is not None or not new):
                continue
        elif (text_or_none(old) if isinstance(old, str) else old) == new:
            continue
        changes[key] = new
    if changes:  # an arc whose project keys are written holds all five (an upstream arc becomes a kernel one)
        for key in _LIST_KEYS:
            if key not in meta and key not in changes:
                changes[key] = wanted[key]
    return changes


def edit_arc(text: str, doc: frontmatter.Document, changes: Mapping[str, Any]) -> tuple[str, frontmatter.Document]:
    """The arc's text with ``changes`` applied to its frontmatter and every other byte as it was, and its document
    (``doc`` is the parse of ``text``; the edited one is derived, not parsed again, when the codec can)."""
    return frontmatter.edit(text, doc, dict(changes))


def old_values(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The five keys as the file holds them (absent keys as None), for the audit log."""
    return {key: meta.get(key) for key in ARC_PROJECT_KEYS}


# -- the arc body's session table (``brain_core.arcs.arc_body``) -----------------------------

_CELL_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True)
class TableRow:
    """One session as the arc's table recorded it."""

    folder: str | None
    turns: float


def _cells(line: str) -> list[str]:
    inner = line.strip()
    if not (inner.startswith("|") and inner.endswith("|")):
        return []
    return [c.strip().replace("\\|", "|") for c in _CELL_SPLIT.split(inner[1:-1])]


def session_table(body: str) -> dict[str, TableRow]:
    """Session id -> (folder, turns) from the body's ``| Session | Agent | ...`` table; {} when there is none."""
    out: dict[str, TableRow] = {}
    columns: list[str] | None = None
    for line in body.splitlines():
        cells = _cells(line)
        if not cells:
            columns = None
            continue
        if columns is None:
            if cells and cells[0] == "Session" and "Folder" in cells:
                columns = cells
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue  # the separator row
        row = dict(zip(columns, cells, strict=False))
        sid = row.get("Session")
        if not sid:
            continue
        try:
            turns = float(row.get("Turns") or 0)
        except ValueError:
            turns = 0.0
        out.setdefault(sid, TableRow(row.get("Folder") or None, turns))
    return out


# -- markers naming only a session (``--rewrite-markers``) -------------------------------------

MARKER_KINDS = ("lesson", "milestone", "signal", "decision")
_ATTRIBUTION_META = ("project_source", "worktree")


def _marker_records(vault_path: str, text: str) -> list[tuple[EntryRecord, LogEntry | None]]:
    kind = kind_of_path(vault_path)
    if kind in LOG_KINDS:
        return list(log_entries(kind, text, vault_path))
    if kind == "decision":
        return [(decision_record(text, vault_path), None)]
    if kind == "signal":
        doc = frontmatter.parse(text)
        if is_arc(kind, doc.meta):
            return []  # an upstream incident arc: the arc backfill's
        return [(signal_record_of(doc, vault_path), None)]
    return []


def unattributed_markers(vault_path: str, text: str) -> list[tuple[EntryRecord, LogEntry | None]]:
    """The entries of a marker file (lesson or milestone log, signal, decision) with a session id and no project."""
    return [
        (r, e)
        for r, e in _marker_records(vault_path, text)
        if r.project is None and not r.projects and r.scope == "project" and isinstance(r.meta.get("session_id"), str)
    ]


def _unattributed(record: EntryRecord) -> EntryRecord:
    meta = {k: v for k, v in record.meta.items() if k not in _ATTRIBUTION_META}
    return replace(record, project=None, projects=(), repo=None, meta=meta)


def retag_markers(vault_path: str, text: str, chosen: Sequence[tuple[EntryRecord, LogEntry | None, Attribution]]) -> str | None:
    """The file's text with each chosen entry attributed (module docstring); None when the edit would change more."""
    new = text
    for _, entry, who in chosen:
        if entry is not None:
            new = retag_entry(new, entry, who)
        else:
            keys = {"project": who.project, "repo": who.repo, "project_source": who.source, "worktree": who.worktree}
            new = frontmatter.update(new, {k: v for k, v in keys.items() if v is not None})
    before = {r.id: r for r, _ in _marker_records(vault_path, text)}
    after = {r.id: r for r, _ in _marker_records(vault_path, new)}
    wanted = {record.id: who for record, _, who in chosen}
    if set(before) != set(after):
        return None
    for rid, old in before.items():
        got = after[rid]
        if rid not in wanted:
            if got != old:
                return None
        elif got.project != wanted[rid].project or _unattributed(got) != _unattributed(old):
            return None
    return new
