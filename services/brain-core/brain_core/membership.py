"""Which project an entry reaches, and when a short key names one project (pure).

Membership (why the feed's filter is exact): an entry belongs to project
P = (key, repo) when P's key is among the entry's ``projects`` and either the
entry's repo is P's repo, or the entry names no repo for that key (no repo at
all, or the key is a secondary project of a merged arc) and P's key is
unique. A key shared by two projects therefore only ever matches by slug: an
``api`` lesson with no repo reaches neither ``org1/api`` nor ``org2/api``.

Pins (ADR 0021): the operator's catalog may pin a key to one
repository (an entry with a key and a repo). A pinned key's entries that name
no repo for it belong to the pinned project only, unique or not, so a second
repository carrying the key (``evil/api`` next to ``org/api``) neither takes
them nor takes them away. ``holds_unnamed`` is that per-project answer; every
caller of ``belongs`` passes the pin, or that answer as ``key_is_unique``.

Uniqueness: a key is unique when at most one distinct project carries it as
its key or an alias. A project row with neither a repo nor a root only
records that the key was mentioned (a marker that named ``api`` before any
session resolved it), so it is not a second project next to a real one.

These functions are the rule; ``brain_kernel.feed.feed_repo.member`` and
``key_owned_sql`` (``holds_unnamed`` over the pins table and
``key_unique_sql``) are its SQL twins, held equal by
tests/kernel/test_membership.py over generated rows. Inject blocks and fleet-wide
signals reach projects by their targets and scope, also decided here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from brain_core.entries import EntryRecord

FLEET_TARGETS = frozenset({"all", "*", "fleet", "everyone"})
# Targets that name an agent (upstream's `claude.md`, or an agent's name), mapped to the agent name a session
# registers with: they narrow who reads a block, not where it reaches (ADR 0070).
AGENT_TARGETS = {"claude": "claude", "claude.md": "claude", "claude-code": "claude", "codex": "codex"}
INACTIVE_SIGNAL_STATUSES = frozenset({"resolved", "cleared", "inactive", "expired", "closed", "done", "mitigated"})
# An arc someone or something finished: its inject blocks no longer reach anyone, and its signals speak for the past.
# Upstream listed `complete` too, a status it set once, at clustering; here `complete` and `stalled` are derived
# from inactivity and come back to `active` (ADR 0014), so an inject block with its ttl_days would have gone six
# hours after its arc's last activity, an inbox note's included. Its ttl_days (else BRAIN_STALE_INJECT_DAYS) bounds it.
DONE_PARENT_STATUSES = frozenset({"resolved", "graduated", "merged"})
DEFAULT_STALE_INJECT_DAYS = 30


@dataclass(frozen=True)
class KnownProject:
    """A known project as the rules need it: key, repo slug, main root, aliases."""

    key: str
    repo: str | None = None
    root: str | None = None
    aliases: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        """The project id: the repo slug when known, else the key."""
        return self.repo or self.key

    @property
    def distinct(self) -> bool:
        """A real project (it has a repo or a root), not only a mention of its key."""
        return bool(self.repo or self.root)


def carriers(key: str, projects: Iterable[KnownProject]) -> list[KnownProject]:
    """The distinct projects whose key or alias is ``key``."""
    return [p for p in projects if p.distinct and (p.key == key or key in p.aliases)]


def key_is_unique(key: str, projects: Iterable[KnownProject]) -> bool:
    """True when at most one distinct project carries ``key`` (as key or alias)."""
    return len(carriers(key, projects)) <= 1


def owns_key(key: str, repo: str | None, projects: Iterable[KnownProject]) -> bool:
    """Whether P = (key, ``repo``) is the key's only carrier: with a repo, no other distinct project carries the key
    (P's repository carries it even before it is known); without, ``key_is_unique``."""
    if repo is None:
        return key_is_unique(key, projects)
    return all(p.repo == repo for p in carriers(key, projects))


def unique_keys(projects: Iterable[KnownProject]) -> dict[str, bool]:
    """Every key and alias the projects carry -> whether it is unique (one pass, for listings)."""
    counts: dict[str, int] = {}
    for p in projects:
        for k in {p.key, *p.aliases}:
            counts[k] = counts.get(k, 0) + (1 if p.distinct else 0)
    return {k: n <= 1 for k, n in counts.items()}


def holds_unnamed(repo: str | None, *, key_is_unique: bool, pin: str | None = None) -> bool:
    """Whether P = (key, ``repo``) holds the key's entries that name no repo for it.

    With a pin (the repository the catalog pins P's key to) only the pinned
    project does; without one, every carrier of a unique key does.
    """
    if pin is not None:
        return repo == pin
    return key_is_unique


def repo_matches(entry_repo: str | None, key_is_primary: bool, repo: str | None, *, key_is_unique: bool) -> bool:
    """The repo half of membership, for an entry that lists P's key.

    ``key_is_primary``: the key is the entry's own project (so its repo is the
    key's repo); a secondary key of a merged arc names no repo of its own.
    """
    no_repo_for_key = entry_repo is None or not key_is_primary
    if repo:
        return entry_repo == repo or (key_is_unique and no_repo_for_key)
    return no_repo_for_key if key_is_unique else entry_repo is None


def belongs(record: EntryRecord, key: str, repo: str | None, *, key_is_unique: bool, pin: str | None = None) -> bool:
    """Whether ``record`` is part of project (``key``, ``repo``)'s memory; ``pin``: the repo the catalog pins ``key`` to."""
    if key not in record.projects:
        return False
    held = holds_unnamed(repo, key_is_unique=key_is_unique, pin=pin)
    return repo_matches(record.repo, record.project == key, repo, key_is_unique=held)


def signal_is_fleet(record: EntryRecord) -> bool:
    """Fleet-wide signals: scope fleet, or no project at all."""
    return record.scope == "fleet" or not record.projects


def inject_targets(record: EntryRecord | Mapping[str, Any]) -> tuple[str, ...]:
    """The targets of an inject block, from its record or its frontmatter (``all`` when none is given)."""
    meta = record.meta if isinstance(record, EntryRecord) else record
    raw = meta.get("target", meta.get("targets"))
    if raw is None or raw == "":
        return ("all",)
    values = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    return tuple(str(v).strip().lower() for v in values if str(v).strip()) or ("all",)


def _place_targets(record: EntryRecord | Mapping[str, Any]) -> tuple[str, ...]:
    """The targets that say where a block reaches: all of them but the agents' (only agents: ``all``)."""
    return tuple(t for t in inject_targets(record) if t not in AGENT_TARGETS) or ("all",)


def inject_agents(record: EntryRecord | Mapping[str, Any]) -> frozenset[str]:
    """The agents a block is aimed at (``claude``, ``codex``); empty: every agent."""
    return frozenset(AGENT_TARGETS[t] for t in inject_targets(record) if t in AGENT_TARGETS)


def inject_reaches_agent(record: EntryRecord, agent: str | None) -> bool:
    """Whether a session of ``agent`` reads the block; a reader whose agent is unknown reads it, labelled (ADR 0070)."""
    agents = inject_agents(record)
    return not agents or agent is None or AGENT_TARGETS.get(agent.lower(), agent.lower()) in agents


def inject_is_fleet(record: EntryRecord | Mapping[str, Any]) -> bool:
    """True when the block targets every session (a block inside a project's arc reaches that project only)."""
    if isinstance(record, EntryRecord) and record.projects:
        return False
    return any(t in FLEET_TARGETS for t in _place_targets(record))


def inject_is_live(record: EntryRecord, now: dt.datetime, *, stale_days: int = DEFAULT_STALE_INJECT_DAYS) -> bool:
    """An inject block still reaches sessions: its arc is not done, and it is younger than its ``ttl_days``.

    ``ttl_days`` on the block wins over ``stale_days`` (``BRAIN_STALE_INJECT_DAYS``;
    0 disables the age limit); an undated block is kept.
    """
    if (record.status or "").lower() in DONE_PARENT_STATUSES and record.meta.get("inline"):
        return False
    try:
        days = int(str(record.meta.get("ttl_days")).strip()) if record.meta.get("ttl_days") not in (None, "") else stale_days
    except ValueError:
        days = stale_days
    if days <= 0 or record.occurred_at is None:
        return True
    return record.occurred_at >= now - dt.timedelta(days=days)


def inject_applies(record: EntryRecord, key: str, repo: str | None, *, key_is_unique: bool, pin: str | None = None) -> bool:
    """Whether a block reaches P: a block of P's own arcs; else targeted at all, at P's slug, or at P's key when P holds it."""
    key_is_unique = holds_unnamed(repo, key_is_unique=key_is_unique, pin=pin)
    if record.projects:
        return belongs(record, key, repo, key_is_unique=key_is_unique)
    for target in _place_targets(record):
        if target in FLEET_TARGETS:
            return True
        if "/" in target:
            if repo and target == repo.lower():
                return True
        elif target == key.lower() and (key_is_unique or repo is None):
            return True
    return False
