"""Markers: what agents post (lessons, milestones, signals, decisions) as vault text (pure).

Three jobs, all on plain values:

* **Validation** (``parse_request``): the rules a ``POST /marker`` body must
  satisfy before anything is written; a failure is a ``MarkerInvalid`` with
  the reason, which the HTTP layer answers with a 4xx.
* **Rendering**: the exact text appended to a shared log (lessons to
  ``left/reference/lessons-<date>.md``, milestones to
  ``left/projects/<project>/BLOCKS.md`` or ``daily/<date>.md``) or written as a
  new file (signals ``amygdala/<stamp>-<sev>-<slug>.md``, decisions
  ``left/decisions/ADR-<NNNN>-<slug>.md``, both with YAML frontmatter through
  ``brain_core.frontmatter``).
* **Parsing back** into ``EntryRecord`` rows (``lesson_records``,
  ``signal_record``, ``decision_record``, ``milestone_records``). The request
  path builds its index row by parsing the text it just rendered, and
  ``brain reindex`` parses whole files with the same functions, so an
  incremental write and a full rebuild give identical rows.

Log entry format (ADR 0004)::

    ## 2026-11-28T14:03:22Z [project: api repo: org1/api] Title on one line
    <!-- brain {"kind": "lesson", "id": "9f0c...", "source": "claude-code"} -->

    content, with any line starting "## " escaped as "\\## "

The ``[...]`` tag always follows the stamp in new entries (``[unattributed]``
when no project is known), so a title can never pose as a tag. Old headers
(``## 14:03 — text``, ``## anything``) have no tag and parse as unattributed;
old entries without the ``brain`` comment get an id anchored on their header
and its position among identical headers, stable in an append-only file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from brain_core import frontmatter
from brain_core.entries import EntryRecord, entry_id
from brain_core.identity import ProjectIdentity, from_attrs, normalise_worktree
from brain_core.intent import clip_words
from brain_core.keys import InvalidKey, normalise_slug, parse_project_ref
from brain_core.times import iso, parse_time

MARKER_TYPES = ("lesson", "milestone", "signal", "decision")
SIGNAL_SCOPES = ("project", "fleet")
DEFAULT_SEVERITY = "info"
DEFAULT_STATUS = "accepted"
LESSONS_DIR = "left/reference"
DECISIONS_DIR = "left/decisions"
PROJECTS_DIR = "left/projects"
SIGNALS_DIR = "amygdala"
DAILY_DIR = "daily"

_TOKEN = re.compile(r"^[a-z][a-z0-9_\-]{0,31}$")
_IDEM_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}$")
_CONTROL_EXCEPT_WS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ATTR_LIMITS = {"session_id": 200, "source": 64, "target": 200, "cwd": 4096}


class MarkerInvalid(ValueError):
    """A marker request that must be refused (4xx) before anything is written."""


@dataclass(frozen=True)
class MarkerRequest:
    """A validated ``POST /marker`` body."""

    type: str
    content: str
    title: str
    body_hash: str
    identity: ProjectIdentity | None = None  # from attrs project/repo, when sent
    worktree: str | None = None
    cwd: str | None = None
    session_id: str | None = None
    source: str | None = None
    severity: str | None = None
    scope: str = "project"
    status: str | None = None
    target: str | None = None


@dataclass(frozen=True)
class Attribution:
    """The project a marker is written under (all None = unattributed)."""

    project: str | None = None
    repo: str | None = None
    worktree: str | None = None
    source: str | None = None  # how the project was resolved (attrs, session, git, ...)


# -- validation ---------------------------------------------------------------


def body_hash(type_: Any, content: Any, attrs: Any) -> str:
    """SHA-256 of the canonical JSON of a marker body (what idempotency compares)."""
    canonical = json.dumps({"type": type_, "content": content, "attrs": attrs or {}}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def check_idempotency_key(value: str | None) -> str | None:
    """The idempotency key a client sent (None when absent); MarkerInvalid when unusable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if not _IDEM_KEY.match(text):
        raise MarkerInvalid("X-Idempotency-Key must be 1-128 characters of letters, digits, '.', '_', ':' or '-'")
    return text


def _no_nul(value: str, where: str) -> None:
    if "\x00" in value:
        raise MarkerInvalid(f"{where} contains a NUL byte")


def _plain_attr(attrs: Mapping[str, str], name: str) -> str | None:
    value = attrs.get(name)
    if value is None or not value.strip():
        return None
    text = value.strip()
    if _CONTROL_EXCEPT_WS.search(text) or "\n" in text or "\r" in text:
        raise MarkerInvalid(f"attrs.{name} contains control characters")
    limit = _ATTR_LIMITS.get(name, 200)
    if len(text) > limit:
        raise MarkerInvalid(f"attrs.{name} is longer than {limit} characters")
    return text


def _token(attrs: Mapping[str, str], name: str) -> str | None:
    value = attrs.get(name)
    if value is None or not value.strip():
        return None
    text = value.strip().lower()
    if not _TOKEN.match(text):
        raise MarkerInvalid(f"attrs.{name} {value!r} must be a short lower-case word (letters, digits, '-', '_')")
    return text


def _normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_request(type_: Any, content: Any, attrs: Any, *, max_chars: int) -> MarkerRequest:
    """Validate a marker body; raise MarkerInvalid with the reason when it must be refused."""
    if not isinstance(type_, str):
        raise MarkerInvalid("type must be a string")
    _no_nul(type_, "type")
    marker_type = type_.strip().lower()
    if marker_type not in MARKER_TYPES:
        raise MarkerInvalid(f"unknown marker type {type_!r}; expected one of {', '.join(MARKER_TYPES)}")
    if not isinstance(content, str):
        raise MarkerInvalid("content must be a string")
    _no_nul(content, "content")
    text = _normalise_newlines(content).strip("\n")
    if not text.strip():
        raise MarkerInvalid("content is empty")
    if len(text) > max_chars:
        raise MarkerInvalid(f"content is longer than {max_chars} characters")
    if attrs is None:
        attrs = {}
    if not isinstance(attrs, Mapping):
        raise MarkerInvalid("attrs must be an object")
    for key, value in attrs.items():
        if not isinstance(key, str):
            raise MarkerInvalid("attrs keys must be strings")
        _no_nul(key, "an attrs key")
        if not isinstance(value, str):
            raise MarkerInvalid(f"attrs.{key} must be a string")
        _no_nul(value, f"attrs.{key}")
    try:
        identity = from_attrs(attrs, None)
        worktree = normalise_worktree(attrs.get("worktree"))
    except InvalidKey as exc:
        raise MarkerInvalid(str(exc)) from None
    cwd = _plain_attr(attrs, "cwd")
    if cwd is not None and not cwd.startswith(("/", "~")):
        raise MarkerInvalid("attrs.cwd must be an absolute path")
    scope = _token(attrs, "scope") or "project"
    if scope not in SIGNAL_SCOPES:
        raise MarkerInvalid(f"attrs.scope {scope!r} must be 'project' or 'fleet'")
    raw_title = attrs.get("title")
    if raw_title is not None and raw_title.strip():
        title = _normalise_newlines(raw_title).strip()
        if len(title) > max_chars:
            raise MarkerInvalid(f"attrs.title is longer than {max_chars} characters")
    else:
        title = default_title(text)
    return MarkerRequest(
        type=marker_type,
        content=text,
        title=title,
        body_hash=body_hash(type_, content, attrs),
        identity=identity,
        worktree=worktree,
        cwd=cwd,
        session_id=_plain_attr(attrs, "session_id"),
        source=_plain_attr(attrs, "source"),
        severity=_token(attrs, "severity"),
        scope=scope,
        status=_token(attrs, "status"),
        target=_plain_attr(attrs, "target"),
    )


def default_title(content: str, limit: int = 120) -> str:
    """A title from content: its first non-empty line, cut at ``limit`` characters on a word."""
    for line in content.split("\n"):
        line = line.strip().lstrip("#").strip()
        if line:
            return clip_words(line, limit)
    return "untitled"


# -- names ----------------------------------------------------------------------


def one_line(text: str) -> str:
    """Text made safe for a single line: control and separator characters become spaces."""
    chars = [" " if unicodedata.category(c)[0] in ("C", "Z") else c for c in text]
    return re.sub(r" {2,}", " ", "".join(chars)).strip()


def slugify(text: str, max_len: int = 60) -> str:
    """A file-name slug: ASCII lower case, digits and single hyphens; never empty."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    if len(slug) > max_len:
        slug = slug[:max_len].rstrip("-")
    return slug or "untitled"


def lesson_path(at: dt.datetime) -> str:
    """The day's lesson log."""
    return f"{LESSONS_DIR}/lessons-{at.astimezone(dt.timezone.utc).date().isoformat()}.md"


def milestone_path(project: str | None, at: dt.datetime) -> str:
    """Where a milestone goes: the project's BLOCKS.md when known, else the daily note."""
    if project:
        return f"{PROJECTS_DIR}/{project}/BLOCKS.md"
    return f"{DAILY_DIR}/{at.astimezone(dt.timezone.utc).date().isoformat()}.md"


def signal_path(title: str, severity: str, at: dt.datetime, attempt: int = 1) -> str:
    """A signal file name; attempts after the first get a ``-<n>`` suffix (collisions)."""
    suffix = "" if attempt <= 1 else f"-{attempt}"
    when = at.astimezone(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{SIGNALS_DIR}/{when}-{severity}-{slugify(title)}{suffix}.md"


def decision_path(number: int, title: str) -> str:
    """The file of ADR ``number``."""
    return f"{DECISIONS_DIR}/ADR-{number:04d}-{slugify(title)}.md"


_ADR_NAME = re.compile(r"^ADR-(\d+)(?:[-_.]|$)", re.I)


def adr_number(name: str) -> int | None:
    """The number in an ``ADR-NNNN-...`` file name, or None."""
    match = _ADR_NAME.match(name.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def log_file_header(kind: str, vault_path: str) -> str:
    """The heading a new log file starts with."""
    name = vault_path.rsplit("/", 1)[-1].removesuffix(".md")
    if kind == "lesson":
        return f"# Lessons {name.removeprefix('lessons-')}\n\n"
    match = BLOCKS_PATH.match(vault_path)
    if match:
        return f"# {match.group(1)}: milestones\n\n"
    return f"# {name}\n\n"


# -- log entries (lessons, milestones) ------------------------------------------------

_HEADER = "## "
_ESCAPED_HEADER = re.compile(r"^(\\*)## ")
_META_LINE = re.compile(r"^<!-- brain (\{.*\}) -->$")
_STAMP = re.compile(
    r"^(?P<stamp>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?|\d{1,2}:\d{2}(?::\d{2})?Z?)(?=\s|$)"
)
_TAG = re.compile(r"^\[(?:project: (?P<project>[^\]\s]+)(?: repo: (?P<repo>[^\]\s]+))?|(?P<none>unattributed))\]")
_DATE_IN_PATH = re.compile(r"(\d{4}-\d{2}-\d{2})")
BLOCKS_PATH = re.compile(rf"^{re.escape(PROJECTS_DIR)}/([^/]+)/BLOCKS\.md$")


def _tag(who: Attribution) -> str:
    if not who.project:
        return "[unattributed]"
    return f"[project: {who.project} repo: {who.repo}]" if who.repo else f"[project: {who.project}]"


def _meta_comment(meta: Mapping[str, Any]) -> str:
    # ">" never occurs in JSON syntax, only inside strings, so escaping it keeps "-->" out.
    payload = json.dumps({k: v for k, v in meta.items() if v is not None}, ensure_ascii=False, separators=(", ", ": "))
    return "<!-- brain " + payload.replace(">", "\\u003e") + " -->"


def _escape_body(content: str) -> str:
    return "\n".join(("\\" + line) if _ESCAPED_HEADER.match(line) else line for line in content.split("\n"))


def _unescape_body(lines: list[str]) -> list[str]:
    return [line[1:] if _ESCAPED_HEADER.match(line) and line.startswith("\\") else line for line in lines]


def render_log_entry(kind: str, req: MarkerRequest, who: Attribution, *, marker_id: str, at: dt.datetime) -> str:
    """A lesson or milestone entry as appended to its log (header, meta comment, body)."""
    meta = {
        "kind": kind,
        "id": marker_id,
        "session_id": req.session_id,
        "source": req.source,
        "worktree": who.worktree,
        "project_source": who.source,
    }
    header = f"{_HEADER}{iso(at)} {_tag(who)} {one_line(req.title)}".rstrip()
    return f"{header}\n{_meta_comment(meta)}\n\n{_escape_body(req.content)}\n\n"


@dataclass(frozen=True)
class _LogEntry:
    header: str
    stamp: str | None
    project: str | None
    repo: str | None
    title: str
    meta: dict[str, Any]
    content: str
    ordinal: int


def _split_log(text: str) -> list[_LogEntry]:
    """Entries of a log file, in order; text before the first ``## `` header is skipped."""
    entries: list[_LogEntry] = []
    seen: dict[str, int] = {}
    current: list[str] | None = None
    blocks: list[list[str]] = []
    for line in text.split("\n"):
        if line.startswith(_HEADER):
            current = [line.rstrip("\r")]
            blocks.append(current)
        elif current is not None:
            current.append(line.rstrip("\r"))
    for block in blocks:
        header = block[0]
        rest = header[len(_HEADER):].strip()
        stamp_text = None
        match = _STAMP.match(rest)
        if match:
            stamp_text = match.group("stamp")
            rest = rest[match.end():].strip()
        project = repo = None
        tag = _TAG.match(rest)
        if tag:
            project, repo = _valid_ref(tag.group("project"), tag.group("repo"))
            rest = rest[tag.end():].strip()
        title = rest.lstrip("—–-·:|").strip()
        body = block[1:]
        meta: dict[str, Any] = {}
        if body:
            found = _META_LINE.match(body[0].strip())
            if found:
                try:
                    loaded = json.loads(found.group(1))
                except ValueError:
                    loaded = None
                if isinstance(loaded, dict):
                    meta = loaded
                    body = body[1:]
        content = "\n".join(_unescape_body(body)).strip("\n")
        ordinal = seen.get(header, 0)
        seen[header] = ordinal + 1
        entries.append(_LogEntry(header, stamp_text, project, repo, title, meta, content, ordinal))
    return entries


def _valid_ref(project: str | None, repo: str | None) -> tuple[str | None, str | None]:
    """A (key, slug) read back from a file, dropped when it is not a valid key (never trusted blindly)."""
    if not project:
        return None, None
    try:
        key, slug = parse_project_ref(project)
        return key, normalise_slug(repo) if repo else slug
    except InvalidKey:
        return None, None


def _occurred(stamp_text: str | None, vault_path: str) -> dt.datetime | None:
    """A UTC datetime from a header stamp; time-only stamps take the date in the file name."""
    if not stamp_text:
        return None
    text = stamp_text.strip().replace(" ", "T")
    if "T" not in text and ":" in text:
        day = _DATE_IN_PATH.search(vault_path.rsplit("/", 1)[-1])
        if not day:
            return None
        hour, _, rest = text.partition(":")
        text = f"{day.group(1)}T{hour.zfill(2)}:{rest}"  # older headers wrote 9:05 for 09:05
    return parse_time(text)


def _entry_meta(meta: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """The JSONB metadata of a row: the marker's id and provenance, strings only."""
    out: dict[str, Any] = {}
    if meta.get("id"):
        out["marker_id"] = str(meta["id"])
    for name in ("session_id", "source", "worktree", "project_source", "target"):
        value = meta.get(name)
        if isinstance(value, str) and value:
            out[name] = value
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


def _log_record(kind: str, entry: _LogEntry, vault_path: str, project: str | None, repo: str | None) -> EntryRecord:
    anchor = f"id:{entry.meta['id']}" if entry.meta.get("id") else f"header:{entry.header}#{entry.ordinal}"
    return EntryRecord(
        id=entry_id(kind, vault_path, anchor),
        kind=kind,
        vault_path=vault_path,
        title=entry.title or default_title(entry.content),
        content=entry.content,
        project=project,
        repo=repo if project else None,
        scope="project",
        occurred_at=_occurred(entry.stamp, vault_path),
        meta=_entry_meta(entry.meta),
    )


def lesson_records(text: str, vault_path: str) -> list[EntryRecord]:
    """Index rows of a lesson log (or of one rendered entry); old untagged headers are unattributed."""
    return [_log_record("lesson", e, vault_path, e.project, e.repo) for e in _split_log(text)]


def milestone_records(text: str, vault_path: str) -> list[EntryRecord]:
    """Index rows of milestones in a project's BLOCKS.md or a daily note.

    In ``left/projects/<p>/BLOCKS.md`` every entry is a milestone of ``p``
    unless its own tag names the project. In a daily note only entries marked
    as milestones (``brain`` comment, or a header saying "milestone") count.
    """
    blocks = BLOCKS_PATH.match(vault_path)
    path_project = _valid_ref(blocks.group(1), None)[0] if blocks else None
    records = []
    for entry in _split_log(text):
        if not blocks and entry.meta.get("kind") != "milestone" and "milestone" not in entry.header.lower():
            continue
        project, repo = (entry.project, entry.repo) if entry.project else (path_project, None)
        records.append(_log_record("milestone", entry, vault_path, project, repo))
    return records


# -- files with frontmatter (signals, decisions) -----------------------------------------


def _provenance(req: MarkerRequest, who: Attribution, marker_id: str) -> dict[str, Any]:
    meta = {
        "project": who.project,
        "repo": who.repo,
        "worktree": who.worktree,
        "project_source": who.source,
        "session_id": req.session_id,
        "source": req.source,
        "target": req.target,
        "id": marker_id,
    }
    return {k: v for k, v in meta.items() if v is not None}


def render_signal(req: MarkerRequest, who: Attribution, *, marker_id: str, at: dt.datetime) -> str:
    """A signal file: frontmatter (title, severity, scope, project, repo, ...) and the content."""
    meta: dict[str, Any] = {
        "type": "signal",
        "title": req.title,
        "severity": req.severity or DEFAULT_SEVERITY,
        "scope": req.scope,
        "created": iso(at),
        **_provenance(req, who, marker_id),
    }
    return frontmatter.render(meta, f"\n# {one_line(req.title)}\n\n{req.content}\n")


def render_decision(req: MarkerRequest, who: Attribution, *, number: int, marker_id: str, at: dt.datetime) -> str:
    """A decision (ADR) file: frontmatter (adr, title, status, project, repo, ...) and the content."""
    meta: dict[str, Any] = {
        "type": "decision",
        "adr": number,
        "title": req.title,
        "status": req.status or DEFAULT_STATUS,
        "created": iso(at),
        **_provenance(req, who, marker_id),
    }
    return frontmatter.render(meta, f"\n# ADR-{number:04d}: {one_line(req.title)}\n\n{req.content}\n")


def _body_without_heading(body: str) -> tuple[str | None, str]:
    """(first ``# `` heading text or None, the rest) of a file body."""
    text = body.strip("\n")
    first, _, rest = text.partition("\n")
    if first.startswith("# "):
        return first[2:].strip(), rest.strip("\n")
    return None, text


def _str(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    text = str(value).strip()
    return text or None


def _created(meta: Mapping[str, Any], vault_path: str) -> dt.datetime | None:
    created = _str(meta.get("created")) or _str(meta.get("date")) or _str(meta.get("timestamp"))
    return _occurred(created, vault_path) if created else None


_SIGNAL_NAME = re.compile(r"^(\d{8})-(\d{6})-([a-z0-9_]+)-")


def signal_record(text: str, vault_path: str) -> EntryRecord:
    """The index row of a signal file; ``scope: fleet`` makes it fleet-wide."""
    doc = frontmatter.parse(text)
    meta = doc.meta
    heading, content = _body_without_heading(doc.body)
    name = _SIGNAL_NAME.match(vault_path.rsplit("/", 1)[-1])
    occurred = _created(meta, vault_path)
    if occurred is None and name:
        occurred = dt.datetime.strptime(name.group(1) + name.group(2), "%Y%m%d%H%M%S").replace(tzinfo=dt.timezone.utc)
    project, repo = _valid_ref(_str(meta.get("project")), _str(meta.get("repo")))
    scope = "fleet" if _str(meta.get("scope")) == "fleet" or meta.get("fleet") is True else "project"
    return EntryRecord(
        id=entry_id("signal", vault_path),
        kind="signal",
        vault_path=vault_path,
        title=_str(meta.get("title")) or heading or default_title(content),
        content=content,
        project=project,
        repo=repo,
        scope=scope,
        severity=(_str(meta.get("severity")) or (name.group(3) if name else None) or DEFAULT_SEVERITY).lower()[:32],
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
    project, repo = _valid_ref(_str(meta.get("project")), _str(meta.get("repo")))
    status = _str(meta.get("status"))
    return EntryRecord(
        id=entry_id("decision", vault_path),
        kind="decision",
        vault_path=vault_path,
        title=_str(meta.get("title")) or heading or default_title(content),
        content=content,
        project=project,
        repo=repo,
        scope="project",
        status=status.lower()[:32] if status else None,
        occurred_at=_created(meta, vault_path),
        meta=_entry_meta(meta, adr=number),
    )
