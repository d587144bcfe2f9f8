"""The amygdala alert as ``GET /signal`` reports it (pure; UPSTREAM.md 1.5).

The alert is one file, ``brain-feed/amygdala-active.md``, written by the
amygdala daemon; an absent file means all clear. Signal markers posted by
agents are not alerts: they reach ``signals.md`` and the feeds, never this
route, so one agent's warning cannot become a permanent fleet banner.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from brain_core.times import iso
from brain_core.vault import frontmatter

ALERT_SEVERITIES = frozenset({"nuclear", "critical", "warning", "info", "resolved"})
DEFAULT_ALERT_TITLE = "AMYGDALA ALERT"


def alert_state(text: str | None, modified: dt.datetime | None, vault_path: str) -> dict[str, Any]:
    """The ``/signal`` answer for the alert file's text (None when the file is absent or unreadable)."""
    if text is None:
        return {"active": False, "severity": None, "title": None, "content": None, "hash": None, "last_updated": None, "vault_path": vault_path}
    doc = frontmatter.parse(text)
    raw = doc.meta.get("severity")
    severity = str(raw).strip().lower() if raw is not None else ""
    if severity not in ALERT_SEVERITIES:
        severity = "critical"
    title = doc.meta.get("title", DEFAULT_ALERT_TITLE)
    body = doc.body.strip()
    return {
        "active": severity != "resolved",
        "severity": severity,
        "title": "" if title is None else str(title),
        "content": body or None,
        "hash": hashlib.sha256(text.encode("utf-8")).hexdigest()[:16],
        "last_updated": iso(modified),
        "vault_path": vault_path,
        "scope": "fleet",
    }
