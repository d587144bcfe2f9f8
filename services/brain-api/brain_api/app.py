"""Build the FastAPI app from a settings object; nothing here reads the environment."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from sqlalchemy.exc import DataError, DBAPIError, InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from brain_api.deps import get_db, get_read_db, get_unit_of_work, require_auth
from brain_api.edge import RequestEdge
from brain_api.observability import RequestObserver
from brain_api.responses import ERROR_BODY, ERRORS, FIELD_ERROR
from brain_core.keys import InvalidKey
from brain_kernel import http_client
from brain_kernel.clock import Clock, utc_now
from brain_kernel.db.engine import make_engine, read_session_factory, session_factory
from brain_kernel.errors import ConfigError
from brain_kernel.identity import pins
from brain_kernel.identity.projects import AmbiguousProject
from brain_kernel.identity.transcript_files import TranscriptLocator
from brain_kernel.marker_service import search_follow
from brain_kernel.release import version
from brain_kernel.scope import OutOfScope, ProjectRequired
from brain_kernel.search.embed_run import embed_follower
from brain_kernel.search.embedders import embedder_for
from brain_kernel.search.follower import Follower
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault, VaultPathError

log = logging.getLogger("brain.api")


def _routers() -> list[APIRouter]:
    """Every route module's router, in registration order."""
    from brain_api.routes import embeddings, entries, feed, health, ingest, markers, metrics, projects, pulls, sessions, tick, vault
    from brain_api.ui import pages as ui

    return [
        health.router,
        sessions.router,
        markers.router,
        feed.router,
        entries.router,
        vault.router,
        ingest.router,
        projects.router,
        tick.router,
        embeddings.router,
        pulls.router,
        metrics.router,
        ui.router,
    ]


def api_routes() -> dict[tuple[str, str], APIRoute]:
    """Every route of the routers by (path, method): the operations ``/openapi.json`` describes."""
    return {(r.path_format, method): r for router in _routers() for r in router.routes if isinstance(r, APIRoute) for method in r.methods}


def preload() -> None:
    """Import every module an app uses: ``brain serve --workers N`` forks its workers after this (ADR 0031)."""
    _routers()


def create_app(settings: Settings, *, clock: Clock = utc_now) -> FastAPI:
    """The API for ``settings``: engine, vault, clock and routes, no global state."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if app.state.engine is not None:
            try:
                pins.refresh(app.state.engine, settings)  # the catalog's key pins (ADR 0021)
            except DBAPIError as exc:  # the database is down: it answers 503 per request, pins as last written
                log.warning("catalog pins not refreshed: %s", str(exc.orig or exc).splitlines()[0])
        yield
        for follower in (app.state.search_follower, app.state.embed_follower):
            if follower is not None:
                follower.close()
        if app.state.engine is not None:
            app.state.engine.dispose()
        http_client.close()  # the process's LLM and embeddings clients: a worker stopped by a signal runs no atexit

    app = FastAPI(title="brain kernel", version=version(), lifespan=lifespan, generate_unique_id_function=_operation_id)
    app.state.settings = settings
    app.state.clock = clock
    # Finds a marker's session transcript by id; its cache only saves directory walks (a miss looks again).
    app.state.transcripts = TranscriptLocator(settings.resolved_claude_dir, settings.resolved_codex_dir)
    app.state.embedder = embedder_for(settings)  # the offline model loads on first use
    app.state.vault = Vault(settings.vault)
    app.state.engine = make_engine(settings.database_url) if settings.database_url else None
    app.state.session_factory = session_factory(app.state.engine) if app.state.engine is not None else None
    app.state.read_session_factory = read_session_factory(app.state.engine) if app.state.engine is not None else None
    app.state.search_follower = Follower(search_follow(app.state.session_factory, app.state.vault)) if app.state.session_factory is not None else None
    # Markers embedded a moment after they are written, off the request, with the embedder searches use (ADR 0067).
    app.state.embed_follower = embed_follower(app.state.engine, settings, app.state.embedder) if app.state.engine is not None else None

    @app.exception_handler(VaultPathError)
    async def _vault_path(request: Request, exc: VaultPathError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @app.exception_handler(InvalidKey)
    async def _invalid_key(request: Request, exc: InvalidKey) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(OutOfScope)
    async def _out_of_scope(request: Request, exc: OutOfScope) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=403)

    @app.exception_handler(ProjectRequired)
    async def _project_required(request: Request, exc: ProjectRequired) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(AmbiguousProject)
    async def _ambiguous(request: Request, exc: AmbiguousProject) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "candidates": exc.candidates}, status_code=409)

    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    async def _database(request: Request, exc: DBAPIError) -> JSONResponse:
        # The database is down or unreachable: the service is unavailable, not broken (never a 500).
        reason = _driver_reason(exc)
        log.warning("database unavailable: %s", reason)
        return JSONResponse({"detail": f"database unavailable: {reason}"}, status_code=503)

    @app.exception_handler(DataError)
    async def _data(request: Request, exc: DataError) -> JSONResponse:
        # Postgres refused a value the request carried (a NUL byte in a path or query value, a number out of
        # range): the input's fault, so a 422 with the database's reason, never a 500.
        return JSONResponse({"detail": f"a value of the request cannot be stored or compared: {_driver_reason(exc)}"}, status_code=422)

    @app.exception_handler(ConfigError)
    async def _config(request: Request, exc: ConfigError) -> JSONResponse:
        # e.g. an unreadable project catalog: the operator's problem, not the client's
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code in (404, 405) and (request.url.path == "/ui" or request.url.path.startswith("/ui/")):
            from brain_api.ui.pages import no_such_page

            return no_such_page(request, exc.status_code)  # a person typed it: a page, not the API's JSON
        return await http_exception_handler(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{k: v for k, v in err.items() if k in ("loc", "msg", "type")} for err in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=422)

    for router in _routers():
        app.include_router(router)
    docs_entries = None if settings.docs_public else settings.token_entries
    app.add_middleware(RequestEdge, max_body_bytes=settings.max_body_bytes, docs_entries=docs_entries, auth_off=not settings.token_entries)
    app.add_middleware(RequestObserver, settings=settings)  # outermost: it identifies, times and counts the edge's refusals too
    app.openapi = lambda: _documented_errors(app)  # type: ignore[method-assign]
    return app


def _driver_reason(exc: DBAPIError) -> str:
    """The first line of what the database driver said."""
    cause = exc.orig if exc.orig is not None else exc
    return (str(cause).strip().splitlines() or [type(cause).__name__])[0]


def _operation_id(route: APIRoute) -> str:
    """The route function's name (``get_feed``), which generated clients turn into method names."""
    return route.name


def _calls(dependant: Dependant) -> Iterator[Any]:
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from _calls(dependency)


def _errors_of(route: APIRoute) -> dict[str, dict[str, Any]]:
    """The error statuses an operation can answer: its own refusals (``responses.errors``) and those its shape implies.

    Implied: 401 behind the bearer check; 400 (a form body that cannot be parsed)
    and 413 with a body; 422 with any input; 503 where a request opens the
    database. Refusals made before routing (an unparseable Content-Length, an
    unknown path or method) belong to no operation and are not listed.
    """
    calls = set(_calls(route.dependant))
    implied: list[int] = []
    if _behind_bearer(route):
        implied.append(401)
    if route.dependant.body_params:
        implied += [400, 413]
    if route.dependant.query_params or route.dependant.path_params or route.dependant.body_params or route.dependant.header_params:
        implied.append(422)
    if calls & _database_deps():
        implied.append(503)
    own = {str(status): dict(entry) for status, entry in route.responses.items() if str(status)[0] in "45"}
    return {**{str(s): {"description": ERRORS[s]} for s in implied}, **own}


def _behind_bearer(route: APIRoute) -> bool:
    from brain_api.routes.metrics import metrics_auth

    return not {require_auth, metrics_auth}.isdisjoint(_calls(route.dependant))


def _database_deps() -> frozenset[Any]:
    return frozenset({get_db, get_read_db, get_unit_of_work})


def _documented_errors(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI schema with each operation's error statuses, only those it can answer, with their bodies.

    Routes behind the bearer check carry the ``bearer`` security scheme (the
    Authorize button of ``/docs``). The fuzz run holds every answer to it.
    """
    if app.openapi_schema is not None:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["ErrorBody"] = ERROR_BODY
    schemas["ValidationError"] = FIELD_ERROR
    schemas.pop("HTTPValidationError", None)  # FastAPI's 422 body: every error answers ErrorBody instead
    components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer", "description": "A token of BRAIN_TOKENS."}}
    routes = api_routes()
    for path, item in schema.get("paths", {}).items():
        for method, operation in item.items():
            route = routes.get((path, method.upper()))
            if route is None:  # a route added outside the routers: only the error body is known
                errors = {str(s): {"description": text} for s, text in ERRORS.items()}
            else:
                errors = _errors_of(route)
            if route is None or _behind_bearer(route):
                operation["security"] = [{"bearer": []}]
            responses = operation.setdefault("responses", {})
            for status in [s for s in responses if s[0] in "45" and s not in errors]:
                del responses[status]
            for status, declared in errors.items():
                answer = responses.setdefault(status, {})
                answer["description"] = declared.get("description", ERRORS[int(status)])
                if "content" not in declared and "model" not in declared:  # a route's own body (an HTML page, a report) stays
                    answer["content"] = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    app.openapi_schema = schema
    return schema


def create_app_from_env() -> FastAPI:
    """Factory for uvicorn worker processes: settings rebuilt from the environment."""
    return create_app(Settings())
