"""Marker requests: what an agent may post as a lesson, milestone, signal or decision (pure).

``parse_request`` holds upstream's rules for a ``POST /marker`` body
(UPSTREAM.md 1.6): only the type, the content and the shape of ``attrs`` can
refuse it (``MarkerInvalid``, a 400 with upstream's reason); every attr is
read leniently. ``body_hash`` and ``idempotency_key`` derive upstream's keys. The text a marker becomes in the vault is
``brain_core.vault.logs``; its index rows are ``brain_core.vault.records``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from brain_core.curation import expiry_attrs, supersedes_refs
from brain_core.identity import ProjectIdentity, from_attrs, normalise_worktree
from brain_core.keys import InvalidKey
from brain_core.redact import scrub
from brain_core.text import clip_words, has_lone_surrogate_char

MARKER_TYPES = ("lesson", "milestone", "signal", "decision")
# Signal severities kept as sent (lowercased); any other value, or none, is upstream's default.
SEVERITIES = frozenset({"info", "low", "warning", "alert", "high", "critical", "nuclear", "resolved"})
DEFAULT_SEVERITY = "warning"
DEFAULT_STATUS = "proposed"  # a decision's status when none is sent (upstream's)
DEFAULT_MILESTONE_STATUS = "done"
FLEET = "fleet"
_TRUE = frozenset({"true", "1", "yes", "on"})
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ATTR_LIMITS = {"session_id": 200, "source": 200, "target": 200, "cwd": 4096, "scope": 200, "status": 32}
_KEY_SAFE = re.compile(r"^[\x21-\x7e]{1,128}$")
# Input limits on attrs (ADR 0021, amended): past them only the attrs the kernel reads are read, each within the
# size limit, and the rest ignored; never a refusal, since upstream answered 201 and its client's outbox stops for
# good at a refused POST.
MAX_ATTRS = 64
MAX_ATTR_KEY_CHARS = 128
MAX_ATTRS_JSON_CHARS = 16_384
READ_ATTRS = frozenset({
    "commit", "cwd", "fleet", "paths", "project", "repo", "scope", "session_id", "severity", "source", "status",
    "supersedes", "target", "title", "ttl_days", "valid_until", "worktree",
})  # fmt: skip


def has_lone_surrogate(value: Any) -> bool:
    """Whether a JSON value holds a lone surrogate anywhere (it cannot be written as UTF-8)."""
    if isinstance(value, str):
        return has_lone_surrogate_char(value)
    if isinstance(value, Mapping):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(has_lone_surrogate(v) for v in value)
    return False


def _bounded_attrs(attrs: Mapping[str, Any]) -> Mapping[str, Any]:
    """``attrs`` as they are within the input limits; past them, only the ones the kernel reads (``READ_ATTRS``),
    each within ``MAX_ATTRS_JSON_CHARS`` of JSON. The body hash is still of what was sent."""
    within = len(attrs) <= MAX_ATTRS and all(isinstance(k, str) and len(k) <= MAX_ATTR_KEY_CHARS for k in attrs)
    if within and len(json.dumps(attrs, default=str)) <= MAX_ATTRS_JSON_CHARS:
        return attrs
    return {k: v for k, v in attrs.items() if k in READ_ATTRS and len(json.dumps(v, default=str)) <= MAX_ATTRS_JSON_CHARS}


class MarkerInvalid(ValueError):
    """A marker request that must be refused (400) before anything is written."""


@dataclass(frozen=True)
class MarkerRequest:
    """A ``POST /marker`` body as the kernel uses it (every attr read leniently, as upstream does)."""

    type: str
    content: str
    title: str
    body_hash: str
    identity: ProjectIdentity | None = None  # from attrs project/repo, when they name one validly
    worktree: str | None = None
    cwd: str | None = None  # attrs cwd, or a ``project`` that was a folder path
    session_id: str | None = None
    source: str | None = None
    severity: str | None = None
    scope: str = "project"  # "fleet" only for a fleet-wide signal; see ``label`` for upstream's free scope
    label: str | None = None  # attrs.scope as sent: a free label (milestones record it, as upstream)
    status: str | None = None
    target: str | None = None
    title_given: bool = False
    unreadable_project: str | None = None  # why a project/repo attr sent is not usable (dropped; a restricted token is refused)
    supersedes: tuple[str, ...] = ()  # entry ids or ``ADR-NNNN`` it replaces; the kernel keeps the ids they resolve to (ADR 0048)
    valid_until: dt.datetime | None = None  # attrs.valid_until: the entry leaves the feed then
    ttl_days: float | None = None  # attrs.ttl_days: counted from the moment of the write
    commit: str | None = None  # attrs.commit: the repository's HEAD when the marker was written (the connector sends it)
    paths: tuple[str, ...] = ()  # attrs.paths: repository paths the content names that exist at that commit


@dataclass(frozen=True)
class Attribution:
    """The project a marker is written under (all None = unattributed)."""

    project: str | None = None
    repo: str | None = None
    worktree: str | None = None
    source: str | None = None  # how the project was resolved (attrs, session, git, ...)


def body_hash(type_: Any, content: Any, attrs: Any) -> str:
    """Upstream's body hash: first 16 hex of SHA-256 over sorted-key JSON of ``{type, content, attrs}``.

    ``type`` is the normalised type, ``content`` as sent, ``attrs`` as sent
    (``{}`` when falsy); JSON with Python's default separators and non-ASCII
    escaped, so the same body hashes the same here and upstream.
    """
    normalised = type_.strip().lower() if isinstance(type_, str) else type_
    canonical = json.dumps({"type": normalised, "content": content, "attrs": attrs or {}}, sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def idempotency_key(header: str | None, body_digest: str) -> str:
    """The key a write is remembered under: the header trimmed, else the body hash; never a refusal.

    A header that is blank after trimming counts as absent (upstream keyed
    every such request on ``""``). A key that is not 1-128 visible
    ASCII characters is stored as a digest of itself, so it still dedupes.
    """
    text = (header or "").strip()
    if not text:
        return body_digest
    if _KEY_SAFE.match(text):
        return text
    return "h:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _text(attrs: Mapping[str, Any], name: str) -> str | None:
    """An attr as one line of text: strings, numbers and booleans; anything else, or unusable text, is ignored."""
    value = attrs.get(name)
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, (int, float)):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if _CONTROL.search(text) or "\n" in text or "\r" in text or len(text) > _ATTR_LIMITS.get(name, 200):
        return None
    return text


def _normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _identity(attrs: Mapping[str, Any]) -> tuple[ProjectIdentity | None, str | None, str | None]:
    """(identity from project/repo, a folder path sent as ``project``, why what was sent could not be used).

    Upstream's outbox stores ``CLAUDE_PROJECT_DIR`` as ``project``: a path is a
    working folder to resolve, never a key. A value that is not a valid key or
    slug is dropped (attribution falls to the other evidence), not refused;
    the dropped value is returned so a token bound to projects can be refused
    instead of re-filed (ADR 0033).
    """
    project, repo = _text(attrs, "project"), _text(attrs, "repo")
    cwd = None
    if project and project.startswith(("/", "~")):
        cwd, project = project, None
    sent = {name: attrs.get(name) for name in ("project", "repo") if not _blank(attrs.get(name))}
    if cwd is not None:
        sent.pop("project", None)
    why: str | None = None  # why the first candidate failed: a contradiction says so, not "not a key"
    for candidate in ({"project": project, "repo": repo}, {"repo": repo}, {"project": project}):
        if not any(candidate.values()):
            continue
        try:
            found = from_attrs(candidate, None)
        except InvalidKey as exc:
            why = why or (str(exc) if project and repo and "disagree" in str(exc) else None)
            continue
        if found is not None:
            dropped = next((str(v) for name, v in sent.items() if not candidate.get(name)), None)
            return found, cwd, (why or _not_a_key(dropped)) if dropped is not None else None
    value = next((str(v) for v in sent.values()), None)
    return None, cwd, _not_a_key(value) if value is not None else None


def _not_a_key(value: str) -> str:
    return f"project {value[:120]!r} is not a project key or owner/name"


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def parse_request(type_: Any, content: Any, attrs: Any, *, max_chars: int) -> MarkerRequest:
    """Validate a marker body as upstream does; MarkerInvalid (400) only for type, content and attrs' shape.

    Every attr of any JSON type is accepted: the ones the kernel uses are read
    when they are usable and ignored otherwise, so a payload upstream took is
    never refused (a refused POST stops the client's outbox for good).
    """
    if not isinstance(type_, str) or "\x00" in type_:
        raise MarkerInvalid(f"invalid marker type: {type_!r}")
    marker_type = type_.strip().lower()
    if marker_type not in MARKER_TYPES:
        raise MarkerInvalid(f"invalid marker type: {marker_type!r}")
    if not attrs:
        attrs = {}
    if not isinstance(attrs, Mapping):
        raise MarkerInvalid("attrs must be an object")
    sent = attrs
    attrs = _bounded_attrs(attrs)
    if not isinstance(content, str):
        raise MarkerInvalid("content is required")
    if has_lone_surrogate(content) or has_lone_surrogate(attrs):
        raise MarkerInvalid("content or attrs hold a lone surrogate (not valid Unicode text)")
    # A NUL (upstream wrote it to the file) is no text Postgres stores: the replacement character stands for it.
    text = _normalise_newlines(content.replace("\x00", "\ufffd")).strip("\n")  # kept as written, but for surrounding blank lines
    if not text.strip():
        raise MarkerInvalid("content is required")
    if len(text.strip()) > max_chars:  # upstream measures the trimmed content
        raise MarkerInvalid("content exceeds 4KB limit" if max_chars == 4096 else f"content exceeds the {max_chars}-character limit")
    identity, path_project, unreadable = _identity(attrs)
    try:
        worktree = normalise_worktree(attrs.get("worktree")) if isinstance(attrs.get("worktree"), str) else None
    except InvalidKey:
        worktree = None
    cwd = _text(attrs, "cwd")
    cwd = cwd if cwd and cwd.startswith(("/", "~")) else path_project
    label = _text(attrs, "scope")
    fleet = marker_type == "signal" and ((label or "").lower() == FLEET or (_text(attrs, "fleet") or "").lower() in _TRUE)
    raw_title = attrs.get("title")
    title_given = isinstance(raw_title, str) and bool(raw_title.strip()) and "\x00" not in raw_title
    title = _normalise_newlines(raw_title).strip() if title_given else default_title(text)
    title = title if len(title) <= 200 else clip_words(title, 200)  # the codec quotes any title; a huge one is clipped
    severity = (_text(attrs, "severity") or "").lower()
    status = (_text(attrs, "status") or "").lower() or None
    until, ttl_days = expiry_attrs(attrs)
    return MarkerRequest(
        type=marker_type,
        content=scrub(text),  # secrets never reach the vault (ADR 0021); the body hash is of what was sent
        title=scrub(title),
        body_hash=body_hash(type_, content, sent),
        identity=identity,
        worktree=worktree,
        cwd=cwd,
        session_id=_text(attrs, "session_id"),
        source=_scrubbed(_text(attrs, "source")),  # the labels are written into the vault too: no secret in them either
        severity=severity if severity in SEVERITIES else None,
        scope=FLEET if fleet else "project",
        label=_scrubbed(label),
        status=status,
        target=_scrubbed(_text(attrs, "target")),
        title_given=title_given,
        unreadable_project=unreadable,
        supersedes=supersedes_refs(attrs.get("supersedes")),
        valid_until=until,
        ttl_days=ttl_days,
        commit=commit_attr(attrs.get("commit")),
        paths=paths_attr(attrs.get("paths")),
    )


def _scrubbed(value: str | None) -> str | None:
    return scrub(value) if value else value


_COMMIT = re.compile(r"[0-9a-f]{4,64}")
MAX_PATHS = 20


def commit_attr(value: Any) -> str | None:
    """A commit id as sent (hex, 4 to 64 characters, lowercased); anything else is ignored, as any unusable attr."""
    if isinstance(value, str) and _COMMIT.fullmatch(value.strip().lower()):
        return value.strip().lower()
    return None


def paths_attr(value: Any) -> tuple[str, ...]:
    """Repository paths as sent: strings of 1 to 300 characters with no NUL, at most 20; anything else ignored."""
    if not isinstance(value, list):
        return ()
    kept = [p.strip() for p in value if isinstance(p, str) and 0 < len(p.strip()) <= 300 and "\x00" not in p]
    return tuple(dict.fromkeys(kept))[:MAX_PATHS]


def default_title(content: str, limit: int = 120) -> str:
    """A title from content: its first non-empty line, cut at ``limit`` characters on a word."""
    for line in content.split("\n"):
        line = line.strip().lstrip("#").strip()
        if line:
            return clip_words(line, limit)
    return "untitled"
