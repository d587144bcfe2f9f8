"""What every MCP tool answers, wherever it is answered: the output models, the JSON text, the failure reasons.

The tools are answered in-process (``brain_mcp.tools.Local``) or through a
running kernel's HTTP API (``brain_mcp.remote.Remote``); both return the
same dicts, so ``brain_mcp.server`` declares each tool once, on a
``Backend``. The models are the tools' ``outputSchema`` (ADR 0043): open
objects (a new field never breaks a client that validates), requiring only
the fields every success carries. This module imports no database and no
HTTP client, so a remote server starts without them.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

DATABASE_UNAVAILABLE = "database unavailable"
KERNEL_UNAVAILABLE = "kernel unavailable"
# Failures that are the server's, not the caller's: a resource read answers them as an internal error.
SERVER_FAULTS = (DATABASE_UNAVAILABLE, KERNEL_UNAVAILABLE)
# brain_ingest: upstream's default slice, and a bound on the slices one call may send (each one ingest).
INGEST_CHUNK_CHARS = 200_000
MAX_INGEST_CHUNKS = 50
MAX_LIMIT = 100
# POST /tick's rule for ``source`` (brain_api.routes.tick.SOURCE_PATTERN), checked before a tick is queued.
SOURCE_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
SOURCE_REFUSED = "source must be 1-64 letters, digits, '.', '_' or '-'"
OBSIDIAN_PREVIEW_SNIPPETS = 2
OBSIDIAN_PREVIEW_CHARS = 500
ARC_PREVIEW_CHARS = 200
ARC_CONTENT_CHARS = 2000
# A tick's states as GET /tick/{job_id} reports them (docs/http.md); ``brain tick-drain`` runs the queue.
TICK_COMPLETED, TICK_FAILED = "completed", "failed"
TICK_FINISHED = (TICK_COMPLETED, TICK_FAILED)
TICK_POLL_S = 0.5  # the tick runs elsewhere; this only watches its row
MAX_TICK_WAIT_S = 600.0
UNKNOWN_POLLS = 2  # upstream stopped after two consecutive ``unknown`` answers


def to_json(answer: dict[str, Any]) -> str:
    """A tool's answer as the JSON string it returns (dates as ISO text, as the HTTP API encodes them)."""

    def default(value: Any) -> Any:
        if isinstance(value, (dt.datetime, dt.date)):
            return value.isoformat()
        return str(value)

    return json.dumps(answer, ensure_ascii=False, default=default)


class Backend(Protocol):
    """Who answers the tools: each method returns the tool's answer, or ``{"error": ...}``."""

    # The memory reads take the optional ``session_id`` of the session asking: their pull record names it (ADR 0061).
    def kb_search(
        self, query: str, limit: int, include_artifact: bool, include_obsidian: bool, min_score: float, project: str | None, session_id: str | None = None
    ) -> dict[str, Any]: ...

    def kb_brief(self, query: str, limit: int, model: str, session_id: str | None = None) -> dict[str, Any]: ...

    def brain_search_arcs(
        self, query: str, top_k: int, min_heat: float, min_score: float, project: str | None, session_id: str | None = None
    ) -> dict[str, Any]: ...

    def brain_get_arc(self, cluster_id: str, session_id: str | None = None) -> dict[str, Any]: ...

    def brain_ingest(self, content: str, title: str, producer: str, chunk_size: int, project: str | None) -> dict[str, Any]: ...

    def brain_tick(self, no_ai: bool, wait: bool, timeout: float, source: str) -> dict[str, Any]: ...

    def brain_feed(self, project: str | None, session_id: str | None = None) -> dict[str, Any]: ...

    def brain_marker(self, type: str, content: str, attrs: Any) -> dict[str, Any]: ...

    def memory_block(self, project: str) -> dict[str, Any]:
        """``{"markdown": text}``: the project's memory block (ADR 0040)."""
        ...

    def brain_retract(self, entry_id: str, reason: str) -> dict[str, Any]:
        """``POST /entries/{entry_id}/retract``'s answer: the entry withdrawn and its history (ADR 0048)."""
        ...

    def brain_expire(self, entry_id: str, reason: str) -> dict[str, Any]:
        """``POST /entries/{entry_id}/expire``'s answer: the entry expired now and its history (ADR 0060)."""
        ...

    def brain_supersede(self, entry_id: str, type: str, content: str, attrs: Any) -> dict[str, Any]:
        """A marker that takes ``entry_id``'s place (``POST /marker`` with ``attrs.supersedes``), refused for an entry it cannot curate."""
        ...


class Open(BaseModel):
    """An answer object that may carry more fields than it names (`additionalProperties: true`): a new field never breaks a client."""

    model_config = ConfigDict(extra="allow")


class SearchHit(Open):
    """One `kb_search` hit: an index chunk ("artifact") or a vault file ("obsidian")."""

    source: Literal["artifact", "obsidian"]
    ref: str = Field(description="The chunk's key (artifact) or the vault-relative path (obsidian).")
    title: str
    score: float
    normalized_score: float = Field(description="The score the hits are ranked by: the index's own, or a file's score over the best file's.")
    preview: str
    metadata: dict[str, Any]
    producer: str | None = None
    content_type: str | None = None
    match_count: int | None = None


class KbSearch(Open):
    """`kb_search`'s answer."""

    query: str
    count: int
    results: list[SearchHit]
    sources_searched: list[Literal["artifact", "obsidian"]]


class KbBrief(Open):
    """`kb_brief`'s answer (`model` is absent when nothing was found to brief)."""

    query: str
    hits: list[SearchHit]
    brief: str
    candidate_refs: list[Any]
    model: str | None = None


class ArcHit(Open):
    """One arc `brain_search_arcs` found."""

    cluster_id: str
    title: str
    region: str | None
    heat: int
    status: str | None
    path: str | None
    score: float
    preview: str


class SearchArcs(Open):
    """`brain_search_arcs`'s answer."""

    query: str
    count: int
    arcs: list[ArcHit]


class Arc(Open):
    """`brain_get_arc`'s answer: the indexed chunk (source embeddings: metadata, text_preview) with the file (path, content) when the vault holds it, or the file alone (source vault)."""

    cluster_id: str
    source: Literal["vault", "embeddings"]
    path: str | None = None
    content: str | None = None
    metadata: dict[str, Any] | None = None
    text_preview: str | None = None


class Tick(Open):
    """`brain_tick`'s answer."""

    job_id: str
    status: str
    no_ai: bool
    waited: bool
    note: str
    waited_seconds: float | None = None


class IngestChunk(Open):
    """One slice `brain_ingest` sent: its answer (`detail`, `POST /ingest`'s) or why it failed (`error`)."""

    chunk: int
    ok: bool
    status: int | None = None
    detail: dict[str, Any] | None = None
    error: str | None = None


class Ingest(Open):
    """`brain_ingest`'s answer."""

    chunks_sent: int
    total_chunks: int
    title: str | None
    producer: str
    results: list[IngestChunk]


class Feed(Open):
    """`brain_feed`'s answer: `GET /feed`'s JSON (a project's adds `project` and `scope`)."""

    hot_arcs: list[Any]
    inject_blocks: list[Any]
    entries: list[Any]
    generated_at: str
    entry_count: int
    project: dict[str, Any] | None = None
    scope: str | None = None


class Marker(Open):
    """`brain_marker`'s answer: `POST /marker`'s (a replay adds `idempotent_replay`)."""

    ok: bool
    marker_type: str
    action: str
    vault_path: str
    project: str | None = None
    idempotent_replay: bool | None = None


class Curated(Open):
    """`brain_retract`'s and `brain_expire`'s answer: `POST /entries/{entry_id}/retract`'s or `/expire`'s, the entry as it
    now stands and its history."""

    entry: dict[str, Any]
    history: list[Any]


# -- pulls: what a memory read served, and what a control project reads instead (ADR 0061) ----------------

# The one line a control project's read carries, as its memory block's (ADR 0050): the kernel answered, nothing shown.
NO_MEMORY = "No memory is shown in this answer."


def served_ids(answer: Mapping[str, Any]) -> list[str]:
    """The entries a read's answer shows, in order, once each: an index hit's entry id (else its key), a vault file's
    path, an arc's file entry (``arc:<path>``, else its cluster id), a feed item's ``entry_ids`` / ``entry_id``."""
    out: list[str] = []
    for hit in answer.get("results") or answer.get("hits") or []:
        meta = hit.get("metadata") or {}
        out.append(str(meta.get("entry_id") or hit.get("ref") or ""))
    for arc in answer.get("arcs") or []:
        out.append(f"arc:{arc['path']}" if arc.get("path") else str(arc.get("cluster_id") or ""))
    if answer.get("source") in ("vault", "embeddings") and answer.get("cluster_id"):
        meta = answer.get("metadata") or {}
        out.append(f"arc:{answer['path']}" if answer.get("path") else str(meta.get("entry_id") or answer["cluster_id"]))
    for bucket in ("hot_arcs", "inject_blocks", "entries"):
        for item in answer.get(bucket) or []:
            meta = (item.get("metadata") or {}) if isinstance(item, Mapping) else {}
            named = meta.get("entry_ids") if isinstance(meta.get("entry_ids"), list) else [meta.get("entry_id")]
            out.extend(str(e) for e in named if e)
    return list(dict.fromkeys(e for e in out if e))


def withheld(answer: Mapping[str, Any]) -> dict[str, Any]:
    """A read's answer for a control project: the same shape (what the output schema requires) with no memory in it, and
    ``note`` saying so. Only the request's own words (the query, the cluster id) and what names no memory (the
    project, the feed's scope and moment) are kept."""
    if "entries" in answer:  # a feed; a project's also lists its arcs and blocks
        kept = {key: answer[key] for key in ("generated_at", "vault_root", "project", "scope") if key in answer}
        lists = {key: [] for key in ("hot_arcs", "inject_blocks", "entries", "arcs", "blocks") if key in answer or key in ("hot_arcs", "inject_blocks")}
        return {**lists, "entry_count": 0, **kept, "note": NO_MEMORY}
    if "arcs" in answer:
        return {"query": answer.get("query", ""), "count": 0, "arcs": [], "note": NO_MEMORY}
    if "results" in answer:
        return {"query": answer.get("query", ""), "count": 0, "results": [], "sources_searched": answer.get("sources_searched", []), "note": NO_MEMORY}
    return {"cluster_id": answer.get("cluster_id", ""), "source": "vault", "path": None, "content": "", "note": NO_MEMORY}


# -- shaping, one rule for both backends -----------------------------------------------------------------


def clamp_limit(limit: int) -> int:
    """A result count the tools accept: 1 to 100."""
    return max(1, min(int(limit), MAX_LIMIT))


def artifact_hit(chunk: Mapping[str, Any]) -> dict[str, Any]:
    """A search index chunk (``POST /search``'s result item) as a ``kb_search`` hit."""
    key = str(chunk["key"])
    return {
        "source": "artifact",
        "ref": key,
        "title": key.rsplit("/", 1)[-1],
        "score": chunk["score"],
        "normalized_score": chunk["score"],
        "preview": chunk.get("text_preview") or "",
        "producer": chunk.get("producer"),
        "content_type": chunk.get("content_type"),
        "metadata": chunk.get("metadata") or {},
    }


def obsidian_hits(files: Iterable[Mapping[str, Any]], limit: int) -> list[dict[str, Any]]:
    """Vault files (``GET /vault/search``'s result items), best first, as ``kb_search`` hits scored against the best."""
    found = list(files)[:limit]
    best = max((f["score"] for f in found), default=0) or 1
    return [
        {
            "source": "obsidian",
            "ref": f["path"],
            "title": str(f.get("title") or ""),
            "score": f["score"],
            "normalized_score": f["score"] / best,
            "preview": "\n---\n".join(str(s["snippet"]) for s in f.get("snippets", [])[:OBSIDIAN_PREVIEW_SNIPPETS])[:OBSIDIAN_PREVIEW_CHARS],
            "match_count": f.get("match_count"),
            # A file that is one entry says whether it is live or expired (withdrawn ones are left out; ADR 0064).
            "metadata": {"state": f["state"]} if f.get("state") else {},
        }
        for f in found
    ]


def ranked(query: str, results: list[dict[str, Any]], limit: int, sources: list[str]) -> dict[str, Any]:
    """``kb_search``'s answer: both sources' hits by normalised score (stable: ties keep artifact hits first), at most 2 x limit."""
    results = sorted(results, key=lambda r: -r["normalized_score"])[: 2 * limit]
    return {"query": query, "count": len(results), "results": results, "sources_searched": sources}


def _heat(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def arc_hits(chunks: Iterable[Mapping[str, Any]], top_k: int, min_heat: float) -> list[dict[str, Any]]:
    """Arc chunks (one per arc, nearest first) at least ``min_heat`` hot, as ``brain_search_arcs`` lists them (at most ``top_k``)."""
    arcs: list[dict[str, Any]] = []
    for chunk in chunks:
        meta = chunk.get("metadata") or {}
        heat = _heat(meta.get("heat"))
        if heat < min_heat:
            continue
        arcs.append(
            {
                "cluster_id": str(chunk["key"]),
                "title": str(meta.get("title") or chunk["key"]),  # frontmatter may hold a number: the schema says text
                "region": _text(meta.get("region")),
                "heat": int(heat),
                "status": _text(meta.get("status")),
                "path": _text(meta.get("path")),
                "score": chunk["score"],
                "preview": (chunk.get("text_preview") or "")[:ARC_PREVIEW_CHARS],
            }
        )
        if len(arcs) >= top_k:
            break
    return arcs


def arc_answer(cluster_id: str, chunks: list[Mapping[str, Any]], arc_producer: str, path: str | None, content: str | None) -> dict[str, Any]:
    """``brain_get_arc``'s answer: the indexed form when there are chunks (the arc chunk, else the first), with the file's ``path`` and ``content``
    when it was read; the file alone when nothing is indexed; not found when neither."""
    answer: dict[str, Any] = {"cluster_id": cluster_id}
    if chunks:
        first = next((c for c in chunks if c["producer"] == arc_producer), chunks[0])
        answer |= {"source": "embeddings", "metadata": first["metadata"], "text_preview": first["text_preview"]}
    elif content is None:
        return {"error": f"cluster_id not found: {cluster_id}"}
    else:
        answer["source"] = "vault"
    if content is not None:
        answer |= {"path": path, "content": content[:ARC_CONTENT_CHARS]}
    return answer


def tick_note(status: str, error: str | None, waited: bool, timeout: float) -> str:
    """The line ``brain_tick`` adds to say what the status means."""
    if status == TICK_COMPLETED:
        return "tick completed"
    if status == TICK_FAILED:
        return f"tick failed: {error or 'unknown error'}"
    if status == "unknown":
        return "the tick request is gone from the queue"
    drain = "brain tick-drain runs queued ticks (the MCP server does not)"
    if waited:
        return f"still {status} after {timeout:g} s; {drain}; call brain_tick again later or read GET /tick/<job_id>"
    return f"queued; {drain}"


def follow_tick(job_id: str, status: str, *, no_ai: bool, wait: bool, timeout: float, poll: Callable[[], tuple[str, str | None] | None]) -> dict[str, Any]:
    """``brain_tick``'s answer for a queued job; with ``wait``, ``poll`` (its status and error, None when gone) until it ends or ``timeout`` s pass."""
    answer: dict[str, Any] = {"job_id": job_id, "status": status, "no_ai": no_ai, "waited": bool(wait)}
    if not wait:
        answer["note"] = tick_note(status, None, False, 0)
        return answer
    limit = max(0.0, min(float(timeout), MAX_TICK_WAIT_S))
    started = time.monotonic()
    error: str | None = None
    unknown = 0
    while status not in TICK_FINISHED and unknown < UNKNOWN_POLLS and time.monotonic() - started < limit:
        time.sleep(min(TICK_POLL_S, max(0.0, limit - (time.monotonic() - started))))
        seen = poll()
        unknown = unknown + 1 if seen is None else 0
        status, error = seen if seen is not None else ("unknown", None)
    answer["status"] = status
    answer["waited_seconds"] = round(time.monotonic() - started, 1)
    answer["note"] = tick_note(status, error, True, limit)
    return answer


def ingest_chunks(content: str, title: str, chunk_size: int) -> list[str] | dict[str, Any]:
    """``content`` cut into the messages ``brain_ingest`` sends (upstream's prefixes), or the ``{"error": ...}`` refusing it.

    Several slices: ``[Part i/N of <title or "document">]``; one titled slice:
    ``[<title>]``; each followed by a blank line.
    """
    if not content.strip():
        return {"error": "content is empty"}
    size = max(1, min(int(chunk_size), INGEST_CHUNK_CHARS))
    parts = [content[i : i + size] for i in range(0, len(content), size)]
    if len(parts) > MAX_INGEST_CHUNKS:
        return {"error": f"content makes {len(parts)} chunks of {size} characters; at most {MAX_INGEST_CHUNKS} are sent in one call"}
    if len(parts) > 1:
        return [f"[Part {i}/{len(parts)} of {title or 'document'}]\n\n{part}" for i, part in enumerate(parts, 1)]
    return [f"[{title}]\n\n{parts[0]}" if title else parts[0]]


def ingest_slices(content: str, title: str, producer: str, chunk_size: int, send: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """``brain_ingest``'s answer: each slice ``send`` (its ingest answer, or ``{"error": ...}``), one after the other.

    A refused first slice is the tool's error (nothing was written: the
    token's scope, a bad project); a later slice's failure is its result
    ``{chunk, ok: false, error}``, as upstream's tool reported it.
    """
    chunks = ingest_chunks(content, title, chunk_size)
    if isinstance(chunks, dict):
        return chunks
    results: list[dict[str, Any]] = []
    for i, message in enumerate(chunks, 1):
        answer = send(message)
        if "error" not in answer:
            results.append({"chunk": i, "ok": True, "status": 200, "detail": answer})
        elif not results:
            return answer
        else:
            results.append({"chunk": i, "ok": False, "error": str(answer["error"]), **({"status": answer["status"]} if "status" in answer else {})})
    return {
        "chunks_sent": sum(1 for r in results if r.get("ok")),
        "total_chunks": len(results),
        "title": title or None,
        "producer": producer,
        "results": results,
    }
