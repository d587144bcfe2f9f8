"""The event bus adapter: Redis Streams through redis-py, as upstream's fleet uses it (UPSTREAM.md 5.3, 5.7).

Thin on purpose: publish (``XADD`` with an approximate max length), consumer
groups (``XGROUP CREATE ... MKSTREAM``, ``XREADGROUP``, ``XACK``) and the one
key the amygdala keeps. What events mean lives in ``brain_core.amygdala``.

The bus is ``REDIS_URL`` with its database replaced by ``EVENT_BUS_DB``
(default 11), as upstream's tick publisher did and its Helm chart did for
the amygdala, so the tick, the amygdala and the fleet's other producers meet
on one database. Every Redis failure becomes ``EventBusError`` (a
``BrainError``: one line for the operator, never a traceback).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis

from brain_core.amygdala import BusEvent
from brain_kernel.errors import BrainError, ConfigError
from brain_kernel.settings import Settings

MAXLEN = 10_000  # upstream's approximate stream length
TIMEOUT_S = 5.0  # connect and command timeout (a blocking read adds its block time)


class EventBusError(BrainError):
    """The event bus could not be reached or refused a command."""


def bus_url(redis_url: str, db: int) -> str:
    """``redis_url`` with its database (the path) set to ``db``: ``redis://h:6379/0`` -> ``redis://h:6379/11``."""
    parts = urlsplit(redis_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, parts.fragment))


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def host_name() -> str:
    """This machine's name, the ``host`` of published events (a container's is its ``$HOSTNAME``)."""
    return socket.gethostname()


class EventBus:
    """One connection to the bus (redis-py keeps a small pool inside)."""

    def __init__(self, url: str, *, block_s: float = 0.0) -> None:
        self.url = url
        # A blocking read waits up to ``block_s`` before Redis answers: the socket waits that much longer.
        self.client = redis.Redis.from_url(url, socket_timeout=TIMEOUT_S + block_s, socket_connect_timeout=TIMEOUT_S)

    @classmethod
    def from_settings(cls, settings: Settings) -> EventBus:
        """The bus of ``settings``; ConfigError when ``REDIS_URL`` is not set."""
        if not settings.redis_url:
            raise ConfigError("REDIS_URL is not set: the event bus (Redis Streams) is off; set REDIS_URL=redis://host:6379 to use it")
        return cls(bus_url(settings.redis_url, settings.event_bus_db), block_s=settings.amygdala_poll_interval)

    @property
    def where(self) -> str:
        """The bus's address without credentials, for messages."""
        parts = urlsplit(self.url)
        return f"{parts.hostname}:{parts.port or 6379}{parts.path}"

    def _fail(self, exc: redis.RedisError) -> EventBusError:
        return EventBusError(f"event bus at {self.where}: {type(exc).__name__}: {exc}")

    def publish(self, stream: str, fields: Mapping[str, str], *, maxlen: int = MAXLEN) -> str:
        """``XADD`` one event; its stream id."""
        try:
            return _text(self.client.xadd(stream, dict(fields), maxlen=maxlen, approximate=True))
        except redis.RedisError as exc:
            raise self._fail(exc) from None

    def ensure_groups(self, streams: Sequence[str], group: str) -> None:
        """Create ``group`` on each stream from its start (``0``), creating missing streams; existing groups stay."""
        for stream in streams:
            try:
                self.client.xgroup_create(stream, group, id="0", mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise self._fail(exc) from None
            except redis.RedisError as exc:
                raise self._fail(exc) from None

    def read_group(self, streams: Sequence[str], group: str, consumer: str, *, count: int, block_ms: int | None, pending: bool = False) -> list[BusEvent]:
        """``XREADGROUP``: new events (``>``), or with ``pending`` this consumer's unacknowledged ones (``0``)."""
        try:
            answer = self.client.xreadgroup(group, consumer, dict.fromkeys(streams, "0" if pending else ">"), count=count, block=block_ms)
        except redis.RedisError as exc:
            raise self._fail(exc) from None
        events = []
        for stream, entries in answer or []:
            for entry_id, fields in entries:
                if fields is None:  # a pending entry trimmed away since: nothing to read
                    continue
                events.append(BusEvent(_text(stream), _text(entry_id), {_text(k): _text(v) for k, v in fields.items()}))
        return events

    def _entries(self, stream: str, entries: Any) -> list[BusEvent]:
        return [BusEvent(stream, _text(entry_id), {_text(k): _text(v) for k, v in fields.items()}) for entry_id, fields in entries or [] if fields is not None]

    def peek(self, streams: Sequence[str], group: str, *, count: int) -> list[BusEvent]:
        """The events ``group`` has not been given yet (after its last delivered id; all of a stream it does not read yet),
        read with ``XRANGE``: the group, its consumers and its pending lists stay as they were."""
        events: list[BusEvent] = []
        try:
            for stream in streams:
                if not self.client.exists(stream):
                    continue
                last = next((_text(g["last-delivered-id"]) for g in self.client.xinfo_groups(stream) if _text(g["name"]) == group), None)
                start = f"({last}" if last is not None else "-"
                events += self._entries(stream, self.client.xrange(stream, min=start, max="+", count=count))
        except redis.RedisError as exc:
            raise self._fail(exc) from None
        return events

    def recent(self, streams: Sequence[str], *, count: int) -> list[BusEvent]:
        """The last ``count`` events across ``streams`` (``XREVRANGE``), newest first; read only."""
        events: list[BusEvent] = []
        try:
            for stream in streams:
                events += self._entries(stream, self.client.xrevrange(stream, max="+", min="-", count=count))
        except redis.RedisError as exc:
            raise self._fail(exc) from None
        events.sort(key=lambda e: tuple(int(part) for part in e.id.split("-")), reverse=True)
        return events[:count]

    def ack(self, group: str, events: Sequence[BusEvent]) -> int:
        """``XACK`` the events in their streams; how many were acknowledged."""
        by_stream: dict[str, list[str]] = {}
        for event in events:
            by_stream.setdefault(event.stream, []).append(event.id)
        try:
            return sum(int(self.client.xack(stream, group, *ids)) for stream, ids in by_stream.items())
        except redis.RedisError as exc:
            raise self._fail(exc) from None

    def get_float(self, key: str) -> float | None:
        """A numeric key's value; None when absent or not a number."""
        try:
            value = self.client.get(key)
        except redis.RedisError as exc:
            raise self._fail(exc) from None
        try:
            return float(_text(value)) if value is not None else None
        except ValueError:
            return None

    def set_value(self, key: str, value: str, *, expire_s: int) -> None:
        try:
            self.client.set(key, value, ex=max(1, expire_s))
        except redis.RedisError as exc:
            raise self._fail(exc) from None

    def delete(self, key: str) -> None:
        try:
            self.client.delete(key)
        except redis.RedisError as exc:
            raise self._fail(exc) from None

    def close(self) -> None:
        self.client.close()
