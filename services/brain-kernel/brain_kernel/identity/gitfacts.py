"""Git facts read in-process by git's own rules: ``.git``, ``commondir`` and the config files (GitPython).

``GitReader.facts(path)`` answers what ``git rev-parse --path-format=absolute
--git-dir --git-common-dir --show-toplevel`` and ``git config --get-regexp
'^remote\\..*\\.url$'`` print in an existing, real (symlink-free) folder, without
starting git. It walks up from the folder as git's discovery does (a ``.git``
file or a valid ``.git`` folder, then the folder itself as a bare repository,
stopping at a file-system boundary); GitPython checks a git directory
(``is_git_dir``), reads a gitfile (``find_worktree_git_dir``) and parses each
config file (``GitConfigParser``, one file at a time, includes followed by us).

Where the answer could differ from git's, the reader asks git itself (the
caller's ``run_git``): a repository or gitfile not owned by this user (git's
``safe.directory`` rules), ``core.bare`` set, a ``core.worktree`` elsewhere than
the folder holding ``.git``, an unknown repository format, a config file that
cannot be parsed or read, or an included config file that names remotes.
An environment that points git at other files (``GIT_CONFIG_COUNT``,
``GIT_CONFIG_PARAMETERS``, ``GIT_CONFIG``, ``GIT_COMMON_DIR``,
``GIT_OBJECT_DIRECTORY``) makes every answer git's (``in_process`` False).

The answers are kept per process for every caller (requests, workers' threads,
jobs): one entry per repository toplevel, bounded (LRU), and used only while
the files it was read from are unchanged (device, inode, mode, owner, and for
files size and mtime): a moved ``.git``, a rewritten config (``git remote
set-url``), a new worktree or a changed ownership reads again. Folders below a
known toplevel cost a walk of ``stat`` calls that stops at the first ``.git``
entry, so a nested repository or a submodule is never given to the outer one
(ADR 0003). Parsed config files are kept the same way, by file.
"""

from __future__ import annotations

import functools
import os
import posixpath
import stat
import subprocess
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from brain_core.identity import GitFacts

# Variables that would point git at another repository than the folder asked about.
GIT_ENV_DROP = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_NAMESPACE",
)


def git_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` for a git process asked about one folder: without what would point it elsewhere (an agent started
    from a git hook, or inside ``vcsh enter``, has ``GIT_DIR`` set), in the C locale, never prompting or locking."""
    env = {k: v for k, v in environ.items() if k not in GIT_ENV_DROP}
    env.update({"LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"})
    return env


MAX_TOPLEVELS = 4096  # repositories (main checkouts, worktrees, submodules) kept per process
MAX_CONFIG_FILES = 1024
_MAX_INCLUDE_DEPTH = 10  # git's own limit
# The environment points git at files we do not read: every answer is git's.
_ENV_NOT_MIRRORED = ("GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")
# Every variable ``GitEnvironment`` looks at.
ENV_NAMES = (
    *_ENV_NOT_MIRRORED,
    "HOME",
    "XDG_CONFIG_HOME",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_GLOBAL",
    "SUDO_UID",
)
_FALSE = ("", "0", "false", "no", "off")
_TRUE = ("1", "true", "yes", "on")

RunGit = Callable[..., "subprocess.CompletedProcess[str] | None"]
Stamp = tuple[int, ...] | None


class _Fallback(Exception):
    """The in-process reading cannot promise git's answer here: ask git."""


@dataclass
class Tally:
    """What answering cost: ``reads`` (in-process discoveries and config reads) and git ``processes``."""

    reads: int = 0
    processes: int = 0

    @property
    def calls(self) -> int:
        """Reads and processes together: what ADR 0002 bounds per distinct folder."""
        return self.reads + self.processes


# -- GitPython, imported once on first use ----------------------------------------------------

_GITPYTHON: Any = None
_GITPYTHON_LOCK = threading.Lock()


def _gitpython() -> Any:
    """GitPython's helpers, or False when it cannot be imported (no git executable: its import fails)."""
    global _GITPYTHON
    if _GITPYTHON is None:
        with _GITPYTHON_LOCK:
            if _GITPYTHON is None:
                try:
                    from git.config import GitConfigParser
                    from git.exc import WorkTreeRepositoryUnsupported
                    from git.repo.fun import find_worktree_git_dir, is_git_dir
                except ImportError:
                    _GITPYTHON = False
                else:
                    _GITPYTHON = (GitConfigParser, is_git_dir, find_worktree_git_dir, WorkTreeRepositoryUnsupported)
    return _GITPYTHON


# -- stamps --------------------------------------------------------------------------------


def _stamp(path: str, *, content: bool = True) -> Stamp:
    """What must not change for an answer read from ``path`` to stand (None: the path does not exist)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if content:
        return (st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_mtime_ns, st.st_size)
    return (st.st_dev, st.st_ino, st.st_mode, st.st_uid)  # a folder: its entries come and go (lock files)


@dataclass(frozen=True)
class _Proof:
    """Paths and their stamps at the time of reading; the answer stands while every stamp does."""

    items: tuple[tuple[str, bool, Stamp], ...]

    def holds(self) -> bool:
        return all(_stamp(path, content=content) == stamp for path, content, stamp in self.items)


class _Proving:
    """Collects the stamps of what a reading looks at, and whether it parsed a config file afresh."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[bool, Stamp]] = {}
        self.parsed = False

    def file(self, path: str) -> Stamp:
        stamp = _stamp(path)
        self.items.setdefault(path, (True, stamp))
        return stamp

    def folder(self, path: str) -> Stamp:
        stamp = _stamp(path, content=False)
        self.items.setdefault(path, (False, stamp))
        return stamp

    def proof(self) -> _Proof:
        return _Proof(tuple((path, content, stamp) for path, (content, stamp) in self.items.items()))


class _Lru:
    """A bounded map shared by the process's threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


_TOPLEVELS = _Lru(MAX_TOPLEVELS)
_CONFIGS = _Lru(MAX_CONFIG_FILES)


def clear_caches() -> None:
    """Forget every answer kept by this process (benchmarks measure a fresh process with it)."""
    _TOPLEVELS.clear()
    _CONFIGS.clear()


# -- config files ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigFile:
    """What one config file says that the facts need: remote URLs in order, a few settings, includes."""

    remotes: tuple[tuple[str, str], ...] = ()
    settings: Mapping[str, str | None] = field(default_factory=dict)  # last value of core.* / extensions.* keys we read
    includes: tuple[str, ...] = ()  # absolute paths of include.path and includeIf.*.path, in order


_WANTED_SETTINGS = ("core.bare", "core.worktree", "core.repositoryformatversion", "extensions.worktreeconfig")


def _section(header: str) -> tuple[str, str | None]:
    """(section lower case, subsection) of a header: ``remote "Origin"`` -> (remote, Origin); ``remote.Up`` -> (remote, up)."""
    text = header.strip()
    name, sep, rest = text.partition(" ")
    if sep and rest.strip().startswith('"') and rest.strip().endswith('"') and len(rest.strip()) >= 2:
        return name.lower(), rest.strip()[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    if "." in text:
        name, _, sub = text.partition(".")
        return name.lower(), sub.lower()  # the deprecated [section.subsection] form is case-insensitive
    return text.lower(), None


def _read_config(path: str, proving: _Proving, home: str | None) -> ConfigFile | None:
    """One config file (None when it does not exist), parsed once per version; _Fallback when git would fail on it."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        proving.file(path)
        return None  # git skips a missing config file (a dangling symlink too)
    except OSError:
        raise _Fallback(f"config {path} cannot be examined") from None
    stamp = proving.file(path)
    cached = _CONFIGS.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    parser_cls = _gitpython()[0]
    try:
        with open(path, "rb"):
            pass  # unreadable: git stops with an error, GitPython would skip the file
        parser = parser_cls(path, read_only=True, merge_includes=False)
        parser.read()
        sections = [(header, parser.items_all(header)) for header in parser.sections()]
    except Exception as exc:  # unreadable or unparseable: git fails on it, so let git say so
        raise _Fallback(f"config {path}: {exc}") from None
    remotes: list[tuple[str, str]] = []
    settings: dict[str, str | None] = {}
    includes: list[str] = []
    base = posixpath.dirname(path)
    for header, items in sections:
        section, sub = _section(header)
        for option, values in items:
            key = option.strip().lower()
            if section == "remote" and sub is not None and key == "url":
                remotes.extend((sub, value.strip()) for value in values if isinstance(value, str) and value.strip())
            elif sub is None and f"{section}.{key}" in _WANTED_SETTINGS and values:
                settings[f"{section}.{key}"] = values[-1]
            elif key == "path" and ((section == "include" and sub is None) or (section == "includeif" and sub is not None)):
                for value in values:
                    if not isinstance(value, str) or not value.strip():
                        continue
                    target = value.strip()
                    if target == "~" or target.startswith("~/"):
                        if not home:
                            continue
                        target = home + target[1:]
                    includes.append(posixpath.normpath(posixpath.join(base, target)))
    parsed = ConfigFile(tuple(remotes), settings, tuple(includes))
    proving.parsed = True
    _CONFIGS.put(path, (stamp, parsed))
    return parsed


def _check_includes(config: ConfigFile, proving: _Proving, home: str | None, depth: int = 0) -> None:
    """Included files matter only when they name remotes (then git decides: its include conditions are its own)."""
    for target in config.includes:
        if depth >= _MAX_INCLUDE_DEPTH:
            raise _Fallback("includes nested too deep")
        included = _read_config(target, proving, home)
        if included is None:
            continue
        if included.remotes:
            raise _Fallback(f"included config {target} names remotes")
        _check_includes(included, proving, home, depth + 1)


def _boolean(value: str | None) -> bool | None:
    """Git's boolean: a valueless key is true; None when the text is not a boolean git accepts here."""
    if value is None:
        return True
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


# -- the reader ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GitEnvironment:
    """Where git would read its configuration from, taken from one environment snapshot."""

    in_process: bool
    system: str | None
    global_files: tuple[str, ...]
    home: str | None
    owner: int

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> GitEnvironment:
        """The environment's git settings (``env`` needs only the variables of ``ENV_NAMES``); kept per distinct value."""
        return _environment(tuple(sorted((k, v) for k, v in env.items() if k in ENV_NAMES)))

    @classmethod
    def _build(cls, env: Mapping[str, str]) -> GitEnvironment:
        in_process = not any(name in env for name in _ENV_NOT_MIRRORED) and bool(_gitpython())
        home = env.get("HOME") or None
        nosystem = env.get("GIT_CONFIG_NOSYSTEM")
        if nosystem is not None and nosystem.strip().lower() not in _FALSE + _TRUE:
            in_process = False
        system = None if nosystem is not None and nosystem.strip().lower() in _TRUE else (env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")
        if "GIT_CONFIG_GLOBAL" in env:
            global_files: tuple[str, ...] = (env["GIT_CONFIG_GLOBAL"],) if env["GIT_CONFIG_GLOBAL"] else ()
        else:
            files = []
            xdg = env.get("XDG_CONFIG_HOME")
            if xdg:
                files.append(posixpath.join(xdg, "git", "config"))
            elif home:
                files.append(posixpath.join(home, ".config", "git", "config"))
            if home:
                files.append(posixpath.join(home, ".gitconfig"))
            global_files = tuple(files)
        owner = os.geteuid()
        sudo_uid = env.get("SUDO_UID")
        if owner == 0 and sudo_uid and sudo_uid.isdigit():
            owner = int(sudo_uid)  # git (2.36+) trusts the sudo caller's repositories under sudo
        return cls(in_process, system, global_files, home, owner)


@functools.lru_cache(maxsize=16)
def _environment(items: tuple[tuple[str, str], ...]) -> GitEnvironment:
    return GitEnvironment._build(dict(items))


@dataclass(frozen=True)
class _Entry:
    facts: GitFacts
    proof: _Proof


class GitReader:
    """Git facts of folders: in-process by git's rules where that is git's answer, else through ``run_git``."""

    def __init__(self, env: GitEnvironment, run_git: RunGit, tally: Tally) -> None:
        self.env = env
        self.run_git = run_git
        self.tally = tally

    # -- the walk ------------------------------------------------------------------------------

    def facts(self, path: str) -> GitFacts | None:
        """Git's facts of the existing real folder ``path``; None when it is not in a work tree."""
        try:
            device = os.stat(path).st_dev
        except OSError:
            return None
        current = path
        while True:
            dotgit = posixpath.join(current, ".git")
            try:
                st = os.stat(dotgit)
            except (FileNotFoundError, NotADirectoryError):
                st = None
            except OSError:
                return self._from_git(path, None)
            if st is not None:
                if stat.S_ISDIR(st.st_mode):
                    if os.path.lexists(posixpath.join(dotgit, "HEAD")):
                        found = self._at_toplevel(path, current, dotgit, gitfile=False)
                        if found is not _NOT_HERE:
                            return found
                elif stat.S_ISREG(st.st_mode):
                    return self._at_toplevel(path, current, dotgit, gitfile=True)
                else:
                    return self._from_git(path, None)  # neither file nor folder: leave it to git
            if os.path.lexists(posixpath.join(current, "HEAD")):
                try:
                    bare = self._is_git_dir(current)
                except _Fallback:
                    return self._from_git(path, None)
                if bare:
                    self.tally.reads += 1
                    return None  # a bare repository or a git directory itself: no work tree
            parent = posixpath.dirname(current)
            if parent == current:
                break
            try:
                if os.stat(parent).st_dev != device:
                    break  # git does not cross a file-system boundary (GIT_DISCOVERY_ACROSS_FILESYSTEM unset)
            except OSError:
                return self._from_git(path, None)
            current = parent
        self.tally.reads += 1
        return None

    def _is_git_dir(self, path: str) -> bool:
        is_git_dir, unsupported = _gitpython()[1], _gitpython()[3]
        try:
            return bool(is_git_dir(path))
        except unsupported:
            raise _Fallback(f"{path} looks like a worktree's git directory") from None

    def _at_toplevel(self, path: str, toplevel: str, dotgit: str, *, gitfile: bool) -> Any:
        """The facts of the repository whose ``.git`` is ``dotgit`` (kept per process while its files are unchanged)."""
        entry = _TOPLEVELS.get(toplevel)
        if entry is not None and entry.proof.holds():
            return entry.facts
        try:
            return self._read_toplevel(toplevel, dotgit, gitfile=gitfile)
        except _Fallback:
            return self._from_git(path, toplevel)

    def _read_toplevel(self, toplevel: str, dotgit: str, *, gitfile: bool) -> Any:
        proving = _Proving()
        proving.folder(toplevel)
        if gitfile:
            proving.file(dotgit)
            target = _gitpython()[2](dotgit)
            if target is None:
                self.tally.reads += 1
                return None  # not a gitfile git can read: git stops with an error
            gitdir = posixpath.normpath(posixpath.join(toplevel, target))
            proving.folder(gitdir)
            proving.file(posixpath.join(gitdir, "HEAD"))
            if not self._is_git_dir(gitdir):
                self.tally.reads += 1
                return None  # the gitfile names no repository: git stops with an error
            self._check_owner(dotgit, toplevel, os.path.realpath(gitdir))
        else:
            proving.folder(dotgit)
            proving.file(posixpath.join(dotgit, "HEAD"))
            if not self._is_git_dir(dotgit):
                return _NOT_HERE  # not a repository: git goes on to the parent
            gitdir = dotgit
            self._check_owner(None, toplevel, dotgit)
        git_dir = os.path.realpath(gitdir)
        common_dir = self._common_dir(git_dir, proving)
        proving.folder(posixpath.join(common_dir, "objects"))
        proving.folder(posixpath.join(common_dir, "refs"))
        home = self.env.home
        local = _read_config(posixpath.join(common_dir, "config"), proving, home)
        worktree_config = None
        if local is not None and _boolean(local.settings.get("extensions.worktreeconfig")) is True:
            worktree_config = _read_config(posixpath.join(git_dir, "config.worktree"), proving, home)
        system = _read_config(self.env.system, proving, home) if self.env.system else None
        globals_ = [_read_config(path, proving, home) for path in self.env.global_files]
        configs = [c for c in (system, *globals_, local, worktree_config) if c is not None]  # git's order
        for config in configs:
            _check_includes(config, proving, home)
        self._check_settings(local, worktree_config, git_dir, common_dir, toplevel)
        facts = GitFacts(git_dir=git_dir, common_dir=common_dir, toplevel=toplevel, remote_url=_pick_remote(configs))
        self.tally.reads += 2 if proving.parsed else 1  # the discovery, and the config when it was read afresh
        _TOPLEVELS.put(toplevel, _Entry(facts, proving.proof()))
        return facts

    def _common_dir(self, git_dir: str, proving: _Proving) -> str:
        path = posixpath.join(git_dir, "commondir")
        if proving.file(path) is None:
            return git_dir
        try:
            with open(path, "rb") as fp:
                text = os.fsdecode(fp.read()).rstrip("\r\n")
        except (OSError, UnicodeError):
            raise _Fallback(f"{path} cannot be read") from None
        if not text:
            raise _Fallback(f"{path} is empty")
        return os.path.realpath(posixpath.join(git_dir, text))

    def _check_owner(self, gitfile: str | None, toplevel: str, gitdir: str) -> None:
        """git refuses repositories of other users unless ``safe.directory`` allows them: let git judge those."""
        for path in (gitfile, toplevel, gitdir):
            if path is None:
                continue
            try:
                owner = os.lstat(path).st_uid
            except OSError:
                raise _Fallback(f"{path} cannot be examined") from None
            if owner != self.env.owner:
                raise _Fallback(f"{path} belongs to another user")

    def _check_settings(self, local: ConfigFile | None, worktree: ConfigFile | None, git_dir: str, common_dir: str, toplevel: str) -> None:
        """Settings that change git's answer in ways not mirrored here send the question to git.

        As git's repository format check: the format version is the shared
        config's; ``core.bare`` and ``core.worktree`` there apply only to the
        main git directory (a linked worktree's, which has a ``commondir``,
        ignores them); a worktree's own config setting either is left to git.
        """
        shared = local.settings if local is not None else {}
        version = shared.get("core.repositoryformatversion")
        if version is not None and version.strip() not in ("0", "1"):
            raise _Fallback(f"repository format version {version!r}")
        own = worktree.settings if worktree is not None else {}
        if "core.bare" in own or "core.worktree" in own:
            raise _Fallback("core.bare or core.worktree in a worktree's config")
        if git_dir != common_dir:
            return
        if "core.bare" in shared and _boolean(shared["core.bare"]) is not False:
            raise _Fallback("core.bare is set")
        setting = shared.get("core.worktree")
        if setting is not None and os.path.realpath(posixpath.join(git_dir, setting.strip())) != toplevel:
            raise _Fallback("core.worktree names another folder")  # a submodule's names its own checkout

    # -- git itself ------------------------------------------------------------------------------

    def _from_git(self, path: str, toplevel: str | None) -> GitFacts | None:
        """What git says in ``path`` (two processes), kept like a reading when it is the repository at ``toplevel``."""
        proving = _Proving()
        if toplevel is not None:
            proving.folder(toplevel)
        facts = rev_parse(self.run_git, path, self.tally)
        if facts is None:
            return None
        facts = GitFacts(facts.git_dir, facts.common_dir, facts.toplevel, remote_by_git(self.run_git, path, self.tally))
        if toplevel is not None and facts.toplevel == toplevel:
            dotgit = posixpath.join(toplevel, ".git")
            proving.file(dotgit)
            for folder in (facts.git_dir, facts.common_dir):
                proving.folder(folder)
            for name in ("HEAD", "config", "config.worktree", "commondir"):
                proving.file(posixpath.join(facts.git_dir, name))
                proving.file(posixpath.join(facts.common_dir, name))
            for config in (self.env.system, *self.env.global_files):
                if config:
                    proving.file(config)
            _TOPLEVELS.put(toplevel, _Entry(facts, proving.proof()))
        return facts


_NOT_HERE = object()  # a ``.git`` folder that is not a repository: git keeps walking up


def _pick_remote(configs: Iterable[ConfigFile]) -> str | None:
    """origin's URL, else the only remote's; the first URL of each remote in git's file order."""
    urls: dict[str, str] = {}
    for config in configs:
        for name, url in config.remotes:
            urls.setdefault(name, url)
    return urls.get("origin") or (next(iter(urls.values())) if len(urls) == 1 else None)


# -- the two git processes, where git must answer ------------------------------------------------------


def rev_parse(run_git: RunGit, path: str, tally: Tally) -> GitFacts | None:
    """``git rev-parse`` for the dirs and toplevel of ``path``."""
    tally.processes += 1
    proc = run_git(path, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir", "--show-toplevel")
    if proc is None or proc.returncode != 0:
        return None
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if len(lines) != 3:
        return None
    git_dir, common_dir, toplevel = (posixpath.normpath(os.path.join(path, p)) for p in lines)
    return GitFacts(git_dir=git_dir, common_dir=common_dir, toplevel=toplevel)


def remote_by_git(run_git: RunGit, path: str, tally: Tally) -> str | None:
    """The origin URL (else the only remote's URL) as ``git config`` lists them."""
    tally.processes += 1
    proc = run_git(path, "config", "--get-regexp", r"^remote\..*\.url$")
    urls: dict[str, str] = {}
    if proc is not None and proc.returncode == 0:
        for line in proc.stdout.splitlines():
            name, _, url = line.partition(" ")
            if name.startswith("remote.") and name.endswith(".url") and url.strip():
                urls.setdefault(name[len("remote.") : -len(".url")], url.strip())
    return urls.get("origin") or (next(iter(urls.values())) if len(urls) == 1 else None)
