"""Identity resolver: gathers evidence for ``brain_core.identity`` and applies DESIGN section 3.

Evidence comes, in order, from client attrs, the session index, the transcript,
git on disk, the operator catalog, learned roots and layout patterns; the
first hit wins and nothing falls back to a folder's basename. The resolver is
cheap to build (one per request or job) and caches git facts per distinct
folder for its lifetime. Git cost is bounded: at most two git processes for a
folder git has not seen yet (``rev-parse`` for the dirs and toplevel, ``config``
for the remotes, the latter once per repository), and none for a folder whose
repository this resolver already knows when no ``.git`` entry lies between the
folder and that repository's toplevel (a plain stat walk). With a database
session the resolver also reads the session index and learned roots, and
records learned roots after each git resolution; it never commits.
"""

from __future__ import annotations

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
from brain_kernel.settings import Settings, environ_snapshot

GIT_TIMEOUT_S = 10
# Variables that would point git at another repository than the folder asked about.
_GIT_ENV_DROP = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_NAMESPACE",
)


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

    def __init__(self, settings: Settings, db: Session | None = None, *, learn: bool = True) -> None:
        self.settings = settings
        self.db = db
        self.learn = learn
        self.git_calls = 0
        self._home = core.norm_path(str(settings.user_home.expanduser()))
        self._home_real = os.path.realpath(self._home) if self._home else None
        self._catalog: tuple[CatalogProject, ...] | None = None
        self._git: dict[str, GitFacts | None] = {}
        self._by_toplevel: dict[str, GitFacts] = {}
        self._remotes: dict[str, str | None] = {}
        self._learned_written: set[tuple[str, str]] = set()
        self._learned: dict[str, list[core.LearnedRoot]] = {}
        self._env: dict[str, str] | None = None

    # -- public ---------------------------------------------------------------

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
        for path, home in views:
            hit = core.from_layout(path, self.settings.layout_patterns, shown, home)
            if hit is not None:
                return self._enrich_layout(hit)
        return core.unresolved(shown)

    def record_session(self, session_id: str, identity: ProjectIdentity, *, agent: str | None = None, started_at: Any = None) -> bool:
        """Store a session's identity in the index (needs a database); True when the session is new."""
        from brain_kernel.identity_repo import record_session

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
        from brain_kernel.identity_repo import get_session

        row = get_session(self.db, session_id)  # type: ignore[arg-type]
        if row is None:
            return None
        return core.from_stored(row.project, row.repo, row.root, row.worktree, shown or row.cwd, "session")

    def _from_learned(self, path: str, shown: str | None, home: str | None) -> ProjectIdentity | None:
        from brain_kernel.identity_repo import learned_roots_containing

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

    def _learn(self, identity: ProjectIdentity, toplevel: str) -> None:
        from brain_kernel.identity_repo import record_learned_roots

        assert identity.root is not None
        marker = (identity.root, toplevel)
        if marker in self._learned_written:
            return
        self._learned_written.add(marker)
        self._learned.clear()  # lookups cached before this root was learned may now match it
        record_learned_roots(self.db, identity, core.learned_paths(identity, toplevel))  # type: ignore[arg-type]

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
        facts = self._known_repo(path)
        if facts is None:
            facts = self._rev_parse(path)
            if facts is not None:
                facts = GitFacts(facts.git_dir, facts.common_dir, facts.toplevel, self._remote(path, facts.common_dir))
                self._by_toplevel.setdefault(facts.toplevel, facts)
        self._git[path] = facts
        return facts

    def _known_repo(self, path: str) -> GitFacts | None:
        """Facts of an already-seen repository containing ``path`` with no ``.git`` in between."""
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
            env = {k: v for k, v in environ_snapshot().items() if k not in _GIT_ENV_DROP}
            env.update({"LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"})
            self._env = env
        self.git_calls += 1
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

    def _rev_parse(self, path: str) -> GitFacts | None:
        proc = self._run_git(path, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir", "--show-toplevel")
        if proc is None or proc.returncode != 0:
            return None
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        if len(lines) != 3:
            return None
        git_dir, common_dir, toplevel = (posixpath.normpath(os.path.join(path, p)) for p in lines)
        return GitFacts(git_dir=git_dir, common_dir=common_dir, toplevel=toplevel)

    def _remote(self, path: str, common_dir: str) -> str | None:
        """The origin URL (else the only remote's URL), once per repository."""
        if common_dir in self._remotes:
            return self._remotes[common_dir]
        proc = self._run_git(path, "config", "--get-regexp", r"^remote\..*\.url$")
        urls: dict[str, str] = {}
        if proc is not None and proc.returncode == 0:
            for line in proc.stdout.splitlines():
                name, _, url = line.partition(" ")
                if name.startswith("remote.") and name.endswith(".url") and url.strip():
                    urls.setdefault(name[len("remote.") : -len(".url")], url.strip())
        url = urls.get("origin") or (next(iter(urls.values())) if len(urls) == 1 else None)
        self._remotes[common_dir] = url
        return url
