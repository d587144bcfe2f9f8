"""``GET /metrics``: the server's requests, the kernel's events and state, in the Prometheus text format.

Replaces upstream's push of tick health to ClickHouse: a scraper pulls it
instead (``brain_api.observability`` assembles it, ADR 0054). The same bearer auth as
every other route, unless ``BRAIN_METRICS_PUBLIC`` is set (the answer holds
counts and timings, never memory). A database outage answers 503 through the
app's handler.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from brain_api.deps import ReadSessionDep, SettingsDep, require_auth
from brain_api.observability import exposition

router = APIRouter(tags=["metrics"])


async def metrics_auth(request: Request) -> None:
    """The bearer check of every route, skipped when ``settings.metrics_public`` is set."""
    if not request.app.state.settings.metrics_public:
        await require_auth(request)


@router.get(
    "/metrics",
    dependencies=[Depends(metrics_auth)],
    response_class=Response,
    responses={200: {"description": "The exposition text.", "content": {"text/plain": {"schema": {"type": "string"}}}}},
)
def get_metrics(db: ReadSessionDep, settings: SettingsDep) -> Response:
    """The Prometheus text exposition format."""
    return Response(content=exposition(settings, db), media_type=CONTENT_TYPE_LATEST)
