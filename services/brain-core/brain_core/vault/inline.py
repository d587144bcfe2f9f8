"""Inline markers inside vault documents (pure): ``<!-- @signal severity=warning -->`` and friends.

Sessions and agents leave markers inside arcs and standing documents
(UPSTREAM.md 4.3):

- block form ``<!-- @type k=v k="quoted value" -->`` ... ``<!-- @/type -->``,
  whose content (trimmed) is what lies between;
- inline form ``<!-- @type k=v -->`` with no closing comment (``@edge`` is
  only ever inline).

Unquoted attribute values hold no whitespace and no ``>``. Markers on lines
inside a block are part of that block's content, not markers of their own.
``parse_markers`` returns every marker in document order; the keeper and the
index give each the project of the document that holds it
(``brain_core.vault.records``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MARKER_TYPES = ("hot", "lesson", "signal", "decision", "milestone", "edge", "inject", "todo")

_OPEN = re.compile(r"<!--\s*@(?P<type>[a-z][a-z0-9_-]*)(?P<attrs>(?:\s+[A-Za-z_][\w-]*=(?:\"[^\"]*\"|[^\s>\"]+))*)\s*-->")
_ATTR = re.compile(r"([A-Za-z_][\w-]*)=(?:\"([^\"]*)\"|([^\s>\"]+))")


@dataclass(frozen=True)
class InlineMarker:
    """One marker: its type, attributes, block content ("" for the inline form) and 1-based line."""

    type: str
    attrs: dict[str, str] = field(default_factory=dict)
    content: str = ""
    line: int = 1
    block: bool = False

    @property
    def first_line(self) -> str:
        """The first non-empty line of the content (what the signal lists show)."""
        return next((ln.strip() for ln in self.content.splitlines() if ln.strip()), "")


def parse_attrs(text: str) -> dict[str, str]:
    """``k=v k="quoted"`` pairs; the last of a repeated key wins."""
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _ATTR.finditer(text)}


def _closing(marker_type: str) -> re.Pattern[str]:
    return re.compile(rf"<!--\s*@/{re.escape(marker_type)}\s*-->")


def parse_markers(text: str) -> list[InlineMarker]:
    """Every inline marker of ``text`` in document order (see the module docstring)."""
    if "<!--" not in text:
        return []
    out: list[InlineMarker] = []
    pos = 0
    while True:
        match = _OPEN.search(text, pos)
        if match is None:
            return out
        kind = match.group("type")
        attrs = parse_attrs(match.group("attrs"))
        line = text.count("\n", 0, match.start()) + 1
        close = _closing(kind).search(text, match.end()) if kind != "edge" else None
        # A block ends at its own closing comment; an opening of the same type before it
        # means this one was an inline marker (``<!-- @signal -->`` twice, then one close).
        if close is not None:
            again = re.compile(rf"<!--\s*@{re.escape(kind)}[\s-]").search(text, match.end(), close.start())
            if again is not None:
                close = None
        if close is None:
            out.append(InlineMarker(kind, attrs, "", line, block=False))
            pos = match.end()
        else:
            out.append(InlineMarker(kind, attrs, text[match.end() : close.start()].strip(), line, block=True))
            pos = close.end()
