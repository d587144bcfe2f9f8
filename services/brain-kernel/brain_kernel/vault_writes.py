"""One job's writes to the vault: a file written only when its text changes, moves, removals, dry runs, counts.

The keeper's pass, ``brain apply`` and ``brain backfill`` write through a
``VaultWrites`` (ADR 0039). Every byte still goes through the vault store
(``Vault``: atomic temp file and rename, mode kept, a move that creates its
target exclusively); this layer decides whether a write is needed, holds
what a dry run or a staged run would write, counts what was done and lists
the paths touched, which the caller hands to ``index.changes.sync_changes``.

Three modes:

- **immediate** (the default): each write is made at once.
- **dry run**: nothing reaches the disk. Writes, moves and removals are held,
  and ``read`` and ``exists`` see them, so a later step reads what an earlier
  one would have written (the keeper scores an inbox note it only pretends
  to move). Nothing is counted.
- **staged**: writes and removals are held, with every text read, so several
  edits of one file compose (apply); ``flush`` makes them, new texts first
  and removals last, so a crash between leaves a copy, never a loss.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping

from brain_kernel.index.changes import Changed
from brain_kernel.vault_store import Vault


class VaultWrites:
    """The writes of one job over ``vault`` (module docstring); counts ``files_written``, ``moves`` and ``removals``."""

    def __init__(self, vault: Vault, *, dry_run: bool = False, staged: bool = False) -> None:
        self.vault, self.dry_run, self.staged = vault, dry_run, staged
        self.files_written = self.moves = self.removals = 0
        self._touched: dict[str, None] = {}  # an ordered set (``touched``)
        self.refused: list[str] = []  # moves refused because the target name is taken
        self._held: dict[str, str] = {}  # texts not (yet) on disk; staged, also every text read
        self._gone: set[str] = set()  # removed or moved away, not (yet) on disk
        self._pending: list[str] = []  # staged: the paths ``flush`` makes, in order
        self._unsynced: set[str] = set()  # rewritten without their folder synced (``sync_folders``)
        self._lock = threading.Lock()  # ``rewrite_listed`` runs on a job's writer threads

    @property
    def total(self) -> int:
        """Files written, moved and removed on disk so far."""
        return self.files_written + self.moves + self.removals

    @property
    def touched(self) -> list[str]:
        """The paths written, moved from or to, or removed (held: to be), once each, in order."""
        return list(self._touched)

    @property
    def texts(self) -> Mapping[str, str]:
        """The texts this job holds: its held writes (staged: and every text it read)."""
        return self._held

    def _holds(self) -> bool:
        return self.dry_run or self.staged

    def _touch(self, rel: str) -> None:
        self._touched[rel] = None
        if self.staged and rel not in self._pending:
            self._pending.append(rel)

    # -- reads, as this job leaves the vault --------------------------------------------------

    def exists(self, rel: str) -> bool:
        """Whether the file is there, counting what this job holds."""
        return rel not in self._gone and (rel in self._held or self.vault.exists(rel))

    def read(self, rel: str) -> str:
        """The file's text as this job leaves it (FileNotFoundError when it removed it)."""
        if rel in self._gone:
            raise FileNotFoundError(rel)
        if rel in self._held:
            return self._held[rel]
        text = self.vault.read_text(rel)
        if self.staged:
            self._held[rel] = text
        return text

    def changes(self, paths: Iterable[str]) -> list[Changed | str]:
        """``paths`` as ``sync_changes`` takes them: with the text this job holds, else the path alone (read there, or gone)."""
        return [Changed(rel, self._held[rel]) if rel in self._held and rel not in self._gone else rel for rel in paths]

    # -- writes --------------------------------------------------------------------------------

    def write(self, rel: str, text: str, *, changed: bool = False, same: Callable[[str, str], bool] | None = None) -> bool:
        """Write ``text`` unless the file already says it (``same``: a looser equality; ``changed``: known to differ).

        True when it was written (or, held, will be or would be).
        """
        if not changed:
            try:
                old = self.read(rel) if self.exists(rel) else None
            except OSError:
                old = None
            if old is not None and (old == text or (same is not None and same(old, text))):
                return False
        if self._holds():
            self._held[rel] = text
            self._gone.discard(rel)
        else:
            self.vault.write_atomic(rel, text)
            self.files_written += 1
        self._touch(rel)
        return True

    def create(self, rel: str, text: str) -> int:
        """Write a new file, never replacing one (``Vault.create_exclusive``): its size in bytes.

        FileExistsError when the name is taken, on disk or by a text this job holds.
        """
        if self.exists(rel):
            raise FileExistsError(rel)
        if self._holds():
            self._held[rel] = text
            self._gone.discard(rel)
            self._touch(rel)
            return len(text.encode("utf-8"))
        size = self.vault.create_exclusive(rel, text)
        self.files_written += 1
        self._touch(rel)
        return size

    def move(self, source: str, target: str, text: str | None = None) -> bool:
        """Move a file, with new ``text`` or as it is (``Vault.move``); False, and the refusal kept, when ``target`` is taken.

        Staged, a move is held as the target's text and the source's removal.
        """
        if self.exists(target):
            self.refused.append(f"{source} -> {target}: target exists")
            return False
        if self._holds():
            self._held[target] = text if text is not None else self.read(source)
            self._gone.discard(target)
            self._held.pop(source, None)
            self._gone.add(source)
            self._touch(target)
            self._touch(source)
            return True
        self.vault.move(source, target, text)
        self.moves += 1
        self._touch(source)
        self._touch(target)
        return True

    def remove(self, rel: str) -> bool:
        """Remove a file; False when it was not there."""
        if self._holds():
            there = self.exists(rel)
            self._held.pop(rel, None)
            self._gone.add(rel)
            self._touch(rel)
            return there
        if not self.vault.remove(rel):
            return False
        self.removals += 1
        self._touch(rel)
        return True

    def flush(self) -> list[str]:
        """Staged: make the held writes, new texts first and removals last; the paths made. A dry run makes none."""
        made, self._pending = self._pending, []
        if self.dry_run:
            return []
        for rel in made:
            if rel not in self._gone:
                self.vault.write_atomic(rel, self._held[rel])
                self.files_written += 1
        for rel in made:
            if rel in self._gone and self.vault.remove(rel):
                self.removals += 1
        return made

    # -- bulk rewrites (backfill) -----------------------------------------------------------------

    def rewrite_listed(self, rel: str, text: str) -> os.stat_result | None:
        """Rewrite a file a vault walk listed (``Vault.rewrite_listed``), its folder synced later (``sync_folders``).

        Safe from several threads for different files. Returns the new file's
        stat; None in a dry run, which holds the text.
        """
        if self.dry_run:
            with self._lock:
                self._held[rel] = text
                self._touch(rel)
            return None
        info = self.vault.rewrite_listed(rel, text.encode("utf-8"))
        with self._lock:
            self.files_written += 1
            self._touch(rel)
            self._unsynced.add(rel)
        return info

    def rewrite_locked(self, rel: str, edit: Callable[[str], str | None]) -> os.stat_result | None:
        """Rewrite a shared log under its appenders' lock (``Vault.rewrite_locked``); the new file's stat, or None.

        ``edit`` maps the exact text to the new one (None: no change). A dry run
        runs ``edit`` on the text as it is, holds the result and returns None.
        """
        if self.dry_run:
            old = self._held.get(rel)
            if old is None:
                old = self.vault.listed(rel).read_bytes().decode("utf-8")  # exact bytes, as the lock's reader takes them
            new = edit(old)
            if new is not None and new != old:
                self._held[rel] = new
                self._touch(rel)
            return None
        info = self.vault.rewrite_locked(rel, edit)
        if info is not None:
            self.files_written += 1
            self._touch(rel)
            self._unsynced.add(rel)
        return info

    def sync_folders(self) -> None:
        """fsync, once each, the folders of the files rewritten since the last call, so their renames are durable."""
        with self._lock:
            rels, self._unsynced = self._unsynced, set()
        self.vault.sync_folders(rels)
