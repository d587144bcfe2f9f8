"""The transcript store: agent transcripts on disk, listed, read, and found by session id.

Claude Code writes ``<claude-dir>/<project folder>/<session_id>.jsonl``;
Codex writes ``<codex-dir>/sessions/YYYY/MM/DD/rollout-<stamp>-<id>.jsonl``.
A Claude subagent's transcript is ``agent-<agent id>.jsonl``, flat beside its
session's (older versions) or under ``<folder>/<session_id>/subagents/``.
``brain extract`` lists and streams them (``find_transcripts``,
``find_subagent_transcripts``, ``read_summary``); ``POST /marker`` finds the
one transcript of a session the index does not know yet
(``TranscriptLocator``), a subagent's by its agent id too, and reads only its
first lines, where both agents record the working folder (and Codex the
repository URL) and a subagent its parent session. The locator's cache is an optimisation only: a miss looks again, at
most once a minute per session, and a found session is recorded in the
session index, which every replica reads first.
"""

from __future__ import annotations

import glob
import itertools
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from brain_core.transcripts import ClaudeParser, CodexParser, SessionSummary, codex_id_from_name, subagent_id_from_name

_READ_BUFFER = 1 << 20
HEAD_LINES = 200  # both agents record the cwd within the first lines
MISS_TTL_S = 60.0


@dataclass(frozen=True)
class TranscriptFile:
    """One transcript on disk and the parser that reads it.

    A subagent's: ``session_id`` is its agent id, ``parent_session_id`` the
    session folder it sits in (None when flat: its lines name the parent).
    """

    path: Path
    agent: str
    session_id: str
    subagent: bool = False
    parent_session_id: str | None = None


def find_transcripts(claude_dir: Path | None, codex_dir: Path | None) -> list[TranscriptFile]:
    """Transcript files under the two sources, in a stable order (missing folders give none)."""
    found: list[TranscriptFile] = []
    if claude_dir is not None and claude_dir.is_dir():
        for path in sorted(claude_dir.glob("*/*.jsonl")):
            if path.name.startswith("agent-"):
                continue  # a subagent's sidechain: part of its parent session, not a session
            found.append(TranscriptFile(path, "claude", path.stem))
    sessions = codex_dir / "sessions" if codex_dir is not None else None
    if sessions is not None and sessions.is_dir():
        for path in sorted(sessions.glob("[0-9]*/[0-9]*/[0-9]*/rollout-*.jsonl")):
            found.append(TranscriptFile(path, "codex", codex_id_from_name(path.name)))
    return found


def find_subagent_transcripts(claude_dir: Path | None) -> list[TranscriptFile]:
    """Claude subagent transcripts in both layouts (flat ``agent-<id>.jsonl``, ``<session>/subagents/``), in a stable order."""
    if claude_dir is None or not claude_dir.is_dir():
        return []
    found = [_subagent_file(path, None) for path in sorted(claude_dir.glob("*/agent-*.jsonl"))]
    found += [_subagent_file(path, path.parent.parent.name) for path in sorted(claude_dir.glob("*/*/subagents/agent-*.jsonl"))]
    return found


def _subagent_file(path: Path, parent: str | None) -> TranscriptFile:
    return TranscriptFile(path, "claude", subagent_id_from_name(path.name) or path.stem, subagent=True, parent_session_id=parent)


def read_summary(item: TranscriptFile, *, max_lines: int | None = None, assistant_chars: int = 0) -> SessionSummary:
    """Parse one transcript by streaming its lines (the first ``max_lines`` only, when given); OSError propagates.

    ``assistant_chars``: keep that many of the last characters of the assistant's text (the trial's recall used).
    """
    parser: ClaudeParser | CodexParser
    if item.agent == "codex":
        parser = CodexParser(item.session_id, assistant_chars=assistant_chars)
    else:
        parser = ClaudeParser(item.session_id, subagent=item.subagent, parent_session_id=item.parent_session_id, assistant_chars=assistant_chars)
    with open(item.path, "rb", buffering=_READ_BUFFER) as handle:
        for line in itertools.islice(handle, max_lines):
            parser.feed(line)
    return parser.finish()


class TranscriptLocator:
    """Finds a session's transcript by id: Claude by one stat per project folder, Codex through an index of rollouts.

    An id that names no session may be a Claude subagent's agent id (a client
    posting the agent's id, ``agent-`` prefixed or not): its ``agent-<id>.jsonl``
    is looked for last, flat and under every session's ``subagents/`` folder.
    """

    def __init__(self, claude_dir: Path, codex_dir: Path) -> None:
        self.claude_dir, self.codex_dir = claude_dir, codex_dir
        self._lock = threading.Lock()
        self._codex: dict[str, Path] = {}
        self._codex_listed = -MISS_TTL_S
        self._misses: dict[str, float] = {}
        self._agents: dict[str, TranscriptFile] = {}

    def find(self, session_id: str) -> TranscriptFile | None:
        """The transcript of ``session_id``, or None (a miss is remembered for a minute)."""
        if not session_id or "/" in session_id or session_id.startswith("."):
            return None
        now = time.monotonic()
        with self._lock:
            if now - self._misses.get(session_id, -MISS_TTL_S) < MISS_TTL_S:
                return None
        found = self._claude(session_id) or self._codex_file(session_id, now) or self._subagent(session_id)
        if found is None:
            with self._lock:
                self._misses[session_id] = now
        return found

    def _claude(self, session_id: str) -> TranscriptFile | None:
        if session_id.startswith("agent-"):
            return None  # a flat subagent transcript is no session: ``_subagent`` reads it as one
        try:
            folders = [p for p in self.claude_dir.iterdir() if p.is_dir()]
        except OSError:
            return None
        for folder in folders:
            path = folder / f"{session_id}.jsonl"
            if path.is_file():
                return TranscriptFile(path, "claude", session_id)
        return None

    def _subagent(self, agent_id: str) -> TranscriptFile | None:
        agent_id = agent_id.removeprefix("agent-")
        with self._lock:
            known = self._agents.get(agent_id)
        if known is not None and known.path.is_file():
            return known
        name = f"agent-{agent_id}.jsonl"
        try:
            folders = [p for p in self.claude_dir.iterdir() if p.is_dir()]
        except OSError:
            return None
        for folder in folders:
            flat = folder / name
            paths = [flat] if flat.is_file() else sorted(folder.glob(f"*/subagents/{glob.escape(name)}"))
            if paths:
                found = _subagent_file(paths[0], None if paths[0] == flat else paths[0].parent.parent.name)
                with self._lock:
                    self._agents[agent_id] = found
                return found
        return None

    def _codex_file(self, session_id: str, now: float) -> TranscriptFile | None:
        with self._lock:
            path = self._codex.get(session_id)
            if path is None and now - self._codex_listed >= MISS_TTL_S:
                self._codex = {t.session_id: t.path for t in find_transcripts(None, self.codex_dir)}
                self._codex_listed = now
                path = self._codex.get(session_id)
        return TranscriptFile(path, "codex", session_id) if path is not None and path.is_file() else None
