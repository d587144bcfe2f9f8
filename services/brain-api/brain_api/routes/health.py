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
from sqlalchemy import text

from brain_api.deps import require_auth
from brain_kernel.errors import ConfigError
from brain_kernel.release import version
from brain_kernel.search.embeddings import column_dimension
from brain_migrations.runner import current_revision, head_revision

router = APIRouter(tags=["health"])
SERVICE = "brain-api"


@router.get("/health")
def health(request: Request) -> dict[str, Any]:
    """Liveness: the process answers (and says where its vault is and which version it runs)."""
    root = request.app.state.vault.root
    return {"status": "ok", "service": SERVICE, "vault_root": str(root), "vault_mounted": root.exists(), "version": version()}


def _checks(request: Request) -> dict[str, dict[str, object]]:
    """Vault writable, database reachable, schema at head: each ``{ok, ...}``."""
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
        checks["schema"] = {"ok": current == head, "current": current, "head": head}
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


def _report(request: Request) -> dict[str, Any]:
    checks = _checks(request)
    ok = all(bool(c["ok"]) for c in checks.values())
    return {"status": "ok" if ok else "degraded", "service": SERVICE, "checks": checks}


@router.get("/health/deep", dependencies=[Depends(require_auth)])
def health_deep(request: Request) -> dict[str, Any]:
    """Every check, always 200: ``status`` is ``ok`` or ``degraded`` (upstream's contract)."""
    return _report(request)


@router.get("/health/ready")
def health_ready(request: Request) -> JSONResponse:
    """Readiness for probes: the deep checks, 503 while any fails (no auth, like ``/health``)."""
    report = _report(request)
    return JSONResponse(report, status_code=200 if report["status"] == "ok" else 503)
