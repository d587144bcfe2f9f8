"""``brain tick``: the keeper pass (heat and status, feed files, per-project intent, index refresh)."""

from __future__ import annotations

import json

import typer

from brain_cli.client import UrlOption, kernel_errors
from brain_cli.common import DatabaseOption, VaultOption, job_engine, load_settings, open_vault, operator_errors
from brain_cli.progress import reporter
from brain_kernel.errors import ConfigError


@operator_errors
@kernel_errors
def tick(
    no_ai: bool = typer.Option(False, "--no-ai", help="Derive intents from hot arcs even when an LLM endpoint is configured. Example: brain tick --no-ai"),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Compute and report, write nothing (no vault file, no move, no index row, no verifier run). Example: brain tick --dry-run"
    ),
    vault: VaultOption = None,
    database_url: DatabaseOption = None,
    remote: bool = typer.Option(
        False, "--remote", help="Queue the tick on a running kernel (POST /tick) instead of running it here. Example: brain tick --remote --wait"
    ),
    wait: bool = typer.Option(False, "--wait", help="With --remote: follow the queued tick until it ends (or --timeout). Example: --wait"),
    timeout: float = typer.Option(300.0, "--timeout", min=0, max=600, help="With --remote --wait: seconds to wait at most. Example: --timeout 120"),
    url: UrlOption = None,
) -> None:
    """Run one keeper pass: drain, heat, promote, collect markers, write the feed, refresh the index.

    Upstream's deterministic steps (UPSTREAM.md 5.4), project-aware:
    drain raw/inbox/ by tags; scan the region folders and clusters/<date>/ (.merged.md
    tombstones suppress their raw files); heat with upstream's formula (BRAIN_PROMOTE_HEAT,
    BRAIN_DECAY_START_DAYS, ...) for arcs only; promote to frontal-lobe/conscious/, demote
    to frontal-lobe/unconscious/, graduate into the region's folder (moves, never copies);
    collect inline markers (@signal, @lesson, @inject, @decision, @milestone) with the
    project of the arc holding them; write brain-feed/ (hot-arcs.md with a Project column,
    signals.md, inject.md, lessons.md, intent.md, last-tick-diff.md), one intent per project
    active in the last 72 hours, clusters/<date>/_dashboard.md; refresh the index; then store
    the default feed answer of each active project, and embed for search the entries written
    since the last tick (a failure is reported and retried next tick). A file is rewritten
    only when its content changes.

    With an LLM endpoint (BRAIN_LLM_BASE_URL or INFERENCE_URL) and no --no-ai the LLM half
    follows: upstream's prompt (arc table with a Project column, edges, signals, lessons,
    unsynthesized arcs, the previous intent), secrets scrubbed, one chat completion call,
    and the six-section answer applied as brain apply does (its intents replace the
    derived ones). Without an endpoint, or when the call fails, the tick stays
    deterministic and says so on stderr. Prints a JSON summary (upstream's stats keys under "stats"); progress goes
    to stderr.

    With --remote the tick is queued on a running kernel instead (POST /tick; the kernel's
    brain tick-drain or ops-loop runs it), at --url (default: the client file's url) with
    BRAIN_TOKEN or the client file's token; --wait follows it (GET /tick/<job_id>) and exits 1
    unless it completed. Prints {job_id, status, no_ai, waited, note, result}.

    Example: brain tick --no-ai

    Example: brain tick --remote --wait --url http://127.0.0.1:8080
    """
    if remote:
        if vault is not None or database_url is not None:
            raise ConfigError("--remote runs the tick on the kernel: drop --vault and --database-url")
        from brain_cli.commands.remote import remote_tick

        remote_tick(url, no_ai=no_ai, dry_run=dry_run, wait=wait, timeout=timeout)
        return
    if wait or url is not None:
        raise ConfigError("--wait and --url go with --remote: brain tick --remote --wait")
    settings = load_settings(vault=vault, database_url=database_url)
    store = open_vault(settings.vault)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_ops.keeper.drain import run_tick_and_warm

    progress = reporter("tick")
    with job_engine(settings) as (ready, engine):
        summary = run_tick_and_warm(engine, store, ready, use_ai=not no_ai, dry_run=dry_run, progress=progress)
    for note in summary.notes:
        progress.say(note)
    typer.echo(json.dumps(summary.as_dict()))
