"""``brain amygdala``: event-bus alarms to ``brain-feed/amygdala-active.md`` and incident arcs (``brain_ops.amygdala_watch``)."""

from __future__ import annotations

import json

import typer

from brain_cli.common import VaultOption, load_settings, open_vault, operator_errors
from brain_cli.progress import reporter


@operator_errors
def amygdala(
    continuous: bool = typer.Option(
        False, "--continuous", help="Keep reading the bus until SIGTERM/SIGINT instead of one pass. Example: brain amygdala --continuous"
    ),
    redis_url: str | None = typer.Option(
        None, "--redis-url", help="The event bus (default REDIS_URL; its database becomes EVENT_BUS_DB). Example: --redis-url redis://redis:6379"
    ),
    poll_interval: float | None = typer.Option(
        None,
        "--poll-interval",
        help="Seconds one read waits for events in --continuous mode (default AMYGDALA_POLL_INTERVAL, else 5). Example: --poll-interval 2",
    ),
    consumer: str | None = typer.Option(
        None, "--consumer", help="Consumer name in group amygdala (default AMYGDALA_CONSUMER, else amygdala-<host name>). Example: --consumer amygdala-cron"
    ),
    vault: VaultOption = None,
) -> None:
    """Read the event bus (Redis Streams, consumer group amygdala) and raise or clear the alert.

    Events on AMYGDALA_STREAMS are classified by whole words (nuclear: down,
    offline, fatal, data loss, nuclear or priority urgent; critical: failed,
    crash, timeout, unreachable or priority high; warning: warning,
    threshold, degraded, slow; brain.* events by their severity). The worst
    one becomes brain-feed/amygdala-active.md, the file GET /signal reports;
    each nuclear or critical event that is not a keeper tick's files an
    incident arc in amygdala/. After AMYGDALA_CLEAR_WINDOW seconds (900)
    without events the alert file is removed (all clear).

    Needs REDIS_URL (or --redis-url). One pass by default; --continuous loops
    until SIGTERM or SIGINT. Prints a JSON summary; progress on stderr.

    Example: REDIS_URL=redis://redis:6379 brain amygdala --continuous --vault /vault
    """
    from brain_kernel.ticks.events import EventBus
    from brain_ops.amygdala_watch import run_amygdala

    settings = load_settings(vault=vault, redis_url=redis_url, amygdala_poll_interval=poll_interval, amygdala_consumer=consumer)
    store = open_vault(settings.vault)
    bus = EventBus.from_settings(settings)

    try:
        summary = run_amygdala(bus, store, settings, continuous=continuous, progress=reporter("amygdala"))
    finally:
        bus.close()
    typer.echo(json.dumps(summary.as_dict()))
