"""Helpers that build real git repositories, worktrees and submodules in temporary folders."""

from __future__ import annotations

import subprocess
from pathlib import Path

_IDENTITY = [
    "-c",
    "user.name=Brain Test",
    "-c",
    "user.email=brain-test@example.invalid",
    "-c",
    "init.defaultBranch=main",
    "-c",
    "protocol.file.allow=always",
    "-c",
    "commit.gpgsign=false",
]


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` and return its stdout; fail the test on a non-zero exit."""
    proc = subprocess.run(["git", *_IDENTITY, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"git {' '.join(args)} failed: {proc.stderr}"
    return proc.stdout


def make_repo(path: Path, remote: str | None = None) -> Path:
    """A repository with one commit at ``path`` (and an origin remote when given)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    (path / "README.md").write_text(f"# {path.name}\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "init")
    if remote:
        git(path, "remote", "add", "origin", remote)
    return path


def add_worktree(repo: Path, path: Path, branch: str) -> Path:
    """A linked worktree of ``repo`` at ``path`` on a new branch."""
    path.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "-q", "-b", branch, str(path))
    return path


def add_submodule(superproject: Path, source: Path, name: str) -> Path:
    """Add ``source`` as a submodule of ``superproject`` in folder ``name``."""
    git(superproject, "submodule", "add", "-q", str(source), name)
    git(superproject, "commit", "-q", "-m", f"add submodule {name}")
    return superproject / name
