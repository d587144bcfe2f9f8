"""The LLM tick's prompt (pure): upstream's sections (UPSTREAM.md 5.5) with a Project column, scrubbed.

Sections, in upstream's order and caps: the arc table sorted by heat (top
250, then ``(+N more arcs, trimmed by heat)``) with a Project column, the
edge map (one line per pair with its strongest type, 500 lines at most),
active signals, a sample of 10 distinct lessons, the unsynthesized arcs
(the hottest 25 without a summary, with what opened them and a few of their
markers), the previous intent as whole sentences (upstream hard-cut it at
700 characters mid-sentence, heading included), the active
projects the intent map may name, and the tasks asking for the six sections
``brain_core.ai_output`` parses. Over 400,000 characters the edge map, then
the arc table, is replaced by a placeholder, then the text is cut. The whole
prompt goes through ``brain_core.redact.scrub`` (ADR 0017).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from brain_core.ai_output import EDGE_TYPES
from brain_core.feed.intent import cap_intent
from brain_core.redact import scrub
from brain_core.text import clip_words, one_line, table_cell

MAX_ARCS = 250
MAX_EDGES = 500
MAX_LESSONS = 10
MAX_SYNTH_ARCS = 25
IGNITION_CHARS = 240
MARKER_CHARS = 200
PREVIOUS_INTENT_CHARS = 700
MAX_PROMPT_CHARS = 400_000


@dataclass(frozen=True)
class PromptArc:
    cluster_id: str
    heat: float
    region: str | None
    status: str | None
    title: str
    project: str  # the Project column: repo slug or key, plus the other projects of a merged arc
    sessions: int = 0
    markers: int = 0


@dataclass(frozen=True)
class PromptSignal:
    severity: str
    source: str
    first_line: str


@dataclass(frozen=True)
class SynthArc:
    cluster_id: str
    project: str
    created: str
    heat: float
    status: str | None
    opened_with: str
    decisions: tuple[str, ...] = ()
    milestones: tuple[str, ...] = ()
    lessons: tuple[str, ...] = ()


@dataclass
class PromptInputs:
    arcs: Sequence[PromptArc] = ()  # hottest first
    arcs_total: int = 0
    edges: Sequence[tuple[str, str, str]] = ()  # (source, type, target)
    signals: Sequence[PromptSignal] = ()
    lessons: Sequence[str] = ()
    lessons_total: int = 0
    unsynthesized: Sequence[SynthArc] = ()
    previous_intent: str = ""
    projects: Sequence[str] = field(default_factory=list)


def strongest_edges(edges: Sequence[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """One edge per (source, target) pair, the strongest type kept; self-loops dropped."""
    rank = {t: i for i, t in enumerate(EDGE_TYPES)}
    best: dict[tuple[str, str], str] = {}
    for src, kind, tgt in edges:
        if src == tgt:
            continue
        held = best.get((src, tgt))
        if held is None or rank.get(kind, len(rank)) < rank.get(held, len(rank)):
            best[(src, tgt)] = kind
    return [(s, k, t) for (s, t), k in sorted(best.items())]


def _heat(value: float) -> str:
    return f"{value:g}"


def _arc_table(arcs: Sequence[PromptArc], total: int) -> str:
    lines = [
        "## Arc Table (sorted by heat desc)",
        "",
        "| # | Arc ID | Heat | Region | Status | Project | Title | Sessions | Markers |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, a in enumerate(arcs[:MAX_ARCS], 1):
        cells = [n, a.cluster_id, _heat(a.heat), a.region or "?", a.status or "?", a.project or "-", clip_words(a.title, 50), a.sessions, a.markers]
        lines.append("| " + " | ".join(table_cell(c) for c in cells) + " |")
    more = max(total, len(arcs)) - min(len(arcs), MAX_ARCS)
    if more > 0:
        lines.append(f"(+{more} more arcs, trimmed by heat)")
    return "\n".join(lines)


def _edge_map(edges: Sequence[tuple[str, str, str]]) -> str:
    kept = strongest_edges(edges)
    lines = ["## Edge Map", ""]
    if not kept:
        lines.append("(no edges found — this is a gap)")
    lines += [f"  {s} --{k}--> {t}" for s, k, t in kept[:MAX_EDGES]]
    if len(kept) > MAX_EDGES:
        lines.append(f"... and {len(kept) - MAX_EDGES} more edges (capped)")
    return "\n".join(lines)


def _signals(signals: Sequence[PromptSignal]) -> str:
    lines = ["## Active Signals", ""]
    seen: set[tuple[str, str]] = set()
    for s in signals:
        key = (s.source, s.first_line)
        if key in seen:
            continue
        seen.add(key)
        lines.append(f"  [{s.severity}] ({s.source}) {one_line(s.first_line)}")
    if len(lines) == 2:
        lines.append("(no active signals)")
    return "\n".join(lines)


def _lessons(lessons: Sequence[str], total: int) -> str:
    sample: list[str] = []
    seen: set[str] = set()
    for text in lessons:
        first = one_line(next((ln for ln in text.splitlines() if ln.strip()), ""))
        if first and first.lower() not in seen:
            seen.add(first.lower())
            sample.append(first)
        if len(sample) == MAX_LESSONS:
            break
    lines = [f"## Lessons (sample of {max(total, len(sample))} total)", ""]
    lines += [f"- {clip_words(s, MARKER_CHARS)}" for s in sample] or ["(no lessons yet)"]
    return "\n".join(lines)


def _unsynthesized(arcs: Sequence[SynthArc]) -> str:
    lines = ["## Unsynthesized Arcs (need a summary — see Task 6)", ""]
    for a in arcs[:MAX_SYNTH_ARCS]:
        lines += [
            f"- id: {a.cluster_id}",
            f"  project: {a.project or '-'}",
            f"  created: {a.created or '?'}",
            f"  heat: {_heat(a.heat)}",
            f"  status: {a.status or '?'}",
            f"  opened_with: {clip_words(a.opened_with, IGNITION_CHARS)}",
        ]
        for label, items in (("decision", a.decisions), ("milestone", a.milestones), ("lesson", a.lessons)):
            lines += [f"  {label}: {clip_words(x, MARKER_CHARS)}" for x in items[:2]]
    if len(lines) == 2:
        lines.append("(every arc has a summary)")
    return "\n".join(lines)


_FIRST_PROMPT = re.compile(r"^- \S+ first: (?P<text>.+)$", re.M)


def opened_with(body: str, fallback: str = "") -> str:
    """What opened an arc: upstream's ``## Ignition`` quote, else the first prompt ``brain cluster`` lists, else ``fallback``."""
    ignition = re.search(r"^## Ignition[ \t]*\n+(?P<text>(?:>.*\n?)+)", body, re.M)
    if ignition:
        return one_line(" ".join(ln.lstrip("> ") for ln in ignition.group("text").splitlines()))
    first = _FIRST_PROMPT.search(body)
    return one_line(first.group("text")) if first else one_line(fallback)


def previous_intent(body: str, max_chars: int = PREVIOUS_INTENT_CHARS) -> str:
    """The last intent as whole sentences within ``max_chars``, without its heading."""
    text = " ".join(ln.strip() for ln in body.splitlines() if ln.strip() and not ln.lstrip().startswith("#"))
    return cap_intent(text, max_chars) if text else ""


TASKS = f"""## Your Tasks

Answer with exactly these six sections, each under its heading, one item per line.

### 1. Missing Edges
Lines `<source-arc-id> --<type>--> <target-arc-id> — <reason>`, at most one edge per pair,
both ids from the Arc Table. Types: {", ".join(EDGE_TYPES)}.

### 2. Merge/Split
Lines `MERGE: <arc-a> + <arc-b> → <new title>` for arcs that are the same thread of work
(arc-a absorbs arc-b, keeping both projects); the title is a short name, no rationale.
Lines `SPLIT: <arc> → <why>` for arcs holding unrelated work.

### 3. Signal Escalation
Lines `ESCALATE: <source> → <info|warning|critical|nuclear> (<reason>)` and
`CLEAR: <source> (<reason>)`. Put a source of several words in backticks.

### 4. Operator Intent
One paragraph on what the operator is driving at, or a JSON object mapping each active
project id (listed above) to one to three complete sentences, with key "fleet" for the
fleet-wide paragraph.

### 5. Brain Health
One line `N/10 — <reason>`.

### 6. Arc Summaries
Lines `SUMMARY: <arc-id> | <one sentence>` for the unsynthesized arcs; `SKIP` when unsure.

Respond ONLY with the 6 sections."""


def build_prompt(inputs: PromptInputs, *, max_chars: int = MAX_PROMPT_CHARS) -> str:
    """The whole prompt (module docstring), secrets scrubbed."""
    head = (
        "You are the keeper of a memory vault shared by a fleet of AI coding agents. "
        "Below are its arcs (threads of work), their edges, active signals, lessons and the last intent. "
        "Propose the changes the six tasks at the end ask for."
    )
    intent = inputs.previous_intent or "(none yet)"
    projects = ", ".join(inputs.projects) if inputs.projects else "(none active)"
    parts = {
        "head": head,
        "arcs": _arc_table(inputs.arcs, inputs.arcs_total),
        "edges": _edge_map(inputs.edges),
        "signals": _signals(inputs.signals),
        "lessons": _lessons(inputs.lessons, inputs.lessons_total),
        "synth": _unsynthesized(inputs.unsynthesized),
        "intent": f"## Previous Intent\n\n{intent}",
        "projects": f"## Active Projects\n\n{projects}",
        "tasks": TASKS,
    }

    def joined() -> str:
        return "\n\n".join(parts.values()) + "\n"

    text = joined()
    if len(text) > max_chars:
        parts["edges"] = "## Edge Map\n\n(edge map omitted: prompt over its size cap)"
        text = joined()
    if len(text) > max_chars:
        parts["arcs"] = "## Arc Table (sorted by heat desc)\n\n(arc table omitted: prompt over its size cap)"
        text = joined()
    return scrub(text[:max_chars])
