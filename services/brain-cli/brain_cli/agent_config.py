"""The agent configuration ``brain connect`` writes, as plain edits of plain values: no files are read here.

Claude Code and Codex both configure hooks as ``{"hooks": {Event: [{"matcher": ..., "hooks": [{"type":
"command", "command": ..., "timeout": N}]}]}}`` (Claude Code's settings.json, Codex's hooks.json), and
Claude Code its MCP servers as ``{"mcpServers": {name: {...}}}``; Codex keeps MCP servers as
``[mcp_servers.<name>]`` tables in config.toml. Our entries are recognised by what they run, never by
position: a hook handler whose command is ``<...>/brain hook <agent> <event>``, an MCP server named
``brain`` that runs ``<...>/brain mcp``, and the TOML block between our marker comments. So an edit
keeps every other hook and server, a rerun finds its own entries and changes nothing, and a removal
takes out exactly what an install put in (and the containers it emptied).
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from brain_kernel.errors import ConfigError

SERVER_NAME = "brain"
TOML_BEGIN = "# >>> brain connect"
TOML_END = "# <<< brain connect"
_TOML_BLOCK = re.compile(rf"^{re.escape(TOML_BEGIN)}[^\n]*\n.*?^{re.escape(TOML_END)}[^\n]*(?:\n|\Z)", re.M | re.S)


class AgentConfigError(ConfigError, ValueError):
    """A configuration file whose shape refuses the edit (not an object where one is needed, a foreign server named brain)."""


@dataclass(frozen=True)
class HookSpec:
    """One hook ``brain connect`` installs: the agent's event, its matcher, our event name and the timeout (seconds)."""

    event: str
    matcher: str | None
    brain_event: str
    timeout: int

    def group(self, brain: str, agent: str, client_file: str | None = None) -> dict[str, Any]:
        """The matcher group the agent's documentation gives: a matcher (where the event has one) and one command handler.

        ``client_file``: a client file outside the hook's default place, named on the command (``--client-file``).
        """
        command = f"{shlex.quote(brain)} hook {agent} {self.brain_event}"
        if client_file:
            command += f" --client-file {shlex.quote(client_file)}"
        handler = {"type": "command", "command": command, "timeout": self.timeout}
        return {"matcher": self.matcher, "hooks": [handler]} if self.matcher is not None else {"hooks": [handler]}


def hook_specs(agent: str) -> list[HookSpec]:
    """The four hooks of DESIGN section 9 for ``agent``; both agents start a session after a compaction too (``compact``),
    which rewrites the history the block was in."""
    start = "startup|resume|clear|compact"
    return [
        HookSpec("SessionStart", start, "session-start", 10),
        HookSpec("UserPromptSubmit", None, "prompt-submit", 5),
        HookSpec("Stop", None, "stop", 10),
        HookSpec("SubagentStop", None, "subagent-stop", 10),
    ]


def _runs_brain(command: object, *words: str) -> bool:
    """Whether a command line runs an executable named ``brain`` with these first arguments."""
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    return len(argv) > len(words) and argv[0].rsplit("/", 1)[-1] == "brain" and tuple(argv[1 : 1 + len(words)]) == words


def is_our_handler(handler: object, agent: str) -> bool:
    """A hook handler ``brain connect <agent>`` wrote: a command running ``brain hook <agent> ...``."""
    return isinstance(handler, dict) and _runs_brain(handler.get("command"), "hook", agent)


def _object(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise AgentConfigError(f"{where}: {key!r} is not an object")
    return value


def _strip_ours(groups: list[Any], agent: str) -> tuple[list[Any], bool]:
    """The groups without our handlers (a group left with no handler goes too), and whether anything went."""
    out: list[Any] = []
    removed = False
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list) or not any(is_our_handler(h, agent) for h in handlers):
            out.append(group)
            continue
        removed = True
        kept = [h for h in handlers if not is_our_handler(h, agent)]
        if kept:
            out.append({**group, "hooks": kept})
    return out, removed


def without_hooks(data: dict[str, Any], agent: str) -> dict[str, Any]:
    """``data`` with every hook handler of ours removed, and the groups, event lists and ``hooks`` object that left empty."""
    out = copy.deepcopy(data)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for event in list(hooks):
        if not isinstance(hooks[event], list):
            continue
        groups, removed = _strip_ours(hooks[event], agent)
        if removed and not groups:
            del hooks[event]
        elif removed:
            hooks[event] = groups
    if not hooks and "hooks" in data and data["hooks"] != {}:
        del out["hooks"]
    return out


def with_hooks(data: dict[str, Any], agent: str, brain: str, where: str, client_file: str | None = None) -> dict[str, Any]:
    """``data`` with our hooks installed: an identical group of ours stays where it is; a stale one is replaced at the end."""
    out = copy.deepcopy(data)
    specs = hook_specs(agent)
    wanted = {spec.event for spec in specs}
    hooks = _object(out, "hooks", where)
    for event in list(hooks):  # ours on an event no longer installed (an older brain)
        if event not in wanted and isinstance(hooks[event], list):
            groups, removed = _strip_ours(hooks[event], agent)
            if removed and not groups:
                del hooks[event]
            elif removed:
                hooks[event] = groups
    for spec in specs:
        groups = hooks.setdefault(spec.event, [])
        if not isinstance(groups, list):
            raise AgentConfigError(f"{where}: hooks.{spec.event} is not a list")
        desired = spec.group(brain, agent, client_file)
        mine = [g for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list) and any(is_our_handler(h, agent) for h in g["hooks"])]
        if mine == [desired]:
            continue
        groups, _ = _strip_ours(groups, agent)
        hooks[spec.event] = [*groups, desired]
    return out


def mcp_args(url: str, client_file: str | None = None) -> list[str]:
    """``brain``'s arguments for the MCP server: ``mcp --remote URL``, the kernel the hooks use (ADR 0043), and the client file when it is not the default one."""
    return ["mcp", "--remote", url, *(["--client-file", client_file] if client_file else [])]


def mcp_server(brain: str, url: str, client_file: str | None = None) -> dict[str, Any]:
    """Claude Code's entry for a stdio server, as ``claude mcp add`` writes it."""
    return {"type": "stdio", "command": brain, "args": mcp_args(url, client_file)}


def _is_our_server(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    args = entry.get("args") or []
    return _runs_brain(shlex.join([str(entry.get("command", "")), *map(str, args)]), "mcp") if isinstance(args, list) else False


def with_mcp_server(data: dict[str, Any], brain: str, url: str, where: str, client_file: str | None = None) -> dict[str, Any]:
    """``data`` with ``mcpServers.brain`` running ``brain mcp --remote URL``; a server named brain that runs something else is refused."""
    out = copy.deepcopy(data)
    servers = _object(out, "mcpServers", where)
    current = servers.get(SERVER_NAME)
    if current is not None and not _is_our_server(current):
        raise AgentConfigError(f"{where}: an MCP server named {SERVER_NAME!r} that brain connect did not write is there; remove it or pass --no-mcp")
    desired = mcp_server(brain, url, client_file)
    if current != desired:
        servers[SERVER_NAME] = desired
    return out


def without_mcp_server(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without our ``mcpServers.brain`` (and without ``mcpServers`` if that left it empty)."""
    out = copy.deepcopy(data)
    servers = out.get("mcpServers")
    if isinstance(servers, dict) and _is_our_server(servers.get(SERVER_NAME)):
        del servers[SERVER_NAME]
        if not servers:
            del out["mcpServers"]
    return out


def dump_json(data: Any, like: str | None) -> str:
    """JSON text in the style of ``like`` (its indent and final newline), else two spaces and a newline, as Claude Code writes."""
    indent: str | int = 2
    newline = "\n"
    if like:
        found = re.search(r"^([ \t]+)\S", like, re.M)
        if found:
            indent = found.group(1)
        newline = "\n" if like.endswith("\n") else ""
    return json.dumps(data, indent=indent, ensure_ascii=False) + newline


def toml_block(agent: str, brain: str, url: str, client_file: str | None = None) -> str:
    """Our ``[mcp_servers.brain]`` table between marker comments (TOML basic strings and arrays take JSON's escapes)."""
    return (
        f"{TOML_BEGIN}: added by `brain connect {agent}`; `brain disconnect {agent}` removes it\n"
        f"[mcp_servers.{SERVER_NAME}]\n"
        f"command = {json.dumps(brain)}\n"
        f"args = {json.dumps(mcp_args(url, client_file))}\n"
        f"{TOML_END}\n"
    )


def has_toml_block(text: str) -> bool:
    """Whether ``text`` holds our marked block."""
    return _TOML_BLOCK.search(text) is not None


def with_toml_block(text: str, block: str) -> str:
    """``text`` with our block: replaced in place when there, else appended after one blank line."""
    found = _TOML_BLOCK.search(text)
    if found:
        return text[: found.start()] + block + text[found.end() :]
    if not text:
        return block
    separator = "" if text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
    return text + separator + block


def without_toml_block(text: str) -> str:
    """``text`` without our block (and the blank line that separated an appended block)."""
    found = _TOML_BLOCK.search(text)
    if not found:
        return text
    before, after = text[: found.start()], text[found.end() :]
    if before.endswith("\n\n") and (not after or after.startswith("\n")):  # the separator, with the user's own after it
        before = before[:-1]
    return before + after
