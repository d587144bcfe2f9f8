"""Liveness and readiness: ``GET /health`` (no auth) and ``GET /health/deep``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from brain_api.deps import require_auth
from brain_kernel.errors import ConfigError
from brain_migrations.runner import current_revision, head_revision

router = APIRouter(tags=["health"])


@router.get("/health")
def health() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/health/deep", dependencies=[Depends(require_auth)])
def health_deep(request: Request) -> JSONResponse:
    """Readiness: vault writable, database reachable, schema at head."""
    state = request.app.state
    checks: dict[str, dict[str, object]] = {}
    try:
        state.vault.check_writable()
        checks["vault"] = {"ok": True, "path": str(state.vault.root)}
    except ConfigError as exc:
        checks["vault"] = {"ok": False, "error": str(exc)}
    engine = state.engine
    if engine is None:
        checks["database"] = {"ok": False, "error": "database is not configured"}
        checks["schema"] = {"ok": False, "error": "database is not configured"}
    else:
        try:
            with engine.connect() as conn:
                conn.execute(text("select 1"))
            checks["database"] = {"ok": True}
            current, head = current_revision(engine), head_revision()
            checks["schema"] = {"ok": current == head, "current": current, "head": head}
        except Exception as exc:  # any failure here is "not ready", reported, not raised
            checks.setdefault("database", {"ok": False, "error": str(exc).splitlines()[0]})
            checks.setdefault("schema", {"ok": False, "error": "database unreachable"})
    ok = all(bool(c["ok"]) for c in checks.values())
    return JSONResponse({"status": "ok" if ok else "degraded", "checks": checks}, status_code=200 if ok else 503)
