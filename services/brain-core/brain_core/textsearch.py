"""Token search over vault text (pure): what ``GET /vault/search`` matches and ranks by.

A query is lower-cased and split on whitespace into tokens, each a literal
case-insensitive substring. A line that holds any token is a hit line; a
token inside the lower-cased file name (extension included) is a filename
hit; a document matches with at least one of either. Its score is
``min(hit lines, 30) + 10 × filename hits + 20`` when every token occurs
somewhere in its text, and the first three hit lines get snippets with their
1-based line numbers (a line ends at ``\\n``, as the vault's log codec counts
them) and ``context_lines`` of context. ``allowed`` restricts matching, and
context, to some line numbers: that is how a project filter searches only the
spans of that project's own entries inside a log shared with other projects.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from brain_core.jsonable import json_object

SEARCH_SUFFIXES = (".md", ".markdown", ".txt")
SNIPPET_CHARS = 240
MAX_SNIPPETS = 3
MAX_LINE_SCORE = 30
FILENAME_WEIGHT = 10
ALL_TOKENS_BONUS = 20


@dataclass(frozen=True, kw_only=True)
class Hit:
    """One matching document: its score, what matched and its line snippets (fields in the answer's order)."""

    path: str
    score: int
    match_count: int
    tokens_matched: int
    tokens_total: int
    filename_match: bool
    snippets: list[dict[str, object]] = field(default_factory=list)
    title: str

    def as_dict(self) -> dict[str, Any]:
        """The result item ``GET /vault/search`` answers."""
        return json_object(self)


def tokens(query: str) -> list[str]:
    """The distinct lower-case tokens of a query, in order."""
    seen: list[str] = []
    for token in re.split(r"\s+", query.strip().lower()):
        if token and token not in seen:
            seen.append(token)
    return seen


def is_searchable(path: str) -> bool:
    """Whether a file's lower-cased suffix is one search reads (``.md``, ``.markdown``, ``.txt``)."""
    return posixpath.splitext(path)[1].lower() in SEARCH_SUFFIXES


def lines_of(text: str) -> list[str]:
    """The lines of a document as search numbers them (``\n`` ends a line; a final newline starts none)."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def context_snippet(lines: Sequence[str], index: int, context_lines: int, keep: Collection[int] | None) -> str:
    """The hit line at ``index`` (0-based) with up to ``context_lines`` either side, never past an unallowed line.

    ``lines`` may be any sequence that answers ``len`` and slices: the search
    index passes the few lines around a hit of a document it does not load.
    """
    start = end = index
    # Context stops at the first line outside ``allowed``: in a shared log that line is
    # another project's entry, which a project-filtered search must not show.
    while start > 0 and index - start < context_lines and (keep is None or start in keep):
        start -= 1
    while end < len(lines) - 1 and end - index < context_lines and (keep is None or end + 2 in keep):
        end += 1
    return "\n".join(lines[start : end + 1]).rstrip()


def search_text(
    path: str,
    text: str,
    query_tokens: list[str],
    *,
    context_lines: int = 2,
    allowed: Collection[int] | None = None,
) -> Hit | None:
    """Match one document (only its ``allowed`` line numbers, when given); None when nothing matched."""
    if not query_tokens:
        return None
    lines = lines_of(text)
    keep = set(allowed) if allowed is not None else None
    numbered = [(i, line) for i, line in enumerate(lines, 1) if keep is None or i in keep]
    haystack = "\n".join(line for _, line in numbered).lower()
    name = posixpath.basename(path).lower()
    filename_hits = sum(1 for t in query_tokens if t in name)
    hit_lines = [(i, line) for i, line in numbered if any(t in line.lower() for t in query_tokens)]
    if not hit_lines and not filename_hits:
        return None
    matched = sum(1 for t in query_tokens if t in haystack)
    score = min(len(hit_lines), MAX_LINE_SCORE) + FILENAME_WEIGHT * filename_hits
    if matched == len(query_tokens):
        score += ALL_TOKENS_BONUS
    snippets: list[dict[str, object]] = [
        {
            "line": number,
            "snippet": context_snippet(lines, number - 1, context_lines, keep),
            "text": line.strip()[:SNIPPET_CHARS],  # the hit line alone, which existing kernel clients read
        }
        for number, line in hit_lines[:MAX_SNIPPETS]
    ]
    return Hit(
        path=path,
        score=score,
        match_count=len(hit_lines),
        tokens_matched=matched,
        tokens_total=len(query_tokens),
        filename_match=filename_hits > 0,
        title=posixpath.splitext(posixpath.basename(path))[0],
        snippets=snippets,
    )
