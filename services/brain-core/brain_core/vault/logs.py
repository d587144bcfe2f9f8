"""Marker text in the vault (pure): the log-entry codec of lessons and milestones, and the files
of signals and decisions.

Log entry format (ADR 0004)::

    ## 2026-11-28T14:03:22Z [project: api repo: org1/api] Title on one line
    <!-- brain {"kind": "lesson", "id": "9f0c...", "source": "claude-code"} -->

    content, with any line starting "## " escaped as "\\## "

The ``[...]`` tag always follows the stamp in new entries (``[unattributed]``
when no project is known), so a title can never pose as a tag. Old headers
(``## 14:03 — text``, ``## anything``) have no tag and parse as unattributed;
old entries without the ``brain`` comment get an id anchored on their header
and its position among identical headers, stable in an append-only file.
``split_log`` also reports each entry's line span, so a search can look inside
one entry of a log shared by many projects. ``retag_entry`` gives an
unattributed entry its project (``brain backfill --rewrite-markers``): only
the header's tag and the comment's attribution change, and an old entry's id
(anchored on its header without the tag) stays what it was.

A marker's idempotency key and body hash (``MarkerKey``) are kept with its
text (the ``brain`` comment, or the file's frontmatter), so a rebuild from the
vault alone remembers which writes were made (ADR 0035).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from brain_core import curation
from brain_core.keys import InvalidKey, normalise_slug, parse_project_ref
from brain_core.markers import DEFAULT_MILESTONE_STATUS, DEFAULT_SEVERITY, DEFAULT_STATUS, Attribution, MarkerRequest
from brain_core.text import one_line, slugify
from brain_core.times import iso, parse_time
from brain_core.vault import frontmatter
from brain_core.vault.layout import BLOCKS_PATH

_HEADER = "## "
# Upstream's milestone entry (UPSTREAM.md 1.6): ``- [x] <ISO> — <source> — scope=<s> — status=<s>``, then the content
# indented by two spaces. Read only in milestone logs, and only with a full date and time after the box, so a
# checklist in an entry's content is never taken for an entry.
_CHECKBOX = re.compile(r"^- \[[ xX]\] (?=\d{4,}-\d{2}-\d{2}[T ]\d{2}:\d{2})")

# A content line that would open an entry where it is read back (a ``## `` header; upstream's stamped checkbox in
# a milestone log) is written with one more leading backslash and read back without it: a marker's text can
# never become an entry of its own, with another project's tag.
_ESCAPED_OPENER = re.compile(r"^(\\*)(?:## |- \[[ xX]\] \d{4,}-\d{2}-\d{2}[T ]\d{2}:\d{2})")

_META_LINE = re.compile(r"^<!-- brain (\{.*\}) -->$")

# Four digits or more: a year past 9999 still reads as a stamp, one no calendar holds (its entry is left out).
_STAMP = re.compile(r"^(?P<stamp>\d{4,}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?|\d{1,2}:\d{2}(?::\d{2})?Z?)(?=\s|$)")

_TAG = re.compile(r"^\[(?:project: (?P<project>[^\]\s]+)(?: repo: (?P<repo>[^\]\s]+))?|(?P<none>unattributed))\]")

_DATE_IN_PATH = re.compile(r"(\d{4}-\d{2}-\d{2})")

_STORED_KEY = re.compile(r"[\x21-\x7e]{1,256}")  # a client's key (1-128 visible ASCII) or its digest, maybe namespaced
_BODY_HASH = re.compile(r"[0-9a-f]{16,64}")


@dataclass(frozen=True)
class MarkerKey:
    """What a write is remembered under: the key as the idempotency table keeps it, the namespace that key is
    in (a scoped token's name, which prefixes it as ``<namespace>:``) and the body hash (ADR 0035)."""

    FIELDS = ("idempotency_key", "key_namespace", "body_hash")

    key: str
    body_hash: str
    namespace: str | None = None

    @property
    def shown(self) -> str:
        """The key as the client sent it (what a response says): without the namespace."""
        return self.key.removeprefix(f"{self.namespace}:") if self.namespace else self.key

    def fields(self) -> dict[str, str | None]:
        """The key as it is written into a comment or frontmatter (no namespace: the field is left out)."""
        return {"idempotency_key": self.key, "key_namespace": self.namespace, "body_hash": self.body_hash}

    @classmethod
    def read(cls, meta: Mapping[str, Any]) -> MarkerKey | None:
        """The key ``fields`` wrote, read back from a comment or frontmatter; None when there is none (older
        entries) or when it is no key the kernel makes (a hand edit: visible ASCII, a hex body hash)."""
        key, body, namespace = meta.get("idempotency_key"), meta.get("body_hash"), meta.get("key_namespace")
        if not (isinstance(key, str) and _STORED_KEY.fullmatch(key) and isinstance(body, str) and _BODY_HASH.fullmatch(body)):
            return None
        if isinstance(namespace, str) and namespace and key.startswith(f"{namespace}:"):
            return cls(key, body, namespace)
        return cls(key, body)


def log_file_header(kind: str, vault_path: str) -> str:
    """The heading a new log file starts with."""
    name = vault_path.rsplit("/", 1)[-1].removesuffix(".md")
    if kind == "lesson":
        return f"# Lessons {name.removeprefix('lessons-')}\n\n"
    match = BLOCKS_PATH.match(vault_path)
    if match:
        return f"# {match.group(1)}: milestones\n\n"
    return f"# {name}\n\n"


def _tag(who: Attribution) -> str:
    if not who.project:
        return "[unattributed]"
    return f"[project: {who.project} repo: {who.repo}]" if who.repo else f"[project: {who.project}]"


def _meta_comment(meta: Mapping[str, Any]) -> str:
    # ">" never occurs in JSON syntax, only inside strings, so escaping it keeps "-->" out.
    payload = json.dumps({k: v for k, v in meta.items() if v is not None}, ensure_ascii=False, separators=(", ", ": "))
    return "<!-- brain " + payload.replace(">", "\\u003e") + " -->"


def _escape_body(content: str) -> str:
    return "\n".join(("\\" + line) if _ESCAPED_OPENER.match(line) else line for line in content.split("\n"))


def _unescape_body(lines: list[str]) -> list[str]:
    return [line[1:] if _ESCAPED_OPENER.match(line) and line.startswith("\\") else line for line in lines]


def upstream_suffix(kind: str, meta: Mapping[str, Any]) -> str:
    """What upstream's header said after the stamp, kept at the end of ours: `` — <source> — `<session>```
    for a lesson, `` — <source> — scope=<scope> — status=<status>`` for a milestone."""
    parts = [str(meta.get("source") or "unknown")]
    if kind == "lesson":
        if meta.get("session_id"):
            parts.append(f"`{meta['session_id']}`")
    else:
        if meta.get("scope"):
            parts.append(f"scope={meta['scope']}")
        parts.append(f"status={meta.get('status') or DEFAULT_MILESTONE_STATUS}")
    return " — " + " — ".join(one_line(p) for p in parts)


def render_log_entry(kind: str, req: MarkerRequest, who: Attribution, *, marker_id: str, at: dt.datetime, key: MarkerKey | None = None) -> str:
    """A lesson or milestone entry as appended to its log: header (stamp, project tag, title, upstream's
    source and session or scope and status), the ``brain`` comment (with ``key``), the body."""
    meta = {
        "kind": kind,
        "id": marker_id,
        "session_id": req.session_id,
        "source": req.source,
        "worktree": who.worktree,
        "project_source": who.source,
    }
    if kind == "milestone":
        meta.update(scope=req.label, status=req.status or DEFAULT_MILESTONE_STATUS)
    meta.update(_curation_fields(req, at))
    if key is not None:
        meta.update(key.fields())
    header = f"{_HEADER}{iso(at)} {_tag(who)} {one_line(req.title)}{upstream_suffix(kind, meta)}"
    return f"{header}\n{_meta_comment(meta)}\n\n{_escape_body(req.content)}\n\n"


@dataclass(frozen=True)
class LogEntry:
    """One entry of a log file: its header parts, ``brain`` comment, content, and lines in the file.

    ``first_line`` and ``last_line`` are 1-based and inclusive, counting lines
    as ``text.split("\\n")`` does (the codec's own notion of a line).
    ``anchor`` is the header without its tag: what identifies an entry that has
    no ``brain`` id, and stays when the backfill tags it.
    """

    header: str
    stamp: str | None
    project: str | None
    repo: str | None
    title: str
    meta: dict[str, Any]
    content: str
    ordinal: int
    first_line: int
    last_line: int
    anchor: str = ""
    unattributed: bool = False  # the header says ``[unattributed]``: no project, wherever the log lives
    checkbox: bool = False  # upstream's ``- [x]`` milestone entry, not a ``## `` header


def _prefix(line: str, checkboxes: bool) -> int | None:
    """The length of the mark that opens an entry on ``line`` (``## ``, or upstream's ``- [x] `` where read), else None."""
    if line.startswith(_HEADER):
        return len(_HEADER)
    found = _CHECKBOX.match(line) if checkboxes else None
    return found.end() if found else None


def split_log(text: str, *, checkboxes: bool = False) -> list[LogEntry]:
    """Entries of a log file, in order; text before the first ``## `` header is skipped. ``checkboxes``: upstream's
    ``- [x] <ISO> — ...`` lines open entries too (a milestone log), their content's two-space indent taken off."""
    entries: list[LogEntry] = []
    seen: dict[str, int] = {}
    current: list[str] | None = None
    blocks: list[tuple[int, int, list[str]]] = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline ending the file ends the last line; it starts no line of its own
    for number, line in enumerate(lines, 1):
        opened = _prefix(line, checkboxes)
        if opened is not None:
            current = [line.rstrip("\r")]
            blocks.append((number, opened, current))
        elif current is not None:
            current.append(line.rstrip("\r"))
    for first_line, opened, block in blocks:
        header = block[0]
        boxed = opened != len(_HEADER)
        rest = header[opened:].strip()
        stamp_text = None
        match = _STAMP.match(rest)
        if match:
            stamp_text = match.group("stamp")
            rest = rest[match.end() :].strip()
        project = repo = None
        tag = _TAG.match(rest)
        anchor = header
        if tag:
            project, repo = valid_ref(tag.group("project"), tag.group("repo"))
            start = header.index(rest) + tag.start()
            after = header[start + tag.end() - tag.start() :].lstrip()
            anchor = header[:start] + after if after else header[:start].rstrip()
            rest = rest[tag.end() :].strip()
        body = [line[2:] if line.startswith("  ") else line for line in block[1:]] if boxed else block[1:]
        meta: dict[str, Any] = {}
        if body and not boxed:
            found = _META_LINE.match(body[0].strip())
            if found:
                try:
                    loaded = json.loads(found.group(1))
                except ValueError:
                    loaded = None
                if isinstance(loaded, dict):
                    meta = loaded
                    body = body[1:]
        content = "\n".join(body if boxed else _unescape_body(body)).strip("\n")
        if boxed:
            title, meta = _upstream_milestone(rest)
        elif tag and not meta and _UPSTREAM_LESSON.match(rest):  # an old header the backfill tagged: read the rest as before
            title, meta = _upstream_header(rest)
        elif tag:
            kind = "lesson" if str(meta.get("kind") or "lesson") == "lesson" else "milestone"
            suffix = upstream_suffix(kind, meta) if meta else ""
            title = (rest[: -len(suffix)] if suffix and rest.endswith(suffix) else rest).strip()
        else:
            title, found_meta = _upstream_header(rest)
            meta = {**found_meta, **meta}
        ordinal = seen.get(anchor, 0)
        seen[anchor] = ordinal + 1
        last_line = first_line + len(block) - 1
        explicit = bool(tag and tag.group("none"))
        entries.append(LogEntry(header, stamp_text, project, repo, title, meta, content, ordinal, first_line, last_line, anchor, explicit, boxed))
    return entries


def retag_entry(text: str, entry: LogEntry, who: Attribution) -> str:
    """The log's text with ``entry`` (one of ``split_log(text)``) attributed to ``who``, every other byte as it was.

    The header's ``[unattributed]`` tag, or the place after the stamp where an
    old header has none, takes ``[project: <key> repo: <owner/name>]``; a
    ``brain`` comment the codec wrote (it renders back to the same line) gets
    ``project_source`` and ``worktree``. Line ends are kept.
    """
    lines = text.split("\n")
    number = entry.first_line - 1
    line = lines[number]
    header = line.rstrip("\r")
    opened = _prefix(header, entry.checkbox) or len(_HEADER)
    pos = opened + len(header[opened:]) - len(header[opened:].lstrip())
    stamp = _STAMP.match(header[pos:])
    if stamp:
        pos += stamp.end()
        pos += len(header[pos:]) - len(header[pos:].lstrip())
    tag = _TAG.match(header[pos:])
    new_tag = _tag(who)
    if tag:
        header = header[:pos] + new_tag + header[pos + tag.end() :]
    elif header[pos:]:
        header = header[:pos] + new_tag + " " + header[pos:]
    else:
        header = header[:pos] + ("" if header[pos - 1 : pos].isspace() else " ") + new_tag
    lines[number] = header + line[len(line.rstrip("\r")) :]
    if entry.meta.get("id") and number + 1 < len(lines):
        comment = lines[number + 1]
        bare = comment.rstrip("\r")
        found = _META_LINE.match(bare)
        if found and _meta_comment(json.loads(found.group(1))) == bare:
            meta = {**json.loads(found.group(1)), "worktree": who.worktree, "project_source": who.source}
            lines[number + 1] = _meta_comment(meta) + comment[len(bare) :]
    return "\n".join(lines)


_UPSTREAM_LESSON = re.compile(r"^[—–-]\s*(?P<source>[^`]+?)\s*(?:[—–-]\s*`(?P<session>[^`]+)`)?\s*$")


def _upstream_header(rest: str) -> tuple[str, dict[str, Any]]:
    """(title, meta) of an untagged header: upstream's `` — <source> — `<session>``` gives no title but
    its source and session id (so old lessons can be attributed by session); other text is the title."""
    match = _UPSTREAM_LESSON.match(rest)
    if match:
        found = {"source": match.group("source").strip()}
        if match.group("session"):
            found["session_id"] = match.group("session").strip()
        return "", {k: v for k, v in found.items() if v and v != "unknown"}
    return rest.lstrip("—–-·:|").strip(), {}


def _upstream_milestone(rest: str) -> tuple[str, dict[str, Any]]:
    """(title, meta) of upstream's milestone line after its stamp (and a tag the backfill added):
    `` — <source> — scope=<s> — status=<s>`` gives no title, and its source, scope and status."""
    found: dict[str, Any] = {}
    for part in (p.strip() for p in re.split(r"(?:^|\s)[—–]\s", rest)):
        name, eq, value = part.partition("=")
        if eq and name in ("scope", "status"):
            found[name] = value.strip()
        elif part and "source" not in found and not eq:
            found["source"] = part
    return "", {k: v for k, v in found.items() if v and v != "unknown"}


def valid_ref(project: str | None, repo: str | None) -> tuple[str | None, str | None]:
    """A (key, slug) read back from a file, dropped when it is not a valid key (never trusted blindly)."""
    if not project:
        return None, None
    try:
        key, slug = parse_project_ref(project)
        return key, normalise_slug(repo) if repo else slug
    except InvalidKey:
        return None, None


def occurred_at(stamp_text: str | None, vault_path: str) -> dt.datetime | None:
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


def _curation_fields(req: MarkerRequest, at: dt.datetime) -> dict[str, Any]:
    """What a marker says of other entries and of its own end (ADR 0048): the ids it supersedes, when it expires;
    and the code it was written against (the commit and the paths it names, ADR 0042), for staleness."""
    out: dict[str, Any] = {}
    if req.commit:
        out["commit"] = req.commit
        if req.paths:
            out["paths"] = list(req.paths)
    if req.supersedes:
        out["supersedes"] = list(req.supersedes)
    until = curation.valid_until(req.valid_until, req.ttl_days, at)
    if until is not None:
        out["valid_until"] = until
    return out


def render_curation_entry(
    action: str,
    entry: Mapping[str, Any],
    *,
    at: dt.datetime,
    who: Attribution,
    by: str,
    reason: str | None = None,
    successor: str | None = None,
    valid_until: str | None = None,
) -> str:
    """A curation record appended to the log holding ``entry`` (its ``id``, ``title``, ``kind``): never an edit of it.

    ``action`` is ``retracted``, ``superseded`` (``successor`` replaced it),
    ``reinstated`` or ``successor_retracted`` (``successor`` was retracted and
    no longer supersedes it, ADR 0060) or ``expired`` (it leaves the feed at
    ``valid_until``). The record names the entry by id and says who and, for a
    retraction or an expiry, why (the body). ``records`` reads it back as the
    entry's state; it is no entry of its own.
    """
    meta = {
        "kind": curation.CURATION,
        "action": action,
        "entry": entry["id"],
        "entry_kind": entry.get("kind"),
        "by": by,
        "superseded_by": successor if action == curation.SUPERSEDED else None,
        "successor": successor if action in (curation.REINSTATED, curation.SUCCESSOR_RETRACTED) else None,
        "valid_until": valid_until if action == curation.EXPIRED else None,
    }
    title = f"{action.replace('_', ' ').capitalize()}: {one_line(str(entry.get('title') or entry['id']))}"
    if reason:
        body = reason
    elif action == curation.SUPERSEDED and successor:
        body = f"Superseded by {successor}."
    elif action in (curation.REINSTATED, curation.SUCCESSOR_RETRACTED) and successor:
        body = f"Its successor {successor} was retracted."
    else:
        body = action.capitalize() + "."
    return f"{_HEADER}{iso(at)} {_tag(who)} {title}\n{_meta_comment(meta)}\n\n{_escape_body(body)}\n\n"


def _provenance(req: MarkerRequest, who: Attribution, marker_id: str, key: MarkerKey | None) -> dict[str, Any]:
    meta = {
        "project": who.project,
        "repo": who.repo,
        "worktree": who.worktree,
        "project_source": who.source,
        "session_id": req.session_id,
        "source": req.source,
        "target": req.target,
        "marker_id": marker_id,
        **(key.fields() if key is not None else {}),
    }
    return {k: v for k, v in meta.items() if v is not None}


def _file_fields(req: MarkerRequest, who: Attribution, marker_id: str, key: MarkerKey | None, at: dt.datetime) -> dict[str, Any]:
    """A signal's or decision's frontmatter after its own keys: provenance, then what it supersedes and when it expires."""
    return {**_provenance(req, who, marker_id, key), **_curation_fields(req, at)}


def render_signal(req: MarkerRequest, who: Attribution, *, marker_id: str, at: dt.datetime, key: MarkerKey | None = None) -> str:
    """A signal file: frontmatter (title, severity, scope, project, repo, ...) and the content."""
    meta: dict[str, Any] = {
        "id": f"amygdala-{slugify(req.title)}",
        "type": "signal",
        "title": req.title,
        "severity": req.severity or DEFAULT_SEVERITY,
        "source": req.source or "unknown",
        "scope": req.scope,
        "created": iso(at),
        **_file_fields(req, who, marker_id, key, at),
    }
    return frontmatter.render(meta, f"\n# {one_line(req.title)}\n\n{req.content}\n")


def render_decision(req: MarkerRequest, who: Attribution, *, number: int, marker_id: str, at: dt.datetime, key: MarkerKey | None = None) -> str:
    """A decision (ADR) file: frontmatter (adr, title, status, project, repo, ...) and the content."""
    title = req.title if req.title_given or req.content else f"ADR {number}"
    meta: dict[str, Any] = {
        "id": f"ADR-{number:04d}",
        "type": "decision",
        "adr": number,
        "title": title,
        "status": req.status or DEFAULT_STATUS,
        "source": req.source or "unknown",
        "created": iso(at),
        **_file_fields(req, who, marker_id, key, at),
    }
    return frontmatter.render(meta, f"\n# ADR-{number:04d} — {one_line(title)}\n\n{req.content}\n")
