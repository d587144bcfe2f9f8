"""Liveness and readiness: ``GET /health`` (no auth), ``GET /health/deep`` and ``GET /health/ready``.

``/health`` and ``/health/deep`` keep upstream's shapes (UPSTREAM.md 1.2,
1.3): deep health always answers 200 with ``status: ok|degraded`` and one
entry per check, so existing dashboards keep reading it. Probes (compose,
Kubernetes) need a status code instead: ``/health/ready`` runs the same
checks and answers 503 while any fails.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import Field
from sqlalchemy import text

from brain_api.deps import require_auth
from brain_api.responses import Answer, AnsweredRoute
from brain_kernel.errors import ConfigError
from brain_kernel.release import version
from brain_kernel.search.embeddings import column_dimension
from brain_kernel.ticks.llm import models_check
from brain_migrations.runner import current_revision, head_revision, schema_ahead

router = APIRouter(tags=["health"], route_class=AnsweredRoute)
SERVICE = "brain-api"


class Health(Answer):
    """Answer of ``GET /health``."""

    status: str = Field(description="Always ok: the process answers.")
    service: str
    vault_root: str
    vault_mounted: bool = Field(description="Whether the vault folder exists.")
    version: str


class Check(Answer):
    """One check of the deep health report; which keys it carries depends on the check and on its outcome."""

    ok: bool
    error: str | None = Field(None, description="Why the check failed.")
    root: str | None = Field(None, description="vault: its folder.")
    writable: bool | None = Field(None, description="vault: a file could be written.")
    current: str | None = Field(None, description="schema: the database's revision.")
    head: str | None = Field(None, description="schema: the code's revision.")
    api_base: str | None = Field(None, description="embedding_api: the OpenAI-compatible endpoint, null for the offline model.")
    model: str | None = Field(None, description="embeddings: the embedder's name.")
    model_dim: int | None = None
    schema_dim: int | None = None
    dim_match: bool | None = None
    latency_ms: float | None = None
    url: str | None = Field(None, description="inference: the models URL asked.")
    http_status: int | None = Field(None, description="inference: the endpoint's status.")
    model_count: int | None = Field(None, description="inference: how many models the endpoint lists.")
    classify_model: str | None = Field(None, description="inference: the ingest classifier's model (BRAIN_CLASSIFY_MODEL).")
    classify_model_available: bool | None = Field(None, description="inference: whether the endpoint lists it.")


class HealthReport(Answer):
    """Answer of ``GET /health/deep`` and ``GET /health/ready``."""

    status: str = Field(description="ok, or degraded while any check fails.")
    service: str
    checks: dict[str, Check] = Field(
        description="vault, database, schema, embeddings, embedding_api (the last two with a database); /health/deep adds inference when an LLM "
        "endpoint is configured."
    )


@router.get("/health", response_model=Health)
def health(request: Request) -> dict[str, Any]:
    """Liveness: the process answers (and says where its vault is and which version it runs)."""
    root = request.app.state.vault.root
    return {"status": "ok", "service": SERVICE, "vault_root": str(root), "vault_mounted": root.exists(), "version": version()}


def _checks(request: Request, *, embeddings: bool = True) -> dict[str, dict[str, object]]:
    """Vault writable, database reachable, schema at head (or ahead of it), and with ``embeddings`` the embedder: each
    ``{ok, ...}``."""
    state = request.app.state
    root = str(state.vault.root)
    checks: dict[str, dict[str, object]] = {}
    try:
        state.vault.check_writable()
        checks["vault"] = {"ok": True, "root": root, "writable": True}
    except ConfigError as exc:
        checks["vault"] = {"ok": False, "root": root, "error": str(exc)}
    engine = state.engine
    if engine is None:
        checks["database"] = {"ok": False, "error": "database is not configured"}
        checks["schema"] = {"ok": False, "error": "database is not configured"}
        return checks
    try:
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        checks["database"] = {"ok": True}
        current, head = current_revision(engine), head_revision()
        # Ahead: a newer kernel's migration ran (a rolling upgrade's hook); this one serves on until it is replaced (ADR 0069).
        checks["schema"] = {"ok": current == head or schema_ahead(current), "current": current, "head": head}
        if schema_ahead(current):
            checks["schema"]["ahead"] = True
        if embeddings:
            checks["embeddings"] = _embeddings_check(state, engine)
            checks["embedding_api"] = _embedding_api(state, checks["embeddings"])
    except Exception as exc:  # any failure here is "not ready", reported, not raised
        checks.setdefault("database", {"ok": False, "error": str(exc).splitlines()[0]})
        checks.setdefault("schema", {"ok": False, "error": "database unreachable"})
    return checks


def _embeddings_check(state: Any, engine: Any) -> dict[str, object]:
    """The embedder answers and its dimension is the index's."""
    embedder = state.embedder
    started = time.perf_counter()
    try:
        dim = len(embedder.embed(["healthcheck ping"])[0])
        latency_ms = round((time.perf_counter() - started) * 1000, 1)
        with engine.connect() as conn:
            schema_dim = column_dimension(conn)
    except Exception as exc:  # reported, not raised: deep health is always an answer
        return {"ok": False, "model": embedder.name, "error": str(exc).splitlines()[0]}
    match = dim == schema_dim
    return {"ok": match, "model": embedder.name, "model_dim": dim, "schema_dim": schema_dim, "dim_match": match, "latency_ms": latency_ms}


def _embedding_api(state: Any, embeddings: dict[str, object]) -> dict[str, object]:
    """The same check under upstream's embeddings-service name and shape (UPSTREAM.md 2), which its clients read.

    ``api_base`` is the OpenAI-compatible endpoint, null for the offline model.
    """
    return {"api_base": state.settings.embed_base_url, **embeddings}


# Upstream's outbound timeout was 30 s; a health probe that waits that long is a dead probe, and the client retries.
INFERENCE_TIMEOUT_S = 5.0


def _report(request: Request, *, inference: bool = False) -> dict[str, Any]:
    """The checks and their status; ``inference`` (``/health/deep``) adds the embedder's and the LLM endpoint's. Readiness
    depends on neither: an outage of either leaves the kernel serving (entries wait to be embedded, ticks are
    deterministic), and a probe every few seconds must not call a billed endpoint."""
    checks = _checks(request, embeddings=inference)
    settings = request.app.state.settings
    if inference and settings.llm_base_url:
        checks["inference"] = models_check(settings, timeout_s=INFERENCE_TIMEOUT_S)
    ok = all(bool(c["ok"]) for c in checks.values())
    return {"status": "ok" if ok else "degraded", "service": SERVICE, "checks": checks}


# Documented, not a response_model (ADR 0059): a check's keys come in the order it found them (embedding_api leads with
# api_base), which a model would reorder (tests/api/test_openapi.py holds real answers to the model).
@router.get("/health/deep", dependencies=[Depends(require_auth)], response_model=None, responses={200: {"model": HealthReport}})
def health_deep(request: Request) -> dict[str, Any]:
    """Every check, always 200: ``status`` is ``ok`` or ``degraded`` (upstream's contract)."""
    return _report(request, inference=True)


@router.get(
    "/health/ready",
    response_model=None,
    responses={200: {"model": HealthReport}, 503: {"model": HealthReport, "description": "Not ready: a check fails (the same report)."}},
)
def health_ready(request: Request) -> JSONResponse:
    """Readiness for probes: the deep checks, 503 while any fails (no auth, like ``/health``)."""
    report = _report(request)
    return JSONResponse(report, status_code=200 if report["status"] == "ok" else 503)
