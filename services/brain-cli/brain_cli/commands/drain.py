"""``brain tick-drain``: run the keeper ticks queued through ``POST /tick`` (a thin wrapper over ``brain_ops.keeper.drain``)."""

from __future__ import annotations

import json
import sys

import typer

from brain_cli.common import DatabaseOption, ExitCode, VaultOption, job_engine, load_settings, open_vault, operator_errors
from brain_cli.progress import reporter


@operator_errors
def tick_drain(
    vault: VaultOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Run the keeper ticks agents asked for with POST /tick.

    Claims every pending request, then runs one tick (the same pass as brain
    tick) per combination of flags requested, in this order: full, --no-ai, --dry-run, --dry-run --no-ai.
    Each request ends completed, with the tick's summary as its result, or
    failed, with the error, which GET /tick/{job_id} then answers; a failing
    tick does not stop the others. Safe to run from several schedulers at once:
    a request is run by one drain only.

    Prints a JSON summary {total, ticks, ok, failed, buckets} on stdout and the
    line "drain-summary: total=N ticks=N ok=N failed=N stuck=0" on stderr; exits
    1 when a tick failed, 0 otherwise (also when nothing was pending).

    Example: brain tick-drain --vault /srv/vault
    """
    settings = load_settings(vault=vault, database_url=database_url)
    store = open_vault(settings.vault)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_ops.keeper.drain import drain

    with job_engine(settings) as (ready, engine):
        summary = drain(engine, store, ready, progress=reporter("tick-drain"))
    sys.stderr.write(summary.log_line() + "\n")
    typer.echo(json.dumps(summary.as_dict()))
    if summary.failed:
        raise typer.Exit(ExitCode.FAILED)
