"""``brain repair``: vaults damaged by upstream's defects made whole, in place, auditable and safe to rerun."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import typer

from brain_cli.common import DatabaseOption, VaultOption, audit_and_plan, job_session, load_settings, open_vault, operator_errors
from brain_cli.progress import reporter


@operator_errors
def repair(
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print one JSON line per change it would make; write no file and no index row. Example: brain repair --dry-run"
    ),
    audit: Path | None = typer.Option(
        None,
        "--audit",
        help="Append one JSON line per change (file, what, before, after), written before the change. Example: --audit repair-audit.jsonl",
    ),
    vault: VaultOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Repair the damage upstream's defects left in a vault: four repairs, each safe to rerun.

    merge-chain: files of one folder named <id>.merged.merged....md (upstream renamed a
    tombstone again at every merge) become the one tombstone <id>.merged.md holding the
    longest of their texts; the others are removed. title: an arc title polluted with a
    merge's rationale ("Auth flow — merged because ..., ...; ...") is cut before the
    rationale, backticks removed, never blanked. edge: one @edge marker per target, the
    strongest type kept (parent > child > sibling > unblocks > supersedes > related),
    self-loops dropped; a repeated "## Merged from X" section goes too (merged-section).
    signal-quoting: @signal openings whose quoting upstream's tombstone script lost
    (verify=curl -s url), so the signal no longer parsed, are quoted again.

    Reads the markdown under clusters/ and the region folders. Only the damaged spans
    change: every other byte and line end of a file is kept. Each change is one audit line
    {file, what, before, after, dry_run, at}, written before the change (a removed file's
    whole text is its before), so every change can be undone. The index follows the files
    written. A rerun changes nothing. The last stdout line is the JSON summary {scanned,
    changed, removed, repairs: {<what>: n}, skipped, ...}.

    Example: brain repair --dry-run --audit repair-dry.jsonl
    """
    settings = load_settings(vault=vault, database_url=database_url)
    store = open_vault(settings.vault)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_ops.repair import run_repair

    with contextlib.ExitStack() as stack:
        sink, show = stack.enter_context(audit_and_plan(audit, dry_run=dry_run))
        db = None if dry_run else stack.enter_context(job_session(settings, embed_after=True))[1]  # a dry run reads only the vault
        summary = run_repair(store, db=db, dry_run=dry_run, audit=sink, progress=reporter("repair"), plan=show)
    typer.echo(json.dumps(summary.as_dict(), ensure_ascii=False))
