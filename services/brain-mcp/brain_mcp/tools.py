"""What each MCP tool does, in-process over the kernel (UPSTREAM.md 3): plain functions returning dicts.

Upstream's tools were HTTP clients of brain-api and the embeddings service;
here they call the same repositories and services the routes call, on a
``Kernel`` (settings, vault, engine and sessions, embedder) opened once per
process. Each tool keeps upstream's name, parameters, defaults and answer
shape, and answers a failure as ``{"error": ...}`` the way upstream's HTTP
helper did, never a traceback: a malformed or ambiguous ``project``
(ambiguous ones with ``candidates``), an unreachable database, a broken
embedder. ``kb_search`` keeps upstream's rule that a failed source gives no
hits rather than an error. ``Local`` serves them to ``brain_mcp.server`` as
the principal of each call; the answers' shapes are ``brain_mcp.answers``',
shared with the remote backend (``brain_mcp.remote``).

Upstream's defects fixed here (section 8, item 16): ``brain_search_arcs``
lists one result per arc, and ``min_score`` applies before the limit (both
in ``brain_kernel.search.embeddings.search``).

The memory reads (``kb_search``, and so ``kb_brief``; ``brain_search_arcs``,
``brain_get_arc``, ``brain_feed``, the ``memory_block`` resource) are
recorded as pulls (ADR 0061): one ``injections`` row each, through
``brain_kernel.trial.records``, with the arm of the reading project. A
control project's read answers the same shape with no memory in it
(``brain_mcp.answers.withheld``). A read's optional ``session_id`` names the
session asking; the record never fails the read.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar

import httpx
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from brain_core.chunks import PRODUCERS
from brain_core.feed.block import LABEL_CHARS, neutral
from brain_core.feed.envelope import stamp_answer
from brain_core.keys import InvalidKey
from brain_core.markers import MarkerInvalid
from brain_core.trial import control_block
from brain_kernel import marker_service
from brain_kernel.auth import EVERYONE, Principal
from brain_kernel.clock import Clock, utc_now
from brain_kernel.curation.tools import expire_tool, retract_tool, supersede_tool
from brain_kernel.db.engine import make_engine, read_session_factory, session_factory, unit_of_work
from brain_kernel.errors import BrainError, ConfigError
from brain_kernel.feed import feed_repo
from brain_kernel.feed.answers import DEFAULT_LESSON_DAYS, DEFAULT_TOP_N, global_answer, project_answer, serve_project_block
from brain_kernel.identity.projects import EXACT, AmbiguousProject
from brain_kernel.identity.transcript_files import TranscriptLocator
from brain_kernel.ingest import service as ingest
from brain_kernel.scope import Scope
from brain_kernel.search import embeddings, vault_text
from brain_kernel.search.embed_run import embed_follower
from brain_kernel.search.embedders import Embedder, EmbedderError, embedder_for
from brain_kernel.search.follower import Follower
from brain_kernel.settings import Settings
from brain_kernel.ticks import tick_queue
from brain_kernel.ticks.llm import LLMError, chat_completion
from brain_kernel.trial import records
from brain_kernel.vault_store import Vault, VaultPathError
from brain_mcp import brief
from brain_mcp.answers import (
    DATABASE_UNAVAILABLE,
    INGEST_CHUNK_CHARS,
    SOURCE_PATTERN,
    SOURCE_REFUSED,
    arc_answer,
    arc_hits,
    artifact_hit,
    clamp_limit,
    follow_tick,
    ingest_slices,
    obsidian_hits,
    ranked,
    served_ids,
    to_json,
    withheld,
)

log = logging.getLogger("brain.mcp")

F = TypeVar("F", bound=Callable[..., dict[str, Any]])

ARC_PRODUCER = PRODUCERS["arc"]  # upstream's ``brain-arc``
# As GET /vault/search walks and searches (brain_api.routes.vault): same folders skipped, same context.
CONTEXT_LINES = 2
BRIEF_MAX_TOKENS = 800
BRIEF_TEMPERATURE = 0.3
BRIEF_TIMEOUT_S = 200.0


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
    folder: str | None = None  # the project of the folder a stdio server runs in: a read's arm when nothing else says (ADR 0066)
    embed_follower: Follower | None = None  # its markers embedded a moment after they are written (ADR 0067)

    @classmethod
    def open(cls, settings: Settings, *, clock: Clock = utc_now, llm_transport: httpx.BaseTransport | None = None, folder: str | None = None) -> Kernel:
        """The kernel of ``settings``, whose ``database_url`` must answer (the CLI opens and migrates it)."""
        if not settings.database_url:
            raise ConfigError("brain mcp needs a database: set DATABASE_URL or let brain mcp start the embedded one")
        # A small pool: agents often run one stdio server per session, each holding its idle connections.
        engine = make_engine(settings.database_url, pool_size=2)
        embedder = embedder_for(settings)  # the offline model loads on first use
        return cls(
            settings=settings,
            vault=Vault(settings.vault),
            engine=engine,
            sessions=session_factory(engine),
            reads=read_session_factory(engine),
            embedder=embedder,
            embed_follower=embed_follower(engine, settings, embedder),
            locator=TranscriptLocator(settings.resolved_claude_dir, settings.resolved_codex_dir),
            clock=clock,
            llm_transport=llm_transport,
            folder=folder,
        )

    def close(self) -> None:
        """Stop the embed follower (what it has not begun is left to the tick), then close the engine's connections."""
        if self.embed_follower is not None:
            self.embed_follower.close()
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


# -- pulls (ADR 0061) -----------------------------------------------------------------------------------


def _pull(k: Kernel, db: Session, reach: Scope, about: tuple[str | None, str | None] | None, session_id: str | None) -> records.Pull:
    """The read's arm (``brain_kernel.trial.records.pull_of``)."""
    return records.pull_of(db, k.settings, reach, about, session_id, folder=k.folder)


def _record_pull(k: Kernel, pull: records.Pull, text: str, entry_ids: list[str], *, cut: bool = False) -> None:
    """One ``pull`` row in its own unit of work; ``records.record`` logs a failure and never raises it."""
    records.record_pull(lambda: unit_of_work(k.sessions), pull, records.Served(text, tuple(entry_ids), cut))


def _served(k: Kernel, pull: records.Pull, answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` as the reader gets it, without memory for a control project, and recorded (a refusal is not a read)."""
    if "error" in answer:
        return answer
    if pull.withheld:
        answer = withheld(answer)
    _record_pull(k, pull, to_json(answer), [] if pull.withheld else served_ids(answer))
    return answer


# -- kb_search ------------------------------------------------------------------------------------------


def _artifact_hits(
    k: Kernel, db: Session, query: str, *, limit: int, min_score: float | None, scope: tuple[str, str | None] | None, reach: Scope
) -> list[dict[str, Any]]:
    [vector] = k.embedder.embed([query])
    # Words and vectors fused (ADR 0044): the score is the fused value in (0, 1], comparable with the vault's normalized one.
    hits, _ = embeddings.search(db, vector, query=query, mode="hybrid", project=scope, limit=limit, min_score=min_score, within=_within(reach, scope))
    return [artifact_hit(h.as_dict()) for h in hits]


def _obsidian_hits(k: Kernel, db: Session, query: str, *, limit: int, scope: tuple[str, str | None] | None, reach: Scope) -> list[dict[str, Any]]:
    # The route's own search (index or files, withdrawn entries left out: ADR 0064), so both answer alike.
    return obsidian_hits(vault_text.search(reach, k.vault, query, now=k.clock(), project=scope, limit=limit, context_lines=CONTEXT_LINES), limit)


@answers_errors
def kb_search(
    k: Kernel,
    query: str,
    limit: int = 10,
    include_artifact: bool = True,
    include_obsidian: bool = True,
    min_score: float = 0.0,
    project: str | None = None,
    session_id: str | None = None,
    *,
    principal: Principal = EVERYONE,
) -> dict[str, Any]:
    """Search index and vault text together; ``{query, count, results, sources_searched}``; a pull (ADR 0061)."""
    if not include_artifact and not include_obsidian:
        return {"query": query, "count": 0, "results": [], "sources_searched": []}
    limit = clamp_limit(limit)
    sources = [name for name, wanted in (("artifact", include_artifact), ("obsidian", include_obsidian)) if wanted]
    results: list[dict[str, Any]] = []
    with k.reads() as db:
        known, scope, reach = _scope(db, project, principal)
        pull = _pull(k, db, reach, scope, session_id)
        if known and query.strip() and not pull.withheld:
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
    return _served(k, pull, ranked(query, results, limit, sources))


# -- kb_brief -------------------------------------------------------------------------------------------


def complete(settings: Settings, model: str, chat: list[dict[str, str]], transport: httpx.BaseTransport | None = None) -> tuple[str | None, str | None]:
    """(the model's reply, None), or (None, the bracketed reason there is none: upstream's strings)."""
    if not settings.llm_base_url:
        return None, brief.NOT_CONFIGURED
    try:
        content = chat_completion(
            settings, chat, model=model, timeout_s=BRIEF_TIMEOUT_S, transport=transport, max_tokens=BRIEF_MAX_TOKENS, temperature=BRIEF_TEMPERATURE
        )
    except LLMError as exc:  # a failure of the call or of its answer becomes the brief, as upstream's did
        if exc.status is not None:
            return None, f"[inference error {exc.status}: {exc.detail}]"
        return None, f"[inference exception: {exc}]"
    if not content.strip():
        return None, brief.EMPTY_REPLY
    return content, None


@answers_errors
def kb_brief(k: Kernel, query: str, limit: int = 8, model: str = "", session_id: str | None = None, *, principal: Principal = EVERYONE) -> dict[str, Any]:
    """``kb_search`` (the one pull recorded) then one chat completion: ``{query, hits, brief, candidate_refs, model}``."""
    found = kb_search(k, query, limit=limit, session_id=session_id, principal=principal)
    if "error" in found:
        return found
    chosen = model or k.settings.llm_model or brief.DEFAULT_MODEL
    answer = brief.compose(query, found["results"], chosen, lambda chat: complete(k.settings, chosen, chat, k.llm_transport))
    return {**answer, "note": found["note"]} if "note" in found else answer  # a control project's: nothing was shown


# -- arcs -----------------------------------------------------------------------------------------------


@answers_errors
def brain_search_arcs(
    k: Kernel,
    query: str,
    top_k: int = 5,
    min_heat: float = 0,
    min_score: float = 0.0,
    project: str | None = None,
    session_id: str | None = None,
    *,
    principal: Principal = EVERYONE,
) -> dict[str, Any]:
    """Arcs nearest the query, one result per arc, heat at least ``min_heat``: ``{query, count, arcs}``; a pull (ADR 0061)."""
    top_k = clamp_limit(top_k)
    arcs: list[dict[str, Any]] = []
    with k.reads() as db:
        known, scope, reach = _scope(db, project, principal)
        pull = _pull(k, db, reach, scope, session_id)
        if known and query.strip() and not pull.withheld:
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
            arcs = arc_hits((h.as_dict() for h in hits), top_k, min_heat)
    return _served(k, pull, {"query": query, "count": len(arcs), "arcs": arcs})


@answers_errors
def brain_get_arc(k: Kernel, cluster_id: str, session_id: str | None = None, *, principal: Principal = EVERYONE) -> dict[str, Any]:
    """An indexed arc in upstream's embeddings form, with its file's path and content when the vault holds it; else the file alone.

    Upstream answered ``GET /by-key`` first (``source: embeddings``, ``metadata``,
    ``text_preview``) and read the vault only for an arc it had not embedded;
    its clients read that form, so an indexed arc answers it, and the file
    (a merged id finds the arc that absorbed it) adds ``path`` and ``content``.
    A pull (ADR 0061), assigned by the arc's project when the session names none.
    """
    with k.reads() as db:
        reach = Scope(db, principal)
        record = feed_repo.arc_by_cluster_id(db, cluster_id) or feed_repo.arc_absorbing(db, cluster_id)
        if record is not None and reach.hides_path(record.vault_path):
            record = None  # another project's arc reads as a missing one (ADR 0033)
        content = None
        if record is not None:
            try:
                content = k.vault.read_text(record.vault_path)
            except (OSError, VaultPathError):
                content = None  # indexed but gone from the vault: the chunks may still tell
        chunks = [c for c in embeddings.by_key(db, cluster_id) if reach.admits_meta(*embeddings.metadata_project(c["metadata"]))]
        pull = _pull(k, db, reach, (record.project, record.repo) if record is not None and record.project else None, session_id)
    answer = arc_answer(cluster_id, chunks, ARC_PRODUCER, record.vault_path if record is not None and content is not None else None, content)
    return _served(k, pull, answer)


def brain_ingest(
    k: Kernel,
    content: str,
    title: str = "",
    producer: str = "agent",
    chunk_size: int = INGEST_CHUNK_CHARS,
    project: str | None = None,
    *,
    principal: Principal = EVERYONE,
) -> dict[str, Any]:
    """Ingest ``content`` as ``POST /ingest`` does, one slice of ``chunk_size`` characters at a time (upstream's tool)."""

    @answers_errors
    def send(message: str) -> dict[str, Any]:
        return ingest.ingest(k.settings, k.vault, lambda: unit_of_work(k.sessions), message, principal=principal, now=k.clock(), project=project)

    return ingest_slices(content, title, producer, chunk_size, send)


# -- tick -----------------------------------------------------------------------------------------------


@answers_errors
def brain_tick(k: Kernel, no_ai: bool = False, wait: bool = True, timeout: float = 45, source: str = "mcp-agent") -> dict[str, Any]:
    """Queue a keeper tick and, with ``wait``, watch it until it ends or ``timeout`` s pass."""
    if not SOURCE_PATTERN.match(source):
        return {"error": SOURCE_REFUSED}
    with unit_of_work(k.sessions) as db:
        job = tick_queue.enqueue(db, dry_run=False, no_ai=no_ai, source=source)

    def poll() -> tuple[str, str | None] | None:
        with k.reads() as db:
            current = tick_queue.get(db, job.job_id)
        return None if current is None else (current.status, current.error)

    return follow_tick(job.job_id, job.status, no_ai=no_ai, wait=wait, timeout=timeout, poll=poll)


# -- feed and markers -----------------------------------------------------------------------------------


@answers_errors
def brain_feed(k: Kernel, project: str | None = None, session_id: str | None = None, *, principal: Principal = EVERYONE) -> dict[str, Any]:
    """The feed ``GET /feed`` answers: global, or with ``project`` that project's memory (a restricted principal: its own);
    a pull (ADR 0061)."""
    now = k.clock()
    root = str(k.vault.root)
    with k.reads() as db:
        reach = Scope(db, principal)
        project = project if project is not None else reach.default_project()
        if project is None:
            answer = global_answer(db, k.vault, now=now, scope=reach)
            about = None
        else:
            found = project_answer(db, project, top_n=DEFAULT_TOP_N, lesson_days=DEFAULT_LESSON_DAYS, vault_root=root, now=now, scope=reach)
            answer = json.loads(stamp_answer(found.body, now))
            named = answer.get("project") or {}
            about = (named.get("key"), named.get("repo")) if named.get("key") else None
        pull = _pull(k, db, reach, about, session_id)
    return _served(k, pull, answer)


@answers_errors
def memory_block(k: Kernel, project: str, session_id: str | None = None, *, principal: Principal = EVERYONE) -> dict[str, Any]:
    """The project's memory block, as ``GET /feed?project=P&format=markdown`` renders it (ADR 0040): ``{"markdown": text}``.

    A pull (ADR 0061): a control project reads the neutral block a control session starts with (ADR 0050).
    """
    with k.reads() as db:
        reach = Scope(db, principal)
        served = serve_project_block(db, project, top_n=DEFAULT_TOP_N, lesson_days=DEFAULT_LESSON_DAYS, now=k.clock(), scope=reach)
        pull = _pull(k, db, reach, (served.key, served.repo) if served.key else None, session_id)
    text, ids, cut = served.text, list(served.entry_ids), served.cut
    if pull.withheld:
        # named as the treatment's frame names it (owner/name, else the key), whatever the caller's spelling
        text, ids, cut = control_block(neutral(served.repo or served.key or project.strip(), LABEL_CHARS)), [], False
    _record_pull(k, pull, text, ids, cut=cut)
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
    if k.embed_follower is not None and marker_service.written_path(outcome):
        k.embed_follower.notify("marker")
    return outcome.body


@answers_errors
def brain_retract(k: Kernel, entry_id: str, reason: str, *, principal: Principal = EVERYONE) -> dict[str, Any]:
    """Withdraw an entry from feeds and search as ``POST /entries/{id}/retract`` does (ADR 0048): ``{entry, history}``."""
    return retract_tool(k.sessions, k.vault, entry_id, reason, principal=principal, now=k.clock())


@answers_errors
def brain_expire(k: Kernel, entry_id: str, reason: str, *, principal: Principal = EVERYONE) -> dict[str, Any]:
    """Expire an entry now, as ``POST /entries/{id}/expire`` does (ADR 0060): ``{entry, history}``."""
    return expire_tool(k.sessions, k.vault, entry_id, reason, principal=principal, now=k.clock())


@answers_errors
def brain_supersede(k: Kernel, entry_id: str, type: str, content: str, attrs: Any = None, *, principal: Principal = EVERYONE) -> dict[str, Any]:
    """Post a marker that takes ``entry_id``'s place (``POST /marker`` with ``attrs.supersedes``); its answer."""
    return supersede_tool(k.sessions, k.vault, k.settings, entry_id, type, content, attrs, principal=principal, now=k.clock(), locator=k.locator)


class Local:
    """The tools answered in-process over a ``Kernel`` (a ``brain_mcp.answers.Backend``), each call as ``principal()``'s."""

    def __init__(self, kernel: Kernel, principal: Callable[[], Principal]) -> None:
        self.kernel = kernel
        self.principal = principal

    def kb_search(
        self, query: str, limit: int, include_artifact: bool, include_obsidian: bool, min_score: float, project: str | None, session_id: str | None = None
    ) -> dict[str, Any]:
        return kb_search(self.kernel, query, limit, include_artifact, include_obsidian, min_score, project, session_id, principal=self.principal())

    def kb_brief(self, query: str, limit: int, model: str, session_id: str | None = None) -> dict[str, Any]:
        return kb_brief(self.kernel, query, limit, model, session_id, principal=self.principal())

    def brain_search_arcs(
        self, query: str, top_k: int, min_heat: float, min_score: float, project: str | None, session_id: str | None = None
    ) -> dict[str, Any]:
        return brain_search_arcs(self.kernel, query, top_k, min_heat, min_score, project, session_id, principal=self.principal())

    def brain_get_arc(self, cluster_id: str, session_id: str | None = None) -> dict[str, Any]:
        return brain_get_arc(self.kernel, cluster_id, session_id, principal=self.principal())

    def brain_ingest(self, content: str, title: str, producer: str, chunk_size: int, project: str | None) -> dict[str, Any]:
        return brain_ingest(self.kernel, content, title, producer, chunk_size, project, principal=self.principal())

    def brain_tick(self, no_ai: bool, wait: bool, timeout: float, source: str) -> dict[str, Any]:
        return brain_tick(self.kernel, no_ai, wait, timeout, source)

    def brain_feed(self, project: str | None, session_id: str | None = None) -> dict[str, Any]:
        return brain_feed(self.kernel, project, session_id, principal=self.principal())

    def brain_marker(self, type: str, content: str, attrs: Any) -> dict[str, Any]:
        return brain_marker(self.kernel, type, content, attrs, principal=self.principal())

    def memory_block(self, project: str) -> dict[str, Any]:
        return memory_block(self.kernel, project, principal=self.principal())

    def brain_retract(self, entry_id: str, reason: str) -> dict[str, Any]:
        return brain_retract(self.kernel, entry_id, reason, principal=self.principal())

    def brain_expire(self, entry_id: str, reason: str) -> dict[str, Any]:
        return brain_expire(self.kernel, entry_id, reason, principal=self.principal())

    def brain_supersede(self, entry_id: str, type: str, content: str, attrs: Any) -> dict[str, Any]:
        return brain_supersede(self.kernel, entry_id, type, content, attrs, principal=self.principal())
