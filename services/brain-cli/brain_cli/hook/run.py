"""The hook process: one event of one agent, within a budget, always exit 0.

``main(["claude", "stop"])`` reads the hook JSON on stdin. A timer ends the
process (exit 0) when the budget is spent, whatever it is waiting on; every
file it writes is written atomically, so being cut short loses nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from brain_cli.hook.kernel import Kernel, config_dir, state_dir
from brain_cli.hook.outbox import Outbox, write_atomic
from brain_core.text import BLOCK_FRAME_OPEN

BUDGET_SECONDS = 2.0
AGENTS = {"claude": "claude-code", "codex": "codex"}
EVENTS = {
    "sessionstart": "SessionStart",
    "userpromptsubmit": "UserPromptSubmit",
    "promptsubmit": "UserPromptSubmit",
    "stop": "Stop",
    "subagentstop": "SubagentStop",
}
USAGE = """usage: brain hook claude|codex <event> [--client-file PATH]

The hook process an agent's hook runs (brain connect installs it): reads the
hook JSON on stdin, always exits 0, prints only the agent's documented output,
within a budget of 2 s. Events: SessionStart, UserPromptSubmit, Stop,
SubagentStop (or session-start, prompt-submit, stop, subagent-stop).
The kernel's URL and token come from the client file,
$XDG_CONFIG_HOME/brain/client.json (~/.config/brain/client.json) by default.

Example: echo '{"session_id":"s1","cwd":"'$PWD'"}' | brain hook claude SessionStart
"""


def _event(name: str) -> str | None:
    return EVENTS.get(name.lower().replace("-", "").replace("_", ""))


def _subagent_transcript(payload: dict[str, object]) -> Path | None:
    """A subagent's transcript: the path the agent sent, else the two layouts Claude Code uses."""
    given = payload.get("agent_transcript_path")
    if isinstance(given, str) and given:
        return Path(given)
    main_path, agent_id, session = payload.get("transcript_path"), payload.get("agent_id"), payload.get("session_id")
    if not (isinstance(main_path, str) and isinstance(agent_id, str) and agent_id):
        return None
    parent = Path(main_path).parent
    nested = parent / str(session) / "subagents" / f"agent-{agent_id}.jsonl"
    return nested if nested.exists() else parent / f"agent-{agent_id}.jsonl"


def stop(payload: dict[str, object], agent: str, subagent: bool, kernel: Kernel | None, outbox: Outbox) -> None:
    """Queue every new block marker of the transcript, then drain the outbox."""
    session = str(payload.get("session_id") or "")
    if subagent:
        transcript = _subagent_transcript(payload)
    else:
        path = payload.get("transcript_path")
        transcript = Path(path) if isinstance(path, str) and path else None
    if transcript is not None and session:
        from brain_cli.hook.transcript import marker_key, markers_in  # hashlib and the parser: only a stop needs them

        fresh = [(marker_key(session, found), found) for found in markers_in(transcript)]
        fresh = [(key, found) for key, found in fresh if not outbox.was_sent(key)]
        where = _where(payload) if fresh else {}  # git only when something is new to send
        commit, named = _provenance(payload, [found.content for _, found in fresh])
        for (key, found), paths in zip(fresh, named, strict=True):
            # a marker that names its project or repo is filed where it says: the folder's identity would contradict it
            named_elsewhere = any(found.attrs.get(k) for k in ("project", "repo"))
            base = {k: v for k, v in where.items() if k == "cwd"} if named_elsewhere else where
            attrs: dict[str, object] = {**base, **found.attrs, "session_id": session, "source": AGENTS[agent]}
            if isinstance(payload.get("agent_id"), str) and payload["agent_id"]:
                attrs["agent_id"] = payload["agent_id"]
            if commit and not named_elsewhere:  # provenance of this repository only (ADR 0042)
                attrs.setdefault("commit", commit)
                if paths:
                    attrs.setdefault("paths", paths)
            outbox.add(key, {"type": found.type, "content": found.content, "attrs": attrs}, kernel.client if kernel is not None else None)
    if kernel is not None:
        outbox.drain(kernel)


def _where(payload: dict[str, object]) -> dict[str, str]:
    """``cwd`` and the folder's project, repo and worktree, resolved here (ADR 0042)."""
    cwd = payload.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        return {}
    from brain_cli.hook.identity import local_identity  # subprocess and the git rules: not every event needs them

    return {**local_identity(cwd), "cwd": cwd}


def _provenance(payload: dict[str, object], texts: list[str]) -> tuple[str | None, list[list[str]]]:
    """HEAD's commit and, per text, the repository paths it names (see ``identity.provenance``)."""
    cwd = payload.get("cwd")
    if not texts or not isinstance(cwd, str) or not cwd:
        return None, [[] for _ in texts]
    from brain_cli.hook.identity import provenance

    return provenance(cwd, texts)


def _session_file(session: object) -> Path | None:
    """Where session start leaves the session's project for its prompts (None for an id unfit as a file name)."""
    if not isinstance(session, str) or not session or session.startswith(".") or not all(c.isalnum() or c in "-_." for c in session):
        return None
    return state_dir() / "sessions" / session


def session_start(payload: dict[str, object], agent: str, kernel: Kernel | None) -> str | None:
    """Register the session and answer its project's memory block, or the fleet's (None: print nothing).

    The identity is resolved here by git and sent; a folder git knows nothing
    of is sent as ``cwd`` alone for the kernel to resolve. A folder in no
    project gets the fleet's block unless the client file says ``"no_project": "none"``.
    """
    session, cwd = payload.get("session_id"), payload.get("cwd")
    remembered = _session_file(session)
    if remembered is not None:
        # a restarted session resolves its project afresh: what an earlier start left must not feed its prompts
        with contextlib.suppress(OSError):
            remembered.unlink(missing_ok=True)
    if kernel is None or not isinstance(session, str) or not session or not isinstance(cwd, str):
        return None
    where = _where(payload)
    answer = kernel.call("POST", "/sessions", {**where, "session_id": session, "cwd": cwd, "agent": agent})
    if answer.status == 0:
        return None  # no kernel within the budget: nothing to say
    if not 200 <= answer.status < 300:
        # Not registered (a token bound to another project, a fault): only the block of the project this folder
        # is, never the token's or the fleet's, which would hand the agent another project's memory (ADR 0042).
        local = where.get("repo") or where.get("project")
        if not local:
            return None
        return _block(kernel, {"project": local, "format": "markdown", "session_id": session})
    identity = answer.json()
    # owner/name when the kernel knows it: a short key another repository shares would be ambiguous (409)
    project = (identity.get("repo") or identity.get("project")) if isinstance(identity, dict) else None
    if not isinstance(project, str) or not project:
        project = None
        if not kernel.fleet_block:
            return None
    if remembered is not None and project:
        with contextlib.suppress(OSError):
            write_atomic(remembered, {"project": project})
    wanted = {"project": project, "format": "markdown", "session_id": session} if project else {"format": "markdown", "session_id": session}
    if project and where.get("project"):  # standing in a checkout: flag what the code moved past (ADR 0042)
        stale = _stale(kernel, cwd, project, session)
        if stale:
            wanted["stale"] = json.dumps(stale, separators=(",", ":"))
    return _block(kernel, wanted)


def _block(kernel: Kernel, wanted: dict[str, str]) -> str | None:
    """The memory block ``GET /feed`` answers for ``wanted``, or None."""
    feed = kernel.call("GET", f"/feed?{urllib.parse.urlencode(wanted)}")
    if not (200 <= feed.status < 300) or "json" in feed.content_type:
        return None  # no memory block from this kernel (yet)
    block = feed.body.decode(errors="replace").strip()
    # only the kernel's framed block: a gateway's login or error page answered 200 is not memory
    return block if block.startswith(BLOCK_FRAME_OPEN) else None


def _stale(kernel: Kernel, cwd: str, project: str, session: str) -> dict[str, dict[str, object]]:
    """The block's entries whose named paths changed in this checkout since their commit (empty when none or unknown)."""
    query = urllib.parse.urlencode({"project": project, "format": "provenance", "session_id": session})
    answer = kernel.call("GET", f"/feed?{query}")
    found = answer.json() if 200 <= answer.status < 300 else None
    listed = found.get("entries") if isinstance(found, dict) else None
    entries = [
        (e["entry_id"], e["commit"], e["paths"])
        for e in listed or []
        if isinstance(e, dict) and isinstance(e.get("entry_id"), str) and isinstance(e.get("commit"), str) and isinstance(e.get("paths"), list)
    ]
    if not entries:
        return {}
    from brain_cli.hook.identity import stale_hints

    return stale_hints(cwd, entries)


def recall(payload: dict[str, object], kernel: Kernel | None) -> str | None:
    """The kernel's recall for this prompt: a few close entries of the session's project it was not given yet (None: print nothing).

    The kernel selects, frames and records it (``POST /recall``, ADR 0050); a
    session whose start was not seen here sends no prompt at all.
    """
    prompt, session, remembered = payload.get("prompt"), payload.get("session_id"), _session_file(payload.get("session_id"))
    if kernel is None or remembered is None or not isinstance(prompt, str) or not prompt.strip():
        return None
    try:
        project = json.loads(remembered.read_text()).get("project")
    except (OSError, ValueError, AttributeError):
        return None  # no session start seen, or a folder with no project
    if not isinstance(project, str) or not project:
        return None
    answer = kernel.call("POST", "/recall", {"session_id": session, "prompt": prompt[:10000], "project": project})
    found = answer.json() if 200 <= answer.status < 300 else None
    text = found.get("text") if isinstance(found, dict) else None
    return text if isinstance(text, str) and text.strip() else None


def run(agent: str, event: str, stdin: str, deadline: float, emit: Callable[[str], None], client_file: Path | None = None) -> None:
    """One hook event: ``emit`` gets what to print on stdout, if anything; then the outbox is drained."""
    try:
        payload = json.loads(stdin) if stdin.strip() else {}
    except ValueError:
        payload = {}
    if not isinstance(payload, dict):
        payload = {}
    kernel = Kernel.from_client_file(client_file or config_dir() / "client.json", deadline)
    outbox = Outbox(state_dir())
    if event in ("Stop", "SubagentStop"):
        stop(payload, agent, event == "SubagentStop", kernel, outbox)
        return
    if event == "SessionStart":
        block = session_start(payload, agent, kernel)
        if block is not None:
            emit(json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": block}}))
    elif event == "UserPromptSubmit":
        recalled = recall(payload, kernel)
        if recalled is not None:
            emit(json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": recalled}}))
    if kernel is not None and outbox.queued():
        outbox.drain(kernel)


def _emit(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _started_ago() -> float:
    """Seconds since this process started, from Linux's ``/proc`` (to its clock tick); 0 where that cannot be read."""
    try:
        with open("/proc/self/stat", "rb") as stat, open("/proc/uptime", "rb") as uptime:
            ticks = int(stat.read().rsplit(b")", 1)[1].split()[19])  # field 22, starttime, counted after the command name
            return max(0.0, float(uptime.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def _give_up(_signum: int, _frame: object) -> None:
    os._exit(0)


def main(argv: list[str]) -> int:
    """``brain hook AGENT EVENT [--client-file PATH]``: always 0 (a hook that fails must not harm the session)."""
    if not argv or argv[0] in ("-h", "--help") or len(argv) < 2 or argv[0] not in AGENTS or "--help" in argv:
        if not argv or "-h" in argv or "--help" in argv:
            sys.stdout.write(USAGE)
        return 0
    client_file = None
    if "--client-file" in argv[2:]:
        at = argv.index("--client-file", 2)
        client_file = Path(argv[at + 1]).expanduser() if at + 1 < len(argv) else None
    budget = max(BUDGET_SECONDS - _started_ago(), 0.05)  # the interpreter's start and our imports count too
    deadline = time.monotonic() + budget
    with contextlib.suppress(AttributeError, ValueError):  # no SIGALRM (Windows) or not the main thread
        signal.signal(signal.SIGALRM, _give_up)
        signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        event = _event(argv[1])
        stdin = sys.stdin.read() if event else ""
        if event:
            run(argv[0], event, stdin, deadline, _emit, client_file)
    except Exception:  # the hook's one promise: exit 0, whatever went wrong
        return 0
    finally:
        # The timer stops before the interpreter's shutdown: fired there, with the handlers back to their defaults,
        # SIGALRM would end the process with 142, which the agent shows as a failed hook.
        with contextlib.suppress(AttributeError, ValueError):
            signal.setitimer(signal.ITIMER_REAL, 0)
    return 0
