"""Secret scrubbing (pure): tokens and credential assignments replaced before text leaves the kernel.

Upstream scrubbed only the AI output, intents and summaries (UPSTREAM.md 5.8,
defect 15); the keeper's prompt, which quotes arc titles, prompts and signal
text, went to the model as it was. ``scrub`` is the one rule, used on the
prompt, the recorded AI output, intents and summaries, and on every vault
write: markers (content and title), inbox notes, the amygdala's alert text
(issue 18).

What is replaced by ``<REDACTED_SECRET>``:

- well-known token shapes (GitHub, Anthropic, OpenAI, Slack, AWS access and
  temporary keys, Google, GitLab personal/deploy/runner tokens, bearer
  tokens), matched whole;
- PEM private key blocks (``-----BEGIN ... PRIVATE KEY-----`` to its END
  line, or to the end of the text when cut);
- assignments ``NAME=value`` / ``NAME: value`` whose name holds SECRET,
  PASSWORD, PASSWD, TOKEN, API_KEY, ACCESS_KEY or PRIVATE_KEY, where only the
  value (16 or more token characters, optionally quoted) is replaced; a
  ``password=`` / ``passwd=`` / ``pwd=`` / ``secret=`` pair with ``=`` has
  its value replaced from 6 characters (prose like ``password: required``
  keeps its word);
- the password of a URL's credentials (``https://user:pw@host``).
"""

from __future__ import annotations

import re

REDACTED = "<REDACTED_SECRET>"

_TOKENS = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"gh[psou]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|sk-ant-[A-Za-z0-9_-]{20,}"
    r"|sk-[A-Za-z0-9_-]{20,}"
    r"|xox[baprs]-[A-Za-z0-9-]{10,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{20,}"
    r"|gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{15,}"
    r")"
)
_BEARER = re.compile(r"(?i)(\bBearer\s+)[A-Za-z0-9._~+/=-]{20,}")
_ASSIGNMENT = re.compile(
    r"(?i)(\b[A-Z0-9_.-]*(?:SECRET|PASSWORD|PASSWD|TOKEN|API_KEY|ACCESS_KEY|PRIVATE_KEY)[A-Z0-9_.-]*[\"']?\s*[:=]\s*)"
    r"([\"']?)([A-Za-z0-9/+_.-]{16,})\2"
)


_PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|.*\Z)", re.DOTALL)
_PASSWORD_PAIR = re.compile(r"(?i)(\b(?:password|passwd|pwd|secret)\s*=\s*)([\"']?)([^\s\"'&;,]{6,})\2")
_URL_CREDENTIALS = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)([^\s/@]+)(@)")


def scrub(text: str) -> str:
    """``text`` with every secret-shaped token and credential value replaced by ``<REDACTED_SECRET>``."""
    if not text:
        return text
    out = _PRIVATE_KEY.sub(REDACTED, text)
    out = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", out)
    out = _PASSWORD_PAIR.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}{m.group(2)}", out)
    out = _ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}{m.group(2)}", out)
    out = _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", out)
    return _TOKENS.sub(REDACTED, out)
