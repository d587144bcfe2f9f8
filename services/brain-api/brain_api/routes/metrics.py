"""``GET /metrics``: tick health, the tick queue and index counts in the Prometheus text format.

Replaces upstream's push of tick health to ClickHouse: a scraper pulls it
instead (``brain_kernel.ticks.health`` renders it from ``tick_runs``,
``tick_requests``, ``entries`` and ``projects``). The same bearer auth as
every other route, unless ``BRAIN_METRICS_PUBLIC`` is set (the answer holds
counts and timings, never memory). A database outage answers 503 through the
app's handler.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from brain_api.deps import ClockDep, ReadSessionDep, require_auth
from brain_kernel.ticks.health import CONTENT_TYPE, metrics_text

router = APIRouter(tags=["metrics"])


async def metrics_auth(request: Request) -> None:
    """The bearer check of every route, skipped when ``settings.metrics_public`` is set."""
    if not request.app.state.settings.metrics_public:
        await require_auth(request)


@router.get("/metrics", dependencies=[Depends(metrics_auth)], response_class=Response)
def get_metrics(db: ReadSessionDep, clock: ClockDep) -> Response:
    """Prometheus text exposition format 0.0.4."""
    return Response(content=metrics_text(db, clock()), media_type=CONTENT_TYPE)
