"""The MCP tools answered through a running kernel's HTTP API (``brain mcp --remote``), with no local database or vault.

Each tool calls the route that does the same work and shapes its answer
with ``brain_mcp.answers``, so a tool answers the same JSON as in-process
(ADR 0043): ``kb_search`` is ``POST /search`` and ``GET /vault/search``;
``brain_search_arcs`` ``POST /search`` of the arc producer, one per key;
``brain_get_arc`` ``GET /by-key/{id}`` (upstream's form) with ``GET
/arcs/{id}`` and ``GET /vault/read``; ``brain_tick`` ``POST /tick`` and ``GET /tick/{id}``;
``brain_feed`` and the resources ``GET /feed``; ``brain_marker`` ``POST
/marker``; ``brain_retract`` and ``brain_expire`` ``POST /entries/{id}/retract`` and ``/expire``; ``brain_ingest`` ``POST /ingest``, once per slice. ``kb_brief`` searches the kernel and asks the LLM this machine's
settings name (the kernel has no brief route). The token is the client
file's: the kernel answers as that token's principal.

Each memory read (``kb_search``, ``brain_search_arcs``, ``brain_get_arc``,
``brain_feed``, the ``memory_block`` resource) then posts its answer to
``POST /pulls`` with the answer a control project reads instead: the kernel
records the pull and says which to serve (ADR 0061). A kernel that cannot
record it (an older one, a refusal) leaves the answer as it was.

A failure is an answer ``{"error": ...}``, never an exception: the kernel
unreachable or timing out (``kernel unavailable: ...``), a refused token
(401, with where the token comes from), a refusal with the kernel's own
``detail`` (and ``candidates`` for an ambiguous project), a 5xx. As
in-process, a failed embedder (502) leaves ``kb_search`` without index hits
rather than failing it.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any, TypeVar

from brain_core.chunks import PRODUCERS
from brain_core.feed.block import LABEL_CHARS, neutral
from brain_core.text import article, frame_label
from brain_core.trial import control_block
from brain_mcp import brief
from brain_mcp.answers import (
    ARC_CONTENT_CHARS,
    KERNEL_UNAVAILABLE,
    SERVER_FAULTS,
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

if TYPE_CHECKING:  # imported on the first call, not at start: an agent times the server's start (ADR 0043)
    import httpx

log = logging.getLogger("brain.mcp.remote")

F = TypeVar("F", bound=Callable[..., dict[str, Any]])

ARC_PRODUCER = PRODUCERS["arc"]  # POST /search's producer filter for arcs
MAX_SESSION_ID_CHARS = 300  # what POST /pulls takes
CONTEXT_LINES = 2  # as the in-process vault search
VAULT_QUERY_CHARS = 500  # GET /vault/search takes q of at most 500 characters
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0  # a first search may load the kernel's embedder
INGEST_TIMEOUT_S = 600.0  # an ingest waits for its fetches and clones (upstream's tool waited 180 s)


class Refused(Exception):
    """A call the kernel did not answer as asked: ``answer`` is the tool's ``{"error": ...}``."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__(answer["error"])
        self.answer = answer


def answers_refusals(func: F) -> F:
    """A tool method whose ``Refused`` becomes its answer."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return func(*args, **kwargs)
        except Refused as exc:
            return exc.answer

    return wrapper  # type: ignore[return-value]


def _reason(detail: Any) -> str:
    """The kernel's ``detail``: its text, or a validation error's field messages on one line."""
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if isinstance(item, dict):
                where = ".".join(str(p) for p in item.get("loc", []) if p not in ("body", "query", "path"))
                parts.append(f"{where}: {item.get('msg')}" if where else str(item.get("msg")))
            else:
                parts.append(str(item))
        return "; ".join(parts)
    return str(detail)


def _cosine(value: float) -> float:
    """A ``min_score`` ``POST /search`` takes (a cosine, -1 to 1): beyond it no vector matches, or every one does."""
    return max(-1.0, min(float(value), 1.0))


class Remote:
    """The tools over the kernel at ``url`` with ``token`` (a ``brain_mcp.answers.Backend``); ``token_source`` names where the token came from."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        token_source: str = "the client file",
        settings: Any = None,
        transport: httpx.BaseTransport | None = None,
        folder: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.folder = folder  # the project of the folder this server runs in: sent with each pull (ADR 0066)
        self.token_source = token_source
        self.settings = settings  # brain_kernel.settings.Settings: the LLM kb_brief asks, if any
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.transport = transport
        self.opened: httpx.Client | None = None
        self.opening = threading.Lock()  # tools run on worker threads: one client for all

    def http(self) -> httpx.Client:
        """The HTTP client, made on the first call (httpx's import is a tenth of the start)."""
        with self.opening:
            if self.opened is None:
                import httpx

                timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
                self.opened = httpx.Client(base_url=self.url, headers=self.headers, timeout=timeout, transport=self.transport, follow_redirects=False)
            return self.opened

    def close(self) -> None:
        """Close the HTTP connections, if any were opened."""
        if self.opened is not None:
            self.opened.close()

    # -- one request ------------------------------------------------------------------------------------

    def send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        data: dict[str, str] | None = None,
        timeout: float | None = None,
        tolerate: frozenset[int] = frozenset(),
    ) -> httpx.Response:
        """One request (a JSON body, or a form in ``data``); a 2xx answer (or a status in ``tolerate``) is returned, anything else raises ``Refused`` with the reason."""
        import httpx  # loaded by http() already: a dict lookup

        query = {k: v for k, v in (params or {}).items() if v is not None}
        extra: dict[str, Any] = {} if timeout is None else {"timeout": httpx.Timeout(timeout, connect=CONNECT_TIMEOUT_S)}
        try:
            response = self.http().request(method, path, params=query, json=json, data=data, **extra)
        except httpx.TimeoutException as exc:
            raise Refused({"error": f"{KERNEL_UNAVAILABLE}: {method} {self.url}{path} timed out ({type(exc).__name__})"}) from None
        except httpx.HTTPError as exc:
            raise Refused({"error": f"{KERNEL_UNAVAILABLE}: cannot reach {self.url} ({exc or type(exc).__name__})"}) from None
        if response.is_success or response.status_code in tolerate:
            return response
        raise Refused(self.refusal(method, path, response))

    def refusal(self, method: str, path: str, response: httpx.Response) -> dict[str, Any]:
        """The ``{"error": ...}`` of a refused request: the kernel's ``detail`` (and ``candidates``), with the status."""
        status = response.status_code
        try:
            body = response.json()
        except ValueError:
            body = None
        detail = body.get("detail") if isinstance(body, dict) and "detail" in body else (response.text.strip()[:200] or response.reason_phrase)
        reason = _reason(detail)
        if status == 401 and not self.headers:  # nothing was sent: the client file's token goes to its own URL only
            reason = (
                f"the kernel at {self.url} wants a token and none was sent ({reason}): a client file's token goes only to its "
                f"own URL; give one with BRAIN_TOKEN, or brain connect --url {self.url} --token-file"
            )
        elif status == 401:
            reason = f"the kernel at {self.url} refused the token from {self.token_source} ({reason}); set the right one with brain connect --token-file"
        elif status >= 500 and not reason.startswith(SERVER_FAULTS):
            reason = f"{KERNEL_UNAVAILABLE}: {method} {path} answered {status}: {reason}"
        answer: dict[str, Any] = {"error": reason, "status": status}
        if isinstance(body, dict) and "candidates" in body:
            answer["candidates"] = body["candidates"]
        return answer

    def get_json(self, path: str, **params: Any) -> dict[str, Any]:
        """``GET path`` answered with a JSON object."""
        return self.json_of("GET", path, self.send("GET", path, params=params))

    def json_of(self, method: str, path: str, response: httpx.Response) -> dict[str, Any]:
        """The JSON object a response carries; anything else is a refusal (the URL is not a kernel's)."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise Refused({"error": f"{method} {self.url}{path} did not answer a JSON object: is {self.url} a brain kernel?"})
        return body

    def pulled(self, answer: dict[str, Any], hidden: dict[str, Any], *, project: str | None, session_id: str | None, text: str | None = None) -> bool:
        """Record a read's answer as a pull (``POST /pulls``, ADR 0061): whether the kernel says to serve ``hidden``
        (a control project's). ``text`` is what was read when it is no JSON answer (a block's markdown). Telemetry:
        a kernel that cannot record it, or one before ADR 0061 (no route), leaves the answer served (logged).

        The kernel's own refusal of the read (a project outside the token's, a malformed one) is the read's answer,
        as in-process: never a read served with its arm undecided, which a control project would then see. A
        session id the route cannot take (blank, over 300 characters) names no known session, as in-process.
        """
        usable = session_id if isinstance(session_id, str) and session_id.strip() and len(session_id) <= MAX_SESSION_ID_CHARS else None
        body = {
            "session_id": usable,
            "project": project,
            "entry_ids": served_ids(answer),
            "text": text if text is not None else to_json(answer),
            "withheld_text": str(hidden.get("markdown")) if text is not None else to_json(hidden),
        }
        if self.folder:  # a kernel before ADR 0066 ignores the field
            body["folder"] = self.folder
        try:
            return bool(self.json_of("POST", "/pulls", self.send("POST", "/pulls", json=body)).get("withheld"))
        except Refused as exc:
            status = exc.answer.get("status")
            if isinstance(status, int) and 400 <= status < 500 and status not in (404, 405):
                raise
            log.warning("pull not recorded: %s", exc.answer["error"])
            return False

    def served(self, answer: dict[str, Any], *, project: str | None, session_id: str | None) -> dict[str, Any]:
        """A read's JSON answer as the reader gets it: the kernel's arm decides, a refusal is no read."""
        if "error" in answer:
            return answer
        hidden = withheld(answer)
        return hidden if self.pulled(answer, hidden, project=project, session_id=session_id) else answer

    # -- the tools ---------------------------------------------------------------------------------------

    @answers_refusals
    def kb_search(
        self, query: str, limit: int, include_artifact: bool, include_obsidian: bool, min_score: float, project: str | None, session_id: str | None = None
    ) -> dict[str, Any]:
        if not include_artifact and not include_obsidian:
            return {"query": query, "count": 0, "results": [], "sources_searched": []}
        limit = clamp_limit(limit)
        sources = [name for name, wanted in (("artifact", include_artifact), ("obsidian", include_obsidian)) if wanted]
        results: list[dict[str, Any]] = []
        if query.strip():
            if include_artifact:
                # Words and vectors fused, as in-process (ADR 0044).
                body = {"query": query, "project": project, "limit": limit, "min_score": _cosine(min_score), "mode": "hybrid"}
                response = self.send("POST", "/search", json=body, tolerate=frozenset({502}))
                if response.status_code == 502:  # the embedder failed: no index hits, as in-process
                    log.warning("kb_search: the search index failed: %s", self.refusal("POST", "/search", response)["error"])
                else:
                    results += [artifact_hit(c) for c in self.json_of("POST", "/search", response).get("results", [])]
            if include_obsidian:
                params = {"q": query[:VAULT_QUERY_CHARS], "limit": limit, "context_lines": CONTEXT_LINES, "project": project}
                results += obsidian_hits(self.get_json("/vault/search", **params).get("results", []), limit)
        return self.served(ranked(query, results, limit, sources), project=project, session_id=session_id)

    def kb_brief(self, query: str, limit: int, model: str, session_id: str | None = None) -> dict[str, Any]:
        found = self.kb_search(query, limit, True, True, 0.0, None, session_id)
        if "error" in found:
            return found
        if "note" in found:  # a control project's: nothing was shown, nothing to brief
            return {**brief.compose(query, [], brief.DEFAULT_MODEL, lambda chat: (None, brief.NOT_CONFIGURED)), "note": found["note"]}
        settings = self.settings
        chosen = model or (settings.llm_model if settings is not None else None) or brief.DEFAULT_MODEL
        if settings is None or not settings.llm_base_url:
            return brief.compose(query, found["results"], chosen, lambda chat: (None, brief.NOT_CONFIGURED))
        from brain_mcp.tools import complete  # the LLM client: imported only when this machine names an LLM

        return brief.compose(query, found["results"], chosen, lambda chat: complete(settings, chosen, chat))

    @answers_refusals
    def brain_search_arcs(
        self, query: str, top_k: int, min_heat: float, min_score: float, project: str | None, session_id: str | None = None
    ) -> dict[str, Any]:
        top_k = clamp_limit(top_k)
        arcs: list[dict[str, Any]] = []
        if query.strip():
            body = {
                "query": query,
                "project": project,
                "producer": ARC_PRODUCER,
                "limit": clamp_limit(max(3 * top_k, 15)),
                "min_score": _cosine(min_score),
                "one_per_key": True,
                "mode": "hybrid",
            }
            found = self.json_of("POST", "/search", self.send("POST", "/search", json=body))
            arcs = arc_hits(found.get("results", []), top_k, min_heat)
        return self.served({"query": query, "count": len(arcs), "arcs": arcs}, project=project, session_id=session_id)

    @answers_refusals
    def brain_get_arc(self, cluster_id: str, session_id: str | None = None) -> dict[str, Any]:
        quoted = urllib.parse.quote(cluster_id, safe="")
        chunks = self.send("GET", f"/by-key/{quoted}", tolerate=frozenset({404}))
        found = (self.json_of("GET", "/by-key", chunks).get("chunks") or []) if chunks.status_code == 200 else []
        path = content = None
        project = None
        arc = self.send("GET", f"/arcs/{quoted}", tolerate=frozenset({404, 422}))
        if arc.status_code == 200:
            shown = self.json_of("GET", "/arcs", arc)
            where = str(shown.get("vault_path") or "")
            meta = shown.get("frontmatter") if isinstance(shown.get("frontmatter"), dict) else {}
            project = meta.get("repo") or meta.get("project")  # the arc's project assigns the read when no session does
            # At most 4 bytes a character: enough bytes for the first 2000 characters.
            read = self.send("GET", "/vault/read", params={"path": where, "max_bytes": 4 * ARC_CONTENT_CHARS}, tolerate=frozenset({404}))
            if read.status_code == 200:
                path, content = where, str(self.json_of("GET", "/vault/read", read).get("content") or "")
        answer = arc_answer(cluster_id, found, ARC_PRODUCER, path, content)
        return self.served(answer, project=project if isinstance(project, str) else None, session_id=session_id)

    def brain_ingest(self, content: str, title: str, producer: str, chunk_size: int, project: str | None) -> dict[str, Any]:
        @answers_refusals
        def send(message: str) -> dict[str, Any]:
            form = {"message": message, "producer": producer, **({"project": project} if project is not None else {})}
            return self.json_of("POST", "/ingest", self.send("POST", "/ingest", data=form, timeout=INGEST_TIMEOUT_S))

        return ingest_slices(content, title, producer, chunk_size, send)

    @answers_refusals
    def brain_tick(self, no_ai: bool, wait: bool, timeout: float, source: str) -> dict[str, Any]:
        if not SOURCE_PATTERN.match(source):
            return {"error": SOURCE_REFUSED}
        job = self.json_of("POST", "/tick", self.send("POST", "/tick", params={"no_ai": str(no_ai).lower(), "source": source}))
        job_id = str(job.get("job_id") or "")

        def poll() -> tuple[str, str | None] | None:
            seen = self.get_json(f"/tick/{urllib.parse.quote(job_id, safe='')}")
            status = str(seen.get("status") or "unknown")
            return None if status == "unknown" else (status, seen.get("error"))

        return follow_tick(job_id, str(job.get("status") or "pending"), no_ai=no_ai, wait=wait, timeout=timeout, poll=poll)

    @answers_refusals
    def brain_feed(self, project: str | None, session_id: str | None = None) -> dict[str, Any]:
        answer = self.get_json("/feed", project=project)
        named = answer.get("project") if isinstance(answer.get("project"), dict) else {}
        return self.served(answer, project=named.get("repo") or named.get("key") or project, session_id=session_id)

    @answers_refusals
    def brain_marker(self, type: str, content: str, attrs: Any) -> dict[str, Any]:
        return self.json_of("POST", "/marker", self.send("POST", "/marker", json={"type": type, "content": content, "attrs": attrs}))

    @answers_refusals
    def brain_retract(self, entry_id: str, reason: str) -> dict[str, Any]:
        path = f"/entries/{urllib.parse.quote(entry_id, safe='/:')}/retract"
        return self.json_of("POST", path, self.send("POST", path, json={"reason": reason}))

    @answers_refusals
    def brain_expire(self, entry_id: str, reason: str) -> dict[str, Any]:
        path = f"/entries/{urllib.parse.quote(entry_id, safe='/:')}/expire"
        return self.json_of("POST", path, self.send("POST", path, json={"reason": reason}))

    @answers_refusals
    def brain_supersede(self, entry_id: str, type: str, content: str, attrs: Any) -> dict[str, Any]:
        # The entry must be one the token may read (else the kernel's 404, "entry not found"); the marker then names its id.
        found = self.get_json(f"/entries/{urllib.parse.quote(entry_id, safe='/:')}")["entry"]
        if found.get("scope") == "fleet" or found.get("kind") not in ("lesson", "milestone", "signal", "decision"):
            return {"error": f"{article(str(found.get('kind')))} is not curated here: edit its file"}
        wanted = dict(attrs) if isinstance(attrs, dict) else {}
        others = wanted.get("supersedes") if isinstance(wanted.get("supersedes"), list) else []
        wanted["supersedes"] = [found["entry_id"], *(ref for ref in others if ref != found["entry_id"])]
        return self.brain_marker(type, content, wanted)

    @answers_refusals
    def memory_block(self, project: str) -> dict[str, Any]:
        text = self.send("GET", "/feed", params={"project": project, "format": "markdown"}).text
        # named as the kernel's frame names it (owner/name, else the key), whatever the caller's spelling
        hidden = {"markdown": control_block(frame_label(text) or neutral(project.strip(), LABEL_CHARS))}
        # The markdown does not name its entries: the record has its bytes and hash, and no entry ids.
        return hidden if self.pulled({}, hidden, project=project, session_id=None, text=text) else {"markdown": text}
