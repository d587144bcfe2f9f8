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
import subprocess
from pathlib import Path

from brain_core.identity import from_git
from brain_kernel.identity.gitfacts import Tally, remote_by_git, rev_parse

GIT_SECONDS = 0.5  # each git call; a hook's whole budget is 2 s


def _run_git(path: str, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", "--no-optional-locks", "-C", path, *args],
            capture_output=True,
            text=True,
            timeout=GIT_SECONDS,
            stdin=subprocess.DEVNULL,
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
    found = from_git(facts, cwd, str(Path.home()))
    if found is None or not found.project:
        return {}
    known = {"project": found.project, "repo": found.repo, "worktree": found.worktree}
    return {k: v for k, v in known.items() if v}
