"""The vault store: the markdown folder that is the kernel's source of truth.

All file writes go through here so they share the safety rules: new and
rewritten files are written to a temp file in the same folder and renamed into
place (readers never see half a file); appends take an exclusive ``flock`` and
write the whole entry in one ``write`` on an ``O_APPEND`` descriptor, so
concurrent writers in other processes neither lose nor interleave entries;
``create_exclusive`` claims a name with ``O_EXCL`` so two writers can never
take the same one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from brain_core.vault.layout import SCAFFOLD
from brain_kernel.errors import ConfigError

# A writer killed between making its temp file and renaming or linking it leaves a hidden
# ``.<name>.<random>.tmp`` behind. Claiming a number removes such files from that folder once
# their mtime is STALE_TEMP_SECONDS old: a live write holds its temp file for milliseconds, and a
# writer stalled past the bound loses only its own write (its rename finds no file), never a
# finished one. Age, not a pid, because replicas may share the volume (ADR 0037). The
# ``.claims/`` files are kept: they record the numbers taken.
STALE_TEMP_SECONDS = 600
_TEMP_NAME = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")  # ``_temp_copy``'s names: mkstemp's prefix, 8 random characters, suffix


def _decoded(path: Path) -> str:
    """A vault file's text as every read takes it: UTF-8, undecodable bytes replaced."""
    return path.read_text(encoding="utf-8", errors="replace")


def unwalked(rel: str, skip_dirs: Collection[str] = ()) -> bool:
    """Whether a vault-relative path is one no walk enters: a dot file or folder on its way (``.git/config``,
    ``.env``), or a folder of ``skip_dirs`` (``node_modules``)."""
    return any(part.startswith(".") or part in skip_dirs for part in rel.split("/") if part)


class VaultPathError(ValueError):
    """A relative path that would leave the vault."""


class Vault:
    """A vault rooted at ``root``; every path argument is relative to it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser().resolve()
        self._folders: dict[str, Path] = {}  # ``listed``: each folder resolved once

    # -- layout -------------------------------------------------------------

    def scaffold(self) -> None:
        """Create the upstream folder layout; raise ConfigError when the vault is unusable."""
        try:
            for rel in SCAFFOLD:
                (self.root / rel).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"vault folder {self.root} is not writable: {exc.strerror}") from None
        self.check_writable()

    def check_writable(self) -> None:
        """Raise ConfigError unless a file can be created and removed in the vault."""
        try:
            fd, tmp = tempfile.mkstemp(prefix=".probe-", dir=self.root)
            os.close(fd)
            os.unlink(tmp)
        except OSError as exc:
            raise ConfigError(f"vault folder {self.root} is not writable: {exc.strerror}") from None

    # -- paths --------------------------------------------------------------

    def path(self, rel: str | Path) -> Path:
        """The absolute path of ``rel``; raise VaultPathError if it escapes the vault."""
        rel_text = str(rel)
        if "\x00" in rel_text:
            raise VaultPathError("path contains a NUL byte")
        candidate = (self.root / rel_text.lstrip("/")).resolve() if not Path(rel_text).is_absolute() else Path(rel_text).resolve()
        if candidate != self.root and self.root not in candidate.parents:
            raise VaultPathError("path escapes vault root")
        return candidate

    def listed(self, rel: str) -> Path:
        """``path`` of a file a vault walk listed (``filestats.walk``: no symlink on the way), its folder resolved once.

        A job touching thousands of files in a few folders resolves a few paths, not one per file
        (``path`` stats every component); the folder is still checked to stay in the vault.
        """
        folder, _, name = rel.rpartition("/")
        if name in ("", ".", "..") or "\x00" in rel:
            return self.path(rel)
        return self._folder(folder) / name

    def _folder(self, folder: str) -> Path:
        base = self._folders.get(folder)
        if base is None:
            base = self._folders[folder] = self.path(folder) if folder else self.root
        return base

    def contains(self, path: Path) -> bool:
        """Whether ``path``, links followed, is inside the vault (a link out of it is never read)."""
        try:
            resolved = Path(path).resolve()
        except (OSError, RuntimeError):  # a link loop
            return False
        return resolved == self.root or self.root in resolved.parents

    def rel(self, path: Path) -> str:
        """The vault-relative POSIX path of an absolute path inside the vault."""
        return Path(path).resolve().relative_to(self.root).as_posix()

    # -- reads --------------------------------------------------------------

    def read_text(self, rel: str | Path) -> str:
        return _decoded(self.path(rel))

    def read_listed(self, rel: str) -> str:
        """``read_text`` of a file a vault walk listed (``listed``: its folder resolved once, not every file)."""
        return _decoded(self.listed(rel))

    def exists(self, rel: str | Path) -> bool:
        return self.path(rel).exists()

    def iter_files(self, prefix: str = "", suffixes: tuple[str, ...] = (".md",), *, skip_dirs: Collection[str] = ()) -> Iterator[Path]:
        """Files under ``prefix`` with one of ``suffixes`` (``("",)``: any), in sorted order, skipping dot
        files, symlinks and the folders named in ``skip_dirs``; a ``prefix`` that is a file yields just it,
        and one that is or passes through a dot file or folder yields nothing.

        A symlink may point outside the vault (which no read may reach) or at a
        file the walk yields anyway; symlinked folders are not descended either.
        Skipped folders are pruned before descending, so a large
        ``node_modules`` costs nothing.
        """
        base = self.path(prefix) if prefix else self.root
        if base != self.root and unwalked(self.rel(base)):
            return  # a prefix naming a dot folder or file is no way into it (a skipped folder named is walked, as upstream)
        if base.is_file():
            if not base.is_symlink():
                yield base
            return
        if not base.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in skip_dirs)
            for name in sorted(filenames):
                if name.startswith(".") or not name.endswith(suffixes):
                    continue
                path = Path(dirpath) / name
                if not path.is_symlink():
                    yield path

    # -- writes -------------------------------------------------------------

    def _temp_copy(self, target: Path, data: bytes, mode: int, *, parent_exists: bool = False) -> str:
        """Write ``data`` to a new temp file beside ``target`` (fsynced, ``mode``); return its path.

        Plain descriptor calls, no file object: a job rewriting thousands of files from a few threads
        spends each syscall's return waiting for the interpreter, so every call saved counts.
        """
        if not parent_exists:
            target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            try:
                os.fchmod(fd, mode)  # mkstemp's 0600 would hide vault files from other readers
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            os.unlink(tmp)
            raise
        return tmp

    def write_atomic(self, rel: str | Path, text: str) -> int:
        """Write a whole file atomically (temp file + rename); return bytes written."""
        target = self.path(rel)
        data = text.encode("utf-8")
        try:
            mode = target.stat().st_mode & 0o7777  # a rewrite keeps the file's permissions
        except FileNotFoundError:
            mode = 0o644
        tmp = self._temp_copy(target, data, mode)
        try:
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
        return len(data)

    def rewrite_listed(self, rel: str, data: bytes) -> os.stat_result:
        """``write_atomic`` of a file a walk listed (``listed``), as bytes; returns the new file's stat.

        The data is fsynced before the rename, as in ``write_atomic``; the rename reaches the disk
        with the folder, which ``sync_folders`` syncs once per folder for a whole batch of rewrites.
        Safe to call from several threads for different files.
        """
        target = self.listed(rel)
        try:
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
        tmp = self._temp_copy(target, data, mode, parent_exists=True)  # a listed file's folder is there (else: gone, an OSError)
        try:
            info = os.stat(tmp)  # a rename keeps the inode: this is the size and mtime the file has after it
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
        return info

    def sync_folders(self, rels: Collection[str]) -> None:
        """fsync the folders holding these files, once each, so their renames are durable."""
        for folder in sorted({rel.rpartition("/")[0] for rel in rels}):
            fd = os.open(self._folder(folder), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def move(self, source: str | Path, target: str | Path, text: str | None = None) -> None:
        """Move a file to a new vault path (FileExistsError if taken), optionally with new content.

        The file's mode goes with it, and its mtime unless the content changes. The target is created atomically
        (``create_exclusive``: an existing name is never replaced) before the
        source is removed: a crash between the two
        leaves both copies, which the next scan deduplicates (the region copy
        wins), never neither.
        """
        src, dst = self.path(source), self.path(target)
        info = src.stat()
        self.create_exclusive(target, self.read_text(source) if text is None else text)
        os.chmod(dst, info.st_mode & 0o7777)
        if text is None:  # an unchanged file keeps its mtime; new content is a new modification
            os.utime(dst, ns=(info.st_atime_ns, info.st_mtime_ns))
        os.unlink(src)

    def mtime(self, rel: str | Path) -> float:
        """The file's modification time (seconds since the epoch)."""
        return self.path(rel).stat().st_mtime

    def remove(self, rel: str | Path) -> bool:
        """Delete a file; False when it was already gone."""
        try:
            os.unlink(self.path(rel))
        except FileNotFoundError:
            return False
        return True

    def create_exclusive(self, rel: str | Path, text: str) -> int:
        """Create a new file atomically, failing with FileExistsError if the name is taken.

        The content is written to a temp file and hard-linked to the name: ``link``
        refuses an existing name like ``O_EXCL`` does, and readers never see the
        file before it is complete.
        """
        target = self.path(rel)
        data = text.encode("utf-8")
        tmp = self._temp_copy(target, data, 0o644)
        try:
            try:
                os.link(tmp, target)
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                    raise
                self._create_excl_direct(target, data)  # a filesystem without hard links
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        return len(data)

    @staticmethod
    def _create_excl_direct(target: Path, data: bytes) -> None:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def append(self, rel: str | Path, text: str, *, header: str = "", separate: bool = False) -> int:
        """Append ``text`` under an exclusive lock; write ``header`` first if the file is new or empty.

        With ``separate`` (a marker log's entries), a file that does not end
        with a blank line gets upstream's separator first (UPSTREAM.md 1.6):
        ``\n`` after a final newline, a blank line after a final partial
        line, so a hand-edited log never glues the new entry's header to its
        last line. Line files (``health.jsonl``, audit logs) append as is.
        """
        target = self.path(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = self._locked_append_fd(target)
        try:
            try:
                size = os.fstat(fd).st_size
                lead = header if size == 0 else _separator(os.pread(fd, 2, max(size - 2, 0))) if separate else ""
                payload = (lead + text).encode("utf-8")
                written = 0
                while written < len(payload):
                    written += os.write(fd, payload[written:])
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.fsync(fd)  # outside the lock: the bytes are in place, other writers need not wait for the disk
        finally:
            os.close(fd)
        return len(payload)

    @staticmethod
    def _locked_append_fd(target: Path) -> int:
        """An O_APPEND descriptor of ``target`` holding its exclusive lock, on the file the name holds now.

        ``rewrite_locked`` replaces a log under its lock: an appender that waited
        on the old file's lock finds the name holding another file and opens
        that one, so no entry goes to the replaced file.
        """
        while True:
            fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)  # read too: the separator looks at the end
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                held = os.fstat(fd)
                try:
                    now = os.stat(target)
                except FileNotFoundError:
                    now = None
            except BaseException:
                os.close(fd)
                raise
            if now is not None and (now.st_ino, now.st_dev) == (held.st_ino, held.st_dev):
                return fd
            os.close(fd)  # closing drops the lock

    def rewrite_locked(self, rel: str, edit: Callable[[str], str | None]) -> os.stat_result | None:
        """Rewrite a shared log atomically under the lock its appenders take; ``edit`` maps its text to the new one (None: no change).

        The text is read under the lock, so no entry appended meanwhile is lost;
        the new file is fsynced and renamed in place (mode kept) before the lock
        is released. Returns the new file's stat, or None when nothing was written.
        """
        target = self.listed(rel)
        fd = self._locked_append_fd(target)
        try:
            with open(target, "rb") as handle:
                old = handle.read().decode("utf-8")
            new = edit(old)
            if new is None or new == old:
                return None
            tmp = self._temp_copy(target, new.encode("utf-8"), os.fstat(fd).st_mode & 0o7777)
            try:
                info = os.stat(tmp)
                os.replace(tmp, target)
            except BaseException:
                os.unlink(tmp)
                raise
            return info
        finally:
            os.close(fd)

    def claim_number(self, folder: str, *, start: int = 1, width: int = 4) -> int:
        """Claim the first free number from ``start`` up in ``folder``, across processes and replicas.

        A number is claimed by creating ``<folder>/.claims/<NNNN>`` with O_EXCL, which
        succeeds for exactly one writer even on a shared volume. The claims are
        not listed: the caller's ``start`` is one past the highest number its
        folder already shows (``next_adr_number``), so the probe steps over only
        the numbers claimed and not yet written (in flight, or left by a write
        that failed). Listing 5,000 claims had cost each decision 10 ms.
        """
        claims = self.path(folder) / ".claims"
        claims.mkdir(parents=True, exist_ok=True)
        self.remove_stale_temps(folder)  # what a writer killed before its rename left in this folder
        number = start
        while True:
            try:
                fd = os.open(claims / f"{number:0{width}d}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.close(fd)
                return number
            except OSError as exc:
                if exc.errno != errno.EEXIST:
                    raise
                number += 1

    def remove_stale_temps(self, folder: str, *, older_than: float = STALE_TEMP_SECONDS) -> list[str]:
        """Remove the temp files of ``folder`` (not its subfolders) unmodified for ``older_than`` seconds; their names."""
        cutoff = time.time() - older_than
        removed: list[str] = []
        try:
            listing = os.scandir(self.path(folder))
        except FileNotFoundError:
            return removed
        with listing:
            for entry in listing:
                if not (entry.name.endswith(".tmp") and _TEMP_NAME.fullmatch(entry.name)):
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(info.st_mode) and info.st_mtime < cutoff:
                        os.unlink(entry.path)
                        removed.append(entry.name)
                except FileNotFoundError:  # renamed by its writer or removed by another sweep meanwhile
                    continue
        return removed


def _separator(tail: bytes) -> str:
    """What goes before an entry appended after ``tail`` (a file's last two bytes): nothing after a blank line."""
    if tail.endswith(b"\n\n") or tail == b"\n":
        return ""
    return "\n" if tail.endswith(b"\n") else "\n\n"
