"""``brain ops-loop``: the brain-ops service, extract + cluster daily, the keeper tick, the tick drain, embed (``brain_ops.loop``)."""

from __future__ import annotations

import typer

from brain_cli.common import DatabaseOption, ExitCode, VaultOption, job_engine, load_settings, open_vault, operator_errors
from brain_cli.progress import reporter


@operator_errors
def ops_loop(
    vault: VaultOption = None,
    database_url: DatabaseOption = None,
    tick_interval: float | None = typer.Option(
        None, "--tick-interval", help="Seconds between keeper ticks (default TICK_INTERVAL_SECONDS, else 7200). Example: --tick-interval 3600"
    ),
    drain_interval: float | None = typer.Option(
        None,
        "--drain-interval",
        help="Seconds between runs of the POST /tick queue (default TICK_DRAIN_INTERVAL_SECONDS, else 30). Example: --drain-interval 10",
    ),
    extract_hour: int | None = typer.Option(
        None, "--extract-hour", help="UTC hour (0-23) of the daily extract + cluster (default EXTRACT_HOUR, else 4). Example: --extract-hour 3"
    ),
    once: bool = typer.Option(
        False, "--once", help="Run every job due now once and exit (1 when one failed) instead of looping. Example: brain ops-loop --once"
    ),
) -> None:
    """The brain-ops service: upstream's tick-cron and tick-drain loops in one process.

    Once a day, in the UTC hour EXTRACT_HOUR: brain extract --since
    EXTRACT_SINCE --min-turns EXTRACT_MIN_TURNS piped into brain cluster on
    the vault (arcs in clusters/<date>/), then a tick. Every
    TICK_INTERVAL_SECONDS: brain tick (with the LLM when BRAIN_LLM_BASE_URL
    is set, deterministic otherwise). Every TICK_DRAIN_INTERVAL_SECONDS:
    brain tick-drain. brain embed --prune after each tick and after a drain
    that ran a tick; brain sync after each tick when BRAIN_SYNC_REMOTE is
    set. A failing job is logged and the loop goes on; SIGTERM or
    SIGINT stops it after the current job.

    Each job's outcome is one JSON line on stdout
    {job, ok, started_at, duration_ms, summary, error}; progress on stderr.

    Example: brain ops-loop --vault /vault --tick-interval 3600 --drain-interval 30
    """
    settings = load_settings(
        vault=vault,
        database_url=database_url,
        tick_interval_seconds=tick_interval,
        tick_drain_interval_seconds=drain_interval,
        extract_hour=extract_hour,
    )
    store = open_vault(settings.vault)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_ops.loop import run_loop

    progress = reporter("ops-loop")
    with job_engine(settings) as (ready, engine):
        report = run_loop(engine, store, ready, max_cycles=1 if once else None, progress=progress)
    progress.say(f"done: {report.as_dict()}")
    if report.stopped_by == "SIGINT":  # Ctrl-C: stopped after its job, and said so as an interrupt (SIGTERM is a service's stop: 0)
        raise typer.Exit(ExitCode.INTERRUPTED)
    if once and report.failures:
        raise typer.Exit(ExitCode.FAILED)
