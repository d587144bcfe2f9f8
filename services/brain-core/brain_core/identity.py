"""Project identity: which repository a session belongs to (pure, DESIGN section 3).

The adapter in ``brain_kernel.identity.resolver`` gathers evidence (client attrs, the
session index, transcript metadata, git facts, the operator catalog, learned
roots, layout patterns) and hands it to the decision functions here, which
turn plain values into a ``ProjectIdentity``. Nothing in this module touches
the disk: paths are compared as strings (``posixpath``), so the same rules hold
in a pod where the repositories are not mounted.

Rules that matter everywhere:

* Canonical key: the last segment of the ``owner/name`` slug when a remote is
  known, otherwise the basename of the main checkout root; always lower case.
* Never a cwd basename: a folder with no evidence is unresolved (project
  None). A missing project can be backfilled; a wrong one leaks memory into
  another project's feed.
* The home folder and its ancestors are never a project root, so a dotfiles
  repository in ``~`` cannot swallow every plain folder below it.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, TypeVar

from brain_core.keys import InvalidKey, key_of_slug, normalise_key, normalise_slug, parse_project_ref

UNRESOLVED = "unresolved"
ORDER = ("attrs", "session", "transcript", "git", "catalog", "learned", "layout")
SOURCES = (*ORDER, UNRESOLVED)


@dataclass(frozen=True)
class ProjectIdentity:
    """The resolved project of a working folder or session; ``project`` None = unresolved."""

    project: str | None
    repo: str | None
    root: str | None
    worktree: str | None
    cwd: str | None
    source: str

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"unknown identity source {self.source!r}")
        if self.project is None and self.source != UNRESOLVED:
            raise ValueError("an identity without a project must have source 'unresolved'")

    @property
    def resolved(self) -> bool:
        """True when a project is known."""
        return self.project is not None

    def to_dict(self) -> dict[str, str | None]:
        """The JSON shape of ``brain whereis`` and ``POST /sessions``."""
        data = asdict(self)
        return {k: data[k] for k in ("cwd", "project", "repo", "root", "worktree", "source")}


def unresolved(cwd: str | None) -> ProjectIdentity:
    """The identity of a folder nothing is known about."""
    return ProjectIdentity(None, None, None, None, cwd, UNRESOLVED)


# -- remotes ------------------------------------------------------------------

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://(.*)$", re.S)
_SCP = re.compile(r"^(?:[^@/\s]+@)?([A-Za-z0-9.\-\[\]]+):(?!//)(.+)$", re.S)
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def normalise_remote(url: str | None) -> str | None:
    """The lower-case ``owner/name`` slug of a git remote URL, or None.

    Accepts scp-like (``git@host:o/n.git``), ``https://host/o/n(.git)``,
    ``ssh://git@host:port/o/n.git``, ``git://``, ``git+ssh://``, credentials,
    query strings, trailing slashes, upper-case hosts and nested groups
    (``group/sub/name``). Azure DevOps ``/_git/`` and ``v3/`` segments are
    dropped. Local paths and ``file://`` URLs return None: a folder on some
    disk names no hosted repository, so the key falls back to the main root.
    """
    if not isinstance(url, str):
        return None
    text = url.strip()
    if not text or _WINDOWS_DRIVE.match(text) or text.startswith(("/", ".", "~", "\\")):
        return None
    path: str
    host = ""
    match = _SCHEME.match(text)
    if match:
        scheme, rest = match.group(1).lower(), match.group(2)
        if scheme == "file":
            return None
        authority, _, path = rest.partition("/")
        host = authority.rsplit("@", 1)[-1].lower()
    else:
        scp = _SCP.match(text)
        if not scp:
            return None
        host, path = scp.group(1).lower(), scp.group(2)
    path = re.split(r"[?#]", path, maxsplit=1)[0]
    segments = [s for s in path.replace("\\", "/").split("/") if s]
    if segments and segments[-1].lower() == ".git":
        segments.pop()
    if segments and segments[-1].lower().endswith(".git"):
        segments[-1] = segments[-1][:-4]
    if segments and segments[0].startswith("~"):
        segments[0] = segments[0][1:]
    if "dev.azure.com" in host or host.endswith("visualstudio.com"):
        segments = [s for s in segments if s != "_git"]
        if segments and segments[0] == "v3" and host.startswith("ssh."):
            segments = segments[1:]
    segments = [s for s in segments if s]
    if len(segments) < 2:
        return None
    try:
        return normalise_slug("/".join(segments))
    except InvalidKey:
        return None


# -- canonical key --------------------------------------------------------------

_KEY_UNSAFE = re.compile(r"[^a-z0-9._\-]+")


def key_of_root(root: str | None) -> str | None:
    """The canonical key of a main checkout root with no remote: its basename, made safe."""
    if not root:
        return None
    path = posixpath.normpath(root)
    base = posixpath.basename(path)
    if base.lower() in (".bare", ".git"):
        # the bare repository of a worktrees layout (``api/.bare`` beside ``api/main``, ``api/feat``): its folder names it
        base = posixpath.basename(posixpath.dirname(path))
    elif base.lower().endswith(".git") and len(base) > 4:
        base = base[:-4]  # a bare repository folder (``api.git``) names the project ``api``
    key = _KEY_UNSAFE.sub("-", base.lower()).strip("-._")
    if not key:
        return None
    try:
        return normalise_key(key[:100])
    except InvalidKey:
        return None


def canonical_key(repo: str | None, root: str | None) -> str | None:
    """The project key: the slug's last segment when a repo is known, else the root's basename."""
    if repo:
        return key_of_slug(repo)
    return key_of_root(root)


# -- paths (strings only) ---------------------------------------------------------


def norm_path(path: str | None) -> str | None:
    """A normalised absolute POSIX path, or None for empty and relative paths."""
    if not path or not isinstance(path, str) or "\x00" in path:
        return None
    text = path.strip()
    if not text.startswith("/"):
        return None
    return posixpath.normpath(text).replace("//", "/")


def is_within(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or below it (string comparison of normalised paths)."""
    if path == root:
        return True
    prefix = root if root.endswith("/") else root + "/"
    return path.startswith(prefix)


def is_home_or_above(path: str, user_home: str | None) -> bool:
    """True for the home folder itself and every ancestor of it (``/``, ``/home``)."""
    if not user_home:
        return path == "/"
    return is_within(user_home, path)


T = TypeVar("T")


def deepest_match(path: str, roots: Iterable[tuple[str, T]]) -> tuple[str, T] | None:
    """The (root, payload) with the deepest root containing ``path``, or None."""
    best: tuple[str, T] | None = None
    for root, payload in roots:
        if is_within(path, root) and (best is None or len(root) > len(best[0])):
            best = (root, payload)
    return best


# -- attrs, session, transcript -----------------------------------------------------

# One folder name as git names a linked worktree (its folder's name, made a valid ref component: ``wt-fix-ünï``,
# ``-hidden-wt``): no separator, no control character, not ``.`` or ``..``. It is a label, never a path.
_WORKTREE = re.compile(r"^(?!\.{1,2}$)[^/\\\x00-\x1f\x7f]{1,200}$")


def normalise_worktree(value: Any) -> str | None:
    """A linked worktree name (one path segment) or None; raise InvalidKey when unsafe."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or not _WORKTREE.match(value.strip()):
        raise InvalidKey(f"invalid worktree {value!r}: expected one folder name")
    return value.strip()


def read_repo(value: str) -> str | None:
    """An ``owner/name`` slug from what a client or the catalog wrote: a slug or a remote URL."""
    looks_like_url = "://" in value or "@" in value or ":" in value
    return normalise_remote(value) if looks_like_url else normalise_slug(value)


def from_attrs(attrs: Mapping[str, Any] | None, cwd: str | None) -> ProjectIdentity | None:
    """Identity a client sent explicitly (``project`` and/or ``repo``); None when it sent neither.

    ``repo`` may be a slug or a remote URL. ``project`` may be a short key or a
    slug. When both are given they must agree on the canonical key, otherwise
    InvalidKey: an explicit contradiction is refused rather than guessed.
    """
    if not attrs:
        return None
    raw_project, raw_repo = attrs.get("project"), attrs.get("repo")
    raw_project = raw_project if not (isinstance(raw_project, str) and not raw_project.strip()) else None
    raw_repo = raw_repo if not (isinstance(raw_repo, str) and not raw_repo.strip()) else None
    if raw_project is None and raw_repo is None:
        return None
    repo: str | None = None
    if raw_repo is not None:
        if not isinstance(raw_repo, str):
            raise InvalidKey("repo must be a string")
        repo = read_repo(raw_repo)
        if repo is None:
            raise InvalidKey(f"invalid repo {raw_repo!r}: expected owner/name or a remote URL")
    key: str | None = None
    if raw_project is not None:
        key, slug = parse_project_ref(raw_project)
        if slug is not None:
            if repo is not None and repo != slug:
                raise InvalidKey(f"project {raw_project!r} and repo {repo!r} disagree")
            repo = slug
    if repo is not None:
        canonical = key_of_slug(repo)
        if key is not None and key != canonical:
            raise InvalidKey(f"project {key!r} does not match repo {repo!r} (its key is {canonical!r})")
        key = canonical
    worktree = normalise_worktree(attrs.get("worktree"))
    root = norm_path(attrs.get("root")) if isinstance(attrs.get("root"), str) else None
    return ProjectIdentity(key, repo, root, worktree, cwd, "attrs")


def from_stored(
    project: str | None,
    repo: str | None,
    root: str | None,
    worktree: str | None,
    cwd: str | None,
    source: str,
) -> ProjectIdentity | None:
    """Identity from a stored row (session index); None when the row holds no project."""
    if not project:
        return None
    return ProjectIdentity(project, repo, root, worktree, cwd, source)


def from_transcript(repo_url: str | None, cwd: str | None) -> ProjectIdentity | None:
    """Identity from a transcript's recorded repository URL (Codex ``session_meta.git``)."""
    slug = normalise_remote(repo_url)
    if slug is None:
        return None
    return ProjectIdentity(key_of_slug(slug), slug, None, None, cwd, "transcript")


# -- git ------------------------------------------------------------------------


@dataclass(frozen=True)
class GitFacts:
    """What git says about a folder: absolute git dir, common dir, toplevel, origin URL."""

    git_dir: str
    common_dir: str
    toplevel: str
    remote_url: str | None = None

    @property
    def main_root(self) -> str:
        """The main checkout root: the folder holding the common ``.git`` directory.

        A submodule's common dir lives under the superproject's ``.git/modules``,
        so its root is its own toplevel (innermost repo wins, ADR 0003). A linked
        worktree of a bare repository has no main checkout: the bare folder is the root.
        """
        common = posixpath.normpath(self.common_dir)
        if posixpath.basename(common) == ".git":
            return posixpath.dirname(common)
        if not self.is_linked_worktree:
            return posixpath.normpath(self.toplevel)
        return common

    @property
    def is_linked_worktree(self) -> bool:
        """True when the folder is a linked worktree (its git dir differs from the common dir)."""
        return posixpath.normpath(self.git_dir) != posixpath.normpath(self.common_dir)

    @property
    def worktree_name(self) -> str | None:
        """Git's name of the linked worktree (``.git/worktrees/<name>``), None for the main checkout."""
        if not self.is_linked_worktree:
            return None
        return posixpath.basename(posixpath.normpath(self.git_dir))


def from_git(facts: GitFacts | None, cwd: str | None, user_home: str | None = None) -> ProjectIdentity | None:
    """Identity from git facts; None without facts or when the repo is the home folder (or above)."""
    if facts is None:
        return None
    root = facts.main_root
    if is_home_or_above(root, user_home) or is_home_or_above(posixpath.normpath(facts.toplevel), user_home):
        return None
    repo = normalise_remote(facts.remote_url)
    key = canonical_key(repo, root)
    if key is None:
        return None
    return ProjectIdentity(key, repo, root, facts.worktree_name, cwd, "git")


def learned_paths(identity: ProjectIdentity, toplevel: str) -> list[tuple[str, str | None]]:
    """The (path, worktree) pairs a git resolution teaches: the main root and the worktree path."""
    assert identity.root is not None
    pairs: list[tuple[str, str | None]] = [(identity.root, None)]
    top = posixpath.normpath(toplevel)
    if top != identity.root:
        pairs.append((top, identity.worktree))
    return pairs


# -- catalog --------------------------------------------------------------------


@dataclass(frozen=True)
class CatalogProject:
    """One operator-declared project: key, optional repo slug, roots and aliases."""

    key: str
    repo: str | None
    roots: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()


class CatalogError(ValueError):
    """A catalog file whose content cannot be used."""


def _expand(path: str, user_home: str | None) -> str | None:
    if path == "~" or path.startswith("~/"):
        if not user_home:
            return None
        path = user_home + path[1:]
    return norm_path(path)


def parse_catalog(data: Any, user_home: str | None = None) -> tuple[CatalogProject, ...]:
    """Validate a loaded catalog document into projects; raise CatalogError with the reason.

    Shape: ``{projects: [{key?, repo?, roots: [...], aliases: [...]}]}`` or
    ``{projects: {key: {repo?, roots, aliases}}}``; ``~`` in roots is the user
    home. Each project needs a key or a repo; with a repo the key is the slug's
    last segment unless given.
    """
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        raise CatalogError("the catalog must be a mapping with a 'projects' key")
    items = data.get("projects") or []
    if isinstance(items, Mapping):
        items = [{"key": k, **(v or {})} for k, v in items.items()]
    if not isinstance(items, list):
        raise CatalogError("'projects' must be a list or a mapping")
    out: list[CatalogProject] = []
    for n, item in enumerate(items, 1):
        if not isinstance(item, Mapping):
            raise CatalogError(f"project #{n} must be a mapping")
        try:
            repo = None
            if item.get("repo"):
                repo = read_repo(str(item["repo"]))
                if repo is None:
                    raise InvalidKey(f"invalid repo {item['repo']!r}")
            key = normalise_key(str(item["key"])) if item.get("key") else (key_of_slug(repo) if repo else None)
            if key is None:
                raise InvalidKey("a project needs a key or a repo")
            roots_raw = item.get("roots") or ([item["root"]] if item.get("root") else [])
            if isinstance(roots_raw, str):
                roots_raw = [roots_raw]
            roots = []
            for raw in roots_raw:
                root = _expand(str(raw), user_home)
                if root is None:
                    raise InvalidKey(f"root {raw!r} is not an absolute path")
                roots.append(root)
            aliases_raw = item.get("aliases") or []
            if isinstance(aliases_raw, str):
                aliases_raw = [aliases_raw]
            aliases = tuple(normalise_key(str(a)) for a in aliases_raw)
        except InvalidKey as exc:
            raise CatalogError(f"project #{n}: {exc}") from None
        out.append(CatalogProject(key, repo, tuple(roots), aliases))
    return tuple(out)


def from_catalog(path: str | None, catalog: Iterable[CatalogProject], cwd: str | None, user_home: str | None = None) -> ProjectIdentity | None:
    """Identity from the catalog: the project with the deepest root containing ``path``."""
    if not path:
        return None
    pairs = [(root, p) for p in catalog for root in p.roots if not is_home_or_above(root, user_home)]
    hit = deepest_match(path, pairs)
    if hit is None:
        return None
    root, project = hit
    return ProjectIdentity(project.key, project.repo, root, None, cwd, "catalog")


def catalog_pins(catalog: Iterable[CatalogProject]) -> dict[str, str]:
    """The keys the catalog pins: key -> repo of each entry with a repo (``brain_core.membership`` pins).

    A key two entries declare with different repos pins nothing (the
    operator's file contradicts itself; the key stays as unpinned). Aliases
    are not pinned: a pin is the entry's own key.
    """
    repos: dict[str, set[str]] = {}
    for p in catalog:
        if p.repo:
            repos.setdefault(p.key, set()).add(p.repo)
    return {key: next(iter(found)) for key, found in sorted(repos.items()) if len(found) == 1}


def catalog_project_for_key(key: str, catalog: Iterable[CatalogProject]) -> CatalogProject | None:
    """The one catalog project whose key or alias is ``key``; None when none or several."""
    found = [p for p in catalog if p.key == key or key in p.aliases]
    return found[0] if len(found) == 1 else None


# -- learned roots ------------------------------------------------------------------


@dataclass(frozen=True)
class LearnedRoot:
    """A folder learned from an earlier git resolution and the identity it had."""

    path: str
    project: str
    repo: str | None
    root: str
    worktree: str | None = None


def from_learned(path: str | None, learned: Iterable[LearnedRoot], cwd: str | None, user_home: str | None = None) -> ProjectIdentity | None:
    """Identity from learned roots: the deepest learned folder containing ``path``."""
    if not path:
        return None
    pairs = [(lr.path, lr) for lr in learned if not is_home_or_above(lr.path, user_home)]
    hit = deepest_match(path, pairs)
    if hit is None:
        return None
    lr = hit[1]
    return ProjectIdentity(lr.project, lr.repo, lr.root, lr.worktree, cwd, "learned")


# -- layout patterns ------------------------------------------------------------------


@lru_cache(maxsize=256)
def compile_layout(pattern: str, user_home: str | None) -> re.Pattern[str] | None:
    """A regex for a layout pattern: ``{project}`` and ``*`` match one folder name, ``~`` is home.

    The pattern must match a prefix of the path made of whole folders, so
    ``~/scratchpad/{project}/*`` matches ``~/scratchpad/api/task`` and
    ``~/scratchpad/api/task/sub`` but not ``~/scratchpad/api`` itself.
    """
    expanded = _expand(pattern.strip(), user_home) if pattern.strip() else None
    if expanded is None or expanded.count("{project}") != 1:
        return None
    parts = []
    for segment in expanded.strip("/").split("/"):
        if segment == "{project}":
            parts.append(r"(?P<project>[^/]+)")
        elif segment == "*":
            parts.append(r"[^/]+")
        else:
            pieces = re.split(r"(\{project\}|\*)", segment)
            parts.append("".join(r"(?P<project>[^/]+)" if p == "{project}" else r"[^/]*" if p == "*" else re.escape(p) for p in pieces))
    return re.compile("^/" + "/".join(parts) + r"(?:/.*)?$")


def from_layout(path: str | None, patterns: Iterable[str], cwd: str | None, user_home: str | None = None) -> ProjectIdentity | None:
    """Identity from the first layout pattern matching ``path`` (key = the ``{project}`` folder)."""
    if not path:
        return None
    for pattern in patterns:
        regex = compile_layout(pattern, user_home)
        if regex is None:
            continue
        match = regex.match(path)
        if not match:
            continue
        try:
            key = normalise_key(match.group("project"))
        except InvalidKey:
            continue
        return ProjectIdentity(key, None, None, None, cwd, "layout")
    return None
