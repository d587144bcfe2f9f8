"""``brain sync``: a vault that is a git work tree committed, pulled with rebase and pushed (ADR 0056).

Only the memory's own paths are committed: the folders people and agents
write (arcs, the region folders, lesson and milestone logs, decisions,
signals, daily notes, the inbox, the curation audit, the inject blocks people
write by hand under ``brain-feed/inject/``) and the two git files this
writes. Everything else the keeper regenerates (the rest of ``brain-feed/``,
the dashboards) is ignored: each kernel renders its own from its index.

- Shared append-only logs merge by union (``.gitattributes``), so entries
  appended on two machines both survive a rebase.
- Staged changes outside the memory's paths make the sync refuse: it would
  otherwise commit (or leave half-committed) someone else's work.
- Every file about to be committed is read by the secret detector
  (``brain_core.redact``); a file with a secret is left out, and the answer
  says which and of what kind, never the secret.
- A rebase that union cannot resolve is aborted: the sync stops with the files
  named, the work tree as it was, the local commit kept for the next try.
- It never force-pushes: a push the remote refuses is reported, and the next
  sync pulls first.

After a pull the keeper picks the changed files up by their file stats, as it
does any change; nothing here touches the index.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from brain_core.curation import AUDIT_DIR
from brain_core.jsonable import JobSummary
from brain_core.redact import scrub_document
from brain_core.vault.layout import CLUSTERS_DIR, DAILY_DIR, FEED_DIR, INBOX_DIR, INJECT_DIR, REGION_DIRS, kind_of_path
from brain_core.vault.records import records_for
from brain_kernel.errors import BrainError, ConfigError
from brain_kernel.vault_store import Vault
from brain_kernel.vault_writes import VaultWrites

GITATTRIBUTES, GITIGNORE = ".gitattributes", ".gitignore"
# What ``brain sync`` commits: the memory people and agents write, and the git files it writes itself.
# Inject blocks under brain-feed/inject/ are written by hand, never rendered, so they are memory too.
MEMORY_PATHS = (CLUSTERS_DIR, *REGION_DIRS, DAILY_DIR, INBOX_DIR, AUDIT_DIR, INJECT_DIR, GITATTRIBUTES, GITIGNORE)
_BEGIN, _END = "# brain: begin (written by brain sync / brain init --git)", "# brain: end"
# Append-only logs: lesson and milestone logs, daily notes, the curation audit.
UNION_LOGS = ("left/reference/lessons-*.md", "left/projects/*/BLOCKS.md", "daily/*.md", f"{AUDIT_DIR}/*.jsonl")
# Derived files (each kernel renders its own) and the kernel's scratch files in the vault. git cannot
# re-include a file whose folder is ignored, so brain-feed/'s contents are ignored, not the folder.
IGNORED = (f"/{FEED_DIR}/*", f"!/{INJECT_DIR}/", "_dashboard.md", ".*.tmp", ".obsidian/workspace*.json")
GIT_TIMEOUT = 300


class SyncRefused(BrainError):
    """A sync that must not run now (unrelated staged changes); nothing was changed. Exit 1: it runs once they are gone."""


class VaultNotShared(SyncRefused, ConfigError):
    """A vault that is not set up for a sync (not a work tree's top, a detached HEAD): the operator's to fix, exit 2 (ADR 0058)."""


@dataclass
class GitSyncSummary(JobSummary):
    """What ``brain sync`` did (printed as JSON)."""

    dry_run: bool
    remote: str | None = None
    branch: str | None = None
    committed: list[str] = field(default_factory=list)  # memory files in the sync's commit (or, dry, to be)
    commit: str | None = None
    message: str = ""
    left_out: list[dict[str, str]] = field(default_factory=list)  # {"path", "why"}: files with a secret
    pulled: bool = False
    pushed: bool = False
    conflicts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.conflicts and not any(n.startswith("push refused") for n in self.notes)


def managed_block(lines: tuple[str, ...]) -> str:
    return "\n".join((_BEGIN, *lines, _END)) + "\n"


def git_files() -> dict[str, str]:
    """The block each git file gets: union merges for the shared logs, derived files ignored."""
    return {GITATTRIBUTES: managed_block(tuple(f"{p} merge=union" for p in UNION_LOGS)), GITIGNORE: managed_block(IGNORED)}


def with_block(existing: str | None, block: str) -> str:
    """``existing`` with its brain block replaced by ``block`` (appended when it has none); other lines kept."""
    text = existing or ""
    if _BEGIN in text and _END in text:
        head, rest = text.split(_BEGIN, 1)
        tail = rest.split(_END, 1)[1].lstrip("\n")
        return head + block + tail
    return text + ("\n" if text and not text.endswith("\n") else "") + block


def write_git_files(writes: VaultWrites) -> list[str]:
    """Write (or bring up to date) the vault's ``.gitattributes`` and ``.gitignore`` blocks; the files changed."""
    changed = []
    for rel, block in git_files().items():
        old = writes.read(rel) if writes.exists(rel) else None
        new = with_block(old, block)
        if new != old:
            writes.write(rel, new)
            changed.append(rel)
    writes.flush()
    return changed


class Git:
    """git in the vault's work tree, with an identity when the machine has none (a kernel run as root in a container)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.config: list[str] = []  # ``-c`` options put before every command

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        # Its own process group (setsid): a terminal's Ctrl-C reaches brain, which ends its job and stops, not git
        # halfway through a fetch or a push (an interrupt of brain itself still kills git, as subprocess.run does).
        proc = subprocess.run(
            ["git", *self.config, *args], cwd=self.root, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=GIT_TIMEOUT, start_new_session=True
        )
        if check and proc.returncode != 0:
            said = proc.stderr.strip() or proc.stdout.strip() or f"exit status {proc.returncode}"
            raise RuntimeError(f"git {' '.join(args)} failed: {said}")
        return proc

    def out(self, *args: str) -> str:
        return self.run(*args).stdout

    def paths(self, command: str, *args: str) -> list[str]:
        """The NUL-separated paths a command prints with ``-z``."""
        return [p for p in self.out(command, "-z", *args).split("\0") if p]

    def trust(self) -> None:
        """Run as root over a vault another user owns (``brain init`` hands it to the image's user), git refuses
        the repository as of dubious ownership; the vault is the operator's own configured folder, so it is trusted
        for these commands only, never in a config file."""
        self.config += ["-c", f"safe.directory={self.root}"]

    def identity(self) -> None:
        if not self.run("config", "user.email", check=False).stdout.strip():
            host = socket.gethostname() or "localhost"
            self.config += ["-c", "user.name=brain", "-c", f"user.email=brain@{host}"]


def is_memory_path(rel: str) -> bool:
    return any(rel == p or rel.startswith(p + "/") for p in MEMORY_PATHS)


def _secret(vault: Vault, rel: str) -> str | None:
    """Why ``rel`` must not be committed (the kinds of secret found), or None."""
    try:
        text = vault.read_text(rel)
    except FileNotFoundError:
        return None  # a removal: nothing to read
    except (OSError, UnicodeDecodeError):
        return None  # not text: the detector reads text only
    found = scrub_document(text).kinds
    if not found:
        return None
    return "secret detected (" + ", ".join(f"{n} {kind}" for kind, n in sorted(found.items())) + "); scrub it (brain scrub) and sync again"


def _tally(git: Git, vault: Vault, paths: list[str]) -> Counter[tuple[str, str]]:
    """Entries new in each file by (kind, project); a file with no new entry counts once by its path's kind."""
    tally: Counter[tuple[str, str]] = Counter()
    for rel in paths:
        try:
            now = records_for(rel, vault.read_text(rel)) if vault.exists(rel) else []
        except (OSError, UnicodeDecodeError, ValueError):
            now = []
        before_text = git.run("show", f"HEAD:{rel}", check=False)
        before = {r.id for r in records_for(rel, before_text.stdout)} if before_text.returncode == 0 else set()
        new = [r for r in now if r.id not in before]
        for r in new:
            tally[(r.kind, r.repo or r.project or "unattributed")] += 1
        if not new:
            first = now[0] if now else None
            tally[(kind_of_path(rel) or "file", (first.repo or first.project or "unattributed") if first else "-")] += 1
    return tally


def commit_message(tally: Counter[tuple[str, str]], files: int) -> tuple[str, str]:
    """The subject and body of a sync commit: counts by kind, then by project."""
    kinds: Counter[str] = Counter()
    projects: Counter[str] = Counter()
    for (kind, project), n in tally.items():
        kinds[kind] += n
        projects[project] += n
    subject = f"brain sync: {files} file{'s' if files != 1 else ''} (" + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ")"
    body = "\n".join(f"{project}: " + ", ".join(f"{n} {k}" for (k, p), n in sorted(tally.items()) if p == project) for project in sorted(projects))
    return subject, body


def sync_vault(vault: Vault, *, remote: str = "origin", dry_run: bool = False) -> GitSyncSummary:
    """Commit the memory's changed paths, pull with rebase, push (module docstring); raises ``SyncRefused``."""
    root = vault.path("")
    git = Git(root)
    if os.getuid() == 0:
        git.trust()
    top = git.run("rev-parse", "--show-toplevel", check=False).stdout.strip()
    if not top or Path(top).resolve() != root.resolve():
        raise VaultNotShared(f"{root} is not the top of a git work tree: run `brain init --git` there first")
    summary = GitSyncSummary(dry_run=dry_run)
    staged = git.paths("diff", "--cached", "--name-only", "--no-renames")
    foreign = sorted(p for p in staged if not is_memory_path(p))
    if foreign:
        raise SyncRefused("changes outside the memory's paths are staged; commit or unstage them first: " + ", ".join(foreign))
    writes = VaultWrites(vault, dry_run=dry_run)
    pending = write_git_files(writes)  # a dry run holds them: listed, not written
    with _pending_ignores(git, writes, dry_run and GITIGNORE in pending):
        changed = git.paths("status", "--porcelain=v1", "--untracked-files=all", "--no-renames", "--", *MEMORY_PATHS)
    paths = sorted({entry[3:] for entry in changed} | set(pending))
    for rel in paths:
        why = _secret(vault, rel)
        if why:
            summary.left_out.append({"path": rel, "why": why})
    left_out = {x["path"] for x in summary.left_out}
    commit = [p for p in paths if p not in left_out]
    summary.committed = commit
    if commit:
        subject, body = commit_message(_tally(git, vault, commit), len(commit))
        summary.message = subject + ("\n\n" + body if body else "")
    summary.branch = git.run("symbolic-ref", "--quiet", "--short", "HEAD", check=False).stdout.strip() or None
    has_remote = remote in git.out("remote").split()
    summary.remote = remote if has_remote else None
    if dry_run:
        if not has_remote:
            summary.notes.append(f"no remote {remote!r}: the commit would stay local")
        return summary
    git.identity()
    if commit:
        git.run("add", "--all", "--", *commit)
        git.run("commit", "--quiet", "--no-verify", "-m", subject, *(("-m", body) if body else ()), "--", *commit)
        summary.commit = git.out("rev-parse", "HEAD").strip()
    if not has_remote:
        summary.notes.append(f"no remote {remote!r}: committed locally only")
        return summary
    if summary.branch is None:
        raise VaultNotShared("the vault's work tree is on a detached HEAD: check out a branch first")
    _pull(git, remote, summary.branch, summary)
    if summary.conflicts:
        return summary
    if summary.commit and summary.pulled:
        summary.commit = git.out("rev-parse", "HEAD").strip()  # the rebase made it anew over the remote's: the one pushed
    push = git.run("push", "--porcelain", remote, f"HEAD:refs/heads/{summary.branch}", check=False)
    if push.returncode == 0:
        summary.pushed = True
    else:
        summary.notes.append("push refused by the remote (never forced): sync again to pull its changes first. " + (push.stderr.strip() or push.stdout.strip()))
    return summary


@contextmanager
def _pending_ignores(git: Git, writes: VaultWrites, held: bool) -> Iterator[None]:
    """git, inside, ignores what the ``.gitignore`` a dry run holds (not written) would: without it, the first dry
    run listed the day dashboards and feed tables the real run never commits."""
    if not held:
        yield
        return
    with tempfile.NamedTemporaryFile("w", suffix=".gitignore", delete=False) as rules:
        rules.write(writes.read(GITIGNORE))
    option = ["-c", f"core.excludesFile={rules.name}"]
    git.config += option
    try:
        yield
    finally:
        del git.config[-len(option) :]
        os.unlink(rules.name)


@dataclass
class GitInit:
    """What ``brain init --git`` did to the vault."""

    repository: str
    created: bool
    files: list[str]


def init_repository(vault: Vault) -> GitInit:
    """Make the vault the top of a git work tree (branch ``main``) with the sync's ``.gitattributes`` and ``.gitignore``.

    Safe to rerun: an existing repository is kept, and only the brain blocks of the two files are brought up to date.
    """
    root = vault.path("")
    git = Git(root)
    if os.getuid() == 0:
        git.trust()
    top = git.run("rev-parse", "--show-toplevel", check=False).stdout.strip()
    created = not top or Path(top).resolve() != root.resolve()
    if created:
        git.run("init", "--quiet")
        git.run("symbolic-ref", "HEAD", "refs/heads/main")
    return GitInit(str(root.resolve()), created, write_git_files(VaultWrites(vault)))


def _pull(git: Git, remote: str, branch: str, summary: GitSyncSummary) -> None:
    """Fetch and rebase onto the remote branch; on a conflict union cannot resolve, abort and name the files."""
    git.run("fetch", "--quiet", remote)
    if git.run("rev-parse", "--verify", "--quiet", f"refs/remotes/{remote}/{branch}", check=False).returncode != 0:
        summary.notes.append(f"{remote}/{branch} does not exist yet: nothing to pull")
        return
    rebase = git.run("rebase", "--autostash", f"{remote}/{branch}", check=False)
    if rebase.returncode == 0:
        summary.pulled = True
        return
    summary.conflicts = git.paths("diff", "--name-only", "--diff-filter=U")
    git.run("rebase", "--abort", check=False)
    if not summary.conflicts:
        raise RuntimeError(f"git rebase onto {remote}/{branch} failed: {rebase.stderr.strip() or rebase.stdout.strip()}")
    summary.notes.append("the rebase stopped on files union merging cannot resolve; the work tree is as it was: " + ", ".join(summary.conflicts))
