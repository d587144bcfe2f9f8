"""``brain trial``: the holdout trial's report, and its injection records as JSON lines (ADR 0050).

``report`` reads one trial period (the current settings' by default) from the
injection records and the outcomes ``brain extract`` stored; ``export``
writes every record. Both only read the index.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from brain_cli.common import DatabaseOption, job_session, load_settings, operator_errors

SinceOption = typer.Option("all", "--since", help="Only records from this time on: a duration back from now, an ISO date, or all. Example: --since 30d")


@operator_errors
def report(
    since: str = SinceOption,
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object instead of a table. Example: brain trial report --json"),
    control_percent: int | None = typer.Option(
        None, "--control-percent", min=0, max=100, help="Report this period's percentage instead of the current setting's. Example: --control-percent 20"
    ),
    salt_id: str | None = typer.Option(
        None, "--salt-id", help="Report the period of this salt id (12 hex, as records and the report show it). Example: --salt-id 3f9a0c41be27"
    ),
    database_url: DatabaseOption = None,
) -> None:
    """Compare the trial's arms: per arm projects and sessions, per outcome the means and their difference.

    A session is in the trial when it was served a block; its arm is its first
    block record's, and it counts once its outcomes are stored (run `brain
    extract` with the database first). Projects, not sessions, are compared:
    each project's sessions are averaged, and the interval of the difference
    (control minus treatment) comes from a bootstrap over projects. Only the
    records of one trial period are read: the current BRAIN_TRIAL_CONTROL_PERCENT
    and BRAIN_TRIAL_SALT, or the period --control-percent and --salt-id name
    (the JSON lists every period the records hold).

    Example: brain trial report --since 30d
    """
    settings = load_settings(database_url=database_url)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_kernel.trial.records import trial_config
    from brain_kernel.trial.report import Period, render_text, trial_report
    from brain_ops.extract import parse_when

    current = Period.of(trial_config(settings))
    period = Period(
        current.control_percent if control_percent is None else control_percent,
        salt_id if salt_id is not None else current.salt_id,
    )
    with job_session(settings) as (_, db):
        data = trial_report(db, period, since=parse_when(since), current=current)
    typer.echo(json.dumps(data) if as_json else render_text(data), nl=as_json)


@operator_errors
def export(
    since: str = SinceOption,
    out: Path | None = typer.Option(None, "--out", help="Write the JSON lines to this file instead of stdout. Example: --out injections.jsonl"),
    database_url: DatabaseOption = None,
) -> None:
    """Write the injection records as JSON lines, oldest first: one object per block, recall or pull served.

    Each line holds when, kind, session, agent, project, repo, the entry ids,
    bytes, whether it was cut, the text's hash, the arm with its basis, seed,
    percentage and salt id, and a control block's text. The count goes to stderr.

    Example: brain trial export --since 30d --out injections.jsonl
    """
    settings = load_settings(database_url=database_url)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_kernel.trial.records import export_jsonl
    from brain_ops.extract import parse_when

    with job_session(settings) as (_, db):
        if out is None:
            count = export_jsonl(db, sys.stdout, since=parse_when(since))
        else:
            with open(out, "w", encoding="utf-8") as handle:
                count = export_jsonl(db, handle, since=parse_when(since))
    typer.echo(f"{count} records", err=True)
