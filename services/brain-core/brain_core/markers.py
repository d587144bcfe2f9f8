"""Marker requests: what an agent may post as a lesson, milestone, signal or decision (pure).

``parse_request`` holds every rule a ``POST /marker`` body must satisfy before
anything is written; a failure is a ``MarkerInvalid`` with the reason, which
the HTTP layer answers with a 4xx. The text a marker becomes in the vault is
``brain_core.vault.logs``; its index rows are ``brain_core.vault.records``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from brain_core.identity import ProjectIdentity, from_attrs, normalise_worktree
from brain_core.keys import InvalidKey
from brain_core.text import clip_words

MARKER_TYPES = ("lesson", "milestone", "signal", "decision")

SIGNAL_SCOPES = ("project", "fleet")

DEFAULT_SEVERITY = "info"

DEFAULT_STATUS = "accepted"

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
