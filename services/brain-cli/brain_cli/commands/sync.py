"""``brain sync``: commit the memory's changed files in the vault's git work tree, pull with rebase, push."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from brain_cli.common import ExitCode, VaultOption, fail, load_settings, open_vault, operator_errors


@operator_errors
def sync(
    vault: VaultOption = None,
    remote: Annotated[
        str | None, typer.Option("--remote", help="The git remote to pull from and push to (default BRAIN_SYNC_REMOTE, else origin). Example: --remote origin")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be committed and left out; change nothing. Example: --dry-run")] = False,
) -> None:
    """Share the vault through git: commit the memory's changed files, pull with rebase, push.

    Only the memory's own paths are committed (arcs, region folders, logs,
    decisions, signals, daily notes, the inbox, the curation audit), with a
    message counting them by kind and project; derived files (brain-feed/,
    dashboards) are ignored. Shared logs merge by union (.gitattributes,
    written on the first sync). A file with a detected secret is left out and
    named. Refuses when changes outside the memory's paths are staged; stops,
    the work tree as it was, on a conflict union cannot resolve; never
    force-pushes. Prints a JSON summary; exits 1 on a conflict or a refused push.

    Example: brain sync --vault /srv/vault --remote origin
    """
    settings = load_settings(vault=vault)
    # Once the settings and the vault hold: a bad one fails before these modules load (ADR 0063).
    from brain_ops.vault_sync import sync_vault

    summary = sync_vault(open_vault(settings.vault), remote=remote or settings.sync_remote or "origin", dry_run=dry_run)
    typer.echo(json.dumps(summary.as_dict()))
    if not summary.ok:
        why = f"conflicts union merging cannot resolve: {', '.join(summary.conflicts)}" if summary.conflicts else "the remote refused the push"
        fail(f"not synced, {why}; the work tree is as it was (see the summary's notes)", ExitCode.FAILED)
