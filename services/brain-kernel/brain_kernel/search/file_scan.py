"""Token search over the vault, optionally restricted to one project: what ``GET /vault/search`` and the
MCP ``kb_search`` tool both answer.

The matching is the pure ``brain_core.textsearch`` (upstream's rules). The
project filter reads the index for P's entries (the feed's membership rule)
and searches whole files P owns alone, and inside logs shared with other
projects only the line spans of P's own entries, as the log codec splits
the file; a line of another project never matches, whatever it contains.
Withdrawn entries are left out as ``brain_kernel.search.withdrawn`` says
(ADR 0064): a file that is one leaves whole, a log entry its own lines.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from brain_core.textsearch import Hit, is_searchable, search_text
from brain_core.vault.layout import is_tombstone
from brain_core.vault.records import entry_line_spans
from brain_kernel.feed import feed_repo
from brain_kernel.search.withdrawn import NOTHING, Withdrawn, withdrawn
from brain_kernel.vault_store import Vault, VaultPathError

# Folders upstream's walks skip (besides dot folders, which every vault walk skips).
SKIP_DIRS = frozenset({".git", ".obsidian", ".trash", "node_modules"})


def search_vault(vault: Vault, wanted: list[str], *, prefix: str = "", context_lines: int = 2, hidden: Withdrawn = NOTHING) -> list[Hit]:
    """Every searchable file under ``prefix`` matching ``wanted`` tokens, best first, but what ``hidden`` leaves out."""
    hits = []
    for path in vault.iter_files(prefix, ("",), skip_dirs=SKIP_DIRS):
        rel = vault.rel(path)
        if not is_searchable(rel) or is_tombstone(rel) or rel in hidden.files:  # a merged arc's text lives on in the arc that absorbed it
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if hit := search_text(rel, text, wanted, context_lines=context_lines, allowed=hidden.allowed(rel, text)):
            hits.append(hit)
    return _ranked(hits)


def search_project(
    vault: Vault,
    db: Session,
    key: str,
    repo: str | None,
    wanted: list[str],
    *,
    prefix: str = "",
    context_lines: int = 2,
    include_withdrawn: bool = False,
) -> list[Hit]:
    """Only project (``key``, ``repo``)'s entries, best first (see the module docstring)."""
    hidden = NOTHING if include_withdrawn else withdrawn(db)
    entries = feed_repo.project_entries(db, key, repo, prefix=prefix)
    by_path: dict[str, list[Any]] = {}
    for entry in entries:
        by_path.setdefault(entry.vault_path, []).append(entry)
    shared = feed_repo.foreign_paths(db, list(by_path), [e.id for e in entries])
    hits = []
    for rel, own in sorted(by_path.items()):
        if not is_searchable(rel) or SKIP_DIRS.intersection(rel.split("/")) or rel in hidden.files:
            continue
        try:
            text = vault.read_text(rel)
        except (OSError, VaultPathError):
            continue  # gone since it was indexed
        allowed = None
        if rel in shared:
            spans = entry_line_spans(rel, text)
            allowed = {n for e in own if e.id in spans for n in range(spans[e.id][0], spans[e.id][1] + 1)}
        allowed = hidden.allowed(rel, text, allowed)
        if hit := search_text(rel, text, wanted, context_lines=context_lines, allowed=allowed):
            hits.append(hit)
    return _ranked(hits)


def _ranked(hits: list[Hit]) -> list[Hit]:
    return sorted(hits, key=lambda h: (-h.score, h.path))
