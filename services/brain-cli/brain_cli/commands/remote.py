"""The client commands: ``brain status``, ``feed``, ``marker``, ``search``, ``projects`` (and ``brain tick --remote``)
against a running kernel's HTTP API, through ``brain_cli.client``.

Each prints the kernel's JSON answer on stdout (``brain feed --markdown``:
the memory block's text); a kernel that cannot answer is one error line and
exit code 1.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.parse
from typing import Any

import typer

from brain_cli.client import UrlOption, answered, kernel, kernel_errors
from brain_cli.common import ExitCode, fail, operator_errors
from brain_core.chunks import SEARCH_MODES
from brain_core.markers import MARKER_TYPES

CLI_SOURCE = "brain-cli"  # POST /tick's source for a tick this command queues
_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _echo(answer: Any) -> None:
    typer.echo(json.dumps(answer, ensure_ascii=False))


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The samples of a Prometheus text exposition, by metric name."""
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or line.startswith("#"):
            continue
        try:
            value = float(match.group("value"))
        except ValueError:
            continue
        found.setdefault(match.group("name"), []).append((dict(_LABEL.findall(match.group("labels") or "")), value))
    return found


def _by(samples: list[tuple[dict[str, str], float]], label: str) -> dict[str, int]:
    return {labels.get(label, ""): int(value) for labels, value in samples}


def status_of(health: dict[str, Any], deep: dict[str, Any], metrics: str | None) -> dict[str, Any]:
    """``brain status``'s answer from ``/health``, ``/health/deep`` and ``/metrics`` (None: not readable)."""
    checks = deep.get("checks") or {}
    answer: dict[str, Any] = {
        "status": deep.get("status"),
        "version": health.get("version"),
        "service": health.get("service"),
        "vault_root": health.get("vault_root"),
        "checks": {name: bool(check.get("ok")) for name, check in checks.items() if isinstance(check, dict)},
        "problems": {name: check.get("error") for name, check in checks.items() if isinstance(check, dict) and not check.get("ok") and check.get("error")},
    }
    if metrics is None:
        return answer | {"entries": None, "embed_pending": None, "projects": None, "last_tick": None, "ticks": None, "queue": None}
    import datetime as dt

    samples = _samples(metrics)
    last = samples.get("brain_tick_last_success_timestamp_seconds")
    return answer | {
        "entries": _by(samples.get("brain_entries", []), "kind"),
        # entries no search finds as they are yet: the writers' followers and the tick work it off (ADR 0067)
        "embed_pending": int(samples["brain_entries_embed_pending"][0][1]) if samples.get("brain_entries_embed_pending") else None,
        "projects": int(samples["brain_projects"][0][1]) if samples.get("brain_projects") else None,
        "last_tick": dt.datetime.fromtimestamp(last[0][1], dt.timezone.utc).isoformat(timespec="seconds") if last else None,
        "ticks": _by(samples.get("brain_tick_runs_total", []), "outcome"),
        "queue": _by(samples.get("brain_tick_queue_requests", []), "status"),
    }


@operator_errors
@kernel_errors
def status(url: UrlOption = None) -> None:
    """Show a running kernel's health, version, counts, last tick and tick queue.

    Reads GET /health, GET /health/deep and GET /metrics and prints one JSON
    object: {url, status (ok or degraded), version, service, vault_root,
    checks: {name: ok}, problems: {name: error}, entries: {kind: n},
    embed_pending (entries search does not find as they are yet), projects,
    last_tick (the last successful tick, ISO time), ticks: {ok, failed},
    queue: {status: n}}. Counts are null when /metrics cannot be read.

    Example: brain status --url http://127.0.0.1:8080
    """
    with kernel(url) as remote:
        health = remote.get_json("/health")
        deep = remote.get_json("/health/deep")
        read = remote.send("GET", "/metrics", tolerate=frozenset({403, 404, 503}))
        answer = {"url": remote.url} | status_of(health, deep, read.text if read.is_success else None)
    _echo(answer)


@operator_errors
@kernel_errors
def feed(
    project: str | None = typer.Argument(None, help="A project's key or owner/name (default: the fleet's feed). Example: acme/api"),
    markdown: bool = typer.Option(
        False, "--markdown", help="Print the memory block a session reads (text/markdown) instead of the JSON feed. Example: --markdown"
    ),
    url: UrlOption = None,
) -> None:
    """Print a running kernel's feed: the fleet's, or a project's (GET /feed).

    With PROJECT the project's memory and the fleet-wide signals; with
    --markdown the memory block a session receives at start, as text.

    Example: brain feed acme/api --markdown
    """
    with kernel(url) as remote:
        if markdown:
            text = remote.send("GET", "/feed", params={"project": project, "format": "markdown"}).text
            typer.echo(text, nl=not text.endswith("\n"))
            return
        _echo(remote.get_json("/feed", project=project))


@operator_errors
@kernel_errors
def marker(
    type: str = typer.Argument(..., help="lesson, milestone, signal or decision. Example: lesson"),
    content: str = typer.Argument(..., help="The marker's text; - reads it from stdin. Example: 'Run migrations before the tests'"),
    project: str | None = typer.Option(None, "--project", help="The project it belongs to (key or owner/name). Example: --project acme/api"),
    attr: list[str] = typer.Option(
        [], "--attr", help="Another attribute as key=value (repeatable): severity, title, source, ... Example: --attr severity=warning"
    ),
    url: UrlOption = None,
) -> None:
    """Post a marker to a running kernel (POST /marker) and print its answer.

    The kernel writes it to the vault (lessons to the day's lesson log,
    milestones to the project's BLOCKS.md, signals to amygdala/, decisions as
    the next ADR) and answers {ok, marker_type, action, vault_path, ...,
    project}.

    Example: brain marker lesson "Run migrations before the tests" --project acme/api
    """
    if type not in MARKER_TYPES:
        fail(f"{type!r} is not a marker type: one of {', '.join(MARKER_TYPES)}")
    text = sys.stdin.read() if content == "-" else content
    attrs: dict[str, str] = {}
    for item in attr:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"--attr {item!r} is not key=value")
        attrs[key.strip()] = value
    if project:
        attrs["project"] = project
    with kernel(url) as remote:
        _echo(answered(remote.brain_marker(type, text, attrs)))


@operator_errors
@kernel_errors
def search(
    query: str = typer.Argument(..., help="What to look for. Example: 'flaky login test'"),
    project: str | None = typer.Option(None, "--project", help="Only this project's entries (key or owner/name). Example: --project acme/api"),
    limit: int = typer.Option(10, "--limit", min=1, max=100, help="How many results. Example: --limit 5"),
    mode: str = typer.Option("hybrid", "--mode", help="hybrid (words and vectors), vector or words. Example: --mode words"),
    url: UrlOption = None,
) -> None:
    """Search a running kernel's memory (POST /search) and print the results.

    Prints {query, project, results: [{key, producer, text_preview,
    metadata, score, ...}], count, exhaustive, pending}; with --project
    every result belongs to that project.

    Example: brain search "flaky login test" --project acme/api
    """
    if mode not in SEARCH_MODES:
        fail(f"--mode {mode!r}: one of {', '.join(SEARCH_MODES)}")
    with kernel(url) as remote:
        body = {"query": query, "project": project, "limit": limit, "mode": mode}
        _echo(remote.json_of("POST", "/search", remote.send("POST", "/search", json=body)))


@operator_errors
@kernel_errors
def projects(url: UrlOption = None) -> None:
    """List a running kernel's projects (GET /projects): counts by kind and last activity.

    Prints {count, projects: [{id, key, repo, aliases, counts, total,
    last_active}]}, most recently active first; a token bound to projects
    sees only those.

    Example: brain projects
    """
    with kernel(url) as remote:
        _echo(remote.get_json("/projects"))


def remote_tick(url: str | None, *, no_ai: bool, dry_run: bool, wait: bool, timeout: float) -> None:
    """``brain tick --remote``: queue a tick on the kernel (POST /tick) and, with ``wait``, follow it to its end."""
    from brain_mcp.answers import TICK_COMPLETED, follow_tick

    with kernel(url) as remote:
        params = {"no_ai": str(no_ai).lower(), "dry_run": str(dry_run).lower(), "source": CLI_SOURCE}
        job = remote.json_of("POST", "/tick", remote.send("POST", "/tick", params=params))
        job_id = str(job.get("job_id") or "")
        if not job_id:
            fail(f"POST {remote.url}/tick answered no job_id", ExitCode.FAILED)
        last: dict[str, Any] = {}

        def poll() -> tuple[str, str | None] | None:
            seen = remote.get_json(f"/tick/{urllib.parse.quote(job_id, safe='')}")
            last.update(seen)
            state = str(seen.get("status") or "unknown")
            return None if state == "unknown" else (state, seen.get("error"))

        answer = follow_tick(job_id, str(job.get("status") or "pending"), no_ai=no_ai, wait=wait, timeout=timeout, poll=poll)
    answer["note"] = answer["note"].replace("call brain_tick again later", "run brain tick --remote --wait again")
    if last.get("result") is not None:
        answer["result"] = last["result"]
    _echo(answer)
    if wait and answer["status"] != TICK_COMPLETED:
        raise typer.Exit(ExitCode.FAILED)
