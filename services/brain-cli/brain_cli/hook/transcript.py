"""The block markers an agent wrote in its transcript: assistant text only, parsed by ``brain_core``.

Claude Code's transcript is JSONL with ``{"type": "assistant", "message": {"content": [{"type":
"text", "text": ...}]}}`` lines; a Codex rollout has ``{"type": "response_item", "payload": {"type":
"message", "role": "assistant", "content": [{"type": "output_text", "text": ...}]}}``. Each assistant
message is parsed on its own, so an unclosed marker cannot swallow a later message. A marker that
opens inside a fenced code block or an inline code span is an example being shown (an agent explaining
the syntax), not memory, and is left out; a real marker's content may still hold code.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from brain_core.vault.inline import InlineMarker, parse_markers

POSTED_TYPES = ("lesson", "milestone", "signal", "decision")


@dataclass(frozen=True)
class Found:
    """One block marker of the transcript."""

    type: str
    content: str
    attrs: dict[str, str]


def _texts(content: object) -> Iterator[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("text", "output_text") and isinstance(part.get("text"), str):
                yield part["text"]


def assistant_texts(lines: list[str]) -> Iterator[str]:
    """The text of each assistant message, Claude's or Codex's; lines that are not JSON are skipped."""
    for line in lines:
        if '"assistant"' not in line:
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        message = item.get("message") if item.get("type") == "assistant" else item.get("payload") if item.get("type") == "response_item" else None
        if isinstance(message, dict) and message.get("role") == "assistant":
            text = "\n".join(_texts(message.get("content")))
            if text:
                yield text


def markers_in(path: Path) -> list[Found]:
    """Every block marker of the four posted types in the transcript's assistant text, in order."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    found = []
    for text in assistant_texts(lines):
        markers = parse_markers(text)
        if not markers:
            continue
        rows = text.split("\n")
        fenced = _fenced_lines(rows)
        for marker in markers:
            if marker.block and marker.type in POSTED_TYPES and marker.content and not _shown_as_code(marker, rows, fenced):
                found.append(Found(marker.type, marker.content, dict(marker.attrs)))
    return found


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _fenced_lines(rows: list[str]) -> set[int]:
    """The 1-based lines inside fenced code blocks (the fences included); an unclosed fence runs to the end (CommonMark)."""
    inside: set[int] = set()
    fence = ""
    for number, row in enumerate(rows, start=1):
        found = _FENCE.match(row)
        if fence:
            inside.add(number)
            if found and found.group(1)[0] == fence[0] and len(found.group(1)) >= len(fence) and not row[found.end() :].strip():
                fence = ""
        elif found and not (found.group(1)[0] == "`" and "`" in row[found.end() :]):  # a backtick fence's info string has none
            fence = found.group(1)
            inside.add(number)
    return inside


def _shown_as_code(marker: InlineMarker, rows: list[str], fenced: set[int]) -> bool:
    """Whether the marker opens inside a fenced block, or inside an inline code span of its line (an odd count of
    backticks before its opening comment)."""
    if marker.line in fenced:
        return True
    row = rows[marker.line - 1] if marker.line <= len(rows) else ""
    opening = re.search(rf"<!--\s*@{re.escape(marker.type)}\b", row)
    return opening is not None and row.count("`", 0, opening.start()) % 2 == 1


def marker_key(session_id: str, marker: Found) -> str:
    """The marker's durable idempotency key: a digest of (session, type, content)."""
    digest = hashlib.sha256(f"{session_id}\0{marker.type}\0{marker.content}".encode()).hexdigest()
    return f"hook-{digest[:32]}"
