"""Who a page is for, and what every page answer carries: the token cookie, CSRF, and no caching (ADR 0049).

The pages take the API's bearer tokens and scope rule (``brain_kernel.auth``,
``brain_kernel.scope``): a browser signs in by posting a token, which is kept
in an HttpOnly, SameSite=Strict cookie scoped to ``/ui`` (Secure over https),
so no script can read it and the API routes, which read only the
``Authorization`` header, never act on it. A request may also send the
header itself (curl, the benchmark). With no tokens configured the pages are
open, as the API is.

Forms that change something (sign-in, sign-out) carry a CSRF token that must
equal a second cookie of the same kind (double submit), and a request whose
``Origin`` names another site is refused: the state lives in the browser's
cookies only, so any replica answers any request (DESIGN section 8).
"""

from __future__ import annotations

import hmac
import posixpath
import secrets
from urllib.parse import unquote, urlsplit

from fastapi import Request
from fastapi.responses import Response

from brain_api.edge import cross_site
from brain_kernel.auth import EVERYONE, PREFIX, Principal, authenticate

TOKEN_COOKIE = "brain_ui_token"
CSRF_COOKIE = "brain_ui_csrf"
COOKIE_PATH = "/ui"
MAX_TOKEN_CHARS = 4096

# No script runs, nothing loads from elsewhere, no frame holds a page, forms post only here.
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
PAGE_HEADERS = {
    "Cache-Control": "no-store",  # a page shows one token's memory: no cache may hand it to another
    "Vary": "Cookie, Authorization",
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make a browser send "Origin: null" with the forms
    "X-Frame-Options": "DENY",
}


def auth_on(request: Request) -> bool:
    return bool(request.app.state.settings.token_entries)


def principal_of(request: Request) -> Principal | None:
    """The principal a page request acts as: its header's token, else its cookie's; None when it has none that is known."""
    entries = request.app.state.settings.token_entries
    if not entries:
        return EVERYONE
    header = request.headers.get("authorization")
    if header is None:
        cookie = request.cookies.get(TOKEN_COOKIE, "")
        if not cookie or len(cookie) > MAX_TOKEN_CHARS:
            return None
        header = PREFIX + cookie
    answer = authenticate(header, entries)
    return None if isinstance(answer, str) else answer


def token_principal(request: Request, token: str) -> Principal | None:
    """The principal a token typed into the sign-in form names, or None."""
    token = token.strip()
    if not token:
        return None
    answer = authenticate(PREFIX + token, request.app.state.settings.token_entries)
    return None if isinstance(answer, str) else answer


def csrf_of(request: Request) -> tuple[str, bool]:
    """The browser's CSRF token and whether it is new (then the answer must set its cookie)."""
    current = request.cookies.get(CSRF_COOKIE, "")
    if 20 <= len(current) <= 100:
        return current, False
    return secrets.token_urlsafe(32), True


def csrf_ok(request: Request, sent: str) -> bool:
    """Whether a posted form's CSRF token equals the browser's cookie and the request comes from this site."""
    current = request.cookies.get(CSRF_COOKIE, "")
    if cross_site(request.headers.get("origin"), request.url.netloc):
        return False
    return bool(current) and hmac.compare_digest(current.encode(), sent.encode())


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def set_cookie(request: Request, response: Response, name: str, value: str) -> None:
    """A cookie only this site's pages send back, over https only when the page was https, unreadable by scripts."""
    response.set_cookie(name, value, path=COOKIE_PATH, httponly=True, samesite="strict", secure=_secure(request))


def clear_cookie(request: Request, response: Response, name: str) -> None:
    response.delete_cookie(name, path=COOKIE_PATH, httponly=True, samesite="strict", secure=_secure(request))


def finish(request: Request, response: Response, *, csrf: str | None = None, new_csrf: bool = False) -> Response:
    """The page headers, and the CSRF cookie when this answer made one."""
    response.headers.update(PAGE_HEADERS)
    if csrf is not None and new_csrf:
        set_cookie(request, response, CSRF_COOKIE, csrf)
    return response


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a page of this site under /ui, else the projects page (never another site).

    The path is judged as a browser resolves it: ``/ui/../feed`` (or ``%2e%2e``) is ``/feed``, and ``/uix`` is
    not under ``/ui``.
    """
    if not target or len(target) > 2048 or "\\" in target or any(ord(c) < 0x20 or ord(c) == 0x7F for c in target):
        return "/ui"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/") or parts.path.startswith("//"):
        return "/ui"
    resolved = posixpath.normpath(unquote(parts.path))
    if resolved != "/ui" and not resolved.startswith("/ui/"):
        return "/ui"
    return target
