"""The block markers an agent wrote in its transcript: assistant text only, parsed by ``brain_core``.

Claude Code's transcript is JSONL with ``{"type": "assistant", "message": {"content": [{"type":
"text", "text": ...}]}}`` lines; a Codex rollout has ``{"type": "response_item", "payload": {"type":
"message", "role": "assistant", "content": [{"type": "output_text", "text": ...}]}}``. Each assistant
message is parsed on its own, so an unclosed marker cannot swallow a later message.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from brain_core.vault.inline import parse_markers

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
        for marker in parse_markers(text):
            if marker.block and marker.type in POSTED_TYPES and marker.content:
                found.append(Found(marker.type, marker.content, dict(marker.attrs)))
    return found


def marker_key(session_id: str, marker: Found) -> str:
    """The marker's durable idempotency key: a digest of (session, type, content)."""
    digest = hashlib.sha256(f"{session_id}\0{marker.type}\0{marker.content}".encode()).hexdigest()
    return f"hook-{digest[:32]}"
