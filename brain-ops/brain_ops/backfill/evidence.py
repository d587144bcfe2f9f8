"""Each source session's evidence for ``brain backfill``, in the resolution order of ADR 0002.

The session index first (read in bulk); then the Claude or Codex transcript
found by session id, resolved with its folder and repository URL; then the
folder the arc's own session table or ``cwd`` records, resolved by git, the
catalog, learned roots, a deleted folder's existing ancestor and layout. A
folder that resolves to nothing counts as "no project" only when it exists
(or is the home folder): a folder gone from disk proves nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from sqlalchemy.orm import Session

from brain_core import identity as core_identity
from brain_core.identity import ProjectIdentity
from brain_kernel.identity.resolver import IdentityResolver
from brain_kernel.identity.sessions import stored_identities
from brain_kernel.identity.transcript_files import TranscriptFile, find_transcripts, read_summary
from brain_kernel.settings import Settings

HEAD_LINES = 200  # both agents record the working folder (and Codex the repository URL) in the first lines


class Evidence:
    """Each session's evidence, read once per run: the session index in bulk, transcripts listed once on demand."""

    def __init__(self, settings: Settings, db: Session | None, resolver: IdentityResolver, claude: Path, codex: Path) -> None:
        self.settings, self.db, self.resolver = settings, db, resolver
        self.claude, self.codex = claude, codex
        self.stored: dict[str, ProjectIdentity] = {}
        self._transcripts: dict[str, TranscriptFile] | None = None
        self._paths: dict[tuple[str | None, str | None], ProjectIdentity | None] = {}
        home = settings.user_home.expanduser()
        self._home = core_identity.norm_path(str(home))

    def preload(self, session_ids: Iterable[str]) -> None:
        wanted = sorted(set(session_ids) - set(self.stored))
        if self.db is not None and wanted:
            self.stored.update(stored_identities(self.db, wanted))

    def transcript(self, session_id: str) -> TranscriptFile | None:
        if self._transcripts is None:
            self._transcripts = {t.session_id: t for t in find_transcripts(self.claude, self.codex)}
        return self._transcripts.get(session_id)

    def of_session(self, session_id: str, folder: str | None) -> ProjectIdentity | None:
        """The session's identity in DESIGN order; unresolved = evidence of no project; None = nothing survives."""
        stored = self.stored.get(session_id)
        if stored is not None and stored.project:
            return stored
        found = self.transcript(session_id)
        if found is not None:
            try:
                head = read_summary(found, max_lines=HEAD_LINES)
            except OSError:
                head = None
            if head is not None and (head.cwd or head.repo_url):
                hit = self._resolve(head.cwd, head.repo_url)
                if hit is not None:
                    return hit
        for cwd in (stored.cwd if stored is not None else None, folder):
            if cwd:
                hit = self._resolve(cwd, None)
                if hit is not None:
                    return hit
        return None

    def _resolve(self, cwd: str | None, repo_url: str | None) -> ProjectIdentity | None:
        key = (cwd, repo_url)
        if key not in self._paths:
            hit = self.resolver.resolve(cwd, transcript_repo_url=repo_url)
            self._paths[key] = hit if hit.resolved or self._says_none(hit.cwd) else None
        return self._paths[key]

    def _says_none(self, cwd: str | None) -> bool:
        """An unresolved folder proves "no project" only when it is there to look at (or is the home folder)."""
        path = core_identity.norm_path(cwd)
        if path is None:
            return False
        return core_identity.is_home_or_above(path, self._home) or os.path.isdir(path)
