"""``brain hook``: the Typer face of the hook process (its help and its listing); the work is ``brain_cli.hook``.

The console script runs ``brain_cli.hook`` directly, without this module or Typer (``brain_cli.entry``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from brain_cli.hook.run import main as hook_main


def hook(
    agent: str = typer.Argument(..., help="claude or codex."),
    event: str = typer.Argument(..., help="SessionStart, UserPromptSubmit, Stop or SubagentStop (or session-start, prompt-submit, stop, subagent-stop)."),
    client_file: Path | None = typer.Option(
        None,
        "--client-file",
        help="The client file with the kernel's URL and token (default ~/.config/brain/client.json; what connect --config-dir writes). "
        "Example: --client-file ~/.brain-team/client.json",
    ),
) -> None:
    """The hook process an agent's hook runs (always exits 0, within 2 s).

    It reads the hook JSON on stdin and prints only the agent's documented output. Session start registers the session and prints the project's memory block; stop and subagent stop post the
    transcript's block markers (through the outbox under ~/.local/state/brain); the kernel's URL and token come from
    ~/.config/brain/client.json. Example: echo '{"session_id": "s1", "cwd": "."}' | brain hook claude SessionStart
    """
    sys.exit(hook_main([agent, event, *(["--client-file", str(client_file)] if client_file else [])]))
