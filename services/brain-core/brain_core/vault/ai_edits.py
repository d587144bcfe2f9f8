"""The vault edits an AI answer asks for, as text in, text out (pure): edges, signals, summaries, merges.

Each function returns the new text, or None when the file already says what
was asked (so applying the same answer twice changes nothing). Frontmatter
goes through the one codec's targeted ``update``; marker comments are
rewritten in place, every other byte kept.

- ``add_edge``: one ``<!-- @edge type=T target=X -->`` per target, under
  ``## Edges`` (added at the end when missing).
- ``set_signal``: the ``@signal`` markers whose ``source`` attribute is
  exactly the source (upstream matched a prefix; ADR 0017), and a signal
  file whose frontmatter ``source`` is: the severity replaced, every other
  attribute kept; a clear sets ``severity=resolved`` and appends
  ``(CLEARED: reason)`` to the content once.
- ``add_summary``: ``summary`` and ``synthesized: true``, never over an
  existing summary.
- ``merge_arcs``: A absorbs B (UPSTREAM.md 5.6, keeping both projects: ADR 0017): B's body
  under ``## Merged from <B>``, without its ``@edge`` markers and without
  blocks whose content A already holds; A's frontmatter gains the union of
  both arcs' projects, repos, worktrees and source sessions (A's primary
  project stays), ``merged_from`` and the title; B's text becomes the
  tombstone (``status: merged``, ``merged_into: A``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from brain_core.text import one_line, text_or_none
from brain_core.times import parse_time
from brain_core.vault import frontmatter
from brain_core.vault.inline import parse_attrs, parse_markers

CLEARED = "(CLEARED:"
BLOCK_TYPES = ("lesson", "milestone", "signal", "decision", "inject")

_ATTRS = r"(?P<attrs>(?:\s+[A-Za-z_][\w-]*=(?:\"[^\"]*\"|[^\s>\"]+))*)"
_SIGNAL_OPEN = re.compile(rf"<!--\s*@signal{_ATTRS}\s*-->")
_SIGNAL_CLOSE = re.compile(r"<!--\s*@/signal\s*-->")
_ATTR_TOKEN = re.compile(r"([A-Za-z_][\w-]*)=(\"[^\"]*\"|[^\s>\"]+)")
_EDGE_MARKER = re.compile(rf"[ \t]*<!--\s*@edge{_ATTRS}\s*-->[ \t]*\n?")
_EDGES_HEADING = re.compile(r"^## Edges[ \t]*$", re.M)


def _quoted(value: str) -> str:
    return value if value and re.fullmatch(r"[^\s>\"]+", value) else f'"{value}"'


def add_edge(text: str, edge_type: str, target: str) -> str | None:
    """``text`` with an edge to ``target``; None when any edge to it is there already."""
    if any(m.type == "edge" and m.attrs.get("target") == target for m in parse_markers(text)):
        return None
    marker = f"<!-- @edge type={_quoted(edge_type)} target={_quoted(target)} -->"
    heading = _EDGES_HEADING.search(text)
    if heading is None:
        return text.rstrip("\n") + f"\n\n## Edges\n\n{marker}\n"
    at = heading.end()
    rest = text[at:]
    # after the heading and the edge markers already under it
    run = re.match(r"(?:\n[ \t]*(?:<!--\s*@edge[^>]*-->)?[ \t]*)*", rest)
    consumed = rest[: run.end()] if run else ""
    consumed = consumed.rstrip(" \t\n")
    pos = at + len(consumed)
    return text[:pos] + ("\n\n" if not consumed else "\n") + marker + text[pos:]


def _rewrite_opening(opening_attrs: str, severity: str) -> str:
    tokens = [(m.group(1), m.group(2)) for m in _ATTR_TOKEN.finditer(opening_attrs)]
    if any(k == "severity" for k, _ in tokens):
        tokens = [(k, severity if k == "severity" else v) for k, v in tokens]
    else:
        tokens.insert(0, ("severity", severity))
    return "<!-- @signal " + " ".join(f"{k}={v}" for k, v in tokens) + " -->"


def set_signal(text: str, source: str, *, severity: str, reason: str | None = None) -> tuple[str, int] | None:
    """Signals of exactly ``source`` set to ``severity`` (a clear: ``resolved`` plus ``reason``); None when none changes.

    Returns the new text and the number of signals changed.
    """
    clear = severity == "resolved"
    out: list[str] = []
    pos = changed = 0
    for match in _SIGNAL_OPEN.finditer(text):
        if match.start() < pos:
            continue
        attrs = parse_attrs(match.group("attrs") or "")
        if attrs.get("source") != source:
            continue
        close = _SIGNAL_CLOSE.search(text, match.end())
        following = _SIGNAL_OPEN.search(text, match.end())
        block_end = close.start() if close is not None and (following is None or following.start() > close.start()) else None
        content = text[match.end() : block_end] if block_end is not None else ""
        needs_severity = attrs.get("severity", "").lower() != severity
        needs_note = clear and block_end is not None and CLEARED not in content
        if not needs_severity and not needs_note:
            continue
        out.append(text[pos : match.start()])
        out.append(_rewrite_opening(match.group("attrs") or "", severity) if needs_severity else match.group(0))
        pos = match.end()
        if needs_note and block_end is not None:
            body = content.rstrip()
            out.append(body + f" (CLEARED: {one_line(reason)})" + content[len(body) :])
            pos = block_end
        changed += 1
    new = "".join(out) + text[pos:] if changed else text
    doc = frontmatter.parse(new)
    if doc.has_frontmatter and text_or_none(doc.meta.get("source")) == source and "severity" in doc.meta and not doc.meta.get("cluster_id"):
        updates: dict[str, Any] = {}
        if str(doc.meta.get("severity") or "").lower() != severity:
            updates["severity"] = severity
        if updates:
            new = frontmatter.update(new, updates)
        if clear and CLEARED not in doc.body:
            new = new.rstrip("\n") + f"\n\n(CLEARED: {one_line(reason)})\n"
            updates["cleared"] = True
        changed += 1 if updates else 0
    return (new, changed) if changed else None


def add_summary(text: str, summary: str) -> str | None:
    """``text`` with ``summary`` and ``synthesized: true``; None when it has a summary or no frontmatter."""
    doc = frontmatter.parse(text)
    if not doc.has_frontmatter or text_or_none(doc.meta.get("summary")):
        return None
    return frontmatter.update(text, {"summary": summary, "synthesized": True})


def _norm(text: str) -> str:
    return one_line(text).lower()


def _union(*groups: Iterable[Any]) -> list[str]:
    out: list[str] = []
    for group in groups:
        for value in group:
            text = text_or_none(value)
            if text and text not in out:
                out.append(text)
    return out


def _listed(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    return [value] if text_or_none(value) else []


def attributed(meta: dict[str, Any]) -> bool:
    """Whether an arc's project fields are trusted (written with ``projects`` or ``project_source``)."""
    return "projects" in meta or "project_source" in meta


def _projects(meta: dict[str, Any]) -> list[str]:
    if not attributed(meta):
        return []
    return _union(_listed(meta.get("project")), _listed(meta.get("projects")))


def _repos(meta: dict[str, Any]) -> list[str]:
    if not attributed(meta):
        return []
    return _union(_listed(meta.get("repo")), _listed(meta.get("repos")))


def _absorbed_body(a_body: str, b_body: str) -> str:
    """B's body without its ``@edge`` markers, its title line and the blocks A already holds."""
    held = {(m.type, _norm(m.content)) for m in parse_markers(a_body) if m.block}
    body = _EDGE_MARKER.sub("", b_body)
    for kind in BLOCK_TYPES:
        block = re.compile(rf"[ \t]*<!--\s*@{kind}{_ATTRS}\s*-->(?P<content>.*?)<!--\s*@/{kind}\s*-->[ \t]*\n?", re.S)
        body = block.sub(lambda m, k=kind: "" if (k, _norm(m.group("content"))) in held else m.group(0), body)
    lines = body.strip("\n").splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "\n".join(lines).strip("\n")


@dataclass(frozen=True)
class MergedTexts:
    """A's new text and B's tombstone text."""

    survivor: str
    tombstone: str


def merge_heading(b_id: str) -> str:
    return f"## Merged from {b_id}"


def merge_arcs(a_text: str, b_text: str, *, a_id: str, b_id: str, title: str | None) -> MergedTexts | None:
    """A absorbing B (module docstring); None when A already holds ``## Merged from <B>``."""
    heading = merge_heading(b_id)
    a, b = frontmatter.parse(a_text), frontmatter.parse(b_text)
    if re.search(rf"^{re.escape(heading)}[ \t]*$", a.body, re.M):
        return None
    am, bm = a.meta, b.meta
    changes: dict[str, Any] = {}
    projects = _union(_projects(am), _projects(bm))
    if projects:
        changes["projects"] = projects
        if not _projects(am):
            changes["project"] = projects[0]  # A had no trusted project: B's becomes the primary
    repos = _union(_repos(am), _repos(bm))
    if len(repos) > 1 or "repos" in am:
        changes["repos"] = repos
    if repos and not text_or_none(am.get("repo")):
        changes["repo"] = repos[0]
    worktrees = _union(_listed(am.get("worktrees")), _listed(bm.get("worktrees")))
    if worktrees or "worktrees" in am:
        changes["worktrees"] = worktrees
    changes["source_sessions"] = _union(_listed(am.get("source_sessions")), _listed(bm.get("source_sessions")))
    changes["merged_from"] = _union(_listed(am.get("merged_from")), [b_id], _listed(bm.get("merged_from")))
    created = [c for c in (am.get("created"), bm.get("created")) if parse_time(c) is not None]
    if len(created) == 2 and parse_time(bm.get("created")) < parse_time(am.get("created")):  # type: ignore[operator]
        changes["created"] = bm.get("created")
    if title and title != am.get("title"):
        changes["title"] = title
    absorbed = _absorbed_body(a.body, b.body)
    survivor = frontmatter.update(a_text, changes).rstrip("\n") + f"\n\n{heading}\n\n" + (absorbed + "\n" if absorbed else "")
    tombstone = frontmatter.update(b_text, {"status": "merged", "merged_into": a_id})
    return MergedTexts(survivor, tombstone)
