"""The MCP server: upstream's six tools plus ``brain_feed`` and ``brain_marker``, over stdio, streamable HTTP or SSE.

``build_server(settings)`` registers the tools on the SDK's ``MCPServer``
(named ``agentibrain``, as upstream's); each is a thin wrapper that asks a
``Backend`` (``brain_mcp.answers``): ``brain_mcp.tools.Local`` over one
``Kernel`` in-process, or ``brain_mcp.remote.Remote`` through a running
kernel's HTTP API (``run_remote``, ADR 0043). The answer is its JSON text,
as upstream's tools returned it, and the same object as
``structuredContent``, checked against the tool's ``outputSchema``
(``brain_mcp.answers``' models, ADR 0043). A failure keeps upstream's text, the JSON
``{"error": ...}``, and is an MCP tool error (``isError: true``), so a client
tells it from an answer without parsing it (ADR 0041). The read tools carry
``readOnlyHint``; ``brain_marker``'s ``type`` is an enum in its schema. The
feed is also a resource for clients that attach resources to a session:
``brain://feed``, the JSON of ``brain_feed``, and ``brain://feed/{project}``,
the project's memory block in markdown (ADR 0040); a failure there is a
JSON-RPC error whose message is the ``{"error": ...}`` JSON. Over HTTP (``http_app``) the SDK's
streamable-HTTP app serves ``/mcp`` statelessly (upstream's proxy default,
``MCP_PROXY_STATELESS=true``), so any replica answers any request, and its
SSE app serves ``GET /sse`` and ``POST /messages/`` for the clients
upstream's profiles configure that way (an SSE session lives in the process
that opened it). With tokens configured every request but ``GET /ping``
must carry ``Authorization: Bearer <token>`` or ``x-api-key: <token>``
(upstream's example config; 401 JSON otherwise, the API's rule), where
upstream's proxy ran with no key at all. The token's
principal (its projects, ADR 0021) is resolved once by ``BearerAuth`` and
read by every tool from ``PRINCIPAL``; over stdio the server acts for the
local operator (every project), as the CLI does.
"""

from __future__ import annotations

import contextvars
import inspect
import json
import logging
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from brain_kernel.auth import EVERYONE, Principal, TokenEntry, authenticate
from brain_kernel.settings import Settings
from brain_mcp import answers
from brain_mcp.answers import SERVER_FAULTS, Backend, to_json

if TYPE_CHECKING:  # the in-process tools import the database layer: only a local server loads them
    from brain_mcp.tools import Kernel

NAME = "agentibrain"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8104
MCP_PATH = "/mcp"
# The SSE transport upstream's client profiles use (mcp-proxy's paths); a session's messages are posted to MESSAGES_PATH.
SSE_PATH = "/sse"
MESSAGES_PATH = "/messages/"
API_KEY_HEADER = "x-api-key"  # upstream's example client config sends the token here
FEED_URI = "brain://feed"
PROJECT_FEED_URI = "brain://feed/{+project}"  # reserved expansion: owner/name keeps its slash
JSON_MIME = "application/json"
MARKDOWN_MIME = "text/markdown"
OPEN_PATHS = frozenset({"/ping"})  # liveness for proxies and probes, unauthenticated as upstream's proxy answered it
INSTRUCTIONS = (
    "The team's memory: arcs (threads of work ranked by heat), lessons, decisions, milestones and signals, "
    "per project. Search with kb_search or brain_search_arcs, open an arc with brain_get_arc, read the feed with "
    "brain_feed, record what you learned with brain_marker, replace or withdraw a wrong entry with brain_supersede or "
    "brain_retract, end one that no longer holds with brain_expire."
)
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
# brain_core.markers.MARKER_TYPES, spelled out: a schema's enum is read from a Literal.
MarkerType = Literal["lesson", "milestone", "signal", "decision"]
# Hints for the client (it may run a read tool without asking); the server enforces nothing by them.
READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
MARKER = WRITE.model_copy(update={"idempotent_hint": True})  # the same body twice writes it once
RETRACT = WRITE.model_copy(update={"idempotent_hint": True})  # a second retraction (or expiry) of an entry changes nothing
# A tool's result with its output schema: the SDK publishes the model's schema and checks every success against it.
KbSearchResult = Annotated[CallToolResult, answers.KbSearch]
KbBriefResult = Annotated[CallToolResult, answers.KbBrief]
SearchArcsResult = Annotated[CallToolResult, answers.SearchArcs]
ArcResult = Annotated[CallToolResult, answers.Arc]
TickResult = Annotated[CallToolResult, answers.Tick]
FeedResult = Annotated[CallToolResult, answers.Feed]
MarkerResult = Annotated[CallToolResult, answers.Marker]
CuratedResult = Annotated[CallToolResult, answers.Curated]
IngestResult = Annotated[CallToolResult, answers.Ingest]
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


def _reply(answer: dict[str, Any], *, structured: bool = True) -> CallToolResult:
    """A tool's answer as its JSON text and, for a tool with an output schema, as ``structuredContent``;
    an ``{"error": ...}`` answer is the text alone, marked as a tool error.

    Built here rather than raised as the SDK's ``ToolError``, whose text the
    SDK prefixes with ``Error executing tool <name>:``: the text stays JSON.
    The structured object is the text parsed again, so the two never differ.
    """
    text = to_json(answer)
    failed = "error" in answer
    content: list[Any] = [TextContent(type="text", text=text)]
    if failed or not structured:
        return CallToolResult(content=content, is_error=failed)
    return CallToolResult(content=content, structured_content=json.loads(text), is_error=False)


def _with_identity(attrs: dict[str, Any] | None, project: str | None, repo: str | None) -> dict[str, Any] | None:
    """``attrs`` with a marker's ``project``/``repo`` given as arguments of their own (an agent passes them so more
    often than in attrs); what attrs itself says wins, but a null there, which the kernel reads as absent."""
    given = {k: v for k, v in (("project", project), ("repo", repo)) if v is not None}
    if not given:
        return attrs
    if not (isinstance(attrs, dict) or attrs is None):
        return attrs
    return {**given, **{k: v for k, v in (attrs or {}).items() if not (k in given and v is None)}}  # a null is no value


def _unless_error(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer``; an ``{"error": ...}`` one raises with its JSON text (a JSON-RPC error to the client)."""
    if "error" not in answer:
        return answer
    text = to_json(answer)
    if str(answer["error"]).startswith(SERVER_FAULTS):
        raise ResourceError(text)  # the server's fault (its database, or the kernel it serves through): an internal error
    raise ResourceNotFoundError(text)  # the caller's project: malformed, ambiguous or out of scope (invalid params)


def _version() -> str:
    try:
        return version("brain-kernel")
    except PackageNotFoundError:
        return "0"


def build_server(settings: Settings, *, kernel: Kernel | None = None, backend: Backend | None = None, log_level: LogLevel = "INFO") -> MCPServer:
    """The MCP server over ``backend``; without one, in-process over ``kernel`` (opened from ``settings`` when not given, for the life of the process)."""
    if backend is None:
        from brain_mcp.tools import Kernel, Local

        backend = Local(kernel or Kernel.open(settings), _principal)
    b = backend
    server = MCPServer(NAME, instructions=INSTRUCTIONS, version=_version(), log_level=log_level)

    def tool(annotations: ToolAnnotations, *, structured: bool = True) -> Callable[[Callable[..., CallToolResult]], Callable[..., CallToolResult]]:
        # The docstring, on one line, is the description; the output schema is the return annotation's
        # model (None: let the SDK read it); a tool without one answers its JSON text alone.
        def register(fn: Callable[..., CallToolResult]) -> Callable[..., CallToolResult]:
            description = " ".join(inspect.cleandoc(fn.__doc__ or "").split())
            server.add_tool(fn, description=description, annotations=annotations, structured_output=None if structured else False)
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
        session_id: str | None = None,
    ) -> KbSearchResult:
        """Search the knowledge base: the semantic index of arcs, lessons, decisions and signals ("artifact")
        and the vault's markdown text ("obsidian"), best first, at most 2 x limit results. `project` (a short
        key or owner/name) keeps only that project's memory; `session_id`, your session's id, if you know it.
        Returns JSON {query, count, results, sources_searched}."""
        return _reply(b.kb_search(query, limit, include_artifact, include_obsidian, min_score, project, session_id))

    @tool(READ)
    def kb_brief(query: str, limit: int = 8, model: str = "", session_id: str | None = None) -> KbBriefResult:
        """Search the knowledge base and have the LLM write a short brief of the hits, with the refs most worth
        opening. Returns JSON {query, hits, brief, candidate_refs, model}; without an LLM the brief says why and
        the refs are the first three hits."""
        return _reply(b.kb_brief(query, limit, model, session_id))

    @tool(READ)
    def brain_search_arcs(
        query: str, top_k: int = 5, min_heat: float = 0, min_score: float = 0.0, project: str | None = None, session_id: str | None = None
    ) -> SearchArcsResult:
        """Find arcs (threads of past work) by meaning, one result per arc, nearest first; `min_heat` keeps
        only arcs at least that hot, `project` only that project's. Returns JSON {query, count, arcs: [{cluster_id, title, region, heat, status, path, score, preview}]}."""
        return _reply(b.brain_search_arcs(query, top_k, min_heat, min_score, project, session_id))

    @tool(READ)
    def brain_get_arc(cluster_id: str, session_id: str | None = None) -> ArcResult:
        """Read one arc by its cluster_id (from brain_search_arcs or the feed's hot arcs). Returns JSON
        {cluster_id, source: "vault", path, content} (the first 2000 characters), or the error not found."""
        return _reply(b.brain_get_arc(cluster_id, session_id))

    @tool(WRITE)
    def brain_ingest(content: str, title: str = "", producer: str = "agent", chunk_size: int = 200000, project: str | None = None) -> IngestResult:
        """Ingest a document into the knowledge base's inbox: its text is kept as a note, and the URLs, repositories
        and allowed local paths it names are fetched into notes of their own. Long content is sent in slices of
        `chunk_size` characters. `project` (a short key or owner/name) files the notes under that project. Returns
        JSON {chunks_sent, total_chunks, title, producer, results: [{chunk, ok, status, detail}]}."""
        return _reply(b.brain_ingest(content, title, producer, chunk_size, project))

    @tool(WRITE)
    def brain_tick(no_ai: bool = False, wait: bool = True, timeout: float = 45, source: str = "mcp-agent") -> TickResult:
        """Ask for a keeper tick (re-scores arcs, rewrites the feed); `brain tick-drain` runs it. With `wait`,
        follow it for up to `timeout` seconds. Returns JSON {job_id, status, no_ai, waited, waited_seconds, note}."""
        return _reply(b.brain_tick(no_ai, wait, timeout, source))

    @tool(READ)
    def brain_feed(project: str | None = None, session_id: str | None = None) -> FeedResult:
        """The feed a new session reads: global, or with `project` (a short key or owner/name) that project's
        intent, hot arcs, recent lessons, decisions, milestones and signals. Returns the feed JSON."""
        return _reply(b.brain_feed(project, session_id))

    @tool(MARKER)
    def brain_marker(type: MarkerType, content: str, attrs: dict[str, Any] | None = None, project: str | None = None, repo: str | None = None) -> MarkerResult:
        """Record a marker: type lesson, milestone, signal or decision; content in markdown (at most 4096
        characters); attrs such as project, repo, cwd, session_id, source, title, severity, status, scope
        (`project` and `repo` may also be given as arguments of their own). Posting the same body twice writes
        it once. Returns JSON {ok, marker_type, action, vault_path, ...}."""
        return _reply(b.brain_marker(type, content, _with_identity(attrs, project, repo)))

    @tool(RETRACT)
    def brain_retract(entry_id: str, reason: str) -> CuratedResult:
        """Withdraw a wrong entry from feeds and search: `entry_id` is the `entry_id` a marker or the feed's
        metadata gave (or ADR-NNNN for a decision), `reason` why (at most 1000 characters). The vault keeps it,
        marked retracted. Returns JSON {entry, history}; an entry outside your projects is "entry not found"."""
        return _reply(b.brain_retract(entry_id, reason))

    @tool(RETRACT)
    def brain_expire(entry_id: str, reason: str) -> CuratedResult:
        """Expire an entry now: it leaves feeds and stays searchable, marked expired; for what was true and no longer
        is (a freeze that ended, a workaround no longer needed). `entry_id` as for brain_retract, `reason` why (at most
        1000 characters). Returns JSON {entry, history}; an entry outside your projects is "entry not found"."""
        return _reply(b.brain_expire(entry_id, reason))

    @tool(MARKER)
    def brain_supersede(
        entry_id: str, type: MarkerType, content: str, attrs: dict[str, Any] | None = None, project: str | None = None, repo: str | None = None
    ) -> MarkerResult:
        """Replace an entry with a corrected one: records a marker (as brain_marker) that takes `entry_id`'s
        place in feeds and search; the old entry stays in the vault, marked superseded by the new one. Returns
        the marker's JSON with `entry_id` and `supersedes`; an entry outside your projects is "entry not found"."""
        return _reply(b.brain_supersede(entry_id, type, content, _with_identity(attrs, project, repo)))

    @server.resource(FEED_URI, name="feed", title="The feed", mime_type=JSON_MIME, description="The feed brain_feed answers without a project.")
    def feed() -> str:
        return to_json(_unless_error(b.brain_feed(None)))

    @server.resource(
        PROJECT_FEED_URI,
        name="memory_block",
        title="A project's memory",
        mime_type=MARKDOWN_MIME,
        description="One project's memory block (a short key or owner/name), the markdown a session starts with: its "
        "signals, focus and intent, hot arcs, decisions, lessons, milestones and inject blocks (GET /feed?format=markdown).",
    )
    def memory_block(project: str) -> str:
        return str(_unless_error(b.memory_block(project))["markdown"])

    return server


def offered_token(headers: Headers) -> str:
    """The ``Authorization`` header to check: the request's own, else ``x-api-key: <token>`` (upstream's client configs) as a bearer one."""
    header = headers.get("authorization", "")
    if header:
        return header
    key = headers.get(API_KEY_HEADER, "").strip()
    return f"Bearer {key}" if key else ""


class BearerAuth:
    """ASGI middleware: an HTTP request outside ``open_paths`` needs a known token, as ``Authorization: Bearer`` or ``x-api-key``.

    The API's rule, from one place (``brain_kernel.auth.authenticate``); the
    token's principal is set in ``PRINCIPAL`` for the tools of this request,
    and named in the request's ``user`` so the SDK's SSE transport answers a
    message posted to another token's session as a missing session.
    """

    def __init__(self, app: ASGIApp, entries: Sequence[TokenEntry], *, open_paths: frozenset[str] = OPEN_PATHS) -> None:
        self.app = app
        self.entries = list(entries)
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in self.open_paths:
            answer = authenticate(offered_token(Headers(scope=scope)), self.entries)
            if isinstance(answer, str):
                response = JSONResponse({"detail": answer}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
            if self.entries:
                # The principal's name (a digest's prefix, never the token) is the session owner the SSE transport compares.
                scope = {**scope, "user": AuthenticatedUser(AccessToken(token=answer.name, client_id=answer.name, scopes=[]))}
            token = PRINCIPAL.set(answer)
            try:
                await self.app(scope, receive, send)
            finally:
                PRINCIPAL.reset(token)
            return
        await self.app(scope, receive, send)


class Transports:
    """ASGI dispatch: ``GET /sse`` and ``POST /messages/`` to the SSE app, everything else (and the lifespan) to streamable HTTP."""

    def __init__(self, streamable: ASGIApp, sse: ASGIApp) -> None:
        self.streamable, self.sse = streamable, sse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == SSE_PATH or path.startswith(MESSAGES_PATH) or path == MESSAGES_PATH.rstrip("/"):
            await self.sse(scope, receive, send)
        else:
            await self.streamable(scope, receive, send)


async def _ping(request: Request) -> Response:
    return PlainTextResponse("pong")


def http_app(server: MCPServer, settings: Settings, *, host: str = DEFAULT_HOST) -> ASGIApp:
    """The HTTP ASGI app: streamable HTTP at ``POST /mcp`` (stateless), SSE at ``GET /sse`` with ``POST /messages/``,
    ``GET /ping``; tokens (bearer or ``x-api-key``) when configured."""
    server.custom_route("/ping", methods=["GET"], include_in_schema=False)(_ping)
    # host: the SDK turns on its DNS-rebinding check (Host and Origin headers) for a loopback bind.
    streamable = server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, host=host)
    sse = server.sse_app(sse_path=SSE_PATH, message_path=MESSAGES_PATH, host=host)
    return BearerAuth(Transports(streamable, sse), settings.token_entries)


def run(settings: Settings, *, http: bool = False, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, folder: str | None = None) -> None:
    """Serve until stdin closes (stdio) or the process is stopped (HTTP, with uvicorn).

    ``folder``: the project of the folder a stdio server was started in (the agent's repository), which assigns a
    read's trial arm when the read names no project and no session the kernel knows (ADR 0066).
    """
    # Plain log lines on stderr, set before the SDK's own setup (which then leaves them): stdout carries
    # the protocol alone over stdio, and there stderr is the agent's log, so warnings only.
    level: LogLevel = "INFO" if http else "WARNING"
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    from brain_mcp.tools import Kernel

    kernel = Kernel.open(settings, folder=None if http else folder)  # an HTTP server serves every folder's agents
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


def run_remote(settings: Settings, backend: Backend) -> None:
    """Serve ``backend`` (a running kernel's HTTP API) over stdio until stdin closes: no database, no vault.

    No principal is set: the remote tools never ask for one, the kernel answers as the token's.
    """
    logging.basicConfig(level="WARNING", format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    build_server(settings, backend=backend, log_level="WARNING").run("stdio")
