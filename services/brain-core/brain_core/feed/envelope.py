"""The feed envelope (pure): the entry shape clients read, priorities, the stable hash, stored bodies.

The ``hash`` covers everything but ``generated_at``, so two reads of
unchanged memory give the same hash; a stored answer keeps the body without
``generated_at`` and ``stamp_answer`` adds it per response.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from brain_core.times import iso

DEFAULT_TTL = 3600

# Entry priorities, global and project feed alike: higher is injected sooner.
PRIORITY = {
    "intent": 12,
    "signal": 11,
    "hot-arcs": 10,
    "inject": 9,
    "lessons": 8,
    "decisions": 7,
    "milestones": 6,
    "no-memory": 12,
}


@dataclass(frozen=True)
class FeedEntry:
    """One feed entry as clients read it."""

    id: str
    title: str
    content: str
    priority: int = 5
    ttl: int = DEFAULT_TTL
    severity: str = "info"
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (metadata copied one level deep; ``asdict``'s deep copy cost more than the rest of an entry)."""
        return {
            "id": self.id,
            "title": self.title,
            "content": self.content,
            "priority": self.priority,
            "ttl": self.ttl,
            "severity": self.severity,
            "metadata": dict(self.metadata),
        }


def feed_hash(payload: Mapping[str, Any]) -> str:
    """A stable hash of a feed payload (``generated_at`` excluded)."""
    data = {k: v for k, v in payload.items() if k not in ("generated_at", "hash")}
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def envelope(
    *,
    hot_arcs: list[dict[str, Any]],
    inject_blocks: list[dict[str, Any]],
    entries: list[FeedEntry],
    now: dt.datetime,
    vault_root: str,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The envelope around ``entries`` (highest priority first), hashed, stamped ``now``."""
    ordered = sorted(entries, key=lambda e: -e.priority)  # stable: equal priorities keep their order
    payload: dict[str, Any] = {
        "hot_arcs": hot_arcs,
        "inject_blocks": inject_blocks,
        "entries": [e.to_dict() for e in ordered],
        "entry_count": len(ordered),
        "vault_root": vault_root,
    }
    if extra:
        payload.update(extra)
    payload["hash"] = feed_hash(payload)
    payload["generated_at"] = iso(now)
    return payload


def answer_body(payload: Mapping[str, Any]) -> str:
    """A feed payload as compact JSON without ``generated_at`` (what a stored answer keeps)."""
    data = {k: v for k, v in payload.items() if k != "generated_at"}
    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def stamp_answer(body: str, now: dt.datetime) -> bytes:
    """``answer_body`` output with ``generated_at`` appended: the bytes a client receives."""
    if not body.endswith("}"):
        raise ValueError("an answer body is a JSON object")
    sep = "" if body == "{}" else ","
    return f'{body[:-1]}{sep}"generated_at":{json.dumps(iso(now))}}}'.encode()
