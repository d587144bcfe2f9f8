"""Build the FastAPI app from a settings object; nothing here reads the environment."""

from __future__ import annotations

from contextlib import asynccontextmanager
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from brain_kernel.db import make_engine, session_factory
from brain_kernel.settings import Settings
from brain_kernel.vault import Vault, VaultPathError


def _routers() -> list:
    """Every route module's router, in registration order."""
    from brain_api.routes import health

    routers = [health.router]
    import importlib

    for name in ("sessions", "markers", "feed", "vault", "projects", "search", "metrics"):
        try:
            module = importlib.import_module(f"brain_api.routes.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"brain_api.routes.{name}":
                raise
            continue
        routers.append(module.router)
    return routers


def create_app(settings: Settings) -> FastAPI:
    """The API for ``settings``: engine, vault and routes, no global state."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if app.state.engine is not None:
            app.state.engine.dispose()

    app = FastAPI(title="brain kernel", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.vault = Vault(settings.vault)
    app.state.engine = make_engine(settings.database_url) if settings.database_url else None
    app.state.session_factory = session_factory(app.state.engine) if app.state.engine is not None else None

    @app.exception_handler(VaultPathError)
    async def _vault_path(request: Request, exc: VaultPathError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {k: v for k, v in err.items() if k in ("loc", "msg", "type")} for err in exc.errors()
        ]
        return JSONResponse({"detail": errors}, status_code=422)

    for router in _routers():
        app.include_router(router)
    return app


def create_app_from_env() -> FastAPI:
    """Factory for uvicorn worker processes: settings rebuilt from the environment."""
    return create_app(Settings())
