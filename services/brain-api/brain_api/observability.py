"""The API process's own metrics and the assembly of ``GET /metrics`` (ADR 0054).

Two kinds of truth, two sources:

- **What this server answered** (HTTP requests by route template, method and
  status, their latency, feed answers by source) is counted in process by
  prometheus_client. Under ``brain serve --workers N`` each request reaches
  one worker and a scrape another, so the counters live in the library's
  multiprocess mode: every worker writes its values to files in
  ``settings.metrics_dir`` (wiped by the parent at start) and a scrape sums
  them. With one worker they stay in memory, with the process metrics
  (CPU, memory, file descriptors) of that process; the multiprocess mode has
  no per-process collector, so several workers expose none.
- **What the kernel did** (ticks, markers, injections, embeddings) happens in
  other processes and pods too: those counters and the state gauges are read
  from Postgres at scrape time (``brain_kernel.ticks.health.StoreCollector``).

Route labels are templates (``/projects/{project_id}``), never raw paths, and
a request no route matched is ``route="unmatched"``: the label set stays small
whatever clients send.
"""

from __future__ import annotations

import logging
import os
import platform
import time
import uuid
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, PlatformCollector, ProcessCollector, generate_latest, values
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from brain_kernel.log_format import REQUEST_ID, USABLE_ID
from brain_kernel.release import version
from brain_kernel.settings import Settings
from brain_kernel.ticks.health import StoreCollector

FEED_ANSWER_HEADER = b"x-brain-feed"
REQUEST_ID_HEADER = b"x-request-id"
access_log = logging.getLogger("brain.access")
UNMATCHED = "unmatched"


@dataclass(frozen=True)
class _ProcessMetrics:
    registry: CollectorRegistry
    requests: Counter
    latency: Histogram
    feed_answers: Counter


_BY_PID: dict[int, _ProcessMetrics] = {}


def process_metrics(settings: Settings) -> _ProcessMetrics:
    """This process's HTTP metrics, built once per process (after a fork, the worker's own)."""
    pid = os.getpid()
    found = _BY_PID.get(pid)
    if found is not None:
        return found
    if settings.workers > 1:
        # prometheus_client picks its value class from the environment when it is first imported, which
        # `brain serve` may do before it has published PROMETHEUS_MULTIPROC_DIR: choose it here, per worker.
        values.ValueClass = values.MultiProcessValue()
    registry = CollectorRegistry(auto_describe=True)
    built = _ProcessMetrics(
        registry=registry,
        requests=Counter(
            "brain_http_requests", "HTTP requests answered, by method, route template and status.", ["method", "route", "status"], registry=registry
        ),
        latency=Histogram(
            "brain_http_request_duration_seconds", "Time to answer an HTTP request, by method and route template.", ["method", "route"], registry=registry
        ),
        feed_answers=Counter("brain_feed_answers", "GET /feed answers, by source: stored (an exact stored answer) or live.", ["source"], registry=registry),
    )
    _BY_PID[pid] = built
    return built


class RequestObserver:
    """ASGI middleware: every HTTP request identified (``X-Request-ID``), counted and timed under its route template.

    The id is the request's ``X-Request-ID`` when usable (``log_format.USABLE_ID``), else a new one; it is
    answered in the same header and held in ``log_format.REQUEST_ID`` while the request is served. With
    ``BRAIN_LOG_FORMAT=json`` the access line is written here, with structured fields.
    """

    def __init__(self, app: ASGIApp, *, settings: Settings) -> None:
        self.app = app
        self.metrics = process_metrics(settings)
        self.access_line = settings.log_format == "json"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception before the answer started is a 500 to the client
        source: str | None = None
        sent = Headers(scope=scope).get("x-request-id")
        request_id = sent if sent is not None and USABLE_ID.match(sent) else uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)

        async def watch(message: Message) -> None:
            nonlocal status, source
            if message["type"] == "http.response.start":
                status = message["status"]
                source = next((v.decode("latin-1") for k, v in message.get("headers", ()) if k.lower() == FEED_ANSWER_HEADER), None)
                message = {**message, "headers": [*message.get("headers", ()), (REQUEST_ID_HEADER, request_id.encode("latin-1"))]}
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or UNMATCHED
            method = scope["method"]
            elapsed = time.perf_counter() - started
            self.metrics.requests.labels(method, template, str(status)).inc()
            self.metrics.latency.labels(method, template).observe(elapsed)
            if template == "/feed" and source is not None and status == 200:
                self.metrics.feed_answers.labels(source).inc()
            if self.access_line:
                fields = {"method": method, "route": template, "status": status, "duration_ms": round(elapsed * 1000, 1)}
                access_log.info("%s %s %d", method, template, status, extra=fields)
            REQUEST_ID.reset(token)


class _BuildInfo(Collector):
    def collect(self) -> list[GaugeMetricFamily]:
        family = GaugeMetricFamily("brain_build_info", "The running kernel's version (the value is always 1).", labels=["version", "python_version"])
        family.add_metric([version(), platform.python_version()], 1)
        return [family]


class _Registered(Collector):
    """Another registry's metrics, as one collector of the scrape's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self):  # type: ignore[no-untyped-def]
        return self.registry.collect()


def exposition(settings: Settings, session: Session) -> bytes:
    """Every family of ``GET /metrics`` in the text exposition format."""
    registry = CollectorRegistry(auto_describe=False)
    if settings.workers > 1:
        MultiProcessCollector(registry, path=str(settings.metrics_dir))
    else:
        registry.register(_Registered(process_metrics(settings).registry))
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
    registry.register(_BuildInfo())
    registry.register(StoreCollector(session))
    return generate_latest(registry)
