"""What the search index embeds (pure): upstream's chunking, and the text and metadata of each entry.

``chunk_text`` is upstream's rule (UPSTREAM.md section 2): content of 4,000
characters or fewer is one chunk, longer content is split on blank lines and
packed greedily, a paragraph longer than the limit is kept whole. Entries
(arcs, lessons, decisions, signals) are embedded with their project on every
chunk, so a project-filtered search is the feed's membership rule. An entry
filed under other projects with the same text keeps its vectors: only its
chunks' labels are rewritten (``labels``, ADR 0068).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from brain_core.entries import EntryRecord
from brain_core.feed.sections import cluster_id_of
from brain_core.text import clip_words, title_repeats

SEARCH_MODES = ("hybrid", "vector", "words")  # POST /search's modes: words and vectors fused, or one of them (ADR 0044)

CHUNK_CHARS = 4000
PREVIEW_CHARS = 500
ENTRY_TEXT_CHARS = 2000
EMBEDDED_KINDS = ("arc", "lesson", "decision", "signal")
# Upstream's producer for arcs is ``brain-arc`` (its MCP tools filter on it); the other kinds get one each.
PRODUCERS = {"arc": "brain-arc", "lesson": "brain-lesson", "decision": "brain-decision", "signal": "brain-signal"}
# Metadata a chunk's labels leave out: an arc's heat moves with every decay and a signal's status with every
# mitigation; search reads neither from the chunk (withdrawn entries are left out by their rows, ADR 0064).
_UNLABELLED = frozenset({"heat", "status"})


def labels(project: str | None, projects: Iterable[str], repo: str | None, metadata: Mapping[str, Any]) -> str:
    """What a chunk is filed and shown under, as one comparable text: its project columns and its metadata."""
    shown = {k: v for k, v in metadata.items() if k not in _UNLABELLED}
    return json.dumps([project, list(projects), repo, shown], sort_keys=True, ensure_ascii=False, default=str)


def chunk_text(content: str, max_chars: int = CHUNK_CHARS) -> list[str]:
    """Upstream's chunks: one when short, else paragraphs packed while ``len + paragraph + 2 <= max_chars``."""
    if len(content) <= max_chars:
        return [content]
    chunks: list[str] = []
    current = ""
    for paragraph in content.split("\n\n"):
        if current and len(current) + len(paragraph) + 2 > max_chars:
            chunks.append(current)
            current = paragraph
        else:
            current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        chunks.append(current)
    return chunks


@dataclass(frozen=True)
class EmbeddingDoc:
    """One entry as the index embeds it: key, producer, text, metadata and the project columns."""

    key: str
    producer: str
    text: str
    kind: str
    project: str | None = None
    projects: tuple[str, ...] = ()
    repo: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        """What decides whether the entry must be embedded again."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def labels(self) -> str:
        """The projects and metadata its chunks must carry (``labels``): when only they change, no new vector."""
        return labels(self.project, self.projects, self.repo, self.metadata)

    @property
    def index_hash(self) -> str:
        """What the search index must hold for the entry, text and labels: an entry's ``embed_hash`` (ADR 0046)."""
        return hashlib.sha256(f"{self.text}\0{self.labels}".encode()).hexdigest()


def _heat_text(heat: float | None) -> str:
    """Heat as upstream's metadata held it: the frontmatter's whole number as text (``"7"``, not ``"7.0"``), ``"0"``
    when unknown; upstream's ``brain_search_arcs`` read it with ``int()``."""
    if heat is None:
        return "0"
    return str(int(heat)) if float(heat).is_integer() else str(heat)


def entry_doc(record: EntryRecord) -> EmbeddingDoc | None:
    """The embedding of an index entry (None for kinds that are not embedded).

    An arc is keyed by its cluster id (upstream's key) and embedded from its
    title, summary, region and body; other entries by their entry id, from
    their title and content. Every chunk carries kind, project(s), repo,
    cluster id or path, title, heat and status.
    """
    if record.kind not in EMBEDDED_KINDS:
        return None
    title = record.title or ""
    if record.kind == "arc":
        key = cluster_id_of(record)
        parts = [f"Title: {title}"]
        if record.meta.get("summary"):
            parts.append(f"Summary: {record.meta['summary']}")
        if record.meta.get("region"):
            parts.append(f"Region: {record.meta['region']}")
        parts.append(record.content)
        text = "\n\n".join(p for p in parts if p)
    else:
        key = record.id
        text = record.content if title_repeats(title, record.content) else f"{title}\n\n{record.content}"
    metadata = {
        "kind": record.kind,
        "project": record.project,
        "projects": list(record.projects),
        "repo": record.repo,
        "title": clip_words(title, 200),
        "path": record.vault_path,
        "heat": _heat_text(record.heat),
        "status": record.status,
        "region": record.meta.get("region"),
    }
    if record.kind == "arc":
        metadata["cluster_id"] = key
        metadata["summary"] = record.meta.get("summary")
    return EmbeddingDoc(
        key=key,
        producer=PRODUCERS[record.kind],
        text=text[:ENTRY_TEXT_CHARS],
        kind=record.kind,
        project=record.project,
        projects=tuple(record.projects),
        repo=record.repo,
        metadata={k: v for k, v in metadata.items() if v is not None},
    )
