"""The feed envelope (pure): the entry shape clients read, buckets, priorities, hashes, stored bodies.

Every entry lands in exactly one of upstream's buckets, by id (UPSTREAM.md
1.4, but by a prefix test where upstream matched a substring anywhere):
``hot_arcs`` for ids starting ``hot-arcs``, ``inject_blocks`` for ``inject``
and ids starting ``inject``, ``entries`` for the rest. Clients read the
three buckets in that order, deduplicate by id and drop items without an id
or content, so structured records (arcs, inject blocks) never go in a bucket:
they travel under keys of their own (``arcs``, ``blocks``).

The global feed's ``hash`` is upstream's (first 16 hex of SHA-256 over
``id:priority:<first 32 characters of content>`` joined by ``|``); the
project feed's covers everything but ``generated_at``. A stored answer keeps
the body without ``generated_at`` and ``stamp_answer`` adds it per response.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
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


def upstream_hash(entries: Sequence[FeedEntry]) -> str:
    """Upstream's feed hash: ``id:priority:<content[:32]>`` of every entry, joined by ``|``."""
    text = "|".join(f"{e.id}:{e.priority}:{e.content[:32]}" for e in entries)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def bucket_of(entry_id: str) -> str:
    """The bucket an entry id goes to: ``hot_arcs``, ``inject_blocks`` or ``entries`` (exactly one)."""
    low = entry_id.lower()
    if low.startswith("hot-arcs"):
        return "hot_arcs"
    if low.startswith("inject"):
        return "inject_blocks"
    return "entries"


def envelope(
    entries: Sequence[FeedEntry],
    *,
    now: dt.datetime,
    vault_root: str,
    extra: Mapping[str, Any] | None = None,
    upstream: bool = False,
) -> dict[str, Any]:
    """The envelope: ``entries`` by priority (highest first, stable) into their buckets, hashed, stamped ``now``.

    ``upstream`` selects upstream's hash (the global feed); otherwise the
    hash covers the whole payload but ``generated_at`` (the project feed).
    """
    ordered = sorted(entries, key=lambda e: -e.priority)  # stable: equal priorities keep their order
    buckets: dict[str, list[dict[str, Any]]] = {"hot_arcs": [], "inject_blocks": [], "entries": []}
    for entry in ordered:
        buckets[bucket_of(entry.id)].append(entry.to_dict())
    payload: dict[str, Any] = {**buckets, "entry_count": len(ordered), "vault_root": vault_root}
    if extra:
        payload.update(extra)
    payload["hash"] = upstream_hash(ordered) if upstream else feed_hash(payload)
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
