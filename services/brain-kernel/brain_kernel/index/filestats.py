"""The file stats (``vault_file_stats``, revisions 0007 and 0016): what the keeper last read of each file.

A tick stats every file that can hold entries (``stat_files``, one ``scandir``
walk, no reads) and compares it with the file stats (``load``): a file whose
size and mtime match its row is unchanged and is not read; one that differs is
read, and counts as changed only when its content hash differs too. An arc's
row keeps the facts its heat comes from (``brain_core.heat.arc_facts``), so an
arc that only ages is scored without opening its file. ``save`` and
``forget`` keep the rows current; nothing here commits.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from brain_core.text import storable
from brain_core.vault.layout import INDEXED_PREFIXES, kind_of_path
from brain_kernel.db.models import VaultFile
from brain_kernel.vault_store import Vault

BATCH = 1000


@dataclass(frozen=True)
class Stat:
    """A file's size and mtime as the file stats compare them."""

    size: int
    mtime_ns: int


@dataclass(frozen=True)
class StatRow:
    """One row of the file stats."""

    path: str
    size: int
    mtime_ns: int
    sha256: str
    kind: str | None
    arc: dict[str, Any] | None = None

    @property
    def stat(self) -> Stat:
        return Stat(self.size, self.mtime_ns)


def digest(text: str) -> str:
    """The content hash the file stats keep (SHA-256 of the UTF-8 text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def walk(folder: str, rel: str = "", suffixes: tuple[str, ...] = (".md",), skip_dirs: Collection[str] = ()) -> Iterator[tuple[str, os.stat_result]]:
    """(vault path, stat) of the files under ``folder`` (vault path ``rel``) with one of ``suffixes``, from ``scandir``
    (no path resolved per file): dot files and folders, symlinks and the folders named in ``skip_dirs`` are skipped.

    A folder's listing is read as it is walked, not held: a region folder of a year's arcs lists 100,000 files.
    """
    try:
        entries = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return
    with entries:
        for item in entries:
            name = item.name
            if name.startswith(".") or item.is_symlink():
                continue
            child = f"{rel}/{name}" if rel else name
            if item.is_dir(follow_symlinks=False):
                if name not in skip_dirs:
                    yield from walk(item.path, child, suffixes, skip_dirs)
            elif name.endswith(suffixes):
                try:
                    yield child, item.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue


def markdown_under(root: Path, prefixes: Iterable[str]) -> list[str]:
    """The vault paths of every markdown file under these top folders of the vault at ``root`` (``walk``), sorted."""
    found: set[str] = set()
    for prefix in prefixes:
        found.update(rel for rel, _ in walk(str(root / prefix), prefix))
    return sorted(found)


def stat_files(vault: Vault) -> dict[str, Stat]:
    """Every file that can hold entries, with its size and mtime (nothing is read).

    The files ``brain_kernel.index.entries.live_vault_files`` chooses from (dot files and
    symlinks skipped), from one ``scandir`` walk.
    """
    out: dict[str, Stat] = {}
    root = str(vault.root)
    for prefix in INDEXED_PREFIXES:
        target = os.path.join(root, prefix)
        if prefix.endswith(".md"):
            try:
                info = os.lstat(target)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(info.st_mode):
                continue  # symlinks are skipped here as in the walk (a link may leave the vault)
            out[prefix] = Stat(info.st_size, info.st_mtime_ns)
            continue
        for rel, info in walk(target, prefix):
            if kind_of_path(rel) is not None:
                out[rel] = Stat(info.st_size, info.st_mtime_ns)
    return out


def stat_one(vault: Vault, rel: str) -> Stat | None:
    """One file's stat (None when it is gone)."""
    try:
        info = vault.path(rel).stat()
    except FileNotFoundError:
        return None
    return Stat(info.st_size, info.st_mtime_ns)


def load(session: Session) -> dict[str, StatRow]:
    """Every file-stats row by path."""
    rows = session.execute(select(VaultFile.path, VaultFile.size, VaultFile.mtime_ns, VaultFile.sha256, VaultFile.kind, VaultFile.arc))
    return {r[0]: StatRow(*r) for r in rows}


def known_paths(session: Session) -> set[str]:
    """The path of every file-stats row (without the arcs' facts: a rebuild needs only which files it knew)."""
    return set(session.scalars(select(VaultFile.path)))


@functools.cache
def _upsert() -> Any:
    stmt = insert(VaultFile.__table__)
    cols = ("size", "mtime_ns", "sha256", "kind", "arc")
    changed = func.row(*(VaultFile.__table__.c[c] for c in cols)).is_distinct_from(func.row(*(stmt.excluded[c] for c in cols)))
    return stmt.on_conflict_do_update(
        index_elements=["path"], set_={**{c: stmt.excluded[c] for c in cols}, "updated_at": func.clock_timestamp()}, where=changed
    )


def save(session: Session, entries: Iterable[StatRow]) -> int:
    """Insert or update rows (a row that would not change is not written); returns how many were given."""
    rows = [{"path": e.path, "size": e.size, "mtime_ns": e.mtime_ns, "sha256": e.sha256, "kind": e.kind, "arc": storable(e.arc)} for e in entries]
    for start in range(0, len(rows), BATCH):
        session.execute(_upsert(), rows[start : start + BATCH])
    return len(rows)


def forget(session: Session, paths: Iterable[str]) -> int:
    """Drop the rows of files that are gone (or no longer live)."""
    wanted = sorted(set(paths))
    removed = 0
    for start in range(0, len(wanted), BATCH):
        removed += session.execute(delete(VaultFile).where(VaultFile.path.in_(wanted[start : start + BATCH]))).rowcount or 0
    return removed
