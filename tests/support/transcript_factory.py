"""Generated Claude Code and Codex transcripts, and real git repositories, for tests and the bench.

The line shapes follow the project's samples (tests/data/): Claude Code lines
with cwd, gitBranch, sessionId, timestamp, message; Codex rollout lines with
session_meta (cwd, git.repository_url), response_item messages and function
calls. Repositories are made with the git CLI, worktrees with ``git worktree``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from brain_core.transcripts import ClaudeParser, CodexParser, SessionSummary
from tests.support.gitrepo import add_worktree, git, make_repo

__all__ = [
    "add_worktree",
    "claude_lines",
    "codex_lines",
    "git",
    "make_repo",
    "parse_claude",
    "parse_codex",
    "subagent_lines",
    "write_claude",
    "write_claude_subagent",
    "write_codex",
]


def _iso(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def claude_lines(
    session_id: str,
    cwd: str,
    start: dt.datetime,
    prompts: Sequence[str],
    *,
    branch: str = "main",
    tools: Sequence[str] = ("Bash", "Edit"),
    minutes_per_turn: float = 2.0,
    filler_chars: int = 0,
    failures: Sequence[str] = (),
    said: Sequence[str] = (),
) -> list[str]:
    """The lines of a Claude Code session: boilerplate first, then prompt/tool/answer turns.

    ``failures``: Bash commands that fail, one call each, after the turns; ``said``: assistant answers after them.
    """
    base = {"isSidechain": False, "userType": "external", "cwd": cwd, "sessionId": session_id, "version": "2.0.31", "gitBranch": branch}
    lines = [json.dumps({"type": "summary", "summary": "Generated session", "leafUuid": "x"})]
    t = start
    lines.append(
        json.dumps({**base, "type": "user", "message": {"role": "user", "content": "<command-name>/clear</command-name>"}, "uuid": "u0", "timestamp": _iso(t)})
    )
    filler = "x" * filler_chars
    for n, prompt in enumerate(prompts):
        t += dt.timedelta(seconds=30)
        lines.append(json.dumps({**base, "type": "user", "message": {"role": "user", "content": prompt}, "uuid": f"u{n}a", "timestamp": _iso(t)}))
        for k, tool in enumerate(tools):
            t += dt.timedelta(seconds=10)
            msg = {
                "id": f"msg_{n}_{k}",
                "role": "assistant",
                "content": [{"type": "text", "text": "Working on it."}, {"type": "tool_use", "id": f"toolu_{n}_{k}", "name": tool, "input": {"command": "ls"}}],
            }
            lines.append(json.dumps({**base, "type": "assistant", "message": msg, "uuid": f"a{n}{k}", "timestamp": _iso(t)}))
            result = {"role": "user", "content": [{"tool_use_id": f"toolu_{n}_{k}", "type": "tool_result", "content": "ok " + filler}]}
            lines.append(json.dumps({**base, "type": "user", "message": result, "uuid": f"r{n}{k}", "timestamp": _iso(t)}))
        t += dt.timedelta(minutes=minutes_per_turn)
        answer = {"id": f"msg_{n}_done", "role": "assistant", "content": [{"type": "text", "text": "Done: tests pass."}]}
        lines.append(json.dumps({**base, "type": "assistant", "message": answer, "uuid": f"a{n}z", "timestamp": _iso(t)}))
    for k, command in enumerate(failures):
        t += dt.timedelta(seconds=20)
        call = {"type": "tool_use", "id": f"toolu_f{k}", "name": "Bash", "input": {"command": command}}
        lines.append(
            json.dumps(
                {**base, "type": "assistant", "message": {"id": f"msg_f{k}", "role": "assistant", "content": [call]}, "uuid": f"f{k}", "timestamp": _iso(t)}
            )
        )
        result = {"role": "user", "content": [{"tool_use_id": f"toolu_f{k}", "type": "tool_result", "content": "Exit code 1\nfailed", "is_error": True}]}
        lines.append(json.dumps({**base, "type": "user", "message": result, "uuid": f"fr{k}", "timestamp": _iso(t)}))
    for k, text in enumerate(said):
        t += dt.timedelta(seconds=20)
        answer = {"id": f"msg_s{k}", "role": "assistant", "content": [{"type": "text", "text": text}]}
        lines.append(json.dumps({**base, "type": "assistant", "message": answer, "uuid": f"s{k}", "timestamp": _iso(t)}))
    return lines


def claude_folder_name(cwd: str) -> str:
    """How Claude Code names a project folder: the cwd with / and . replaced by -."""
    return cwd.replace("/", "-").replace(".", "-")


def write_claude(claude_dir: Path, session_id: str, cwd: str, start: dt.datetime, prompts: Sequence[str], **kwargs: object) -> Path:
    """Write a Claude Code transcript where Claude Code would and return its path."""
    folder = claude_dir / claude_folder_name(cwd)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session_id}.jsonl"
    path.write_text("\n".join(claude_lines(session_id, cwd, start, prompts, **kwargs)) + "\n")  # type: ignore[arg-type]
    return path


def subagent_lines(
    session_id: str,
    agent_id: str,
    cwd: str,
    start: dt.datetime,
    task: str,
    *,
    tools: Sequence[str] = ("Grep", "Read"),
    branch: str = "main",
    name_session: bool = True,
) -> list[str]:
    """The lines of a Claude Code subagent: the parent's task, tool calls, an answer, all ``isSidechain``.

    ``name_session`` False leaves out ``sessionId`` (a version whose lines do not carry it).
    """
    base: dict[str, object] = {"isSidechain": True, "userType": "external", "cwd": cwd, "agentId": agent_id, "version": "2.0.31", "gitBranch": branch}
    if name_session:
        base["sessionId"] = session_id
    t = start
    lines = [json.dumps({**base, "type": "user", "message": {"role": "user", "content": task}, "uuid": f"{agent_id}-u0", "timestamp": _iso(t)})]
    for k, tool in enumerate(tools):
        t += dt.timedelta(seconds=15)
        msg = {"id": f"msg_{agent_id}_{k}", "role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{agent_id}_{k}", "name": tool, "input": {}}]}
        lines.append(json.dumps({**base, "type": "assistant", "message": msg, "uuid": f"{agent_id}-a{k}", "timestamp": _iso(t)}))
        result = {"role": "user", "content": [{"tool_use_id": f"toolu_{agent_id}_{k}", "type": "tool_result", "content": "found it"}]}
        lines.append(json.dumps({**base, "type": "user", "message": result, "uuid": f"{agent_id}-r{k}", "timestamp": _iso(t)}))
    t += dt.timedelta(minutes=1)
    answer = {"id": f"msg_{agent_id}_done", "role": "assistant", "content": [{"type": "text", "text": "Report: the parser lives in src/."}]}
    lines.append(json.dumps({**base, "type": "assistant", "message": answer, "uuid": f"{agent_id}-az", "timestamp": _iso(t)}))
    return lines


def write_claude_subagent(
    claude_dir: Path, session_id: str, agent_id: str, cwd: str, start: dt.datetime, task: str, *, flat: bool = False, **kwargs: object
) -> Path:
    """Write a subagent's transcript where Claude Code would: ``<folder>/<session>/subagents/agent-<id>.jsonl``, or flat beside the session."""
    folder = claude_dir / claude_folder_name(cwd)
    if not flat:
        folder = folder / session_id / "subagents"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"agent-{agent_id}.jsonl"
    path.write_text("\n".join(subagent_lines(session_id, agent_id, cwd, start, task, **kwargs)) + "\n")  # type: ignore[arg-type]
    return path


def codex_lines(
    session_id: str,
    cwd: str,
    start: dt.datetime,
    prompts: Sequence[str],
    *,
    repo_url: str | None = None,
    branch: str = "main",
    minutes_per_turn: float = 2.0,
    filler_chars: int = 0,
    failures: Sequence[str] = (),
    said: Sequence[str] = (),
) -> list[str]:
    """The lines of a Codex rollout: session_meta, injected context, then prompt/call/answer turns.

    ``failures``: shell commands that exit 1, one call each, after the turns; ``said``: assistant answers after them.
    """
    t = start
    meta: dict[str, object] = {
        "id": session_id,
        "timestamp": _iso(t),
        "cwd": cwd,
        "originator": "codex_cli_rs",
        "cli_version": "0.63.0",
        "instructions": None,
        "source": "cli",
        "model_provider": "openai",
    }
    if repo_url:
        meta["git"] = {"commit_hash": "9f2c1e0a7b", "branch": branch, "repository_url": repo_url}
    lines = [json.dumps({"timestamp": _iso(t), "type": "session_meta", "payload": meta})]
    env = f"<environment_context>\n  <cwd>{cwd}</cwd>\n  <approval_policy>on-request</approval_policy>\n</environment_context>"
    lines.append(
        json.dumps(
            {"timestamp": _iso(t), "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": env}]}}
        )
    )
    filler = "y" * filler_chars
    for n, prompt in enumerate(prompts):
        t += dt.timedelta(seconds=20)
        lines.append(
            json.dumps(
                {
                    "timestamp": _iso(t),
                    "type": "response_item",
                    "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
                }
            )
        )
        lines.append(json.dumps({"timestamp": _iso(t), "type": "event_msg", "payload": {"type": "user_message", "message": prompt, "images": []}}))
        lines.append(
            json.dumps({"timestamp": _iso(t), "type": "turn_context", "payload": {"cwd": cwd, "approval_policy": "on-request", "model": "gpt-5-codex"}})
        )
        t += dt.timedelta(seconds=5)
        args = json.dumps({"command": ["bash", "-lc", "rg -n upload src"]})
        lines.append(
            json.dumps(
                {
                    "timestamp": _iso(t),
                    "type": "response_item",
                    "payload": {"type": "function_call", "name": "shell", "arguments": args, "call_id": f"call_{n}"},
                }
            )
        )
        output = json.dumps({"output": "src/x.py:1 " + filler, "metadata": {"exit_code": 0}})
        lines.append(
            json.dumps({"timestamp": _iso(t), "type": "response_item", "payload": {"type": "function_call_output", "call_id": f"call_{n}", "output": output}})
        )
        t += dt.timedelta(minutes=minutes_per_turn)
        lines.append(
            json.dumps(
                {
                    "timestamp": _iso(t),
                    "type": "response_item",
                    "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
                }
            )
        )
    for k, command in enumerate(failures):
        t += dt.timedelta(seconds=20)
        call = {"type": "function_call", "name": "shell", "arguments": json.dumps({"command": ["bash", "-lc", command]}), "call_id": f"call_f{k}"}
        lines.append(json.dumps({"timestamp": _iso(t), "type": "response_item", "payload": call}))
        output = {"type": "function_call_output", "call_id": f"call_f{k}", "output": json.dumps({"output": "failed", "metadata": {"exit_code": 1}})}
        lines.append(json.dumps({"timestamp": _iso(t), "type": "response_item", "payload": output}))
    for text in said:
        t += dt.timedelta(seconds=20)
        message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        lines.append(json.dumps({"timestamp": _iso(t), "type": "response_item", "payload": message}))
    return lines


def write_codex(codex_dir: Path, session_id: str, cwd: str, start: dt.datetime, prompts: Sequence[str], **kwargs: object) -> Path:
    """Write a Codex rollout under ``<codex-dir>/sessions/YYYY/MM/DD/`` and return its path."""
    day = codex_dir / "sessions" / f"{start:%Y}" / f"{start:%m}" / f"{start:%d}"
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"rollout-{start:%Y-%m-%dT%H-%M-%S}-{session_id}.jsonl"
    path.write_text("\n".join(codex_lines(session_id, cwd, start, prompts, **kwargs)) + "\n")  # type: ignore[arg-type]
    return path


def parse_claude(lines: Iterable[bytes | str], session_id: str = "") -> SessionSummary:
    """Summarise a Claude Code transcript given its lines (session id: the file stem)."""
    return _parse(ClaudeParser(session_id), lines)


def parse_codex(lines: Iterable[bytes | str], session_id: str = "") -> SessionSummary:
    """Summarise a Codex rollout given its lines (session id from ``session_meta``, else the argument)."""
    return _parse(CodexParser(session_id), lines)


def _parse(parser: ClaudeParser | CodexParser, lines: Iterable[bytes | str]) -> SessionSummary:
    for line in lines:
        parser.feed(line)
    return parser.finish()
