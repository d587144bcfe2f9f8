"""Identity resolver: gathers evidence for ``brain_core.identity`` and applies DESIGN section 3.

Evidence comes, in order, from client attrs, the session index, the transcript,
git on disk, the operator catalog, learned roots, git again for a folder gone
from disk (its nearest existing ancestor's repository) and layout patterns; the
first hit wins and nothing falls back to a folder's basename. The resolver is
cheap to build (one per request or job). Git facts are read in-process by
git's own rules (``brain_kernel.identity.gitfacts``: ``.git``, ``commondir`` and the
config files through GitPython) and kept per process for every resolver
while the files they were read from are unchanged, so a folder of a known
repository costs a walk of ``stat`` calls and no read; a folder is given to a
known repository only when no ``.git`` entry lies between them. Git itself
runs only where the in-process reading cannot promise git's answer (two
processes: ``rev-parse`` for the dirs and toplevel, ``config`` for the
remotes). ``git_calls`` counts both kinds (``git_reads`` in-process,
``git_processes`` spawned): at most two for a folder of an unseen
repository, none for a further folder of a known one. With a database session
the resolver also reads the session index and learned roots, and records
learned roots a git resolution reveals when the index does not hold them
already; it never commits.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import subprocess
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy.orm import Session

from brain_core import identity as core
from brain_core.identity import CatalogError, CatalogProject, GitFacts, ProjectIdentity
from brain_kernel.errors import ConfigError
from brain_kernel.identity import gitfacts
from brain_kernel.settings import Settings, environ_snapshot, environ_subset

GIT_TIMEOUT_S = 10


def clear_git_caches() -> None:
    """Forget the git facts this process keeps (a benchmark's fresh process)."""
    gitfacts.clear_caches()


def load_catalog(settings: Settings) -> tuple[CatalogProject, ...]:
    """The operator catalog at ``settings.catalog_path`` (empty when unset); ConfigError if unusable.

    Parsed once per version of the file (its mtime and size), not once per
    request: every ``POST /sessions`` and marker with a cwd builds a resolver.
    """
    path = settings.catalog_path
    if path is None:
        return ()
    path = path.expanduser()
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(f"catalog file {path} cannot be read: {exc.strerror}") from None
    return _parse_catalog_file(path, info.st_mtime_ns, info.st_size, str(settings.user_home.expanduser()))


@lru_cache(maxsize=8)
def _parse_catalog_file(path: Path, mtime_ns: int, size: int, user_home: str) -> tuple[CatalogProject, ...]:
    """The catalog file parsed (cached by version; a failure is not cached)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"catalog file {path} cannot be read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"catalog file {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    try:
        return core.parse_catalog(data, user_home)
    except CatalogError as exc:
        raise ConfigError(f"catalog file {path}: {exc}") from None


class IdentityResolver:
    """Resolve working folders and sessions to a ``ProjectIdentity`` (one instance per request or job)."""

    def __init__(
        self,
        settings: Settings,
        db: Session | None = None,
        *,
        learn: bool = True,
        in_process: bool = True,
        batch: bool = False,
    ) -> None:
        """``in_process=False`` asks git itself for every repository (the comparison the tests and bench make).

        ``batch=True`` (a job resolving thousands of folders) reads every learned
        root once and keeps the roots it learns until ``flush_learned``, so the
        resolution itself sends no statement: lookups see the kept roots as the
        index will hold them.
        """
        self.settings = settings
        self.db = db
        self.learn = learn
        self.in_process = in_process
        self.batch = batch
        self.tally = gitfacts.Tally()
        self._reader: gitfacts.GitReader | None = None
        self._home = core.norm_path(str(settings.user_home.expanduser()))
        self._home_real = os.path.realpath(self._home) if self._home else None
        self._catalog: tuple[CatalogProject, ...] | None = None
        self._git: dict[str, GitFacts | None] = {}
        self._by_toplevel: dict[str, GitFacts] = {}
        self._remotes: dict[str, str | None] = {}
        self._learned_written: set[tuple[str, str]] = set()
        self._learned: dict[str, list[core.LearnedRoot]] = {}
        self._learned_rows: dict[str, core.LearnedRoot] | None = None  # batch: every stored learned root by path
        self._pending: list[tuple[ProjectIdentity, list[tuple[str, str | None]]]] = []  # batch: learned, not yet written
        self._pending_rows: dict[str, core.LearnedRoot] = {}
        self._sessions: dict[str, ProjectIdentity | None] = {}
        self._env: dict[str, str] | None = None

    # -- public ---------------------------------------------------------------

    @property
    def git_calls(self) -> int:
        """Git facts fetched from a repository: in-process reads and git processes (cached answers cost none)."""
        return self.tally.calls

    @property
    def git_in_process(self) -> bool:
        """True when git facts are read in-process (GitPython importable, an environment git reads as we do)."""
        return self._git_reader().env.in_process

    @property
    def git_reads(self) -> int:
        """In-process reads of ``.git``, ``commondir`` and config files."""
        return self.tally.reads

    @property
    def git_processes(self) -> int:
        """``git`` processes started."""
        return self.tally.processes

    @property
    def catalog(self) -> tuple[CatalogProject, ...]:
        """The operator catalog, loaded once."""
        if self._catalog is None:
            self._catalog = load_catalog(self.settings)
        return self._catalog

    def resolve(
        self,
        cwd: str | None,
        *,
        session_id: str | None = None,
        attrs: Mapping[str, Any] | None = None,
        transcript_repo_url: str | None = None,
    ) -> ProjectIdentity:
        """The identity of a session or folder, first hit in DESIGN order; InvalidKey for bad attrs."""
        shown = self._display(cwd)
        _ = self.catalog  # a broken catalog fails every resolution alike, not only the paths it covers
        hit = core.from_attrs(attrs, shown)
        if hit is not None:
            return hit
        if session_id and self.db is not None:
            hit = self._from_session(session_id, shown)
            if hit is not None:
                return hit
        hit = core.from_transcript(transcript_repo_url, shown)
        if hit is not None:
            return hit
        return self.resolve_path(shown)

    def resolve_path(self, cwd: str | None) -> ProjectIdentity:
        """The identity of a folder from path evidence only: git, catalog, learned roots, layout."""
        shown = self._display(cwd)
        catalog = self.catalog
        views = self._views(shown)
        if not views:
            return core.unresolved(shown)
        hit = self._from_git(views, shown)
        if hit is not None:
            return hit
        for path, home in views:
            hit = core.from_catalog(path, catalog, shown, home)
            if hit is not None:
                return hit
        if self.db is not None:
            for path, home in views:
                hit = self._from_learned(path, shown, home)
                if hit is not None:
                    return hit
        hit = self._from_ancestor(views[0][0], shown)
        if hit is not None:
            return hit
        for path, home in views:
            hit = core.from_layout(path, self.settings.layout_patterns, shown, home)
            if hit is not None:
                return self._enrich_layout(hit)
        return core.unresolved(shown)

    def record_session(self, session_id: str, identity: ProjectIdentity, *, agent: str | None = None, started_at: Any = None) -> bool:
        """Store a session's identity in the index (needs a database); True when the session is new."""
        from brain_kernel.identity.sessions import record_session

        if self.db is None:
            raise ConfigError("recording a session needs a database")
        return record_session(self.db, session_id, identity, agent=agent, started_at=started_at)

    # -- paths ----------------------------------------------------------------

    def _display(self, cwd: str | None) -> str | None:
        """The folder as reported: ``~`` expanded against the user home, normalised; else as given."""
        if cwd is None or not isinstance(cwd, str) or not cwd.strip():
            return None
        text = cwd.strip()
        if (text == "~" or text.startswith("~/")) and self._home:
            text = self._home + text[1:]
        return core.norm_path(text) or text

    def _views(self, shown: str | None) -> list[tuple[str, str | None]]:
        """(path, home) pairs to match: as written, and with symlinks resolved; empty when unresolvable.

        The home folder and its ancestors are never resolved from path evidence.
        """
        path = core.norm_path(shown)
        if path is None:
            return []
        real = os.path.realpath(path)
        if core.is_home_or_above(path, self._home) or core.is_home_or_above(real, self._home_real):
            return []
        views = [(path, self._home)]
        if real != path:
            views.append((real, self._home_real))
        return views

    # -- evidence ---------------------------------------------------------------

    def _from_session(self, session_id: str, shown: str | None) -> ProjectIdentity | None:
        from brain_kernel.identity.sessions import get_session

        if session_id in self._sessions:
            stored = self._sessions[session_id]
            if stored is None:
                return None
            return core.from_stored(stored.project, stored.repo, stored.root, stored.worktree, shown or stored.cwd, "session")
        row = get_session(self.db, session_id)  # type: ignore[arg-type]
        if row is None:
            return None
        return core.from_stored(row.project, row.repo, row.root, row.worktree, shown or row.cwd, "session")

    def session_identity(self, session_id: str, cwd: str | None) -> ProjectIdentity | None:
        """The identity the session index holds for ``session_id`` (source ``session``), or None (needs a database)."""
        if self.db is None or not session_id:
            return None
        return self._from_session(session_id, self._display(cwd))

    def preload_sessions(self, session_ids: list[str]) -> None:
        """Read the stored identities of many sessions at once (a job resolving thousands; needs a database)."""
        from brain_kernel.identity.sessions import stored_identities

        wanted = [sid for sid in dict.fromkeys(session_ids) if sid and sid not in self._sessions]
        if self.db is None or not wanted:
            return
        found = stored_identities(self.db, wanted)
        for sid in wanted:
            self._sessions[sid] = found.get(sid)

    def remember_session(self, session_id: str, identity: ProjectIdentity) -> None:
        """What a job is about to store for a session, as the session index will then answer for it."""
        self._sessions[session_id] = identity

    def _from_learned(self, path: str, shown: str | None, home: str | None) -> ProjectIdentity | None:
        from brain_kernel.identity.sessions import all_learned_roots, learned_roots_containing, path_and_ancestors

        if self.batch:
            if self._learned_rows is None:
                self._learned_rows = all_learned_roots(self.db)  # type: ignore[arg-type]
            stored, pending = self._learned_rows, self._pending_rows
            found = [lr for lr in (pending.get(p) or stored.get(p) for p in path_and_ancestors(path)) if lr is not None]
            return core.from_learned(path, found, shown, home)
        if path not in self._learned:
            self._learned[path] = learned_roots_containing(self.db, path)  # type: ignore[arg-type]
        return core.from_learned(path, self._learned[path], shown, home)

    def _from_git(self, views: list[tuple[str, str | None]], shown: str | None) -> ProjectIdentity | None:
        real = views[-1][0]
        facts = self.git_facts(real)
        hit = core.from_git(facts, shown, self._home_real)
        if hit is not None and facts is not None and self.db is not None and self.learn:
            self._learn(hit, facts.toplevel)
        return hit

    def _from_ancestor(self, path: str, shown: str | None) -> ProjectIdentity | None:
        """A folder gone from disk: the repository of its nearest existing ancestor, source ``git``.

        Only when that ancestor lies inside a work tree with no ``.git`` entry
        between the two (a broken gitfile or a ``.git`` folder git skips is a
        repository boundary the deleted folder may have been behind), and
        only after learned roots, so a deleted nested repository or worktree
        known by its own root is never given to the outer one.
        """
        if os.path.lexists(path):
            return None  # an existing folder is git's to answer, and it did
        ancestor = posixpath.dirname(path)
        while not os.path.isdir(ancestor):
            parent = posixpath.dirname(ancestor)
            if parent == ancestor:
                return None
            ancestor = parent
        real = os.path.realpath(ancestor)
        if core.is_home_or_above(ancestor, self._home) or core.is_home_or_above(real, self._home_real):
            return None
        facts = self.git_facts(real)
        if facts is None:
            return None
        current, top = real, posixpath.normpath(facts.toplevel)
        while current != top and core.is_within(current, top):
            if os.path.lexists(posixpath.join(current, ".git")):
                return None
            current = posixpath.dirname(current)
        hit = core.from_git(facts, shown, self._home_real)
        if hit is not None and self.db is not None and self.learn:
            self._learn(hit, facts.toplevel)
        return hit

    def _learn(self, identity: ProjectIdentity, toplevel: str) -> None:
        """Record the roots a git resolution revealed, unless the index already holds them as they are."""
        from brain_kernel.identity.sessions import record_learned_roots

        assert identity.root is not None
        marker = (identity.root, toplevel)
        if marker in self._learned_written:
            return
        self._learned_written.add(marker)
        paths = core.learned_paths(identity, toplevel)
        if self.batch:
            self._pending.append((identity, paths))
            for path, worktree in paths:
                self._pending_rows[path] = core.LearnedRoot(path, identity.project, identity.repo, identity.root, worktree)  # type: ignore[arg-type]
        elif record_learned_roots(self.db, identity, paths):  # type: ignore[arg-type]
            self._learned.clear()  # lookups cached before this root was learned may now match it

    def preload(self) -> None:
        """Batch: read the stored learned roots now; path resolutions read no row after (a job can lend its session out)."""
        from brain_kernel.identity.sessions import all_learned_roots

        if self.batch and self.db is not None and self._learned_rows is None:
            self._learned_rows = all_learned_roots(self.db)

    def flush_learned(self) -> int:
        """Write the learned roots a batch resolver kept (those new or changed); returns rows written."""
        from brain_kernel.identity.sessions import record_learned

        if self.db is None or not self._pending:
            return 0
        written = record_learned(self.db, self._pending)
        self._pending = []
        return written

    def _enrich_layout(self, hit: ProjectIdentity) -> ProjectIdentity:
        """A layout key named in the catalog (key or alias, one project) takes that project's key and repo."""
        project = core.catalog_project_for_key(hit.project or "", self.catalog)
        if project is None:
            return hit
        return ProjectIdentity(project.key, project.repo, None, None, hit.cwd, "layout")

    # -- git ----------------------------------------------------------------------

    def git_facts(self, path: str) -> GitFacts | None:
        """Git facts of an existing folder (cached per folder); None when it is not in a work tree."""
        if path in self._git:
            return self._git[path]
        if not os.path.isdir(path):
            self._git[path] = None
            return None
        reader = self._git_reader()
        if reader.env.in_process:
            facts = reader.facts(path)
        else:
            facts = self._known_repo(path)
            if facts is None:
                facts = gitfacts.rev_parse(self._run_git, path, self.tally)
                if facts is not None:
                    facts = GitFacts(facts.git_dir, facts.common_dir, facts.toplevel, self._remote(path, facts.common_dir))
                    self._by_toplevel.setdefault(facts.toplevel, facts)
        self._git[path] = facts
        return facts

    def _git_reader(self) -> gitfacts.GitReader:
        if self._reader is None:
            env = gitfacts.GitEnvironment.from_environ(environ_subset(gitfacts.ENV_NAMES))
            if not self.in_process:
                env = dataclasses.replace(env, in_process=False)
            self._reader = gitfacts.GitReader(env, self._run_git, self.tally)
        return self._reader

    def _known_repo(self, path: str) -> GitFacts | None:
        """Facts of a repository this resolver asked git about that holds ``path`` with no ``.git`` in between.

        Only when the environment sends every question to git; otherwise the
        process-wide answers of ``gitfacts`` play this part.
        """
        current = path
        while True:
            known = self._by_toplevel.get(current)
            if known is not None:
                return known
            if os.path.lexists(os.path.join(current, ".git")):
                return None  # a repository boundary git has not told us about (nested repo, submodule)
            parent = posixpath.dirname(current)
            if parent == current:
                return None
            current = parent

    def _run_git(self, path: str, *args: str) -> subprocess.CompletedProcess[str] | None:
        if self._env is None:
            self._env = gitfacts.git_env(environ_snapshot())
        try:
            return subprocess.run(
                ["git", "-C", path, *args],
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_S,
                env=self._env,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None

    def _remote(self, path: str, common_dir: str) -> str | None:
        """The origin URL (else the only remote's URL) from git, once per repository."""
        if common_dir not in self._remotes:
            self._remotes[common_dir] = gitfacts.remote_by_git(self._run_git, path, self.tally)
        return self._remotes[common_dir]
