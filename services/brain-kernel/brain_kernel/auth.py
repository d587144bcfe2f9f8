"""Bearer tokens: one rule for every entry point that takes them (the HTTP API and the MCP server).

Upstream's contract (UPSTREAM.md 1.1): with no tokens configured auth is
off; a missing header, one without the ``Bearer `` prefix or an empty token
is ``missing bearer token``; an unknown token is ``invalid token``; both
answer 401. The scheme is matched without regard to case, as RFC 7235 has
it (upstream refused ``bearer``; no client relies on that refusal, ADR 0033).
Tokens are compared in constant time and never logged.

Scoped tokens (ADR 0021): each ``BRAIN_TOKENS`` entry is ``<token>`` (every
project) or ``<token>=<project>|<project>`` (only those projects, each a
short key or ``owner/name``), and ``sha256:<hex>`` may stand in for the
token so the operator stores only its digest. ``authenticate`` answers the
``Principal`` a request acts as: its projects (None: all) and a name that is
not the secret (the first 12 hex digits of the token's SHA-256), which
namespaces its idempotency keys.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass

from brain_core.keys import InvalidKey, parse_project_ref

PREFIX = "Bearer "
DIGEST_PREFIX = "sha256:"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class TokenConfigError(ValueError):
    """A ``BRAIN_TOKENS`` entry that does not parse (the settings refuse to start with it)."""


@dataclass(frozen=True)
class TokenEntry:
    """One configured token: its SHA-256 digest (hex) and the projects it may reach (None: all)."""

    digest: str
    projects: tuple[str, ...] | None

    @property
    def name(self) -> str:
        return f"t{self.digest[:12]}"


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: ``projects`` None reaches every project; ``name`` namespaces idempotency keys."""

    name: str = ""
    projects: tuple[str, ...] | None = None

    @property
    def restricted(self) -> bool:
        return self.projects is not None


EVERYONE = Principal()  # auth off, or the local operator (stdio MCP, the CLI)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_entry(raw: str) -> TokenEntry:
    """One ``BRAIN_TOKENS`` entry; TokenConfigError (naming the entry's position, never its text) when malformed."""
    secret, bound, refs = raw.strip().partition("=")
    secret = secret.strip()
    if not secret:
        raise TokenConfigError("an entry has no token before '='")
    if secret.startswith(DIGEST_PREFIX):
        digest = secret[len(DIGEST_PREFIX) :].strip().lower()
        if not _HEX64.match(digest):
            raise TokenConfigError("a sha256: entry needs 64 hex digits")
    else:
        digest = _digest(secret)
    if not bound:
        return TokenEntry(digest, None)
    projects: list[str] = []
    for ref in refs.split("|"):
        ref = ref.strip()
        try:
            key, slug = parse_project_ref(ref)
        except InvalidKey as exc:
            raise TokenConfigError(f"a token's project is not a key or owner/name ({exc}); a token holding '=' must be given as sha256:<hex>") from None
        projects.append(slug or key)
    return TokenEntry(digest, tuple(dict.fromkeys(projects)))


def parse_entries(raw: Sequence[str]) -> list[TokenEntry]:
    """Every configured entry parsed (TokenConfigError on the first bad one)."""
    return [parse_entry(item) for item in raw]


def authenticate(header: str | None, entries: Sequence[TokenEntry]) -> Principal | str:
    """The principal a request with this ``Authorization`` header acts as, or why it is refused (401).

    Every entry is compared (no early exit), each in constant time, on the
    token's digest, so neither a timing nor a stored token gives one away.
    """
    if not entries:
        return EVERYONE
    header = header or ""
    offered = header[len(PREFIX) :].strip() if header[: len(PREFIX)].lower() == PREFIX.lower() else ""
    if not offered:
        return "missing bearer token"
    digest = _digest(offered).encode()
    found: TokenEntry | None = None
    for entry in entries:
        if hmac.compare_digest(digest, entry.digest.encode()) and found is None:
            found = entry
    if found is None:
        return "invalid token"
    return Principal(found.name, found.projects)
