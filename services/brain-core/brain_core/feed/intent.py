"""Operator intent, per project and fleet-wide (pure).

An intent is a few sentences telling a new session what the operator is
driving at. Without an LLM it is derived from the hottest arcs; with one the
keeper asks for it and runs the answer through the same cap. The cap is by
length at a sentence boundary: whole sentences are kept while they fit, so an
intent is never cut mid-sentence (a single sentence longer than the cap is
kept whole rather than cut).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from brain_core.text import clip_words, one_line

INTENT_MAX_CHARS = 400
BLURB_CHARS = 80

# A sentence ends at . ! or ? (optionally followed by closing quotes or brackets)
# and then whitespace; "e.g." style abbreviations are rare in intents and at
# worst split a sentence early, which still never cuts one in the middle.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


@dataclass(frozen=True)
class ArcDigest:
    """What intent and feed text need from an arc."""

    cluster_id: str
    title: str
    heat: float = 0.0
    status: str | None = None
    summary: str | None = None
    region: str | None = None


def blurb(arc: ArcDigest, limit: int = BLURB_CHARS) -> str:
    """The arc's summary, else its title, clipped on a word boundary."""
    return clip_words(arc.summary if arc.summary and arc.summary.strip() else arc.title, limit)


def sentences(text: str) -> list[str]:
    """Split text into sentences (whitespace collapsed)."""
    flat = one_line(text)
    if not flat:
        return []
    return [s.strip() for s in _SENTENCE_END.split(flat) if s.strip()]


def cap_intent(text: str, max_chars: int = INTENT_MAX_CHARS) -> str:
    """Keep whole sentences while they fit in ``max_chars``; never cut one in the middle."""
    parts = sentences(text)
    if not parts:
        return ""
    kept = [parts[0]]
    length = len(parts[0])
    for part in parts[1:]:
        if length + 1 + len(part) > max_chars:
            break
        kept.append(part)
        length += 1 + len(part)
    result = " ".join(kept)
    if result[-1] not in ".!?\"')]":
        result += "."
    return result


def _sentence(text: str) -> str:
    text = text.rstrip(" .…")
    return text + "." if text else ""


def derive_intent(arcs: Sequence[ArcDigest], *, subject: str | None = None, max_chars: int = INTENT_MAX_CHARS) -> str:
    """An intent from the hottest arcs (highest heat first, ties in the order given), capped at a sentence boundary.

    Ties keep the caller's order, the index's (heat, then the most recently active, then the id), which the
    block's focus line reads too: by cluster id, a tie named one arc the focus and another the intent's.
    """
    ranked = sorted(arcs, key=lambda a: -a.heat)
    if not ranked:
        where = f" in {subject}" if subject else ""
        return f"No active work{where} right now."
    lead = ranked[0]
    parts = [_sentence(f"Focus{' in ' + subject if subject else ''}: {blurb(lead)} ({lead.status or 'active'})")]
    for arc in ranked[1:4]:
        parts.append(_sentence(f"Also: {blurb(arc)} ({arc.status or 'active'})"))
    return cap_intent(" ".join(parts), max_chars)


def focus_line(arc: ArcDigest | None, last_active: str | None) -> str:
    """One line: the hottest arc's summary or title, its status and when the project was last active."""
    if arc is None:
        return "Focus: nothing active yet."
    when = f", last active {last_active}" if last_active else ""
    return f"Focus: {blurb(arc)} ({arc.status or 'active'}{when})"


def intent_prompt(projects: Mapping[str, Sequence[ArcDigest]], max_chars: int = INTENT_MAX_CHARS) -> str:
    """The user message asking an LLM for one intent per project, as a JSON object."""
    lines = [
        "For each project below, write the operator's current intent in one to three sentences,",
        f"at most {max_chars} characters, from its hottest arcs of work.",
        'Answer with one JSON object only, mapping each project id to its intent: {"<project>": "<intent>"}.',
        "",
    ]
    for project in sorted(projects):
        lines.append(f"## {project}")
        for arc in sorted(projects[project], key=lambda a: -a.heat)[:5]:  # ties in the index's order, as derive_intent
            lines.append(f"- heat {arc.heat:.1f}, {arc.status or 'active'}: {blurb(arc, 160)}")
        lines.append("")
    return "\n".join(lines)


def parse_intent_map(answer: str, projects: Iterable[str], max_chars: int = INTENT_MAX_CHARS) -> dict[str, str]:
    """The project -> intent map from an LLM answer (JSON, possibly fenced); unknown keys dropped."""
    text = answer.strip()
    fenced = re.search(r"```(?:json)?\s*(\{.*\})\s*```", text, re.S)
    if fenced:
        text = fenced.group(1)
    else:
        start, end = text.find("{"), text.rfind("}")
        if start != -1 and end > start:
            text = text[start : end + 1]
    try:
        loaded: Any = json.loads(text)
    except json.JSONDecodeError:
        return {}
    if not isinstance(loaded, dict):
        return {}
    wanted = set(projects)
    result: dict[str, str] = {}
    for key, value in loaded.items():
        if key in wanted and isinstance(value, str) and value.strip():
            result[key] = cap_intent(value, max_chars)
    return result
