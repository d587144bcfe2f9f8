"""Index records from vault files (pure): every ``*_record`` parser, and the one dispatch over them.

``records_for(vault_path, text)`` is the single entry both the full
``brain reindex`` and the incremental refresh after a write use, so the two
give the same rows by construction: a file's rows depend on its path and
text only. The request path builds a marker's row by parsing the text it
just rendered with these same functions. ``project_activity`` derives the
projects table (key, repo, last activity) from the same rows, so a wiped
index comes back whole from the vault alone.

Old files stay readable: arcs written before projects existed read as
unattributed (their basename ``project`` kept as ``legacy_project``), old
untagged log headers as unattributed entries, flat frontmatter through the
codec's lenient reader.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import itertools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from brain_core import curation
from brain_core.arcs import arc_last_active
from brain_core.entries import EntryRecord, entry_id
from brain_core.keys import InvalidKey, normalise_slug, parse_project_ref
from brain_core.markers import DEFAULT_SEVERITY, default_title
from brain_core.membership import DONE_PARENT_STATUSES, inject_is_fleet
from brain_core.text import storable, text_or_none
from brain_core.times import iso, parse_time
from brain_core.vault import frontmatter
from brain_core.vault.inline import parse_markers
from brain_core.vault.layout import FLEET_INTENT_FILE, LOG_KINDS, adr_number, blocks_project, is_arc, is_tombstone, kind_of_path
from brain_core.vault.logs import LogEntry, MarkerKey, occurred_at, split_log, valid_ref

ACTIVITY_KINDS = ("arc", "lesson", "decision", "signal", "milestone")
# Upstream's stamp ``20261129T110000Z``, and ``20261129-110000`` that earlier kernels wrote.
_SIGNAL_NAME = re.compile(r"^(\d{8})(?:T(\d{6})Z|-(\d{6}))-([a-z0-9_]+)-")


# -- log entries (lessons, milestones) ------------------------------------------


def _entry_meta(meta: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """The JSONB metadata of a row: the marker's id and provenance, strings only."""
    out: dict[str, Any] = {}
    marker_id = meta.get("marker_id") or meta.get("id")  # files: ``marker_id`` (``id`` is upstream's name); logs: ``id``
    if marker_id:
        out["marker_id"] = str(marker_id)
    for name in ("session_id", "source", "worktree", "project_source", "target", "scope", "status", *MarkerKey.FIELDS):
        value = meta.get(name)
        if isinstance(value, str) and value:
            out[name] = value
    out.update(_curation_meta(meta))
    commit, paths = meta.get("commit"), meta.get("paths")
    if isinstance(commit, str) and commit:  # what the code was when it was written (ADR 0042): staleness
        out["commit"] = commit
        if isinstance(paths, list) and paths and all(isinstance(p, str) for p in paths):
            out["paths"] = paths
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


_CURATION_TEXT = (
    "retracted_reason",
    "retracted_by",
    "retracted_at",
    "superseded_at",
    "superseded_by_token",
    curation.STATUS_BEFORE,
    "reinstated_at",
    "reinstated_by",
    "reinstated_after",
    "expired_reason",
    "expired_by",
    "expired_recorded_at",
)


def _curation_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """What an entry's text says of its curation (ADR 0048): the ids it supersedes, when it expires, and (a file's
    frontmatter) who retracted or superseded it. Values are normalised so the index compares them as text."""
    out: dict[str, Any] = {}
    refs = curation.supersedes_refs(meta.get("supersedes"))
    if refs:
        out["supersedes"] = list(refs)
    until = parse_time(meta.get("valid_until"))
    if until is not None:
        out["valid_until"] = iso(until)
    successors = curation.supersedes_refs(meta.get("superseded_by"))
    if successors:
        out["superseded_by"] = list(successors)
    for name in _CURATION_TEXT:
        value = text_or_none(meta.get(name))
        if value:
            out[name] = value[: curation.MAX_REASON_CHARS]
    return out


@dataclass
class _Curated:
    """What the curation records of one log say of one entry: retracted (by whom, when, why), superseded by whom,
    reinstated after which retracted successor, expired early (ADR 0048, 0060)."""

    retracted: dict[str, str] | None = None
    successors: list[str] = field(default_factory=list)
    superseded_at: str | None = None
    superseded_by_token: str | None = None
    reinstated: dict[str, str] | None = None
    expired: dict[str, str] | None = None


def _curated_entries(entries: Iterable[LogEntry], vault_path: str) -> dict[str, _Curated]:
    """Entry id -> its state, from the curation records appended to its log (read in order; the first retraction
    stands; a successor's retraction takes it off the list; the earliest expiry stands)."""
    out: dict[str, _Curated] = {}
    for entry in entries:
        meta = entry.meta
        target = meta.get("entry")
        if meta.get("kind") != curation.CURATION or not isinstance(target, str):
            continue
        at = occurred_at(entry.stamp, vault_path)
        state = out.setdefault(target, _Curated())
        action = meta.get("action")
        by = str(meta.get("by") or "")
        if action == curation.RETRACTED and state.retracted is None:
            state.retracted = {"retracted_reason": entry.content.strip()[: curation.MAX_REASON_CHARS], "retracted_by": by}
            if at is not None:
                state.retracted["retracted_at"] = iso(at) or ""
        elif action == curation.SUPERSEDED and isinstance(successor := meta.get("superseded_by"), str) and successor not in state.successors:
            if not state.successors:  # superseded again after a reinstatement: the new supersession's moment
                state.superseded_at, state.superseded_by_token = iso(at), text_or_none(meta.get("by"))
            state.successors.append(successor)
        elif action in (curation.REINSTATED, curation.SUCCESSOR_RETRACTED) and isinstance(gone := meta.get("successor"), str) and gone in state.successors:
            state.successors.remove(gone)
            if not state.successors:
                state.reinstated = {"reinstated_at": iso(at) or "", "reinstated_by": by, "reinstated_after": gone}
        elif (
            action == curation.EXPIRED
            and (until := iso(parse_time(meta.get("valid_until"))))
            and (state.expired is None or until < state.expired["valid_until"])
        ):
            reason = entry.content.strip()[: curation.MAX_REASON_CHARS]
            state.expired = {"valid_until": until, "expired_reason": reason, "expired_by": by, "expired_recorded_at": iso(at) or ""}
    return out


def _with_curation(record: EntryRecord, state: _Curated | None) -> EntryRecord:
    """``record`` with what its log's curation records say: status ``retracted`` or ``superseded``, and who and why."""
    if state is None:
        return record
    meta = dict(record.meta)
    if state.successors:
        meta["superseded_by"] = list(state.successors)
    if state.successors or state.reinstated:  # a reinstated entry's history still shows its supersession
        meta.update({k: v for k, v in (("superseded_at", state.superseded_at), ("superseded_by_token", state.superseded_by_token)) if v})
    if state.reinstated and not state.successors:
        meta.update({k: v for k, v in state.reinstated.items() if v})
    if state.expired is not None and not (meta.get("valid_until") and meta["valid_until"] <= state.expired["valid_until"]):
        meta.update({k: v for k, v in state.expired.items() if v})  # an early expiry never extends the entry's own
    if state.retracted is not None:
        meta.update({k: v for k, v in state.retracted.items() if v})
        return replace(record, status=curation.RETRACTED, meta=meta)
    if state.successors:
        return replace(record, status=curation.SUPERSEDED, meta=meta)
    return replace(record, meta=meta)


def _log_record(kind: str, entry: LogEntry, vault_path: str, project: str | None, repo: str | None) -> EntryRecord:
    anchor = f"id:{entry.meta['id']}" if entry.meta.get("id") else f"header:{entry.anchor}#{entry.ordinal}"
    return EntryRecord(
        id=entry_id(kind, vault_path, anchor),
        kind=kind,
        vault_path=vault_path,
        title=entry.title or default_title(entry.content),
        content=entry.content,
        project=project,
        repo=repo if project else None,
        scope="project",
        occurred_at=occurred_at(entry.stamp, vault_path),
        meta=_entry_meta(entry.meta),
    )


@functools.lru_cache(maxsize=2)
def _log_split(kind: str, text: str, vault_path: str) -> tuple[tuple[tuple[EntryRecord, LogEntry], ...], tuple[LogEntry, ...]]:
    """The rows of a shared log with the entries they come from, and the entries left out (frozen; the last
    two logs are kept, since a rebuild asks for a log's rows, their line spans and what was left out: a
    year's day log is split once, not three times).

    Lessons: every entry; old untagged headers are unattributed. Milestones:
    in ``left/projects/<p>/BLOCKS.md`` every entry is a milestone of ``p``
    unless its own tag names the project or says ``[unattributed]``; in a daily note only entries marked
    as milestones (``brain`` comment, a header saying "milestone", or upstream's ``- [x] <ISO> — ...``
    line, UPSTREAM.md 1.6) count.
    An entry whose header stamp no calendar holds (``2026-13-45T99:99:99Z``,
    year 99999: a hand edit) is left out and reported, never a reason to drop
    the rest of the file (ADR 0021).
    """
    folder = blocks_project(vault_path) if kind == "milestone" else None
    path_project = valid_ref(folder, None)[0] if folder else None
    out = []
    left_out = []
    entries = split_log(text, checkboxes=kind == "milestone")
    curated = _curated_entries(entries, vault_path)
    for entry in entries:
        if entry.meta.get("kind") == curation.CURATION:  # a record of another entry's state, no entry of its own
            continue
        if kind == "milestone" and folder is None and not entry.checkbox and entry.meta.get("kind") != "milestone" and "milestone" not in entry.header.lower():
            continue
        if entry.stamp and occurred_at(entry.stamp, vault_path) is None:
            left_out.append(entry)
            continue
        # A marker posted with no project that upstream's routing put in left/projects/<slug(source)>/ says
        # [unattributed]: the folder names its source, not its project, so it stays unattributed.
        project, repo = (entry.project, entry.repo) if entry.project or entry.unattributed else (path_project, None)
        record = _log_record(kind, entry, vault_path, project, repo)
        out.append((_with_curation(record, curated.get(record.id)), entry))
    return tuple(out), tuple(left_out)


def _log_entries(kind: str, text: str, vault_path: str) -> tuple[tuple[EntryRecord, LogEntry], ...]:
    """The rows of a shared log with the entries they come from (``_log_split``)."""
    return _log_split(kind, text, vault_path)[0]


def skipped_entries(vault_path: str, text: str) -> list[str]:
    """What a lesson or milestone log's rows left out (an unreadable header stamp), one line each for a rebuild's report."""
    kind = kind_of_path(vault_path)
    if kind not in LOG_KINDS:
        return []
    return [f"line {entry.first_line}: unreadable stamp {entry.stamp!r}" for entry in _log_split(kind, text, vault_path)[1]]


def log_entries(kind: str, text: str, vault_path: str) -> tuple[tuple[EntryRecord, LogEntry], ...]:
    """The rows of a lesson or milestone log, each with the entry it comes from (what ``retag_entry`` edits)."""
    return _log_entries(kind, text, vault_path)


def lesson_records(text: str, vault_path: str) -> list[EntryRecord]:
    """Index rows of a lesson log (or of one rendered entry); old untagged headers are unattributed."""
    return [record for record, _ in _log_entries("lesson", text, vault_path)]


def milestone_records(text: str, vault_path: str) -> list[EntryRecord]:
    """Index rows of milestones in a project's BLOCKS.md or a daily note (see ``_log_entries``)."""
    return [record for record, _ in _log_entries("milestone", text, vault_path)]


# -- files with frontmatter (signals, decisions) -----------------------------------


def _body_without_heading(body: str) -> tuple[str | None, str]:
    """(first ``# `` heading text or None, the rest) of a file body."""
    text = body.strip("\n")
    first, _, rest = text.partition("\n")
    if first.startswith("# "):
        return first[2:].strip(), rest.strip("\n")
    return None, text


def _created(meta: Mapping[str, Any], vault_path: str) -> dt.datetime | None:
    created = text_or_none(meta.get("created")) or text_or_none(meta.get("date")) or text_or_none(meta.get("timestamp"))
    return occurred_at(created, vault_path) if created else None


def signal_record(text: str, vault_path: str) -> EntryRecord:
    """The index row of a signal file; ``scope: fleet`` makes it fleet-wide."""
    return signal_record_of(frontmatter.parse(text), vault_path)


def signal_record_of(doc: frontmatter.Document, vault_path: str) -> EntryRecord:
    """``signal_record`` for a file already parsed (``records_for`` reads the frontmatter first)."""
    meta = doc.meta
    heading, content = _body_without_heading(doc.body)
    name = _SIGNAL_NAME.match(vault_path.rsplit("/", 1)[-1])
    occurred = _created(meta, vault_path)
    if occurred is None and name:
        occurred = dt.datetime.strptime(name.group(1) + (name.group(2) or name.group(3)), "%Y%m%d%H%M%S").replace(tzinfo=dt.timezone.utc)
    project, repo = valid_ref(text_or_none(meta.get("project")), text_or_none(meta.get("repo")))
    scope = "fleet" if text_or_none(meta.get("scope")) == "fleet" or meta.get("fleet") is True else "project"
    status = (text_or_none(meta.get("status")) or "").lower()
    severity = (text_or_none(meta.get("severity")) or (name.group(4) if name else None) or DEFAULT_SEVERITY).lower()[:32]
    if status not in curation.WITHDRAWN:  # a signal's other states are its severity's (ADR 0048)
        # severity `resolved` is upstream's tombstone of a signal (UPSTREAM.md 4.3): no longer a current alarm, as
        # the keeper's signals.md and an inline signal read it
        status = "resolved" if severity == "resolved" else ""
    return EntryRecord(
        id=entry_id("signal", vault_path),
        kind="signal",
        vault_path=vault_path,
        title=text_or_none(meta.get("title")) or heading or default_title(content),
        content=content,
        project=project,
        repo=repo,
        scope=scope,
        severity=severity,
        status=status or None,
        occurred_at=occurred,
        meta=_entry_meta(meta),
    )


def decision_record(text: str, vault_path: str) -> EntryRecord:
    """The index row of a decision (ADR) file; the number comes from frontmatter or the name."""
    doc = frontmatter.parse(text)
    meta = doc.meta
    heading, content = _body_without_heading(doc.body)
    number = meta.get("adr") if isinstance(meta.get("adr"), int) else adr_number(vault_path)
    if heading:
        heading = re.sub(r"^ADR-\d+\s*[:\-—]\s*", "", heading, flags=re.I).strip() or None
    project, repo = valid_ref(text_or_none(meta.get("project")), text_or_none(meta.get("repo")))
    status = text_or_none(meta.get("status"))
    return EntryRecord(
        id=entry_id("decision", vault_path),
        kind="decision",
        vault_path=vault_path,
        title=text_or_none(meta.get("title")) or heading or default_title(content),
        content=content,
        project=project,
        repo=repo,
        scope="project",
        status=status.lower()[:32] if status else None,
        occurred_at=_created(meta, vault_path),
        meta=_entry_meta(meta, adr=number),
    )


# -- arcs --------------------------------------------------------------------------


def _heat(value: Any) -> float:
    """A heat read from a file: finite, else 0 (``heat: .nan`` once made the feed answer 500)."""
    try:
        heat = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return heat if math.isfinite(heat) else 0.0


def _arc_key(value: Any) -> str | None:
    """An arc's project key as marker input is validated (``../../amygdala`` is no project)."""
    text = text_or_none(value)
    if text is None:
        return None
    try:
        return parse_project_ref(text)[0]
    except InvalidKey:
        return None


def _arc_repo(value: Any) -> str | None:
    text = text_or_none(value)
    if text is None:
        return None
    try:
        return normalise_slug(text)
    except InvalidKey:
        return None


def arc_record_of(doc: frontmatter.Document, vault_path: str) -> EntryRecord | None:
    """Index entry of an arc file, already parsed (the keeper parses every arc once); None for merge tombstones.

    Attribution is trusted only from arcs written with project fields
    (``projects`` or ``project_source`` present). Older arcs carry a
    ``project`` that was the basename of a working folder, often wrong; they
    read as unattributed (kept in ``meta.legacy_project``) until the backfill
    rewrites them.
    """
    if is_tombstone(vault_path):
        return None
    meta = doc.meta
    if meta.get("merged_into"):
        return None
    attributed = "projects" in meta or "project_source" in meta
    project = _arc_key(meta.get("project")) if attributed else None
    raw_projects = meta.get("projects") if attributed else None
    projects = tuple(k for k in (_arc_key(p) for p in raw_projects) if k) if isinstance(raw_projects, list) else ()
    if project is None and projects:
        project = projects[0]
    title = text_or_none(meta.get("title")) or text_or_none(meta.get("cluster_id")) or vault_path.rsplit("/", 1)[-1][:-3]
    summary = text_or_none(meta.get("summary"))
    body = doc.body.strip()
    extra = {
        k: meta.get(k)
        for k in (
            "cluster_id",
            "region",
            "worktrees",
            "cwd",
            "git_branch",
            "project_source",
            "source_sessions",
            "signals",
            "edges",
            "synthesized",
            "created",
            "mitigates",
            "replayed_from",
            "repos",
            "merged_from",
        )
        if k in meta
    }
    extra["summary"] = summary
    if not attributed and meta.get("project"):
        extra["legacy_project"] = meta.get("project")
    return EntryRecord(
        id=entry_id("arc", vault_path),
        kind="arc",
        vault_path=vault_path,
        title=title,
        content=summary or body[:4000],
        project=project.lower() if project else None,
        projects=tuple(p.lower() for p in projects),
        repo=_arc_repo(meta.get("repo")) if attributed and project else None,
        scope="project",
        status=text_or_none(meta.get("status")),
        heat=_heat(meta.get("heat")),
        occurred_at=arc_last_active(meta),
        meta=extra,
    )


# -- inline markers (``<!-- @signal ... -->`` inside arcs and standing documents) ------------

INLINE_KINDS = {"signal": "signal", "lesson": "lesson", "decision": "decision", "milestone": "milestone", "inject": "inject"}
CLEARED = "(CLEARED:"


def content_hash(text: str) -> str:
    """The first 16 hex digits of SHA-256 over the trimmed text (how upstream dedupes markers)."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:16]


def _holder(doc: frontmatter.Document, vault_path: str, arc: EntryRecord | None) -> dict[str, Any]:
    """Project fields and dates inline markers inherit: the arc's, or what a standing document says."""
    meta = doc.meta
    if arc is not None:
        base = {"project": arc.project, "projects": arc.projects, "repo": arc.repo}
        legacy = arc.meta.get("legacy_project")
    else:
        project, repo = valid_ref(text_or_none(meta.get("project")), text_or_none(meta.get("repo")))
        base = {"project": project.lower() if project else None, "projects": (), "repo": repo if project else None}
        legacy = None
    created = parse_time(meta.get("created")) or (arc.occurred_at if arc is not None else None)
    status = text_or_none(meta.get("status"))
    extra = {"parent": text_or_none(meta.get("cluster_id")) or vault_path.rsplit("/", 1)[-1][:-3], "parent_status": status.lower() if status else None}
    if legacy:
        extra["legacy_project"] = legacy
    return {**base, "occurred_at": created, "extra": extra}


def inline_records(doc: frontmatter.Document, vault_path: str, arc: EntryRecord | None) -> list[EntryRecord]:
    """Index rows of the signal, lesson, decision, milestone and inject markers inside one document.

    Each carries the project of the arc that holds it (a standing document's
    markers are unattributed unless its frontmatter names a project), the
    parent's created date (what staleness counts from) and, for inject blocks,
    the parent's status. A resolved or ``(CLEARED: ...)`` signal is stored
    with status ``resolved``; a signal of a finished arc (resolved, graduated,
    merged) with status ``expired``.
    """
    markers = [m for m in parse_markers(doc.body) if m.type in INLINE_KINDS]
    if not markers:
        return []
    holder = _holder(doc, vault_path, arc)
    seen: dict[str, int] = {}
    out: list[EntryRecord] = []
    for marker in markers:
        kind = INLINE_KINDS[marker.type]
        text = marker.content or marker.attrs.get("text", "")
        digest = content_hash(text)
        n = seen.get(f"{kind}:{digest}", 0)
        seen[f"{kind}:{digest}"] = n + 1
        attrs = {k: v for k, v in marker.attrs.items() if k in ("source", "verify", "target", "ttl_days", "status", "scope", "date", "severity", "type")}
        meta = {**holder["extra"], **attrs, "inline": True, "body_line": marker.line, "hash": digest}
        severity = status = None
        occurred = holder["occurred_at"]
        scope = "project"
        if kind == "signal":
            severity = (marker.attrs.get("severity") or "info").lower()[:32]  # upstream lists a bare @signal as info
            if severity == "resolved" or CLEARED in text:
                status = "resolved"
            elif holder["extra"]["parent_status"] in DONE_PARENT_STATUSES:
                status = "expired"  # the arc holding it is finished: its signals no longer speak for the present
        elif kind == "milestone":
            status = (marker.attrs.get("status") or "").lower()[:32] or None
        elif kind == "decision":
            occurred = parse_time(marker.attrs.get("date")) or occurred
        elif kind == "inject":
            status = holder["extra"]["parent_status"]
            if not holder["projects"] and not holder["project"] and inject_is_fleet(meta):
                scope = "fleet"
        out.append(
            EntryRecord(
                id=entry_id(kind, vault_path, f"inline:{digest}:{n}"),
                kind=kind,
                vault_path=vault_path,
                title=default_title(text) if text else f"{marker.type} marker",
                content=text,
                project=holder["project"],
                projects=tuple(holder["projects"]),
                repo=holder["repo"],
                scope=scope,
                status=status,
                severity=severity,
                occurred_at=occurred,
                meta=meta,
            )
        )
    return out


def document_records(doc: frontmatter.Document, vault_path: str, kind: str | None) -> list[EntryRecord]:
    """The rows of an arc or a standing region document already parsed: the arc (if it is one) and its inline markers."""
    is_arc = kind == "arc" or bool(doc.meta.get("cluster_id"))
    arc = arc_record_of(doc, vault_path) if is_arc else None
    if is_arc and arc is None:  # a merge tombstone holds no live memory
        return []
    return ([arc] if arc is not None else []) + inline_records(doc, vault_path, arc)


# -- the keeper's files (intents, inject blocks) ------------------------------------


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
    fleet = vault_path == FLEET_INTENT_FILE or not project
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


# -- every file ------------------------------------------------------------------------


PARSED_KINDS = ("arc", "signal", "region")  # the kinds whose rows come from one parsed document (``parsed_records``)


def parsed_records(vault_path: str, doc: frontmatter.Document) -> list[EntryRecord]:
    """``records_for`` of an arc, signal or region file already parsed (``doc`` is the parse of its text)."""
    kind = kind_of_path(vault_path)
    if kind == "arc":
        return document_records(doc, vault_path, kind)
    if kind == "signal":
        if is_arc(kind, doc.meta):  # an upstream incident arc in amygdala/
            return document_records(doc, vault_path, "arc")
        return [signal_record_of(doc, vault_path)]
    if kind == "region":
        return [] if is_tombstone(vault_path) else document_records(doc, vault_path, kind)
    raise ValueError(f"{vault_path}: not a {'/'.join(PARSED_KINDS)} file")


def parsed_document(vault_path: str, text: str) -> frontmatter.Document | None:
    """The parse ``parsed_records`` takes, for a file whose rows come from its frontmatter (None for any other)."""
    kind = kind_of_path(vault_path)
    if kind not in PARSED_KINDS or (kind == "region" and is_tombstone(vault_path)):
        return None
    return frontmatter.parse(text)


def records_for(vault_path: str, text: str) -> list[EntryRecord]:
    """Every index entry one vault file holds (none for tombstones and unrelated files)."""
    kind = kind_of_path(vault_path)
    if kind in PARSED_KINDS:
        doc = parsed_document(vault_path, text)
        return [] if doc is None else parsed_records(vault_path, doc)
    if kind == "lesson":
        return lesson_records(text, vault_path)
    if kind == "decision":
        return [decision_record(text, vault_path)]
    if kind == "milestone":
        return milestone_records(text, vault_path)
    if kind == "intent":
        return [intent_record(text, vault_path)]
    if kind == "inject":
        return [inject_record(text, vault_path)]
    return []


@dataclass(frozen=True)
class ProjectActivity:
    """One project as the vault shows it: key, repo slug (or None), latest entry time."""

    key: str
    repo: str | None
    last_active: dt.datetime | None


def _later(a: dt.datetime | None, b: dt.datetime | None) -> dt.datetime | None:
    return b if a is None else a if b is None else max(a, b)


class ActivityTally:
    """``project_activity`` fed in parts (a streaming rebuild adds each batch; the answer is the same)."""

    def __init__(self) -> None:
        self.by_repo: dict[tuple[str, str], dt.datetime | None] = {}
        self.bare: dict[str, dt.datetime | None] = {}

    def add(self, records: Iterable[EntryRecord]) -> None:
        """Count the projects ``records`` name."""
        for record in records:
            if record.kind not in ACTIVITY_KINDS:
                continue
            for key in record.projects:
                if key == record.project and record.repo:
                    slot = (key, record.repo)
                    self.by_repo[slot] = _later(self.by_repo[slot], record.occurred_at) if slot in self.by_repo else record.occurred_at
                else:
                    self.bare[key] = _later(self.bare[key], record.occurred_at) if key in self.bare else record.occurred_at

    def result(self) -> list[ProjectActivity]:
        """The projects, folded as ``project_activity`` describes."""
        repos_of: dict[str, list[str]] = {}
        for key, repo in self.by_repo:
            repos_of.setdefault(key, []).append(repo)
        out = [ProjectActivity(key, repo, when) for (key, repo), when in self.by_repo.items()]
        for key, when in self.bare.items():
            repos = repos_of.get(key, [])
            if len(repos) == 1:
                index = next(i for i, p in enumerate(out) if p.key == key and p.repo == repos[0])
                out[index] = ProjectActivity(key, repos[0], _later(out[index].last_active, when))
            elif not repos:
                out.append(ProjectActivity(key, None, when))
        return sorted(out, key=lambda p: (p.key, p.repo or ""))


def project_activity(records: Iterable[EntryRecord]) -> list[ProjectActivity]:
    """The projects named by entries, with their last activity.

    A key seen with exactly one repo folds its repo-less mentions (secondary
    projects of merged arcs, markers that named only the key) into that
    repo; a key seen with several repos keeps them apart and drops the
    repo-less mentions, which could belong to either; a key never seen with
    a repo is a project of its own.
    """
    tally = ActivityTally()
    tally.add(records)
    return tally.result()


def entry_line_spans(vault_path: str, text: str) -> dict[str, tuple[int, int]]:
    """Entry id -> (first line, last line) of each entry in a shared log (lessons, milestones).

    Lines are 1-based and inclusive, as ``text.split("\\n")`` counts them.
    Files of one entry each (arcs, signals, decisions, ...) give {}: the whole
    file is the entry.
    """
    kind = kind_of_path(vault_path)
    if kind not in LOG_KINDS:
        return {}
    return {record.id: (entry.first_line, entry.last_line) for record, entry in _log_entries(kind, text, vault_path)}


# -- idempotency keys the vault keeps (ADR 0035) -----------------------------------------------

MARKER_ACTIONS = {"lesson": "appended", "milestone": "appended", "signal": "created", "decision": "created"}


@dataclass(frozen=True)
class KeptKey:
    """A marker's idempotency key as the table held it once its write was done: the key, the body hash, the
    moment of the write and the response it answered."""

    key: str
    body_hash: str
    at: dt.datetime
    response: dict[str, Any]


def kept_keys(vault_path: str, text: str, records: Iterable[EntryRecord], *, since: dt.datetime) -> list[KeptKey]:
    """The keys the markers among ``records`` (this file's rows, as the file says them) keep, written after ``since``.

    The response is the one the write answered, rebuilt from the text:
    ``written_bytes`` is what the write added as the file holds it now (the
    whole file for a signal or a decision; a log entry's lines, with the
    file's heading for its first entry), so an edit since (a backfill's tag)
    shows in it. ``project`` is the marker's own attribution (a
    ``project_source`` says there was one), not a folder's it was filed under.
    """
    keyed = [
        (r, at, k)
        for r in records
        if r.kind in MARKER_ACTIONS and "idempotency_key" in r.meta and (at := r.occurred_at) is not None and at > since and (k := MarkerKey.read(r.meta))
    ]
    if not keyed:
        return []
    data = text.encode("utf-8")
    whole = len(data)
    sizes: dict[str, int] = {}
    if any(r.kind in LOG_KINDS for r, _, _ in keyed):
        spans = entry_line_spans(vault_path, text)
        ends = [0, *itertools.accumulate(len(line) + 1 for line in data.split(b"\n"))]  # bytes up to the end of line n (1-based)
        first_entry = min((first for first, _ in spans.values()), default=1)
        for rid, (first, last) in spans.items():
            start = 0 if first == first_entry else ends[first - 1]  # the first append wrote the file's heading too
            sizes[rid] = ends[last] - start
    path = storable(vault_path)  # a name the walk read may hold a lone surrogate, which Postgres cannot
    out = []
    for record, at, key in keyed:
        response = {
            "ok": True,
            "marker_type": record.kind,
            "action": MARKER_ACTIONS[record.kind],
            "vault_path": path,
            "written_bytes": min(sizes.get(record.id, whole), whole),
            "idempotency_key": key.shown,
            "body_hash": key.body_hash,
            "project": record.project if record.meta.get("project_source") else None,
            "entry_id": record.id,
        }
        if record.meta.get("supersedes"):
            response["supersedes"] = list(record.meta["supersedes"])
        out.append(KeptKey(key.key, key.body_hash, at, response))
    return out


# -- evidence the index adds to what a file says --------------------------------------------

SESSION_ATTRIBUTABLE = ("lesson", "milestone", "decision", "signal")


def attributable_by_session(record: EntryRecord) -> str | None:
    """The session id that may attribute an unattributed marker (its file names no project), else None."""
    if record.project or record.projects or record.scope != "project" or record.kind not in SESSION_ATTRIBUTABLE:
        return None
    sid = record.meta.get("session_id")
    return str(sid) if sid else None


def attributed(record: EntryRecord, key: str, repo: str | None, source: str) -> EntryRecord:
    """``record`` attributed to project (``key``, ``repo``) by ``source`` evidence the file itself lacks."""
    return replace(record, project=key, projects=(key,), repo=repo, meta={**record.meta, "project_source": source})
