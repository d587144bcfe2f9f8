"""The docs a newcomer reads stay true to the code: every command, route, MCP tool and setting is documented.

docs/cli.md has one ``### brain <command>`` heading per command of the Typer
app (nested groups as ``### brain <group> <command>``), docs/http.md one
``### METHOD /path`` heading per OpenAPI operation, and neither names one that
does not exist. docs/configuration.md names every environment variable the
settings object reads. README.md stays at most 10 kB (one screen or two; the
references live in docs/), and the relative links of these pages reach a file
and, with a ``#fragment``, a heading of it. No database: the app is built
with ``make_settings(tmp_path, None)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import typer

from brain_api.app import create_app
from brain_cli.cli import app as cli_app
from brain_kernel.settings import Settings
from brain_mcp.server import build_server
from tests.support.harness import REPO_ROOT, make_settings

DOCS = REPO_ROOT / "docs"
README_MAX_BYTES = 10_000
PAGES = [REPO_ROOT / "README.md", DOCS / "cli.md", DOCS / "http.md", DOCS / "configuration.md"]
METHODS = "GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS"


def _headings(page: Path, pattern: str) -> list[str]:
    return re.findall(rf"^### ({pattern})[ \t]*$", page.read_text(), re.M)


def _commands(command: Any, words: tuple[str, ...]) -> Iterator[str]:
    """``brain <name>`` for every leaf command under ``command``, groups walked recursively.

    Duck-typed: Typer builds its commands on a click of its own (``typer._click``), not ``click.Group``.
    """
    subcommands = getattr(command, "commands", None)
    if isinstance(subcommands, dict):
        for name, sub in subcommands.items():
            yield from _commands(sub, (*words, name))
    else:
        yield " ".join(words)


def _cli_commands() -> set[str]:
    return set(_commands(typer.main.get_command(cli_app), ("brain",)))


def _routes(tmp_path: Path) -> set[str]:
    schema = create_app(make_settings(tmp_path, None)).openapi()
    return {f"{method.upper()} {path}" for path, item in schema["paths"].items() for method in item}


def test_every_brain_command_has_a_heading_in_docs_cli(tmp_path: Path) -> None:
    commands = _cli_commands()
    assert {"brain serve", "brain tick", "brain backfill"} <= commands  # the walk found the app's commands
    headings = _headings(DOCS / "cli.md", r"brain [a-z][a-z0-9 -]*[a-z0-9]")
    assert len(headings) == len(set(headings)), f"docs/cli.md repeats a heading: {sorted(h for h in headings if headings.count(h) > 1)}"
    missing = commands - set(headings)
    assert not missing, f"commands without a '### <command>' heading in docs/cli.md: {sorted(missing)}"
    unknown = set(headings) - commands
    assert not unknown, f"docs/cli.md headings naming no command of the brain app: {sorted(unknown)}"


def test_every_route_has_a_heading_in_docs_http(tmp_path: Path) -> None:
    routes = _routes(tmp_path)
    assert {"GET /feed", "POST /marker", "GET /tick/{job_id}"} <= routes
    headings = _headings(DOCS / "http.md", rf"(?:{METHODS}) /\S*")
    assert len(headings) == len(set(headings)), f"docs/http.md repeats a heading: {sorted(h for h in headings if headings.count(h) > 1)}"
    missing = routes - set(headings)
    assert not missing, f"routes without a '### METHOD /path' heading in docs/http.md: {sorted(missing)}"
    unknown = set(headings) - routes
    assert not unknown, f"docs/http.md headings naming no route of the app: {sorted(unknown)}"


def test_every_mcp_tool_is_described_in_docs_http(tmp_path: Path) -> None:
    server = build_server(make_settings(tmp_path, None), kernel=object())  # type: ignore[arg-type]
    names = {tool.name for tool in anyio.run(server.list_tools)}
    assert "brain_feed" in names
    text = (DOCS / "http.md").read_text()
    section = text[text.index("\n## MCP tools\n") :]
    section = section[: section.index("\n## ", 1)]
    described = set(re.findall(r"^- `([a-z_]+)\(", section, re.M))
    assert described == names, (
        f"docs/http.md's MCP tools list differs from the server's: missing {sorted(names - described)}, unknown {sorted(described - names)}"
    )


def test_every_setting_is_in_docs_configuration() -> None:
    text = (DOCS / "configuration.md").read_text()
    names = {name for field in Settings.model_fields.values() for name in field.validation_alias.choices}  # type: ignore[union-attr]
    missing = {name for name in names if f"`{name}`" not in text}
    assert not missing, f"settings docs/configuration.md does not name: {sorted(missing)}"


def test_readme_is_at_most_ten_kilobytes() -> None:
    size = len((REPO_ROOT / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes (at most {README_MAX_BYTES}): move reference material to docs/"


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces as '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_relative_links_reach_a_file_and_heading() -> None:
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, fragment = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif fragment and file.is_file():
                anchors = {_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", file.read_text(), re.M)}
                if fragment not in anchors:
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, f"broken links: {broken}"
