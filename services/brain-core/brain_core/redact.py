"""Secret scrubbing (pure): tokens and credential assignments replaced before text leaves the kernel.

Upstream scrubbed only the AI output, intents and summaries (UPSTREAM.md 5.8);
the keeper's prompt, which quotes arc titles, prompts and signal
text, went to the model as it was. ``scrub`` is the one rule, used on the
prompt, the recorded AI output, intents and summaries, and on every vault
write: markers (content and title), inbox notes, the amygdala's alert text
(ADR 0021).

What is replaced by ``<REDACTED_SECRET>``:

- well-known token shapes (GitHub, Anthropic, OpenAI, Slack, AWS access and
  temporary keys, Google, GitLab personal/deploy/runner tokens, npm, Hugging
  Face, Stripe, JSON web tokens, bearer and basic credentials), matched whole;
- PEM and PGP private key blocks (``-----BEGIN ... PRIVATE KEY-----`` to its END
  line, or to the end of the text when cut);
- assignments ``NAME=value`` / ``NAME: value`` whose name holds SECRET,
  PASSWORD, PASSWD, TOKEN, API_KEY, ACCESS_KEY or PRIVATE_KEY, where only the
  value (16 or more token characters, optionally quoted) is replaced; a
  ``password=`` / ``passwd=`` / ``pwd=`` / ``secret=`` pair with ``=`` has
  its value replaced from 6 characters (prose like ``password: required``
  keeps its word);
- the password of a URL's credentials (``https://user:pw@host``, ``redis://:pw@host``).

What ``brain extract`` and ``brain cluster`` mine from transcripts (prompts,
title hints) goes through ``scrub`` where the parser keeps it, so arcs, their
dashboards, the hot table and the index only ever get scrubbed text.
``scrub_document`` applies the same rule to a whole vault file and counts
what it replaced, by kind (``brain scrub``).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import Counter
from dataclasses import dataclass, field

REDACTED = "<REDACTED_SECRET>"

_TOKENS = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"(?P<github>gh[psour]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"
    r"|(?P<anthropic>sk-ant-[A-Za-z0-9_-]{20,})"
    r"|(?P<openai>sk-[A-Za-z0-9_-]{20,})"
    r"|(?P<slack>xox[baprs]-[A-Za-z0-9-]{10,})"
    r"|(?P<aws>(?:AKIA|ASIA)[0-9A-Z]{16})"
    r"|(?P<google>AIza[0-9A-Za-z_-]{20,})"
    r"|(?P<gitlab>gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{15,})"
    r"|(?P<npm>npm_[A-Za-z0-9]{30,})"
    r"|(?P<huggingface>hf_[A-Za-z0-9]{30,})"
    r"|(?P<stripe>(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,})"
    r"|(?P<jwt>eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
    r")"
)
_BEARER = re.compile(r"(?i)(\bBearer\s+)[A-Za-z0-9._~+/=-]{20,}")
# Basic credentials: base64 of ``user:password`` (decoded to see so: "Basic configuration" is prose).
_BASIC = re.compile(r"(?i)(\bBasic\s+)([A-Za-z0-9+/]{12,}={0,2})(?![A-Za-z0-9+/=])")
_ASSIGNMENT = re.compile(
    r"(?i)(\b[A-Z0-9_.-]*(?:SECRET|PASSWORD|PASSWD|TOKEN|API[_-]KEY|ACCESS[_-]KEY|PRIVATE[_-]KEY)[A-Z0-9_.-]*[\"']?\s*[:=]\s*)"
    r"([\"']?)([A-Za-z0-9/+_.-]{16,})\2"
)


_KEY_BEGIN = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"  # PGP's ends in BLOCK
_KEY_END = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_PRIVATE_KEY = re.compile(rf"{_KEY_BEGIN}(?:.*?{_KEY_END}|.*\Z)", re.DOTALL)
# A document holds many texts, one a line (an arc's prompts, a table's cells): there a key block ends at an
# END on its own line or right after its key lines, and one cut short ends with its line and the key lines
# after it, never with the document (nor takes in the texts up to some later key's END).
_PRIVATE_KEY_LINES = re.compile(
    rf"{_KEY_BEGIN}(?:[^\r\n]*?{_KEY_END}"
    rf"|[^\r\n]*(?:\r?\n[ \t]*(?:[A-Za-z0-9+/=]+|(?:Proc-Type|DEK-Info):[^\r\n]*)[ \t]*(?=\r?\n|\Z))*(?:\r?\n[ \t]*{_KEY_END})?)"
)
# ``password=`` (and passwd, pwd, secret), or an environment name ending in one (``DB_PASSWORD=``, ``PGPASSWORD=``:
# no space around ``=``, as a shell writes it; ``user_secret = call()`` is code, and ``OLDPWD`` a folder); a quoted
# value to its quote, a bare one to a space; a ``$`` reference (``${DB_PASSWORD}``) is no secret. In a URL's query
# (after ``?`` or ``&``) a bare value ends at the query's next separator.
_PASSWORD_PAIR = re.compile(
    r"(?i)((?<![?&\w])(?:(?:password|passwd|pwd|secret)\s*=\s*|[A-Z0-9_]+(?:password|passwd|secret)=))"
    r"(?!\$)(?:([\"'])(?!\$)([^\"'\r\n]{6,})\2|()([^\s\"'`]{6,}))"
)
_PASSWORD_QUERY = re.compile(r"(?i)((?<=[?&])[A-Z0-9_]*(?:password|passwd|pwd|secret)=)([^\s\"'&;,#]{6,})")
_PASSWORD_JSON = re.compile(r'(?i)("(?:password|passwd|secret)"\s*:\s*")([^"\r\n]{6,})(")')
# The user may be empty (``redis://:pw@host``) and the password may hold ``@``: it ends at the last ``@`` before the
# host, any scheme's case. Not a ``/``: a URL with a port and an ``@`` in its path (``host:5173/@vite``) is no password.
_URL_CREDENTIALS = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)([^\s/]+?)(@)(?=[^\s@/]*(?:[\s/?#]|$))")


@dataclass(frozen=True)
class Scrubbed:
    """A scrubbed text and how many secrets of each kind were replaced in it (never the secrets)."""

    text: str
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def removed(self) -> int:
        """How many secrets were replaced."""
        return sum(self.kinds.values())


def _credentials(encoded: str) -> bool:
    """Whether a Basic value is base64 of ``user:password`` (printable text with a colon)."""
    try:
        raw = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    return ":" in raw and raw.isprintable()


def _scrub(text: str, private_key: re.Pattern[str]) -> Scrubbed:
    if not text:
        return Scrubbed(text)
    found: Counter[str] = Counter()

    def whole(kind: str) -> str:
        found[kind] += 1
        return REDACTED

    def value(kind: str, match: re.Match[str], prefix: str, suffix: str, secret: str) -> str:
        if secret == REDACTED:  # scrubbed before: left as it is, and not counted again
            return match.group(0)
        found[kind] += 1
        return f"{prefix}{REDACTED}{suffix}"

    out = private_key.sub(lambda m: whole("private_key"), text)
    out = _URL_CREDENTIALS.sub(lambda m: value("url_credentials", m, m.group(1), m.group(3), m.group(2)), out)
    out = _PASSWORD_JSON.sub(lambda m: value("password", m, m.group(1), m.group(3), m.group(2)), out)
    out = _PASSWORD_QUERY.sub(lambda m: value("password", m, m.group(1), "", m.group(2)), out)
    out = _PASSWORD_PAIR.sub(lambda m: value("password", m, m.group(1) + (m.group(2) or ""), m.group(2) or "", m.group(3) or m.group(5)), out)
    out = _ASSIGNMENT.sub(lambda m: value("assignment", m, m.group(1) + m.group(2), m.group(2), m.group(3)), out)
    out = _BEARER.sub(lambda m: m.group(1) + whole("bearer"), out)
    out = _BASIC.sub(lambda m: m.group(1) + whole("basic") if _credentials(m.group(2)) else m.group(0), out)
    out = _TOKENS.sub(lambda m: whole(str(m.lastgroup)), out)
    return Scrubbed(out, dict(sorted(found.items())))


def scrub_document(text: str) -> Scrubbed:
    """``scrub`` of a whole vault file, with the count of secrets replaced by kind (``aws``, ``github``, ...).

    A key block cut short ends at its line (and the key lines after it). Every
    byte outside a replaced secret is kept, line ends included.
    """
    return _scrub(text, _PRIVATE_KEY_LINES)


def scrub(text: str) -> str:
    """``text`` with every secret-shaped token and credential value replaced by ``<REDACTED_SECRET>``."""
    return _scrub(text, _PRIVATE_KEY).text
