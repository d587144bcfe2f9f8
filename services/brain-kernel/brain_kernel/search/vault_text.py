"""The vault's text search as ``GET /vault/search`` and the MCP ``kb_search`` both answer it: one path.

It picks the source: the search index (``brain_kernel.search.search_docs``)
once a full rebuild has indexed this vault, else the files themselves
(``brain_kernel.search.file_scan``); both answer the same
(tests/kernel/test_search_docs.py). A principal bound to projects searches
its projects' entries only, each project's search merged by rank. Withdrawn
entries are left out unless asked for (ADR 0064), and each hit says the
curation state of a file that is one entry.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from brain_core.textsearch import Hit, tokens
from brain_kernel.scope import Scope
from brain_kernel.search import search_docs
from brain_kernel.search.file_scan import search_project, search_vault
from brain_kernel.search.withdrawn import NOTHING, states, withdrawn
from brain_kernel.vault_store import Vault, unwalked


def search(
    scope: Scope,
    vault: Vault,
    q: str,
    *,
    now: dt.datetime,
    project: tuple[str, str | None] | None = None,
    prefix: str = "",
    limit: int = 20,
    context_lines: int = 2,
    include_withdrawn: bool = False,
) -> list[dict[str, Any]]:
    """The best ``limit`` files for ``q`` under ``prefix`` (vault-relative), of one resolved ``project`` or of all ``scope`` reaches.

    Raises ``VaultPathError`` for a prefix that leaves the vault.
    """
    db = scope.db
    target = vault.path(prefix) if prefix else vault.root  # a prefix that leaves the vault raises here, whatever the branch
    if target != vault.root and unwalked(vault.rel(target)):
        return []  # a dot file or folder is never searched, named as the prefix or not (a .git/config can hold a token)
    if project is None and scope.restricted:
        hits = search_members(scope, vault, q, prefix=prefix, limit=limit, context_lines=context_lines, include_withdrawn=include_withdrawn)
    elif project is None:
        under = "" if target == vault.root else vault.rel(target)
        # The index holds what the walk from the root reads; another prefix is read from the files.
        if search_docs.walked(under) and search_docs.indexed(db, vault):
            hits = search_docs.search(db, q, under, limit, context_lines, include_withdrawn=include_withdrawn)
        else:
            hidden = NOTHING if include_withdrawn else withdrawn(db)
            hits = search_vault(vault, tokens(q), prefix=prefix, context_lines=context_lines, hidden=hidden)
    else:
        use_index = search_docs.indexed(db, vault)
        hits = _one_project(scope, vault, q, project, use_index, prefix=prefix, limit=limit, context_lines=context_lines, include_withdrawn=include_withdrawn)
    hits = hits[:limit]
    state = states(db, (h.path for h in hits), now)
    return [{**h.as_dict(), "state": state.get(h.path)} for h in hits]


def search_members(
    scope: Scope, vault: Vault, q: str, *, prefix: str = "", limit: int = 20, context_lines: int = 2, include_withdrawn: bool = False
) -> list[Hit]:
    """A vault search over a restricted scope's projects: each project's search, merged by rank (score, then path)."""
    use_index = search_docs.indexed(scope.db, vault)
    merged: dict[str, Hit] = {}
    for m in scope.members:
        for hit in _one_project(
            scope, vault, q, (m.key, m.repo), use_index, prefix=prefix, limit=limit, context_lines=context_lines, include_withdrawn=include_withdrawn
        ):
            if hit.path not in merged or hit.score > merged[hit.path].score:
                merged[hit.path] = hit
    return sorted(merged.values(), key=lambda h: (-h.score, h.path))


def _one_project(
    scope: Scope,
    vault: Vault,
    q: str,
    project: tuple[str, str | None],
    use_index: bool,
    *,
    prefix: str,
    limit: int,
    context_lines: int,
    include_withdrawn: bool,
) -> list[Hit]:
    key, repo = project
    if use_index:
        return search_docs.search(scope.db, q, prefix, limit, context_lines, project=project, include_withdrawn=include_withdrawn)
    return search_project(vault, scope.db, key, repo, tokens(q), prefix=prefix, context_lines=context_lines, include_withdrawn=include_withdrawn)
