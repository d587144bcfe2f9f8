"""The pure half of ``kb_brief`` (UPSTREAM.md 3, 0.12): the digest of the hits, the prompt, the refs line.

The model is shown one numbered line per hit, ``[i] source://ref - title``,
with the hit's preview (at most 400 characters) under it, and asked to end
with ``CANDIDATE_REFS: [...]``. The refs line is the first line anywhere whose
trimmed text starts with that label: when its rest parses as a JSON list it
is removed from the brief and gives the refs; otherwise the line stays and
the first three hits are the refs, as they are whenever the model could not
be asked. A ref is written ``source://ref``, as the digest names the hits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

REFS_LABEL = "CANDIDATE_REFS:"
PREVIEW_CHARS = 400
FALLBACK_REFS = 3
NOTHING_FOUND = "Nothing found in the knowledge base for this query."
NOT_CONFIGURED = "[inference gateway not configured]"
DEFAULT_MODEL = "brain-brief"
EMPTY_REPLY = "[LLM unavailable - returning raw hits]"

SYSTEM_PROMPT = (
    "You brief an AI coding agent from its team's knowledge base. You are given a query and numbered search hits. "
    "Answer the query from the hits only, in a few short paragraphs or bullets, citing hits as [i]; say so when the "
    "hits do not answer it. End with one last line, exactly: "
    'CANDIDATE_REFS: ["source://ref", ...] -- a JSON array of the refs most worth opening, most useful first.'
)


def hit_ref(hit: Mapping[str, Any]) -> str:
    """A hit as the digest names it: ``source://ref``."""
    return f"{hit.get('source')}://{hit.get('ref')}"


def digest(hits: Sequence[Mapping[str, Any]]) -> str:
    """One numbered line per hit (``[i] source://ref - title``) with its preview, blank lines between."""
    blocks = []
    for i, hit in enumerate(hits, 1):
        preview = str(hit.get("preview") or "")[:PREVIEW_CHARS]
        blocks.append(f"[{i}] {hit_ref(hit)} - {hit.get('title') or ''}" + (f"\n{preview}" if preview else ""))
    return "\n\n".join(blocks)


def messages(query: str, hits: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The chat messages of one brief request."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": f"Query: {query}\n\nHits:\n\n{digest(hits)}"}]


def fallback_refs(hits: Sequence[Mapping[str, Any]]) -> list[str]:
    """The refs of the first three hits."""
    return [hit_ref(h) for h in hits[:FALLBACK_REFS]]


def split_refs(reply: str, hits: Sequence[Mapping[str, Any]]) -> tuple[str, list[Any]]:
    """The brief without its refs line, and the refs; a line that does not parse stays, and the refs fall back."""
    lines = reply.splitlines()
    for index, line in enumerate(lines):
        text = line.strip()
        if not text.startswith(REFS_LABEL):
            continue
        try:
            refs = json.loads(text[len(REFS_LABEL) :].strip())
        except ValueError:
            break
        if not isinstance(refs, list):
            break
        return "\n".join(lines[:index] + lines[index + 1 :]).strip(), refs
    return reply.strip(), fallback_refs(hits)


def compose(
    query: str, hits: Sequence[Mapping[str, Any]], model: str, complete: Callable[[list[dict[str, str]]], tuple[str | None, str | None]]
) -> dict[str, Any]:
    """``kb_brief``'s answer: ``complete`` (the model's reply, or None and why not) asked once, and only when there are hits."""
    if not hits:
        return {"query": query, "hits": [], "brief": NOTHING_FOUND, "candidate_refs": []}
    reply, failure = complete(messages(query, hits))
    text, refs = (failure or EMPTY_REPLY, fallback_refs(hits)) if reply is None else split_refs(reply, hits)
    return {"query": query, "hits": list(hits), "brief": text, "candidate_refs": refs, "model": model}
