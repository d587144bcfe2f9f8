"""``brain scrub``: take secrets out of the arcs already in the vault, in place, auditable and safe to rerun."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import typer

from brain_cli.common import DatabaseOption, VaultOption, audit_and_plan, job_session, load_settings, open_vault, operator_errors
from brain_cli.progress import reporter


@operator_errors
def scrub(
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print one JSON line per file that would change, write no file and no index row. Example: brain scrub --dry-run"
    ),
    audit: Path | None = typer.Option(
        None,
        "--audit",
        help="Append one JSON line per file changed (path, secrets_removed, kinds; never a secret). Example: --audit /vault/raw/scrub/audit.jsonl",
    ),
    vault: VaultOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Replace the secrets in existing arcs and the keeper's copies of them, in place.

    Reads every file under clusters/ (arcs, merge tombstones, day dashboards), the arcs
    in the region folders and the files under brain-feed/, and replaces what the secret
    scrub finds (tokens such as AKIA..., ghp_..., sk-..., NAME=value credentials, private
    key blocks, URL passwords) with <REDACTED_SECRET>. Only those spans change: every
    other byte and line end is kept, a file is rewritten atomically only when it holds a
    secret and its frontmatter still parses the same way, else it is listed under
    skipped. The index and the search index follow the files written, and the changed
    entries are embedded again, so no search answers a secret. A rerun writes nothing. The last stdout line is the
    JSON summary {scanned, changed, unchanged, secrets_removed, kinds, skipped, ...}.

    Example: brain scrub --dry-run --audit scrub-dry.jsonl
    """
    settings = load_settings(vault=vault, database_url=database_url)
    store = open_vault(settings.vault)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_ops.scrub import run_scrub

    with contextlib.ExitStack() as stack:
        sink, show = stack.enter_context(audit_and_plan(audit, dry_run=dry_run))
        db = None if dry_run else stack.enter_context(job_session(settings, embed_after=True))[1]  # a dry run reads only the vault
        summary = run_scrub(store, db=db, dry_run=dry_run, audit=sink, progress=reporter("scrub"), plan=show)
    typer.echo(json.dumps(summary.as_dict(), ensure_ascii=False))
