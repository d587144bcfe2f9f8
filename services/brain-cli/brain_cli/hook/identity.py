"""A session's identity resolved where the session runs, by the kernel's own git rules (ADR 0042).

The kernel may run on another machine (a fleet sharing one kernel) where the
session's folder does not exist, so the hook asks git here: ``git rev-parse``
for the dirs and toplevel, ``git config`` for the remote (the two calls the
kernel's resolver makes when git must answer, ``brain_kernel.identity.gitfacts``),
then the pure rule ``brain_core.identity.from_git``: a linked worktree is its
repository's, a remote is ``owner/name``. A folder git places in no work tree
(or the home folder) has no local identity: the kernel resolves its ``cwd``
by its other evidence (catalog, learned roots, layout) when it can see it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path

from brain_cli.hook.kernel import process_environ
from brain_core.identity import from_git
from brain_kernel.identity.gitfacts import Tally, git_env, remote_by_git, rev_parse

GIT_SECONDS = 0.5  # each git call; a hook's whole budget is 2 s


def _run_git(path: str, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", "--no-optional-locks", "-C", path, *args],
            capture_output=True,
            text=True,
            timeout=GIT_SECONDS,
            stdin=subprocess.DEVNULL,
            env=git_env(process_environ()),
        )
    except (OSError, subprocess.SubprocessError):
        return None


def local_identity(cwd: str) -> dict[str, str]:
    """``project``, ``repo`` and ``worktree`` of ``cwd`` by git (only the known ones); empty when git knows none."""
    if not cwd or not Path(cwd).is_dir():
        return {}
    tally = Tally()
    facts = rev_parse(_run_git, cwd, tally)
    if facts is None:
        return {}
    facts = dataclasses.replace(facts, remote_url=remote_by_git(_run_git, cwd, tally))
    found = from_git(facts, cwd, os.path.realpath(Path.home()))  # git answers real paths: a linked home is compared as one
    if found is None or not found.project:
        return {}
    known = {"project": found.project, "repo": found.repo, "worktree": found.worktree}
    return {k: v for k, v in known.items() if v}


# -- provenance: what a marker's content names in the repository, at the commit it was written at -------------

_STRIP = "`'\"()[]{}<>,;:!?*"
# How a path is cited with a place in it: ``src/auth.py:12``, ``src/auth.py:12:5``, ``src/auth.py#L12-L20``.
_PLACE = re.compile(r"(?::\d+(?::\d+)?|#L\d+(?:-L?\d+)?)$")
MAX_PATHS = 20  # per marker: a content listing more files is a listing, not a claim about each


def _bare(word: str) -> str:
    """``word`` without the quotes, brackets and punctuation around it, however they nest (``(`src/a.py:1`).``)."""
    before = None
    while before != word:
        before, word = word, word.strip(_STRIP).rstrip(".")
    return word


def _candidates(text: str, toplevel: str) -> list[str]:
    """Words of ``text`` that look like repository paths (a slash, or a name with a lettered extension), repo-relative."""
    found: list[str] = []
    for word in text.split():
        word = word.rsplit("](", 1)[-1]  # a markdown link's target: ``[the readme](README.md)``
        word = _bare(_PLACE.sub("", _bare(word)))
        if not word or "://" in word or "@" in word or len(word) > 200:
            continue
        if word.startswith(toplevel.rstrip("/") + "/"):
            word = word[len(toplevel.rstrip("/")) + 1 :]
        word = word.removeprefix("./").rstrip("/")
        name = word.rsplit("/", 1)[-1]
        stem, dot, ext = name.rpartition(".")
        if word.startswith(("/", "../")) or not ("/" in word or (dot and stem and ext[:1].isalpha())):
            continue
        if word not in found:
            found.append(word)
    return found[:MAX_PATHS]


def provenance(cwd: str, texts: list[str]) -> tuple[str | None, list[list[str]]]:
    """HEAD's commit in ``cwd`` and, per text, the repository paths it names that exist at that commit.

    Two git processes whatever the number of texts: ``rev-parse`` and one ``ls-tree`` over every candidate.
    (None, empty lists) outside a work tree or before the first commit.
    """
    nothing: list[list[str]] = [[] for _ in texts]
    if not cwd or not Path(cwd).is_dir():
        return None, nothing
    head = _run_git(cwd, "rev-parse", "--show-toplevel", "HEAD")
    lines = head.stdout.splitlines() if head is not None and head.returncode == 0 else []  # a toplevel may hold spaces
    if len(lines) != 2:
        return None, nothing
    toplevel, commit = lines
    wanted = [_candidates(text, toplevel) for text in texts]
    every = sorted({path for paths in wanted for path in paths})
    if not every:
        return commit, nothing
    listed = _run_git(toplevel, "ls-tree", "--name-only", "-z", commit, "--", *every)
    exists = set(filter(None, listed.stdout.split("\0"))) if listed is not None and listed.returncode == 0 else set()
    # A path with uncommitted changes is work in progress: HEAD is not what the marker speaks of, and the commit that
    # later holds that work would flag it stale. Such paths are not claimed.
    status = _run_git(toplevel, "status", "--porcelain", "-z", "--untracked-files=no", "--", *sorted(exists)) if exists else None
    dirty = {item[3:] for item in status.stdout.split("\0") if len(item) > 3} if status is not None and status.returncode == 0 else set()
    return commit, [[path for path in paths if path in exists and path not in dirty] for paths in wanted]


_HEX = re.compile(r"[0-9a-f]{4,64}")
MAX_COMMITS_CHECKED = 10  # distinct entry commits asked about per session start: one git process each


def stale_hints(cwd: str, entries: list[tuple[str, str, list[str]]]) -> dict[str, dict[str, object]]:
    """Which entries name paths changed since their commit, as the checkout in ``cwd`` sees it.

    ``entries``: (entry id, commit, paths), newest first. One ``git log`` per
    distinct commit (the first ``MAX_COMMITS_CHECKED``): the commits on either
    side since it and HEAD parted (on the same line, those after it) and the
    files they touched (renames as a delete and an add, so a moved file counts
    as changed). A commit this checkout does not have (another
    clone's, not fetched) tells nothing, so its entries are not flagged.
    """
    hints: dict[str, dict[str, object]] = {}
    if not cwd or not Path(cwd).is_dir():
        return hints
    since_commit: dict[str, tuple[int, set[str]] | None] = {}
    for entry, commit, paths in entries:
        if not _HEX.fullmatch(commit):
            continue  # never handed to git as an argument
        if commit not in since_commit:
            if len(since_commit) >= MAX_COMMITS_CHECKED:
                continue
            # commit...HEAD: the commits on either side since they parted, so a checkout on another branch, or behind
            # the entry's commit, sees the entry's file differ too (commit..HEAD saw only the commits ahead of it)
            log = _run_git(cwd, "log", "--no-renames", "--format=%x01%H", "--name-only", f"{commit}...HEAD", "--")
            if log is None or log.returncode != 0:
                since_commit[commit] = None
            else:
                names = {line for line in log.stdout.splitlines() if line and not line.startswith("\x01")}
                since_commit[commit] = (log.stdout.count("\x01"), names)
        known = since_commit[commit]
        if known is None:
            continue
        count, names = known
        changed = [path for path in paths if path in names or any(name.startswith(path.rstrip("/") + "/") for name in names)]
        if changed:
            hints[entry] = {"paths": changed, "since": commit, "commits": count}
    return hints
