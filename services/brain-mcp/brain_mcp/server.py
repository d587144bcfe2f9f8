"""The MCP server: upstream's six tools plus ``brain_feed`` and ``brain_marker``, over stdio or streamable HTTP.

``build_server(settings)`` registers the tools on the SDK's ``MCPServer``
(named ``agentibrain``, as upstream's); each is a thin wrapper that calls
``brain_mcp.tools`` on one ``Kernel`` and returns its answer as a JSON
string, as upstream's tools did. A failure keeps upstream's text, the JSON
``{"error": ...}``, and is an MCP tool error (``isError: true``), so a client
tells it from an answer without parsing it (ADR 0041). The read tools carry
``readOnlyHint``; ``brain_marker``'s ``type`` is an enum in its schema. The
feed is also a resource for clients that attach resources to a session:
``brain://feed``, the JSON of ``brain_feed``, and ``brain://feed/{project}``,
the project's memory block in markdown (ADR 0040); a failure there is a
JSON-RPC error whose message is the ``{"error": ...}`` JSON. Over HTTP (``http_app``) the SDK's
streamable-HTTP app serves ``/mcp`` statelessly (upstream's proxy default,
``MCP_PROXY_STATELESS=true``), so any replica answers any request; with
tokens configured every request but ``GET /ping`` must carry
``Authorization: Bearer <token>`` (401 JSON otherwise, the API's rule),
where upstream's proxy ran with no key at all. The token's
principal (its projects, ADR 0021) is resolved once by ``BearerAuth`` and
read by every tool from ``PRINCIPAL``; over stdio the server acts for the
local operator (every project), as the CLI does.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from brain_kernel.auth import EVERYONE, Principal, TokenEntry, authenticate
from brain_kernel.settings import Settings
from brain_mcp import tools
from brain_mcp.tools import Kernel

NAME = "agentibrain"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8104
MCP_PATH = "/mcp"
FEED_URI = "brain://feed"
PROJECT_FEED_URI = "brain://feed/{+project}"  # reserved expansion: owner/name keeps its slash
JSON_MIME = "application/json"
MARKDOWN_MIME = "text/markdown"
OPEN_PATHS = frozenset({"/ping"})  # liveness for proxies and probes, unauthenticated as upstream's proxy answered it
INSTRUCTIONS = (
    "The team's memory: arcs (threads of work ranked by heat), lessons, decisions, milestones and signals, "
    "per project. Search with kb_search or brain_search_arcs, open an arc with brain_get_arc, read the feed with "
    "brain_feed, record what you learned with brain_marker."
)
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
# brain_core.markers.MARKER_TYPES, spelled out: a schema's enum is read from a Literal.
MarkerType = Literal["lesson", "milestone", "signal", "decision"]
# Hints for the client (it may run a read tool without asking); the server enforces nothing by them.
READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
MARKER = WRITE.model_copy(update={"idempotent_hint": True})  # the same body twice writes it once
# The principal of the HTTP request being served (set by BearerAuth; the tasks and threads that run a
# tool copy the request's context); stdio sets the local operator. Unset: the tool refuses (fails closed).
PRINCIPAL: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("brain_principal", default=None)


class NoPrincipal(RuntimeError):
    """A tool ran outside a request whose principal is known (never answered as everyone's)."""


def _principal() -> Principal:
    principal = PRINCIPAL.get()
    if principal is None:
        raise NoPrincipal("no authenticated principal for this call")
    return principal


def _reply(answer: dict[str, Any]) -> CallToolResult:
    """A tool's answer as its JSON text; an ``{"error": ...}`` answer is the same text marked as a tool error.

    Built here rather than raised as the SDK's ``ToolError``, whose text the
    SDK prefixes with ``Error executing tool <name>:``: the text stays JSON.
    """
    return CallToolResult(content=[TextContent(type="text", text=tools.to_json(answer))], is_error="error" in answer)


def _unless_error(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer``; an ``{"error": ...}`` one raises with its JSON text (a JSON-RPC error to the client)."""
    if "error" not in answer:
        return answer
    text = tools.to_json(answer)
    if str(answer["error"]).startswith(tools.DATABASE_UNAVAILABLE):
        raise ResourceError(text)  # the server's fault: an internal error
    raise ResourceNotFoundError(text)  # the caller's project: malformed, ambiguous or out of scope (invalid params)


def _version() -> str:
    try:
        return version("brain-kernel")
    except PackageNotFoundError:
        return "0"


def build_server(settings: Settings, *, kernel: Kernel | None = None, log_level: LogLevel = "INFO") -> MCPServer:
    """The MCP server over ``kernel``; without one it opens its own from ``settings``, for the life of the process."""
    k = kernel or Kernel.open(settings)
    server = MCPServer(NAME, instructions=INSTRUCTIONS, version=_version(), log_level=log_level)

    def tool(annotations: ToolAnnotations) -> Callable[[Callable[..., CallToolResult]], Callable[..., CallToolResult]]:
        # The docstring, on one line, is the description; structured_output=False: the answer is the
        # JSON text itself, as upstream's tools returned it.
        def register(fn: Callable[..., CallToolResult]) -> Callable[..., CallToolResult]:
            description = " ".join(inspect.cleandoc(fn.__doc__ or "").split())
            server.add_tool(fn, description=description, annotations=annotations, structured_output=False)
            return fn

        return register

    @tool(READ)
    def kb_search(
        query: str,
        limit: int = 10,
        include_artifact: bool = True,
        include_obsidian: bool = True,
        min_score: float = 0.0,
        project: str | None = None,
    ) -> CallToolResult:
        """Search the knowledge base: the semantic index of arcs, lessons, decisions and signals ("artifact")
        and the vault's markdown text ("obsidian"), best first, at most 2 x limit results. `project` (a short
        key or owner/name) keeps only that project's memory. Returns JSON {query, count, results, sources_searched}."""
        return _reply(tools.kb_search(k, query, limit, include_artifact, include_obsidian, min_score, project, principal=_principal()))

    @tool(READ)
    def kb_brief(query: str, limit: int = 8, model: str = "") -> CallToolResult:
        """Search the knowledge base and have the LLM write a short brief of the hits, with the refs most worth
        opening. Returns JSON {query, hits, brief, candidate_refs, model}; without an LLM the brief says why and
        the refs are the first three hits."""
        return _reply(tools.kb_brief(k, query, limit, model, principal=_principal()))

    @tool(READ)
    def brain_search_arcs(query: str, top_k: int = 5, min_heat: float = 0, min_score: float = 0.0, project: str | None = None) -> CallToolResult:
        """Find arcs (threads of past work) by meaning, one result per arc, nearest first; `min_heat` keeps
        only arcs at least that hot, `project` only that project's. Returns JSON {query, count, arcs: [{cluster_id, title, region, heat, status, path, score, preview}]}."""
        return _reply(tools.brain_search_arcs(k, query, top_k, min_heat, min_score, project, principal=_principal()))

    @tool(READ)
    def brain_get_arc(cluster_id: str) -> CallToolResult:
        """Read one arc by its cluster_id (from brain_search_arcs or the feed's hot arcs). Returns JSON
        {cluster_id, source: "vault", path, content} (the first 2000 characters), or the error not found."""
        return _reply(tools.brain_get_arc(k, cluster_id, principal=_principal()))

    @tool(WRITE)
    def brain_ingest(content: str, title: str = "", producer: str = "agent", chunk_size: int = 200000) -> CallToolResult:
        """Ingest a document into the knowledge base. Not available yet on this kernel: returns a JSON error."""
        return _reply(tools.brain_ingest(k, content, title, producer, chunk_size))

    @tool(WRITE)
    def brain_tick(no_ai: bool = False, wait: bool = True, timeout: float = 45, source: str = "mcp-agent") -> CallToolResult:
        """Ask for a keeper tick (re-scores arcs, rewrites the feed); `brain tick-drain` runs it. With `wait`,
        follow it for up to `timeout` seconds. Returns JSON {job_id, status, no_ai, waited, waited_seconds, note}."""
        return _reply(tools.brain_tick(k, no_ai, wait, timeout, source))

    @tool(READ)
    def brain_feed(project: str | None = None) -> CallToolResult:
        """The feed a new session reads: global, or with `project` (a short key or owner/name) that project's
        intent, hot arcs, recent lessons, decisions, milestones and signals. Returns the feed JSON."""
        return _reply(tools.brain_feed(k, project, principal=_principal()))

    @tool(MARKER)
    def brain_marker(type: MarkerType, content: str, attrs: dict[str, Any] | None = None) -> CallToolResult:
        """Record a marker: type lesson, milestone, signal or decision; content in markdown (at most 4096
        characters); attrs such as project, repo, cwd, session_id, source, title, severity, status, scope.
        Posting the same body twice writes it once. Returns JSON {ok, marker_type, action, vault_path, ...}."""
        return _reply(tools.brain_marker(k, type, content, attrs, principal=_principal()))

    @server.resource(FEED_URI, name="feed", title="The feed", mime_type=JSON_MIME, description="The feed brain_feed answers without a project.")
    def feed() -> str:
        return tools.to_json(_unless_error(tools.brain_feed(k, principal=_principal())))

    @server.resource(
        PROJECT_FEED_URI,
        name="memory_block",
        title="A project's memory",
        mime_type=MARKDOWN_MIME,
        description="One project's memory block (a short key or owner/name), the markdown a session starts with: its "
        "signals, focus and intent, hot arcs, decisions, lessons, milestones and inject blocks (GET /feed?format=markdown).",
    )
    def memory_block(project: str) -> str:
        return str(_unless_error(tools.memory_block(k, project, principal=_principal()))["markdown"])

    return server


class BearerAuth:
    """ASGI middleware: an HTTP request outside ``open_paths`` needs ``Authorization: Bearer <known token>``.

    The API's rule, from one place (``brain_kernel.auth.authenticate``); the
    token's principal is set in ``PRINCIPAL`` for the tools of this request.
    """

    def __init__(self, app: ASGIApp, entries: Sequence[TokenEntry], *, open_paths: frozenset[str] = OPEN_PATHS) -> None:
        self.app = app
        self.entries = list(entries)
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in self.open_paths:
            answer = authenticate(Headers(scope=scope).get("authorization", ""), self.entries)
            if isinstance(answer, str):
                response = JSONResponse({"detail": answer}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
            token = PRINCIPAL.set(answer)
            try:
                await self.app(scope, receive, send)
            finally:
                PRINCIPAL.reset(token)
            return
        await self.app(scope, receive, send)


async def _ping(request: Request) -> Response:
    return PlainTextResponse("pong")


def http_app(server: MCPServer, settings: Settings, *, host: str = DEFAULT_HOST) -> ASGIApp:
    """The streamable-HTTP ASGI app: ``POST /mcp`` (stateless), ``GET /ping``, bearer tokens when configured."""
    server.custom_route("/ping", methods=["GET"], include_in_schema=False)(_ping)
    # host: the SDK turns on its DNS-rebinding check (Host and Origin headers) for a loopback bind.
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, host=host)
    return BearerAuth(app, settings.token_entries)


def run(settings: Settings, *, http: bool = False, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
    """Serve until stdin closes (stdio) or the process is stopped (HTTP, with uvicorn)."""
    # Plain log lines on stderr, set before the SDK's own setup (which then leaves them): stdout carries
    # the protocol alone over stdio, and there stderr is the agent's log, so warnings only.
    level: LogLevel = "INFO" if http else "WARNING"
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    kernel = Kernel.open(settings)
    try:
        server = build_server(settings, kernel=kernel, log_level=level)
        if http:
            import uvicorn

            uvicorn.run(http_app(server, settings, host=host), host=host, port=port, log_level="info")
        else:
            PRINCIPAL.set(EVERYONE)  # stdio: the local operator, who holds the database and the vault anyway
            server.run("stdio")
    finally:
        kernel.close()
