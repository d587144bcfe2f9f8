"""The embeddings routes of upstream's embeddings service, served by the kernel (UPSTREAM.md 2, 1.10).

``POST /embed``, ``POST /search``, ``GET /by-key/{key}``, ``POST /prune``
and ``POST /index_artifact`` keep upstream's request and response shapes,
so the MCP tools and artifact producers work when pointed at the kernel.
``POST /search`` adds ``project`` (key or ``owner/name``: ambiguous 409,
unknown 200 with no results, malformed 422, as the feed), ``kind`` and
``mode`` (words and vectors fused, ADR 0044), and answers ``scores`` per
result and ``exhaustive`` (see ``brain_kernel.search.embeddings``).
``POST /recall`` is the connector's prompt recall over the same search,
recorded per session (``brain_kernel.search.recall``, ADR 0050). Embedding failures answer 502, a dimension the
index cannot take 503.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Request
from pydantic import BaseModel, Field, model_validator

from brain_api.deps import AuthDep, PrincipalDep, ReadSessionDep, SessionDep, SettingsDep, UnitOfWorkDep
from brain_api.responses import Answer, AnsweredRoute, errors
from brain_core.chunks import EMBEDDED_KINDS, EmbeddingDoc
from brain_core.markers import has_lone_surrogate
from brain_core.trial import CONTROL
from brain_kernel.identity.projects import EXACT
from brain_kernel.identity.sessions import get_session
from brain_kernel.scope import Scope
from brain_kernel.search import embeddings, recall
from brain_kernel.search.embedders import Embedder, EmbedderError
from brain_kernel.search.pending import pending
from brain_kernel.trial.records import RECALL, Served, arm_of, record

router = APIRouter(tags=["embeddings"], dependencies=[AuthDep], route_class=AnsweredRoute)


def _storable(value: Any) -> Any:
    """Refuse (422) text Postgres cannot store: a NUL, or a lone surrogate (found by the fuzz run)."""
    if has_lone_surrogate(value) or "\\u0000" in json.dumps(value, default=str):
        raise ValueError("text holds a NUL or a lone surrogate")
    return value


class EmbedIn(BaseModel):
    """Body of ``POST /embed`` (and of ``POST /index_artifact``)."""

    @model_validator(mode="after")
    def _storable_text(self) -> EmbedIn:
        _storable([self.key, self.content, self.producer, self.content_type, self.metadata])
        return self

    key: str = Field(..., min_length=1, max_length=500)
    content: str = Field(..., min_length=1, max_length=2_000_000)
    producer: str = Field("unknown", min_length=1, max_length=100)
    content_type: str = Field("text/plain", max_length=100)
    metadata: dict[str, Any] = Field(default_factory=dict)


class SearchIn(BaseModel):
    """Body of ``POST /search``."""

    @model_validator(mode="after")
    def _usable(self) -> SearchIn:
        _storable([self.query, self.project, self.producer, self.kind])
        if not self.query.strip():  # a blank text embeds as the zero vector: every cosine is NaN, every rank arbitrary
            raise ValueError("query is blank")
        if self.kind is not None and self.kind not in EMBEDDED_KINDS:
            raise ValueError(f"kind must be one of {', '.join(EMBEDDED_KINDS)}")
        return self

    query: str = Field(..., min_length=1, max_length=10_000)
    project: str | None = Field(None, max_length=300, description="Only this project's chunks (short key or owner/name); the top-k is exact.")
    producer: str | None = Field(None, max_length=100)
    kind: str | None = Field(None, max_length=32, description="arc, lesson, decision or signal")
    limit: int = Field(10, ge=1, le=100)
    min_score: float | None = Field(
        None,
        ge=-1.0,
        le=1.0,
        description="Least cosine for a vector match (absent: no threshold); in hybrid a match by words alone stays; ignored in words mode.",
    )
    one_per_key: bool = Field(False, description="One result per key (its best chunk), for tools that list arcs.")
    mode: Literal["hybrid", "vector", "words"] = Field("hybrid", description="Words and vectors fused by rank (default), or one of them alone.")


class PruneIn(BaseModel):
    """Body of ``POST /prune``."""

    @model_validator(mode="after")
    def _storable_text(self) -> PruneIn:
        _storable([self.producer, self.keep_keys])
        return self

    producer: str = Field(..., min_length=1, max_length=100)
    keep_keys: list[str] = Field(default_factory=list)


class Embedded(Answer):
    """Answer of ``POST /embed`` and ``POST /index_artifact``."""

    key: str
    chunks_stored: int
    dimensions: int | None = Field(description="The index's vector dimension.")


class SearchResult(Answer):
    """One chunk found (``brain_kernel.search.embeddings.Hit``): upstream's fields plus ``scores``."""

    key: str
    producer: str
    chunk_idx: int
    content_type: str
    text_preview: str
    metadata: dict[str, Any] = Field(description="The chunk's metadata: project, projects, repo, kind, ... as stored.")
    score: float = Field(description="The rank score: cosine in vector mode, fused by rank in hybrid.")
    scores: dict[str, float | None] = Field(description="Each method's own score (null when it did not find the chunk).")


class SearchAnswer(Answer):
    """Answer of ``POST /search``."""

    query: str
    project: str | None
    mode: str
    results: list[SearchResult] = Field(description="Best first.")
    count: int
    exhaustive: bool = Field(description="True only when the top-k is exact.")
    pending: int = Field(description="Entries in this search's reach the index does not hold as they are now (the next tick embeds them).")


class Recalled(Answer):
    """Answer of ``POST /recall``."""

    session_id: str
    project: str | None = Field(description="owner/name (else key) of the project recalled from; null for a session in no project.")
    text: str = Field(description="The recall text; empty when nothing is close or in the trial's control arm.")
    entry_ids: list[str]
    arm: str | None = Field(description="The session's trial arm; null when nothing was recorded.")


class Chunk(Answer):
    """One stored chunk of a key."""

    key: str
    producer: str
    chunk_idx: int
    content_type: str
    text_preview: str
    metadata: dict[str, Any]


class KeyChunks(Answer):
    """Answer of ``GET /by-key/{key}``."""

    key: str
    chunks: list[Chunk] = Field(description="By producer, then chunk index.")
    count: int


class Pruned(Answer):
    """Answer of ``POST /prune``."""

    deleted: int
    kept: int
    scanned: int
    deleted_keys: list[str]


def _embedder(request: Request) -> Embedder:
    return request.app.state.embedder


def _embed(request: Request, db: Any, settings: Any, body: EmbedIn, scope: Scope) -> dict[str, Any]:
    """Store one document; a token bound to projects writes it as its project's and replaces only that project's chunks."""
    metadata = dict(body.metadata)
    project, projects, repo = embeddings.metadata_project(metadata)
    sent = next((str(metadata[k]) for k in ("project", "repo") if metadata.get(k) not in (None, "")), None)
    unusable = f"project {sent[:120]!r} is not a project key or owner/name" if sent is not None and project is None else None
    member = scope.write_project(project, repo, unreadable=unusable)
    owner = None
    if member is not None:  # the write rule (ADR 0033): the chunk is its project's, whatever the metadata said
        project, projects, repo, owner = member.key, (member.key,), member.repo, (member.key, member.repo)
        metadata["project"] = member.key
        if member.repo:
            metadata["repo"] = member.repo
    doc = EmbeddingDoc(body.key, body.producer, body.content, str(metadata.get("kind") or "artifact"), project, projects, repo, metadata)
    try:
        stored = embeddings.store_docs(db, _embedder(request), [doc], content_type=body.content_type, force_dim=settings.embed_dim_force_migrate, owner=owner)
    except EmbedderError as exc:
        raise HTTPException(status_code=502, detail=f"embedding failed: {exc}") from None
    return {"key": body.key, "chunks_stored": stored, "dimensions": embeddings.column_dimension(db)}


@router.post("/embed", response_model=Embedded, responses=errors(403, 502))
def embed(request: Request, body: EmbedIn, db: SessionDep, settings: SettingsDep, principal: PrincipalDep) -> dict[str, Any]:
    """Chunk, embed and store one document (its earlier chunks of the same producer replaced; a scoped token's: its project's only)."""
    return _embed(request, db, settings, body, Scope(db, principal))


@router.post(
    "/index_artifact",
    response_model=Embedded,
    responses=errors(403, 502, described={400: "The body cannot be parsed, or key or content is missing or invalid."}),
)
def index_artifact(request: Request, body: dict[str, Any], db: SessionDep, settings: SettingsDep, principal: PrincipalDep) -> dict[str, Any]:
    """Upstream's artifact hook: ``{key, content, content_type?, producer?, metadata?}``, embedded in-process."""
    missing = [name for name in ("key", "content") if not body.get(name)]
    if missing:
        raise HTTPException(status_code=400, detail=f"missing required fields: {missing}")
    try:
        parsed = EmbedIn(**{k: v for k, v in body.items() if k in EmbedIn.model_fields})
    except ValueError as exc:
        raise HTTPException(status_code=400, detail=str(exc).splitlines()[0]) from None
    return _embed(request, db, settings, parsed, Scope(db, principal))


@router.post("/search", response_model=SearchAnswer, responses=errors(403, 409, 502))
def search(request: Request, body: SearchIn, db: ReadSessionDep, principal: PrincipalDep) -> dict[str, Any]:
    """The chunks that best answer the query: words and vectors fused (``mode``); each result's ``scores`` per method.

    With ``project`` (or any filter) every result belongs to it and the
    answer is exact (``exhaustive: true``) unless the filtered set is large
    enough for the index scan (ADR 0045). A token bound to projects searches
    only those (403 for a project outside them).
    """
    scope = None
    reach = Scope(db, principal)
    within = [(m.key, m.repo) for m in reach.members] if reach.restricted else None
    if body.project is not None:
        found = reach.check(body.project)  # malformed: 422, ambiguous: 409, out of scope: 403 (the app's handlers)
        if found.status != EXACT:
            return {"query": body.query, "project": body.project, "mode": body.mode, "results": [], "count": 0, "exhaustive": True, "pending": 0}
        scope, within = (found.key, found.repo), None
    vector = None
    if body.mode != "words":  # a words search needs no embedder
        try:
            [vector] = _embedder(request).embed([body.query])
        except EmbedderError as exc:
            raise HTTPException(status_code=502, detail=f"query embedding failed: {exc}") from None
    hits, exhaustive = embeddings.search(
        db,
        vector,
        query=body.query,
        mode=body.mode,
        project=scope,
        producer=body.producer,
        kind=body.kind,
        limit=body.limit,
        min_score=body.min_score,
        one_per_key=body.one_per_key,
        within=within,
    )
    return {
        "query": body.query,
        "project": body.project,
        "mode": body.mode,
        "results": [h.as_dict() for h in hits],
        "count": len(hits),
        "exhaustive": exhaustive,
        # Entries of this search's reach the index does not hold as they are now: the next tick embeds them (ADR 0046).
        "pending": pending(db, scope, within),
    }


class RecallIn(BaseModel):
    """Body of ``POST /recall``: a session's prompt, for the few close entries of its project it was not given yet."""

    @model_validator(mode="after")
    def _storable_text(self) -> RecallIn:
        _storable([self.session_id, self.prompt, self.project])
        return self

    session_id: str = Field(..., min_length=1, max_length=300)
    prompt: str = Field(..., min_length=1, max_length=10_000)
    project: str | None = Field(None, max_length=300, description="The session's project (default: the one its registration holds).")
    limit: int = Field(recall.DEFAULT_LIMIT, ge=1, le=10)
    max_bytes: int = Field(recall.DEFAULT_MAX_BYTES, ge=256, le=8192)
    min_score: float = Field(recall.DEFAULT_MIN_SCORE, ge=-1.0, le=1.0, description="Least cosine of a result found by meaning alone.")


@router.post("/recall", response_model=Recalled, responses=errors(403, 409, 502))
def recall_for_prompt(
    request: Request, body: RecallIn, db: ReadSessionDep, settings: SettingsDep, principal: PrincipalDep, uow: UnitOfWorkDep
) -> dict[str, Any]:
    """The recall text for a prompt of a registered session (empty when nothing is close, or in the trial's control arm).

    The project is the one sent, else the session's registered one; a
    session in no project gets nothing. Every answer given to a session is
    recorded with its trial arm (ADR 0050), an empty one too.
    """
    reach = Scope(db, principal)
    row = get_session(db, body.session_id)
    reach.check_session(body.session_id, row)
    ref = body.project or (row.repo or row.project if row is not None else None)
    empty: dict[str, Any] = {"session_id": body.session_id, "project": ref, "text": "", "entry_ids": [], "arm": None}
    found = reach.check(ref) if ref is not None else None  # malformed: 422, ambiguous: 409, out of scope: 403 (the app's handlers)
    if found is None or found.status != EXACT:
        # Nothing to recall from, and still an answer given to a session: recorded, as the fleet block it read is.
        assignment = arm_of(settings, repo=None, project=None, session_id=body.session_id)
        agent = row.agent if row is not None else None
        record(uow, kind=RECALL, assignment=assignment, served=Served("", ()), session_id=body.session_id, agent=agent, project=None, repo=None)
        return {**empty, "arm": assignment.arm}
    assignment = arm_of(settings, repo=found.repo, project=found.key, session_id=body.session_id)
    text, ids = "", ()
    if assignment.arm != CONTROL:
        try:
            [vector] = _embedder(request).embed([body.prompt])
        except EmbedderError as exc:
            raise HTTPException(status_code=502, detail=f"query embedding failed: {exc}") from None
        hits, _ = embeddings.search(
            db,
            vector,
            query=body.prompt,
            mode="hybrid",
            project=(found.key, found.repo),
            limit=recall.CANDIDATES,
            min_score=recall.BOTH_MIN_SCORE,
            one_per_key=True,
        )
        text, ids = recall.select_recall(hits, recall.served_before(db, body.session_id), limit=body.limit, min_score=body.min_score, max_bytes=body.max_bytes)
    record(
        uow,
        kind=RECALL,
        assignment=assignment,
        served=Served(text, ids),
        session_id=body.session_id,
        agent=row.agent if row is not None else None,
        project=found.key,
        repo=found.repo,
    )
    return {**empty, "project": found.repo or found.key, "text": text, "entry_ids": list(ids), "arm": assignment.arm}


@router.get(
    "/by-key/{key:path}", response_model=KeyChunks, responses=errors(described={404: "No chunk is stored under this key (or the token may not read it)."})
)
def get_by_key(key: Annotated[str, Path(min_length=1, max_length=500)], db: ReadSessionDep, principal: PrincipalDep) -> dict[str, Any]:
    """Every chunk stored under ``key`` (a token bound to projects sees its projects' chunks only)."""
    scope = Scope(db, principal)
    chunks = [c for c in embeddings.by_key(db, key) if scope.admits_meta(*embeddings.metadata_project(c["metadata"]))]
    if not chunks:
        raise HTTPException(status_code=404, detail=f"key not found: {key}")
    return {"key": key, "chunks": chunks, "count": len(chunks)}


@router.post("/prune", response_model=Pruned, responses=errors(403))
def prune(body: PruneIn, db: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    """Delete the producer's chunks whose key is not in ``keep_keys`` (every project's: not for a token bound to projects)."""
    Scope(db, principal).require_unrestricted("POST /prune")
    return embeddings.prune(db, body.producer, body.keep_keys)
