"""Validation of project keys and repository slugs (pure).

A project key is the short name of a project (``agentihooks``); a repo slug is
``owner/name`` with optional nested groups (``group/sub/name``). Both end up in
file paths and SQL filters, so anything that could escape a folder or smuggle
control characters is refused here, once, for every entry point.
"""

from __future__ import annotations

import re

_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,99}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# A slug ends up in index rows, B-tree keys and file names: 28 segments of 100 characters made an index
# row too large and 41 a file name too long. Real nested groups are far shorter.
MAX_SLUG_CHARS = 200
MAX_SLUG_SEGMENTS = 8


class InvalidKey(ValueError):
    """A project key or repo slug that cannot be used safely."""


def _check_segment(segment: str, what: str, original: str) -> None:
    if segment in ("", ".", "..") or not _SEGMENT.match(segment):
        raise InvalidKey(f"invalid {what} {original!r}: segment {segment!r} is not allowed")


def normalise_key(value: str) -> str:
    """Return the canonical (lower-case) project key or raise InvalidKey."""
    if not isinstance(value, str):
        raise InvalidKey("project must be a string")
    if _CONTROL.search(value):
        raise InvalidKey("project contains control characters")
    text = value.strip()
    if "/" in text or "\\" in text:
        raise InvalidKey(f"invalid project key {value!r}: use the owner/name slug as repo, or the short key")
    _check_segment(text, "project key", value)
    return text.lower()


def normalise_slug(value: str) -> str:
    """Return the canonical (lower-case) ``owner/name`` slug or raise InvalidKey."""
    if not isinstance(value, str):
        raise InvalidKey("repo must be a string")
    if _CONTROL.search(value):
        raise InvalidKey("repo contains control characters")
    text = value.strip()
    if text.startswith("/") or "\\" in text:
        raise InvalidKey(f"invalid repo slug {value!r}: absolute paths are not slugs")
    text = text.rstrip("/")
    if text.endswith(".git"):
        text = text[:-4]
    if len(text) > MAX_SLUG_CHARS:
        raise InvalidKey(f"invalid repo slug: longer than {MAX_SLUG_CHARS} characters")
    parts = text.split("/")
    if len(parts) < 2:
        raise InvalidKey(f"invalid repo slug {value!r}: expected owner/name")
    if len(parts) > MAX_SLUG_SEGMENTS:
        raise InvalidKey(f"invalid repo slug: more than {MAX_SLUG_SEGMENTS} segments")
    for part in parts:
        _check_segment(part, "repo slug", value)
    return "/".join(parts).lower()


def key_of_slug(slug: str) -> str:
    """The canonical short key of a slug: its last segment."""
    return slug.rsplit("/", 1)[-1].lower()


def parse_project_ref(value: str) -> tuple[str, str | None]:
    """Parse what a client sends as a project: a short key or an owner/name slug.

    Returns (key, slug or None). Raises InvalidKey for anything else.
    """
    if isinstance(value, str) and "/" in value.strip().rstrip("/"):
        slug = normalise_slug(value)
        return key_of_slug(slug), slug
    return normalise_key(value), None
