"""What each MCP tool does, in-process over the kernel (UPSTREAM.md 3): plain functions returning dicts.

Upstream's tools were HTTP clients of brain-api and the embeddings service;
here they call the same repositories and services the routes call, on a
``Kernel`` (settings, vault, engine and sessions, embedder) opened once per
process. Each tool keeps upstream's name, parameters, defaults and answer
shape, and answers a failure as ``{"error": ...}`` the way upstream's HTTP
helper did, never a traceback: a malformed or ambiguous ``project``
(ambiguous ones with ``candidates``), an unreachable database, a broken
embedder. ``kb_search`` keeps upstream's rule that a failed source gives no
hits rather than an error.

Upstream's defects fixed here (section 8, item 16): ``brain_search_arcs``
lists one result per arc, and ``min_score`` applies before the limit (both
in ``brain_kernel.search.embeddings.search``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar

import httpx
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from brain_core.chunks import PRODUCERS
from brain_core.feed.envelope import stamp_answer
from brain_core.keys import InvalidKey
from brain_core.markers import MarkerInvalid
from brain_core.textsearch import tokens
from brain_kernel import marker_service
from brain_kernel.auth import EVERYONE, Principal
from brain_kernel.clock import Clock, utc_now
from brain_kernel.db.engine import make_engine, read_session_factory, session_factory, unit_of_work
from brain_kernel.errors import BrainError, ConfigError
from brain_kernel.feed import feed_repo
from brain_kernel.feed.answers import DEFAULT_LESSON_DAYS, DEFAULT_TOP_N, global_answer, project_answer, project_block
from brain_kernel.identity.projects import EXACT, AmbiguousProject
from brain_kernel.identity.transcript_files import TranscriptLocator
from brain_kernel.scope import Scope, search_members
from brain_kernel.search import embeddings
from brain_kernel.search.embedders import Embedder, EmbedderError, embedder_for
from brain_kernel.search.file_scan import search_project, search_vault
from brain_kernel.settings import Settings
from brain_kernel.ticks import tick_queue
from brain_kernel.ticks.llm import LLMError, chat_completion
from brain_kernel.vault_store import Vault, VaultPathError
from brain_mcp import brief

log = logging.getLogger("brain.mcp")

F = TypeVar("F", bound=Callable[..., dict[str, Any]])

ARC_PRODUCER = PRODUCERS["arc"]  # upstream's ``brain-arc``
MAX_LIMIT = 100
# As GET /vault/search walks and searches (brain_api.routes.vault): same folders skipped, same context.
CONTEXT_LINES = 2
OBSIDIAN_PREVIEW_SNIPPETS = 2
OBSIDIAN_PREVIEW_CHARS = 500
ARC_PREVIEW_CHARS = 200
ARC_CONTENT_CHARS = 2000
BRIEF_MAX_TOKENS = 800
BRIEF_TEMPERATURE = 0.3
BRIEF_TIMEOUT_S = 200.0
DEFAULT_BRIEF_MODEL = "brain-brief"
# POST /tick's rule for ``source`` (brain_api.routes.tick.SOURCE_PATTERN).
SOURCE_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
TICK_POLL_S = 0.5  # a tick is run by ``brain tick-drain`` elsewhere; this only watches its row
MAX_TICK_WAIT_S = 600.0
UNKNOWN_POLLS = 2  # upstream stopped after two consecutive ``unknown`` answers
INGEST_UNAVAILABLE = "brain_ingest is not available: the kernel has no /ingest yet"
DATABASE_UNAVAILABLE = "database unavailable"


@dataclass
class Kernel:
    """What every tool uses: settings, the vault, the engine and its sessions, the embedder, the clock."""

    settings: Settings
    vault: Vault
    engine: Engine
    sessions: sessionmaker[Session]
    reads: sessionmaker[Session]
    embedder: Embedder
    locator: TranscriptLocator
    clock: Clock = utc_now
    llm_transport: httpx.BaseTransport | None = None

    @classmethod
    def open(cls, settings: Settings, *, clock: Clock = utc_now, llm_transport: httpx.BaseTransport | None = None) -> Kernel:
        """The kernel of ``settings``, whose ``database_url`` must answer (the CLI opens and migrates it)."""
        if not settings.database_url:
            raise ConfigError("brain mcp needs a database: set DATABASE_URL or let brain mcp start the embedded one")
        # A small pool: agents often run one stdio server per session, each holding its idle connections.
        engine = make_engine(settings.database_url, pool_size=2)
        return cls(
            settings=settings,
            vault=Vault(settings.vault),
            engine=engine,
            sessions=session_factory(engine),
            reads=read_session_factory(engine),
            embedder=embedder_for(settings),  # the offline model loads on first use
            locator=TranscriptLocator(settings.resolved_claude_dir, settings.resolved_codex_dir),
            clock=clock,
            llm_transport=llm_transport,
        )

    def close(self) -> None:
        """Close the engine's connections."""
        self.engine.dispose()


def _reason(exc: SQLAlchemyError) -> str:
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    return (str(cause).strip().splitlines() or [type(cause).__name__])[0]


def answers_errors(func: F) -> F:
    """Turn the failures a caller can act on into ``{"error": ...}`` (upstream's tools never raised)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return func(*args, **kwargs)
        except AmbiguousProject as exc:
            return {"error": str(exc), "candidates": exc.candidates}
        except (InvalidKey, VaultPathError, BrainError) as exc:
            return {"error": str(exc)}
        except SQLAlchemyError as exc:
            log.warning("%s: database unavailable: %s", func.__name__, _reason(exc))
            return {"error": f"{DATABASE_UNAVAILABLE}: {_reason(exc)}"}

    return wrapper  # type: ignore[return-value]


def _scope(db: Session, project: str | None, principal: Principal) -> tuple[bool, tuple[str, str | None] | None, Scope]:
    """Whether anything can match ``project``, its (key, repo) filter (None: no filter), and the principal's scope.

    A well-formed project nobody knows matches nothing; a malformed one raises
    InvalidKey, an ambiguous one AmbiguousProject, one outside a restricted
    principal's projects OutOfScope (all answered as errors). Without a
    project a restricted scope filters to its projects (``Scope.members``).
    """
    reach = Scope(db, principal)
    if project is None:
        return True, None, reach
    found = reach.check(project)
    return (True, (found.key, found.repo), reach) if found.status == EXACT else (False, None, reach)


def _within(reach: Scope, scope: tuple[str, str | None] | None) -> list[tuple[str, str | None]] | None:
    """The projects a search without its own project filter is limited to (None: all)."""
    return [(m.key, m.repo) for m in reach.members] if reach.restricted and scope is None else None


# -- kb_search ------------------------------------------------------------------------------------------


def _artifact_hits(
    k: Kernel, db: Session, query: str, *, limit: int, min_score: float | None, scope: tuple[str, str | None] | None, reach: Scope
) -> list[dict[str, Any]]:
    [vector] = k.embedder.embed([query])
    # Words and vectors fused (ADR 0044): the score is the fused value in (0, 1], comparable with the vault's normalized one.
    hits, _ = embeddings.search(db, vector, query=query, mode="hybrid", project=scope, limit=limit, min_score=min_score, within=_within(reach, scope))
    return [
        {
            "source": "artifact",
            "ref": h.key,
            "title": h.key.rsplit("/", 1)[-1],
            "score": h.score,
            "normalized_score": h.score,
            "preview": h.text_preview,
            "producer": h.producer,
            "content_type": h.content_type,
            "metadata": h.metadata,
        }
        for h in hits
    ]


def _obsidian_hits(k: Kernel, db: Session, query: str, *, limit: int, scope: tuple[str, str | None] | None, reach: Scope) -> list[dict[str, Any]]:
    wanted = tokens(query)
    if scope is not None:
        found = search_project(k.vault, db, scope[0], scope[1], wanted, context_lines=CONTEXT_LINES)
    elif reach.restricted:
        found = search_members(reach, k.vault, query, limit=limit, context_lines=CONTEXT_LINES)
    else:
        found = search_vault(k.vault, wanted, context_lines=CONTEXT_LINES)
    found = found[:limit]
    best = max((h.score for h in found), default=0) or 1
    return [
        {
            "source": "obsidian",
            "ref": h.path,
            "title": h.title,
            "score": h.score,
            "normalized_score": h.score / best,
            "preview": "\n---\n".join(str(s["snippet"]) for s in h.snippets[:OBSIDIAN_PREVIEW_SNIPPETS])[:OBSIDIAN_PREVIEW_CHARS],
            "match_count": h.match_count,
            "metadata": {},
        }
        for h in found
    ]


@answers_errors
def kb_search(
    k: Kernel,
    query: str,
    limit: int = 10,
    include_artifact: bool = True,
    include_obsidian: bool = True,
    min_score: float = 0.0,
    project: str | None = None,
    *,
    principal: Principal = EVERYONE,
) -> dict[str, Any]:
    """Search index and vault text together; ``{query, count, results, sources_searched}``."""
    if not include_artifact and not include_obsidian:
        return {"query": query, "count": 0, "results": []}
    limit = max(1, min(int(limit), MAX_LIMIT))
    sources = [name for name, wanted in (("artifact", include_artifact), ("obsidian", include_obsidian)) if wanted]
    results: list[dict[str, Any]] = []
    with k.reads() as db:
        known, scope, reach = _scope(db, project, principal)
        if known and query.strip():
            # A failed source gives no hits, as upstream's did; the other still answers.
            if include_artifact:
                try:
                    results += _artifact_hits(k, db, query, limit=limit, min_score=min_score, scope=scope, reach=reach)
                except (EmbedderError, ConfigError, SQLAlchemyError) as exc:
                    log.warning("kb_search: the search index failed: %s", exc)
            if include_obsidian:
                try:
                    results += _obsidian_hits(k, db, query, limit=limit, scope=scope, reach=reach)
                except (OSError, SQLAlchemyError) as exc:
                    log.warning("kb_search: the vault search failed: %s", exc)
    results.sort(key=lambda r: -r["normalized_score"])  # stable: ties keep artifact hits first
    results = results[: 2 * limit]
    return {"query": query, "count": len(results), "results": results, "sources_searched": sources}


# -- kb_brief -------------------------------------------------------------------------------------------


def _complete(k: Kernel, model: str, chat: list[dict[str, str]]) -> tuple[str | None, str | None]:
    """(the model's reply, None), or (None, the bracketed reason there is none: upstream's strings)."""
    if not k.settings.llm_base_url:
        return None, brief.NOT_CONFIGURED
    try:
        content = chat_completion(
            k.settings, chat, model=model, timeout_s=BRIEF_TIMEOUT_S, transport=k.llm_transport, max_tokens=BRIEF_MAX_TOKENS, temperature=BRIEF_TEMPERATURE
        )
    except LLMError as exc:  # a failure of the call or of its answer becomes the brief, as upstream's did
        if exc.status is not None:
            return None, f"[inference error {exc.status}: {exc.detail}]"
        return None, f"[inference exception: {exc}]"
    if not content.strip():
        return None, brief.EMPTY_REPLY
    return content, None


@answers_errors
def kb_brief(k: Kernel, query: str, limit: int = 8, model: str = "", *, principal: Principal = EVERYONE) -> dict[str, Any]:
    """``kb_search`` then one chat completion: ``{query, hits, brief, candidate_refs, model}``."""
    found = kb_search(k, query, limit=limit, principal=principal)
    if "error" in found:
        return found
    hits = found["results"]
    if not hits:
        return {"query": query, "hits": [], "brief": brief.NOTHING_FOUND, "candidate_refs": []}
    chosen = model or k.settings.llm_model or DEFAULT_BRIEF_MODEL
    reply, failure = _complete(k, chosen, brief.messages(query, hits))
    text, refs = (failure, brief.fallback_refs(hits)) if reply is None else brief.split_refs(reply, hits)
    return {"query": query, "hits": hits, "brief": text, "candidate_refs": refs, "model": chosen}


# -- arcs -----------------------------------------------------------------------------------------------


def _heat(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


@answers_errors
def brain_search_arcs(
    k: Kernel, query: str, top_k: int = 5, min_heat: float = 0, min_score: float = 0.0, project: str | None = None, *, principal: Principal = EVERYONE
) -> dict[str, Any]:
    """Arcs nearest the query, one result per arc, heat at least ``min_heat``: ``{query, count, arcs}``."""
    top_k = max(1, min(int(top_k), MAX_LIMIT))
    arcs: list[dict[str, Any]] = []
    with k.reads() as db:
        known, scope, reach = _scope(db, project, principal)
        if known and query.strip():
            [vector] = k.embedder.embed([query])
            hits, _ = embeddings.search(
                db,
                vector,
                query=query,
                mode="hybrid",
                project=scope,
                producer=ARC_PRODUCER,
                limit=max(3 * top_k, 15),
                min_score=min_score,
                one_per_key=True,
                within=_within(reach, scope),
            )
            for h in hits:
                meta = h.metadata
                heat = _heat(meta.get("heat"))
                if heat < min_heat:
                    continue
                arcs.append(
                    {
                        "cluster_id": h.key,
                        "title": meta.get("title") or h.key,
                        "region": meta.get("region"),
                        "heat": int(heat),
                        "status": meta.get("status"),
                        "path": meta.get("path"),
                        "score": h.score,
                        "preview": (h.text_preview or "")[:ARC_PREVIEW_CHARS],
                    }
                )
                if len(arcs) >= top_k:
                    break
    return {"query": query, "count": len(arcs), "arcs": arcs}


@answers_errors
def brain_get_arc(k: Kernel, cluster_id: str, *, principal: Principal = EVERYONE) -> dict[str, Any]:
    """An arc's file from the vault (a merged id finds the arc that absorbed it), else its indexed chunks."""
    with k.reads() as db:
        reach = Scope(db, principal)
        record = feed_repo.arc_by_cluster_id(db, cluster_id) or feed_repo.arc_absorbing(db, cluster_id)
        if record is not None and reach.hides_path(record.vault_path):
            record = None  # another project's arc reads as a missing one (ADR 0033)
        if record is not None:
            try:
                content = k.vault.read_text(record.vault_path)
            except (OSError, VaultPathError):
                content = None  # indexed but gone from the vault: the chunks below may still tell
            if content is not None:
                return {"cluster_id": cluster_id, "source": "vault", "path": record.vault_path, "content": content[:ARC_CONTENT_CHARS]}
        chunks = [c for c in embeddings.by_key(db, cluster_id) if reach.admits_meta(*embeddings.metadata_project(c["metadata"]))]
    if chunks:
        first = next((c for c in chunks if c["producer"] == ARC_PRODUCER), chunks[0])
        return {"cluster_id": cluster_id, "source": "embeddings", "metadata": first["metadata"], "text_preview": first["text_preview"]}
    return {"error": f"cluster_id not found: {cluster_id}"}


@answers_errors
def brain_ingest(k: Kernel, content: str, title: str = "", producer: str = "agent", chunk_size: int = 200000) -> dict[str, Any]:
    """Not served yet: the kernel has no ``/ingest``."""
    return {"error": INGEST_UNAVAILABLE}


# -- tick -----------------------------------------------------------------------------------------------


def _tick_note(job: tick_queue.TickJob | None, status: str, waited: bool, timeout: float) -> str:
    if status == tick_queue.COMPLETED:
        return "tick completed"
    if status == tick_queue.FAILED:
        return f"tick failed: {job.error if job else 'unknown error'}"
    if status == "unknown":
        return "the tick request is gone from the queue"
    drain = "brain tick-drain runs queued ticks (the MCP server does not)"
    if waited:
        return f"still {status} after {timeout:g} s; {drain}; call brain_tick again later or read GET /tick/<job_id>"
    return f"queued; {drain}"


@answers_errors
def brain_tick(k: Kernel, no_ai: bool = False, wait: bool = True, timeout: float = 45, source: str = "mcp-agent") -> dict[str, Any]:
    """Queue a keeper tick and, with ``wait``, watch it until it ends or ``timeout`` s pass."""
    if not SOURCE_PATTERN.match(source):
        return {"error": "source must be 1-64 letters, digits, '.', '_' or '-'"}
    with unit_of_work(k.sessions) as db:
        job = tick_queue.enqueue(db, dry_run=False, no_ai=no_ai, source=source)
    answer: dict[str, Any] = {"job_id": job.job_id, "status": job.status, "no_ai": no_ai, "waited": bool(wait)}
    if not wait:
        answer["note"] = _tick_note(job, job.status, False, 0)
        return answer
    limit = max(0.0, min(float(timeout), MAX_TICK_WAIT_S))
    started = time.monotonic()
    current: tick_queue.TickJob | None = job
    status, unknown = job.status, 0
    while status not in tick_queue.FINISHED and unknown < UNKNOWN_POLLS and time.monotonic() - started < limit:
        time.sleep(min(TICK_POLL_S, max(0.0, limit - (time.monotonic() - started))))
        with k.reads() as db:
            current = tick_queue.get(db, job.job_id)
        unknown = unknown + 1 if current is None else 0
        status = current.status if current is not None else "unknown"
    answer["status"] = status
    answer["waited_seconds"] = round(time.monotonic() - started, 1)
    answer["note"] = _tick_note(current, status, True, limit)
    return answer


# -- feed and markers -----------------------------------------------------------------------------------


@answers_errors
def brain_feed(k: Kernel, project: str | None = None, *, principal: Principal = EVERYONE) -> dict[str, Any]:
    """The feed ``GET /feed`` answers: global, or with ``project`` that project's memory (a restricted principal: its own)."""
    now = k.clock()
    root = str(k.vault.root)
    with k.reads() as db:
        reach = Scope(db, principal)
        project = project if project is not None else reach.default_project()
        if project is None:
            return global_answer(db, k.vault, now=now, scope=reach)
        answer = project_answer(db, project, top_n=DEFAULT_TOP_N, lesson_days=DEFAULT_LESSON_DAYS, vault_root=root, now=now, scope=reach)
    return json.loads(stamp_answer(answer.body, now))


@answers_errors
def memory_block(k: Kernel, project: str, *, principal: Principal = EVERYONE) -> dict[str, Any]:
    """The project's memory block, as ``GET /feed?project=P&format=markdown`` renders it (ADR 0040): ``{"markdown": text}``."""
    with k.reads() as db:
        text = project_block(db, project, top_n=DEFAULT_TOP_N, lesson_days=DEFAULT_LESSON_DAYS, now=k.clock(), scope=Scope(db, principal))
    return {"markdown": text}


@answers_errors
def brain_marker(k: Kernel, type: str, content: str, attrs: Any = None, *, principal: Principal = EVERYONE) -> dict[str, Any]:
    """Post a marker as ``POST /marker`` does (keyed by its body hash); its answer, or a replay of it."""
    try:
        with unit_of_work(k.sessions) as db:
            outcome = marker_service.submit(db, k.vault, k.settings, type, content, attrs, now=k.clock(), locator=k.locator, principal=principal)
    except MarkerInvalid as exc:
        return {"error": str(exc)}
    except OSError as exc:  # the reservation stays pending: a retry finds whatever reached the vault
        return {"error": f"vault write failed: {exc.strerror or exc}"}
    marker_service.follow_marker(k.sessions, k.vault, outcome)  # the search index, after the commit
    return outcome.body


def to_json(answer: dict[str, Any]) -> str:
    """A tool's answer as the JSON string it returns (dates as ISO text, as the HTTP API encodes them)."""

    def default(value: Any) -> Any:
        if isinstance(value, (dt.datetime, dt.date)):
            return value.isoformat()
        return str(value)

    return json.dumps(answer, ensure_ascii=False, default=default)
