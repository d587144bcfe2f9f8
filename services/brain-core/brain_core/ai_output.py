"""The keeper's AI output, parsed (pure): the six sections of UPSTREAM.md 5.6 as values.

Sections start at headings numbered 1 to 6 (``### 1. Missing Edges`` ...;
any heading level, ``1.``, ``1)`` or ``1:``); text before the first is
ignored. Upstream needed exact line shapes (ADR 0017); here every line is
first cleaned of list bullets (``-``, ``*``, ``+``, ``•``, ``1.``), bold
markers and a backtick pair around the whole line, and both ``->`` and ``→``
are accepted wherever upstream wanted ``→``:

1. edges ``src --type--> tgt — reason`` (also ``--type->``, ``--type→``,
   ``-type->``; the reason is optional). Per pair the strongest type wins:
   parent > child > sibling > unblocks > supersedes > related. Self-loops and
   unknown types are refused, with the line.
2. ``MERGE: a + b → title`` and ``SPLIT: a → ...``; a merge title is cut to a
   name (``merge_title``), never the model's rationale.
3. ``ESCALATE: <source> → <severity> (reason)`` and ``CLEAR: <source>
   (reason)``; a multi-word source is written in backticks.
4. the operator intent: one paragraph, or a JSON object project -> intent
   (a ``fleet``, ``*`` or ``all`` key is the fleet-wide paragraph).
5. health ``N/10 — reason`` (the first one in the section), else 0,
   ``unparseable``.
6. ``SUMMARY: <arc-id> | <sentence>``; ``SKIP`` and repeated ids ignored.

Lines a section does not understand are kept in ``unparsed`` so the apply
step can report them instead of dropping them silently.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from brain_core.text import clip_words, one_line

EDGE_TYPES = ("parent", "child", "sibling", "unblocks", "supersedes", "related")  # strongest first
SEVERITIES = ("info", "warning", "critical", "nuclear")
FLEET_KEYS = frozenset({"fleet", "*", "all", "_fleet", "overall"})
TITLE_MAX_CHARS = 80

_HEADING = re.compile(r"^#{1,6}\s*(?:\*\*)?\s*([1-6])\s*[.):]")
_BULLET = re.compile(r"^(?:[-*+•]|\d{1,3}[.)])\s+")
_ARROW = r"(?:-{1,2}>|→|=>)"
_EDGE = re.compile(
    rf"^(?P<src>\S+?)\s*(?:-{{1,2}}|—|–)\s*\[?(?P<type>[A-Za-z][A-Za-z_]*)\]?\s*{_ARROW}\s*(?P<tgt>[^\s,;]+)\s*(?:(?:[—–:]|-{{1,2}})\s*(?P<reason>.*))?$"
)
_MERGE = re.compile(rf"^MERGE\s*:\s*(?P<a>\S+)\s*\+\s*(?P<b>[^\s→]+?)\s*(?:{_ARROW}\s*(?P<title>.*))?$", re.I)
_SPLIT = re.compile(rf"^SPLIT\s*:\s*(?P<a>[^\s→]+?)\s*(?:(?:{_ARROW}|:)\s*(?P<rest>.*))?$", re.I)
_SOURCE = r"(?:`(?P<qsrc>[^`]+)`|(?P<src>[^\s(→]+?))"
_ESCALATE = re.compile(rf"^ESCALATE\s*:\s*{_SOURCE}\s*(?:{_ARROW}|\bto\b)\s*(?P<sev>[A-Za-z]+)\s*(?:\((?P<reason>.*)\))?\s*\.?$", re.I)
_CLEAR = re.compile(rf"^CLEAR\s*:\s*{_SOURCE}\s*(?:\((?P<reason>.*)\))?\s*\.?$", re.I)
_HEALTH = re.compile(r"(?P<score>\d+(?:\.\d+)?)\s*/\s*10\b\s*(?:[—–:]|-{1,2})?\s*(?P<reason>.*)")
_SUMMARY = re.compile(r"^SUMMARY\s*:\s*(?P<id>[^\s|]+)\s*\|\s*(?P<text>.*)$", re.I)
_TITLE_CUT = re.compile(r"\s*(?:[—–]|--)\s+|\s+-\s+|\s*;\s+|\s+\(|\s+because\s+", re.I)


@dataclass(frozen=True)
class Edge:
    source: str
    type: str
    target: str
    reason: str = ""


@dataclass(frozen=True)
class Merge:
    a: str
    b: str
    title: str | None  # a name, or None to keep a's title


@dataclass(frozen=True)
class Split:
    arc: str
    detail: str


@dataclass(frozen=True)
class SignalDirective:
    action: str  # "escalate" or "clear"
    source: str
    severity: str | None
    reason: str


@dataclass(frozen=True)
class Health:
    score: int
    reason: str


@dataclass
class AIOutput:
    """Everything one AI answer asks for, section by section."""

    edges: list[Edge] = field(default_factory=list)
    merges: list[Merge] = field(default_factory=list)
    splits: list[Split] = field(default_factory=list)
    signals: list[SignalDirective] = field(default_factory=list)
    intent: str | None = None  # the fleet-wide paragraph
    project_intents: dict[str, str] = field(default_factory=dict)  # project id or key -> intent
    health: Health = field(default_factory=lambda: Health(0, "unparseable"))
    summaries: list[tuple[str, str]] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)  # {section, line, reason}
    unparsed: list[dict[str, str]] = field(default_factory=list)  # {section, line}
    sections: list[int] = field(default_factory=list)  # which of the six were present


def clean_line(line: str) -> str:
    """A line without list bullets, bold markers or a backtick pair around the whole of it."""
    text = line.strip()
    for _ in range(3):
        before = text
        text = _BULLET.sub("", text).strip()
        if text.startswith("**") and "**" in text[2:]:
            text = text.replace("**", "", 2).strip()
        if len(text) > 1 and text[0] == "`" and text[-1] == "`" and "`" not in text[1:-1]:
            text = text[1:-1].strip()
        if text == before:
            break
    return text


def clean_id(value: str) -> str:
    """An arc id as the model wrote it, without backticks, quotes, wiki brackets or trailing punctuation."""
    text = value.strip().strip("`*\"'").strip()
    if text.startswith("[[") and text.endswith("]]"):
        text = text[2:-2]
    return text.rstrip(",;:.").strip("`")


def merge_title(raw: str | None) -> str | None:
    """A merge's title as a name: cut at the first separator that starts a rationale, backticks and quotes removed."""
    if raw is None:
        return None
    text = one_line(raw).replace("`", "").replace("**", "").strip()
    match = _TITLE_CUT.search(text)
    if match:
        text = text[: match.start()]
    text = text.strip().strip("\"'“”").rstrip(" .,;:").strip()
    return clip_words(text, TITLE_MAX_CHARS) or None


def sections_of(text: str) -> dict[int, list[str]]:
    """The raw lines of each numbered section (text before section 1, or outside any, ignored)."""
    out: dict[int, list[str]] = {}
    current: int | None = None
    for line in text.splitlines():
        match = _HEADING.match(line.strip()) if line.lstrip().startswith("#") else None
        if match:
            current = int(match.group(1))
            out.setdefault(current, [])
            continue
        if current is not None:
            out[current].append(line)
    return out


def _edges(lines: list[str], result: AIOutput) -> None:
    best: dict[tuple[str, str], Edge] = {}
    for raw in lines:
        line = clean_line(raw)
        if not line or line.lower() in ("none", "(none)", "n/a"):
            continue
        match = _EDGE.match(line)
        if not match:
            result.unparsed.append({"section": "edges", "line": line})
            continue
        src, tgt, kind = clean_id(match.group("src")), clean_id(match.group("tgt")), match.group("type").lower()
        if kind not in EDGE_TYPES:
            result.refused.append({"section": "edges", "line": line, "reason": f"unknown edge type {kind!r}"})
            continue
        if src == tgt:
            result.refused.append({"section": "edges", "line": line, "reason": "self-loop"})
            continue
        edge = Edge(src, kind, tgt, (match.group("reason") or "").strip())
        held = best.get((src, tgt))
        if held is None or EDGE_TYPES.index(kind) < EDGE_TYPES.index(held.type):
            best[(src, tgt)] = edge
    result.edges = list(best.values())


def _merges(lines: list[str], result: AIOutput) -> None:
    for raw in lines:
        line = clean_line(raw)
        if not line or line.lower() in ("none", "(none)", "n/a"):
            continue
        if match := _MERGE.match(line):
            a, b = clean_id(match.group("a")), clean_id(match.group("b"))
            result.merges.append(Merge(a, b, merge_title(match.group("title"))))
        elif match := _SPLIT.match(line):
            result.splits.append(Split(clean_id(match.group("a")), one_line(match.group("rest") or "")))
        else:
            result.unparsed.append({"section": "merges", "line": line})


def _unwrapped(line: str) -> str:
    """A directive wrapped whole in backticks, unwrapped even when its source is quoted in backticks too."""
    text = line[:-1].rstrip() if line.endswith("`.") else line
    if len(text) > 2 and text[0] == "`" and text[-1] == "`" and re.match(r"`\s*(?:ESCALATE|CLEAR)\s*:", text, re.I):
        return text[1:-1].strip()
    return line


def _signals(lines: list[str], result: AIOutput) -> None:
    for raw in lines:
        line = _unwrapped(clean_line(raw))
        if not line or line.lower() in ("none", "(none)", "n/a"):
            continue
        if match := _ESCALATE.match(line):
            source = (match.group("qsrc") or match.group("src") or "").strip()
            severity = match.group("sev").lower()
            if severity not in SEVERITIES:
                result.refused.append({"section": "signals", "line": line, "reason": f"unknown severity {severity!r}"})
                continue
            result.signals.append(SignalDirective("escalate", source, severity, one_line(match.group("reason") or "")))
        elif match := _CLEAR.match(line):
            source = (match.group("qsrc") or match.group("src") or "").strip()
            result.signals.append(SignalDirective("clear", source, None, one_line(match.group("reason") or "") or "cleared by the keeper"))
        else:
            result.unparsed.append({"section": "signals", "line": line})


def _json_object(text: str) -> dict[str, Any] | None:
    fenced = re.search(r"```(?:json)?\s*(\{.*\})\s*```", text, re.S)
    body = fenced.group(1) if fenced else text[text.find("{") : text.rfind("}") + 1] if "{" in text and "}" in text else ""
    if not body:
        return None
    try:
        loaded = json.loads(body)
    except json.JSONDecodeError:
        return None
    return loaded if isinstance(loaded, dict) else None


def _intent(lines: list[str], result: AIOutput) -> None:
    text = "\n".join(ln for ln in lines if not ln.lstrip().startswith("###"))
    loaded = _json_object(text) if text.lstrip().startswith(("{", "```")) else None
    if loaded is not None:
        for key, value in loaded.items():
            if not isinstance(value, str) or not value.strip():
                continue
            if str(key).strip().lower() in FLEET_KEYS:
                result.intent = one_line(value)
            else:
                result.project_intents[clean_id(str(key))] = one_line(value)
        return
    paragraph = " ".join(clean_line(ln) for ln in text.splitlines() if clean_line(ln))
    result.intent = one_line(paragraph) or None


def _health(lines: list[str], result: AIOutput) -> None:
    for raw in lines:
        match = _HEALTH.search(clean_line(raw).replace("**", ""))
        if match:
            score = max(0, min(10, round(float(match.group("score")))))
            result.health = Health(score, one_line(match.group("reason")) or "no reason given")
            return


def _summaries(lines: list[str], result: AIOutput) -> None:
    seen: set[str] = set()
    for raw in lines:
        line = clean_line(raw)
        if not line or line.upper() == "SKIP":
            continue
        match = _SUMMARY.match(line)
        if not match:
            result.unparsed.append({"section": "summaries", "line": line})
            continue
        arc, text = clean_id(match.group("id")), one_line(match.group("text")).strip("`").strip()
        if not text or text.upper() == "SKIP" or arc in seen:
            continue
        seen.add(arc)
        result.summaries.append((arc, text))


_PARSERS = {1: _edges, 2: _merges, 3: _signals, 4: _intent, 5: _health, 6: _summaries}


def parse_ai_output(text: str) -> AIOutput:
    """The six sections of an AI answer (module docstring); missing sections are empty."""
    result = AIOutput()
    for number, lines in sorted(sections_of(text).items()):
        result.sections.append(number)
        _PARSERS[number](lines, result)
    return result
