"""The feed files of one keeper run, each written once: ``brain-feed/*.md`` and the day dashboards.

The keeper's pass and ``brain apply`` both derive files from the index
(``hot-arcs.md``, ``signals.md``, ``inject.md``, ``lessons.md``, the intents,
``last-tick-diff.md``, ``clusters/<date>/_dashboard.md``). Each hands its
rendered text to one ``FeedWriter``; a later text of a file replaces an
earlier one, and ``write`` writes each file once, at the end of the run: a
tick with the LLM half writes its feed after the answer is applied, so a file
both halves render reaches the disk once, with the text the answer left.
``brain apply`` on its own writes its feed at its end the same way (ADR 0039).

A file is written only when its text differs from the disk's, stamp lines
aside (``same_content``), so a rerun writes nothing; the files that hold
entries (the intents) then go through the kernel's one path to the derived
stores (``sync_changes``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from brain_core.feed.keeper_files import same_content
from brain_core.vault.layout import kind_of_path
from brain_kernel.index.changes import ALL_STORES, Changed, SyncSummary, sync_changes
from brain_kernel.vault_writes import VaultWrites


@dataclass
class FeedWritten:
    """What ``FeedWriter.write`` did: the listed files written (or, dry, to be), and the index's follow of them."""

    files: list[str]
    index: SyncSummary | None


class FeedWriter:
    """One run's feed files: ``put`` each rendered text, ``write`` them once (module docstring)."""

    def __init__(self, writes: VaultWrites) -> None:
        self.writes = writes
        self._plan: dict[str, str] = {}  # vault path -> the text it gets (differs from the disk's)
        self._listed: set[str] = set()  # the files a summary names when written (a dashboard the keeper redraws is not)

    def _on_disk(self, rel: str) -> str | None:
        """What the file says before this run's feed is written (a text the job holds counts: a dry run's)."""
        held = self.writes.texts.get(rel)
        if held is not None:
            return held
        vault = self.writes.vault
        try:
            return vault.read_text(rel) if vault.exists(rel) else None
        except OSError:
            return None

    def text(self, rel: str) -> str | None:
        """The file's text as this run leaves it: the text put, else the disk's (None: no file)."""
        return self._plan[rel] if rel in self._plan else self._on_disk(rel)

    def put(self, rel: str, text: str, *, listed: bool = True) -> bool:
        """Make ``text`` the file's content for this run, replacing an earlier one; True when the file changes."""
        if listed:
            self._listed.add(rel)
        if same_content(self._on_disk(rel), text):
            self._plan.pop(rel, None)
            return False
        self._plan[rel] = text
        return True

    def write(self, session: Session, *, stores: frozenset[str] = ALL_STORES) -> FeedWritten:
        """Write each file put (held, in a dry run or staged), then the derived stores follow those holding entries."""
        plan, self._plan = self._plan, {}
        for rel, text in plan.items():
            self.writes.write(rel, text, changed=True)
        self.writes.flush()  # staged writes (apply's own run) are made here
        holding = [Changed(rel, text) for rel, text in plan.items() if kind_of_path(rel) and not rel.rsplit("/", 1)[-1].startswith("_")]
        index = sync_changes(session, self.writes.vault, holding, stores=stores) if holding else None
        return FeedWritten([rel for rel in plan if rel in self._listed], index)
