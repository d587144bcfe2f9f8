"""The app's edge: what every request meets before routing, auth or body parsing (ADR 0021).

``RequestEdge`` is one ASGI middleware with four rules:

- a request that changes something (any method but GET, HEAD, OPTIONS) whose
  ``Origin`` names another site answers 403 (ADR 0072): a browser sends it
  with every cross-site form post, which needs no preflight, so with auth off
  (the embedded default) any page a developer opens could otherwise write
  inject blocks every session reads; clients that are not browsers send none;
- with auth off, a request from this machine (a loopback peer) that names a
  host by a DNS name other than ``localhost`` or the machine's own answers 403
  (ADR 0072): a page whose name an attacker points at 127.0.0.1 (DNS
  rebinding) is same-site to the browser, and would otherwise read and write
  the kernel as the developer's own pages do;
- a request body larger than ``BRAIN_MAX_BODY_BYTES`` answers 413 before it
  is read: at once from ``Content-Length``, or as soon as a streamed body
  passes the limit (the handler never sees a truncated body);
- with ``BRAIN_DOCS_PUBLIC=false`` and tokens configured, ``/docs``,
  ``/redoc`` and ``/openapi.json`` need a bearer token like every other route
  (401 as the API answers it); by default they are public, as FastAPI serves
  them (the schema holds no memory).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from brain_kernel.auth import TokenEntry, authenticate

DOC_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def rebound(host: str | None, peer: str | None, *, local_names: frozenset[str]) -> bool:
    """Whether a loopback peer's request names a host that is neither an address nor one of this machine's names."""
    if not peer or not _loopback(peer):
        return False
    name = (urlsplit(f"//{host or ''}").hostname or "").rstrip(".")  # ``localhost.`` is localhost
    if not name or name in local_names or name == "localhost" or name.endswith(".localhost"):
        return False
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return True  # a DNS name: what a rebinding page is reached by
    return False


def _loopback(peer: str) -> bool:
    try:
        return ipaddress.ip_address(peer).is_loopback
    except ValueError:
        return False


def cross_site(origin: str | None, host: str | None) -> bool:
    """Whether a browser's ``Origin`` names another site than the ``Host`` asked (``null``, a sandboxed or file page,
    is another). The host and port, not the scheme: behind a proxy that ends TLS a page is https there, http here."""
    return origin is not None and urlsplit(origin).netloc != (host or "")


class BodyTooLarge(Exception):
    """A streamed body passed the limit (turned into a 413)."""


class RequestEdge:
    """The module's four rules: cross-site writes, rebound host names with auth off, the body-size limit, and (when
    asked) auth on the documentation routes."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, docs_entries: Sequence[TokenEntry] | None, auth_off: bool = False) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.docs_entries = list(docs_entries) if docs_entries else None
        self.auth_off = auth_off
        self.local_names = frozenset({socket.gethostname().lower(), socket.getfqdn().lower()})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        peer = (scope.get("client") or (None,))[0]
        if self.auth_off and rebound(headers.get("host"), peer, local_names=self.local_names):
            detail = f"host {headers.get('host')!r} is not this machine's name: with auth off, ask 127.0.0.1 or localhost (or set a token)"
            await JSONResponse({"detail": detail}, status_code=403)(scope, receive, send)
            return
        if scope["method"] not in SAFE_METHODS and cross_site(headers.get("origin"), headers.get("host")):
            detail = f"a cross-site request is refused: Origin {headers.get('origin')!r} is not this kernel's site"
            await JSONResponse({"detail": detail}, status_code=403)(scope, receive, send)
            return
        if self.docs_entries is not None and scope["path"] in DOC_PATHS:
            answer = authenticate(headers.get("authorization"), self.docs_entries)
            if isinstance(answer, str):
                await JSONResponse({"detail": answer}, status_code=401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
                return
        declared = headers.get("content-length")
        if declared is not None:
            try:
                too_large = int(declared) > self.max_body_bytes
            except ValueError:
                await JSONResponse({"detail": "invalid Content-Length"}, status_code=400)(scope, receive, send)
                return
            if too_large:
                await self._refuse(scope, receive, send)
                return
        seen = 0
        started = over = False

        async def counted() -> Message:
            nonlocal seen, over
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    over = True
                    raise BodyTooLarge
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            if over:
                # The body parser caught the limit as a body it could not parse and answers 400: the answer is ours.
                if not started and message["type"] == "http.response.start":
                    started = True
                    await self._refuse(scope, receive, send)
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except BodyTooLarge:
            if not started:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"request body is larger than {self.max_body_bytes} bytes"
        await JSONResponse({"detail": detail}, status_code=413)(scope, receive, send)
