"""Token search over vault text (pure): what ``GET /vault/search`` ranks by.

A query is split into lower-case tokens; a document matches when every token
occurs in it (case-insensitive substring), its score is the total number of
occurrences, and its snippets are the first lines holding any token, with
their 1-based line numbers (a line ends at ``\n``, as the vault's log codec
counts them). ``allowed`` restricts matching to some line numbers, which is
how a project filter searches only the spans of that project's own entries
inside a log shared with other projects.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

SNIPPET_CHARS = 240
MAX_SNIPPETS = 5


@dataclass(frozen=True)
class Hit:
    """One matching document: score and line snippets."""

    path: str
    score: int
    snippets: list[dict[str, object]] = field(default_factory=list)


def tokens(query: str) -> list[str]:
    """The distinct lower-case tokens of a query, in order."""
    seen: list[str] = []
    for token in re.split(r"\s+", query.strip().lower()):
        if token and token not in seen:
            seen.append(token)
    return seen


def lines_of(text: str) -> list[str]:
    """The lines of a document as search numbers them (``\n`` ends a line; a final newline starts none)."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def search_text(path: str, text: str, query_tokens: list[str], *, allowed: Collection[int] | None = None) -> Hit | None:
    """Match one document (only its ``allowed`` line numbers, when given); None when some token is missing."""
    if not query_tokens:
        return None
    numbered = list(enumerate(lines_of(text), 1))
    if allowed is not None:
        keep = set(allowed)
        numbered = [(i, line) for i, line in numbered if i in keep]
    haystack = "\n".join(line for _, line in numbered).lower()
    counts = [haystack.count(t) for t in query_tokens]
    if not all(counts):
        return None
    snippets: list[dict[str, object]] = []
    for number, line in numbered:
        low = line.lower()
        if any(t in low for t in query_tokens):
            snippets.append({"line": number, "text": line.strip()[:SNIPPET_CHARS]})
            if len(snippets) >= MAX_SNIPPETS:
                break
    return Hit(path=path, score=sum(counts), snippets=snippets)
