"""Bearer tokens: one rule for every entry point that takes them (the HTTP API and the MCP server).

Upstream's contract (UPSTREAM.md 1.1): with no tokens configured auth is
off; a missing header, one without the case-sensitive ``Bearer `` prefix or
an empty token is ``missing bearer token``; an unknown token is ``invalid
token``; both answer 401. Tokens are compared in constant time and never
logged.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

PREFIX = "Bearer "


def bearer_refusal(header: str | None, tokens: Sequence[str]) -> str | None:
    """Why a request with this ``Authorization`` header is refused (401), or None when it may pass."""
    if not tokens:
        return None
    header = header or ""
    offered = header[len(PREFIX) :].strip() if header.startswith(PREFIX) else ""
    if not offered:
        return "missing bearer token"
    if not any(hmac.compare_digest(offered.encode(), token.encode()) for token in tokens):
        return "invalid token"
    return None
