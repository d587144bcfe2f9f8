"""Failed tool calls, repeated failing commands and the kept assistant text, in both transcript formats (pure)."""

from __future__ import annotations

import datetime as dt
import json

from brain_core.transcripts import ClaudeParser, CodexParser, SessionSummary
from tests.support.harness import REPO_ROOT
from tests.support.transcript_factory import claude_lines, codex_lines, parse_claude, parse_codex, subagent_lines

T0 = dt.datetime(2026, 11, 28, 10, 0, tzinfo=dt.timezone.utc)
SAMPLES = REPO_ROOT / "tests" / "data"
CLAUDE_SAMPLE = next((SAMPLES / "claude" / "projects").rglob("*.jsonl"))
CODEX_SAMPLE = next((SAMPLES / "codex" / "sessions").rglob("rollout-*.jsonl"))


def _claude(kind: str, content: object, n: int) -> str:
    base = {"isSidechain": False, "cwd": "/w/api", "sessionId": "s", "timestamp": f"2026-11-28T10:{n:02d}:00Z", "uuid": f"u{n}"}
    return json.dumps({**base, "type": kind, "message": {"id": f"m{n}", "role": kind, "content": content}})


def _claude_call(n: int, name: str, command: str | None, result: object, *, is_error: bool) -> list[str]:
    tool_input = {"command": command} if command is not None else {"file_path": "a.py"}
    call = _claude("assistant", [{"type": "tool_use", "id": f"t{n}", "name": name, "input": tool_input}], n)
    block: dict[str, object] = {"type": "tool_result", "tool_use_id": f"t{n}", "content": result}
    if is_error:
        block["is_error"] = True
    return [call, _claude("user", [block], n)]


def _codex(payload: dict[str, object]) -> str:
    return json.dumps({"timestamp": "2026-11-28T11:00:00Z", "type": "response_item", "payload": payload})


def _codex_call(n: int, name: str, arguments: dict[str, object], output: object) -> list[str]:
    return [
        _codex({"type": "function_call", "name": name, "arguments": json.dumps(arguments), "call_id": f"c{n}"}),
        _codex({"type": "function_call_output", "call_id": f"c{n}", "output": output}),
    ]


def test_the_samples_have_no_failed_call() -> None:
    with open(CLAUDE_SAMPLE, "rb") as handle:
        claude = parse_claude(handle, CLAUDE_SAMPLE.stem)
    with open(CODEX_SAMPLE, "rb") as handle:
        codex = parse_codex(handle)
    assert (claude.num_tool_calls, claude.failed_tool_calls, claude.repeated_failures) == (1, 0, 0)  # "2 failed" is output, not an error result
    assert (codex.num_tool_calls, codex.failed_tool_calls, codex.repeated_failures) == (1, 0, 0)


def test_claude_error_results_are_failed_calls_and_the_same_failing_command_repeats() -> None:
    lines = claude_lines("s", "/w/api", T0, ["Fix the build"], tools=("Bash",))
    lines += _claude_call(10, "Bash", "pytest -x tests/", "Exit code 1\n3 failed", is_error=True)
    lines += _claude_call(11, "Bash", "  pytest -x tests/ ", [{"type": "text", "text": "Exit code 1"}], is_error=True)  # the same, spaced
    lines += _claude_call(12, "Bash", "pytest -x tests/", "Exit code 1", is_error=True)
    lines += _claude_call(13, "Bash", "pytest -x tests/", "12 passed", is_error=False)  # it passes at last: no failure
    lines += _claude_call(14, "Bash", "make lint", "Exit code 2", is_error=True)  # failed once: no repeat
    lines += _claude_call(15, "Edit", None, "<tool_use_error>File has not been read yet</tool_use_error>", is_error=True)
    lines += _claude_call(16, "Bash", "rm -rf build", "The user doesn't want to proceed with this tool use.", is_error=True)  # refused
    lines += _claude_call(17, "Bash", "rm -rf build", "The user doesn't want to proceed with this tool use.", is_error=True)
    s = parse_claude(lines, "s")
    assert s.num_tool_calls == 9
    assert s.failed_tool_calls == 5  # three pytest, make lint, the Edit; the refusals are not failures
    assert s.repeated_failures == 2  # pytest failed three times: two repeats
    assert s.error_markers == 7  # every error result, as before
    activity = s.activity()
    assert (activity["failed_tool_calls"], activity["repeated_failures"]) == (5, 2)
    assert not any(isinstance(k, str) and "pytest" in k for k in s.failed_commands)  # only digests are kept


def test_codex_failed_calls_by_exit_code_success_flag_or_error_and_repeats() -> None:
    lines = codex_lines("c1", "/w/api", T0, ["Add backoff"], repo_url="git@github.com:acme/api.git")
    failing_json = json.dumps({"output": "E   assert 1 == 2", "metadata": {"exit_code": 1, "duration_seconds": 0.4}})
    lines += _codex_call(1, "shell", {"command": ["bash", "-lc", "pytest -q"]}, failing_json)
    lines += _codex_call(2, "shell", {"command": ["bash", "-lc", "pytest -q"]}, "Exit code: 1\nWall time: 0.5 seconds\nOutput:\nE assert")
    lines += _codex_call(3, "shell_command", {"command": "pytest -q"}, "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nerror: none")
    lines += _codex_call(4, "exec_command", {"cmd": "cargo build"}, "Chunk ID: 1\nWall time: 2 seconds\nProcess exited with code 101\nOutput:\n")
    lines += _codex_call(5, "exec_command", {"cmd": "cargo build"}, "Chunk ID: 2\nWall time: 2 seconds\nProcess exited with code 101\nOutput:\n")
    lines += _codex_call(6, "exec_command", {"cmd": "cargo build"}, "Chunk ID: 3\nWall time: 2 seconds\nProcess exited with code 101\nOutput:\n")
    lines += _codex_call(7, "shell", {"command": ["bash", "-lc", "ls"]}, "failed to parse function arguments: missing field `command`")
    lines += _codex_call(8, "shell", {"command": ["bash", "-lc", "ls"]}, {"content": "sandbox denied", "success": False})
    lines += _codex_call(9, "view_image", {"path": "a.png"}, {"content": "ok", "success": True})
    lines.append(_codex({"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "p1"}))
    lines.append(_codex({"type": "custom_tool_call_output", "call_id": "p1", "output": "apply_patch verification failed: no such line"}))
    lines.append(_codex({"type": "local_shell_call", "call_id": "l1", "status": "completed", "action": {"type": "exec", "command": ["make", "test"]}}))
    lines.append(_codex({"type": "function_call_output", "call_id": "l1", "output": json.dumps({"output": "", "metadata": {"exit_code": 2}})}))
    s = parse_codex(lines, "c1")
    assert s.num_tool_calls == 1 + 9 + 2
    assert s.failed_tool_calls == 9  # all but the passing pytest, the view_image and the first turn's rg
    assert s.repeated_failures == 1 + 2 + 1  # pytest -q (JSON, then text: the same command), cargo build thrice, ls twice
    assert s.error_markers == 2  # the JSON exit codes, counted as before


def test_a_subagent_failure_counts_for_its_session_and_its_repeats_join_the_parents() -> None:
    parent = parse_claude(claude_lines("p", "/w/api", T0, ["Fix it"], failures=["npm test"]), "p")
    sub_lines = subagent_lines("p", "a1", "/w/api", T0, "Run the tests")
    sub_lines += [line.replace('"isSidechain": false', '"isSidechain": true') for line in _claude_call(30, "Bash", "npm test", "Exit code 1", is_error=True)]
    sub = ClaudeParser("a1", subagent=True)
    for line in sub_lines:
        sub.feed(line)
    sub_summary = sub.finish()
    assert (sub_summary.failed_tool_calls, sub_summary.repeated_failures) == (1, 0)
    parent.fold_subagent(sub_summary)
    assert (parent.failed_tool_calls, parent.repeated_failures) == (2, 1)


def test_the_factory_failures_count_in_both_formats() -> None:
    failures = ["pytest", "pytest", "pytest", "make"]
    claude = parse_claude(claude_lines("s", "/w", T0, ["Go"], failures=failures), "s")
    codex = parse_codex(codex_lines("c", "/w", T0, ["Go"], failures=failures), "c")
    for s in (claude, codex):
        assert (s.failed_tool_calls, s.repeated_failures) == (4, 2), s.agent


def _said(parser: ClaudeParser | CodexParser, lines: list[str]) -> SessionSummary:
    for line in lines:
        parser.feed(line)
    return parser.finish()


def test_assistant_text_is_kept_only_when_asked_and_only_its_end() -> None:
    said = ["First answer naming lesson:early.", "x" * 5000, "The fix pins the clock, as lesson:abc123 says."]
    claude = claude_lines("s", "/w", T0, ["Go"], said=said)
    codex = codex_lines("c", "/w", T0, ["Go"], said=said)
    assert _said(ClaudeParser("s"), claude).assistant_text == ""  # not asked: nothing kept
    assert _said(CodexParser("c"), codex).assistant_text == ""
    for parser, lines in ((ClaudeParser("s", assistant_chars=1000), claude), (CodexParser("c", assistant_chars=1000), codex)):
        text = _said(parser, lines).assistant_text
        assert len(text) == 1000 and text.endswith("as lesson:abc123 says.")
        assert "lesson:early" not in text  # beyond the bound
    whole = _said(ClaudeParser("s", assistant_chars=100_000), claude).assistant_text
    assert "Working on it." in whole and "lesson:early" in whole and "tool_use" not in whole  # text blocks only


def test_many_calls_without_a_result_stay_bounded() -> None:
    parser = ClaudeParser("s")
    for n in range(2000):
        parser.feed(_claude("assistant", [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": f"cmd {n}"}}], n % 60))
    for line in _claude_call(5000, "Bash", "cmd 1999", "Exit code 1", is_error=True):
        parser.feed(line)
    s = parser.finish()
    assert len(parser._pending) <= 256 and s.failed_tool_calls == 1 and s.num_tool_calls == 2001
