"""Ingest (UPSTREAM.md 1.9), the pure half: reading a classifier's answer, the regex fallback, the notes' texts.

A message is classified into semantic text (what to keep as written),
extractables (URLs, YouTube videos, repositories, local paths to fetch), a
title (at most 80 characters) and 2-5 tags. The classifier is an LLM asked
for a JSON object; ``parse_classification`` finds that object in a fenced
block, a reply starting with ``{`` or between the outermost braces, and
returns None for anything else, so the caller falls back to
``regex_classification`` (every http(s) URL is an extractable, the rest of
the text is the semantic text). The note bodies are upstream's. Fetched text
is third-party content: ``defuse_markers`` keeps its inline brain markers
(``<!-- @signal ... -->``) from being read as the note's own (a web page
cannot raise a signal or inject a block).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MAX_TITLE_CHARS = 80
MAX_TAGS = 5
MAX_EXTRACTABLES = 20  # a message naming more is cut here, with an error saying so
PREVIEW_CHARS = 500
MAX_UPLOAD_CHARS = 500_000  # an uploaded file's text kept in its note
ORIGINAL_CHARS = 500
NOTE_FALLBACK = "ingest"
MAIN_TAG = "brain-api"
TAGS = {
    "url": ("url", "extracted"),
    "youtube": ("youtube", "transcript", "extracted"),
    "repo": ("repo", "extracted"),
    "local_path": ("local-file", "extracted"),
}
UPLOAD_TAGS = ("uploaded-file", "multipart")

_URL = re.compile(r"https?://[^\s<>\"'`)\]]+", re.IGNORECASE)
_TRAILING = ".,;:!?"
_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL | re.IGNORECASE)
_GITHUB = re.compile(r"^https?://(?:www\.)?github\.com/[^/\s]+/[^/\s]+", re.IGNORECASE)
_YOUTUBE = re.compile(r"^https?://(?:(?:www\.|m\.)?youtube\.com/watch\b|youtu\.be/)", re.IGNORECASE)
_MARKER_OPEN = re.compile(r"<!--(\s*)@")

CLASSIFY_PROMPT = (
    "You sort a message someone wants kept in a team's knowledge base. Answer one JSON object, nothing else, with: "
    '"semantic_text": the message\'s own knowledge, without the references, as written; '
    '"extractables": a list of {"type": "url"|"youtube"|"repo"|"local_path", "value": the URL or path, "hint": a few words on what it is}; '
    '"title": a title of at most 80 characters; "tags": 2 to 5 short lowercase tags.'
)


@dataclass(frozen=True)
class Extractable:
    """One reference to fetch: its type, the URL or path, and a few words on what it is."""

    type: str
    value: str
    hint: str = ""


@dataclass(frozen=True)
class Classified:
    """What a message holds: text to keep, references to fetch, a title and tags; ``by`` says who decided (llm or regex)."""

    semantic_text: str
    extractables: tuple[Extractable, ...]
    title: str
    tags: tuple[str, ...]
    by: str = "regex"
    dropped: int = 0  # extractables past MAX_EXTRACTABLES, left out


@dataclass
class Note:
    """An inbox note to write: title, markdown body, tags."""

    title: str
    body: str
    tags: list[str] = field(default_factory=list)


def _json_object(reply: str) -> dict[str, Any] | None:
    """The JSON object of a reply: a fenced block, the whole reply when it starts with ``{``, else the outermost braces."""
    text = reply.strip()
    candidates = []
    fenced = _FENCE.search(text)
    if fenced:
        candidates.append(fenced.group(1))
    if text.startswith("{"):
        candidates.append(text)
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last:
        candidates.append(text[first : last + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _tags(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    tags = [str(t).strip() for t in value if isinstance(t, (str, int, float)) and str(t).strip()]
    return tuple(dict.fromkeys(t[:60] for t in tags))[:MAX_TAGS]


def _cap(items: list[Extractable]) -> tuple[tuple[Extractable, ...], int]:
    unique = list(dict.fromkeys(items))
    return tuple(unique[:MAX_EXTRACTABLES]), max(0, len(unique) - MAX_EXTRACTABLES)


def parse_classification(reply: str) -> Classified | None:
    """The classifier's answer read as upstream reads it; None when it holds no usable object (then the regex fallback)."""
    data = _json_object(reply)
    if data is None:
        return None
    found: list[Extractable] = []
    raw = data.get("extractables")
    for item in raw if isinstance(raw, list) else ():
        if not isinstance(item, dict) or not isinstance(item.get("value"), str) or not item["value"].strip():
            continue
        hint = item.get("hint")
        found.append(Extractable(str(item.get("type") or "").strip().lower(), item["value"].strip(), hint.strip() if isinstance(hint, str) else ""))
    semantic = data.get("semantic_text")
    title = data.get("title")
    extractables, dropped = _cap(found)
    return Classified(
        semantic_text=semantic.strip() if isinstance(semantic, str) else "",
        extractables=extractables,
        title=(title.strip() if isinstance(title, str) else "")[:MAX_TITLE_CHARS],
        tags=_tags(data.get("tags")),
        by="llm",
        dropped=dropped,
    )


def url_type(url: str) -> str:
    """The extractable type of a URL by its shape: GitHub ``repo``, YouTube ``youtube``, else ``url``."""
    if _GITHUB.match(url):
        return "repo"
    if _YOUTUBE.match(url):
        return "youtube"
    return "url"


def regex_classification(message: str) -> Classified:
    """The fallback: every http(s) URL is an extractable; the remaining text is the semantic text, its first 80 characters the title."""
    found: list[Extractable] = []
    for match in _URL.finditer(message):
        url = match.group(0).rstrip(_TRAILING)
        found.append(Extractable(url_type(url), url))
    rest = _URL.sub(" ", message)
    semantic = "\n".join(" ".join(line.split()) for line in rest.splitlines()).strip()
    semantic = re.sub(r"\n{3,}", "\n\n", semantic)
    extractables, dropped = _cap(found)
    return Classified(semantic, extractables, " ".join(semantic.split())[:MAX_TITLE_CHARS], (), "regex", dropped)


def defuse_markers(text: str) -> str:
    """Fetched text with its inline brain markers made inert (``<!-- @x`` becomes ``<!-- (at)x``): read, never obeyed."""
    return _MARKER_OPEN.sub(r"<!--\1(at)", text)


def fetched_body(heading: str, label: str, source: str, fetched_at: str, text: str) -> str:
    """An extracted note's body: ``# <heading>: <label> (<source>)``, its source and time, a rule, then the text."""
    return f"# {heading}: {label} ({source})\n\nSource: {source}\nFetched: {fetched_at}\n\n---\n\n{text.rstrip()}\n"


def repo_body(label: str, source: str, fetched_at: str, readme: str, files: list[str], more: int) -> str:
    """A repository's note: its README (or a line saying there is none) and its file tree."""
    tree = "\n".join(f"- {name}" for name in files) or "(no files)"
    if more:
        tree += f"\n- ... ({more} more)"
    text = f"{readme.rstrip() or '(no README)'}\n\n## File Tree\n\n{tree}"
    return fetched_body("Repository", label, source, fetched_at, text)


def upload_body(name: str, text: str) -> str:
    """An uploaded file's note."""
    return f"# Uploaded File: {name}\n\n{text.rstrip()}\n"


def main_body(semantic_text: str, batch_id: str, message: str, related: list[str]) -> str:
    """The message's own note: its semantic text (or a line counting the references), the batch, the message, the links."""
    lines = [semantic_text.strip() or f"(no semantic text — ingested {len(related)} references)", "", "---", ""]
    lines.append(f"_ingest_batch: {batch_id}_")
    lines.append(f"_original_message: {message[:ORIGINAL_CHARS]}_")
    if related:
        lines += ["", "## Related Vault Notes", ""] + [f"- [[{stem}]]" for stem in related]
    return "\n".join(lines) + "\n"
