"""``brain amygdala``: event-bus alarms to ``brain-feed/amygdala-active.md`` and incident arcs (``brain_ops.amygdala_watch``)."""

from __future__ import annotations

import json

import typer

from brain_cli.common import VaultOption, load_settings, open_vault, operator_errors
from brain_cli.progress import reporter
from brain_kernel.errors import ConfigError


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
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Say what one pass would write, clear and file, changing nothing (events stay unread for the group). Example: brain amygdala --dry-run",
    ),
    replay: bool = typer.Option(
        False, "--replay", help="Print the last --last events as classified, read only (upstream's replay). Example: --replay --last 50"
    ),
    last: int = typer.Option(100, "--last", min=1, max=1000, help="With --replay: how many recent events (at most 1000). Example: --last 50"),
    severity: str | None = typer.Option(
        None, "--severity", help="With --replay: only the events counted at this severity (nuclear, critical, warning). Example: --severity critical"
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

    --dry-run looks at the events the group has not read yet and reports what a
    pass would do (alert raised, updated or cleared; incident arcs filed) with
    "dry_run": true, writing, acknowledging and consuming nothing. --replay
    prints the last --last events of the streams, newest first, each with the
    severity it counts as (null: ignored), read only: {mode, streams, last,
    severity, count, events: [{stream, id, event, severity, title, source,
    ts}]}; --severity keeps one severity.

    Example: REDIS_URL=redis://redis:6379 brain amygdala --continuous --vault /vault

    Example: brain amygdala --replay --last 50 --severity critical
    """
    from brain_core.amygdala import RANK
    from brain_kernel.ticks.events import EventBus
    from brain_ops.amygdala_watch import replay as replay_events
    from brain_ops.amygdala_watch import run_amygdala

    if severity is not None and (not replay or severity not in RANK):
        raise ConfigError(f"--severity goes with --replay and is one of {', '.join(sorted(RANK))}")
    if replay and (continuous or dry_run):
        raise ConfigError("--replay only reads: drop --continuous and --dry-run")
    if dry_run and continuous:
        raise ConfigError("--dry-run is one look: drop --continuous")
    settings = load_settings(vault=vault, redis_url=redis_url, amygdala_poll_interval=poll_interval, amygdala_consumer=consumer)
    bus = EventBus.from_settings(settings)
    try:
        if replay:
            typer.echo(json.dumps(replay_events(bus, settings, last=last, severity=severity), ensure_ascii=False))
            return
        store = open_vault(settings.vault)
        summary = run_amygdala(bus, store, settings, continuous=continuous, progress=reporter("amygdala"), dry_run=dry_run)
    finally:
        bus.close()
    typer.echo(json.dumps(summary.as_dict()))
