"""Vault read routes existing clients use: ``/vault/read``, ``/vault/list``, ``/vault/search``,
``/signal`` and ``/arcs/{cluster_id}``.

Paths are vault-relative; anything that resolves outside the vault is a 400
(``VaultPathError``, handled in ``create_app``), a missing file a 404. These
routes read files (the vault is the truth for what a file says); the index
only chooses which file: the active signal, the live arc of a cluster id, the
entries of a project for a filtered search.
"""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from brain_api.deps import AuthDep, ReadSessionDep, VaultDep
from brain_core.membership import signal_is_fleet
from brain_core.textsearch import Hit, search_text, tokens
from brain_core.times import iso
from brain_core.vault import frontmatter
from brain_core.vault.records import entry_line_spans
from brain_kernel import feed_repo
from brain_kernel.projects import EXACT, resolve_project
from brain_kernel.vault import Vault

router = APIRouter(tags=["vault"], dependencies=[AuthDep])

DEFAULT_MAX_BYTES = 1_048_576
SEARCH_SUFFIXES = (".md", ".txt")
_CLUSTER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,199}$")
MAX_MERGE_HOPS = 16


def _read(vault: Vault, rel: str) -> str:
    path = vault.path(rel)
    if not path.is_file():
        raise HTTPException(status_code=404, detail=f"{rel} not found in the vault")
    return path.read_text(encoding="utf-8", errors="replace")


@router.get("/vault/read")
def vault_read(
    vault: VaultDep,
    path: Annotated[str, Query(min_length=1, max_length=1000, description="Vault-relative path of a file.")],
    max_bytes: Annotated[int, Query(ge=1, le=16 * DEFAULT_MAX_BYTES, description="Largest content returned.")] = DEFAULT_MAX_BYTES,
) -> dict[str, Any]:
    """One file's content (truncated at ``max_bytes``)."""
    target = vault.path(path)
    if not target.is_file():
        raise HTTPException(status_code=404, detail=f"{path} not found in the vault")
    size = target.stat().st_size
    with target.open("rb") as handle:
        data = handle.read(max_bytes)
    return {
        "path": vault.rel(target),
        "size_bytes": size,
        "content": data.decode("utf-8", errors="ignore" if size > max_bytes else "replace"),
        "truncated": size > max_bytes,
    }


@router.get("/vault/list")
def vault_list(
    vault: VaultDep,
    prefix: Annotated[str, Query(max_length=1000, description="Vault-relative folder (or file) to list; empty = whole vault.")] = "",
    limit: Annotated[int, Query(ge=1, le=100_000, description="Most files returned.")] = 10_000,
) -> dict[str, Any]:
    """Files under ``prefix`` (recursive, dot files skipped), sorted."""
    files: list[str] = []
    truncated = False
    for path in vault.iter_files(prefix.strip("/"), suffixes=("",)):
        if len(files) >= limit:
            truncated = True
            break
        files.append(vault.rel(path))
    return {"prefix": prefix, "count": len(files), "files": files, "truncated": truncated}


@router.get("/vault/search")
def vault_search(
    vault: VaultDep,
    db: ReadSessionDep,
    q: Annotated[str, Query(min_length=1, max_length=500, description="Tokens that must all occur (case-insensitive).")],
    prefix: Annotated[str, Query(max_length=1000, description="Vault-relative folder to search under.")] = "",
    limit: Annotated[int, Query(ge=1, le=500, description="Most files returned.")] = 20,
    project: Annotated[str | None, Query(max_length=300, description="Only this project's entries (short key or owner/name).")] = None,
) -> dict[str, Any]:
    """Token search over .md/.txt files with line snippets, optionally restricted to one project."""
    wanted = tokens(q)
    hits: list[Hit] = []
    if project is None:
        for path in vault.iter_files(prefix.strip("/"), suffixes=SEARCH_SUFFIXES):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            hit = search_text(vault.rel(path), text, wanted)
            if hit:
                hits.append(hit)
    else:
        found = resolve_project(db, project)  # malformed: 422, ambiguous: 409 (the app's error handlers)
        if found.status == EXACT:
            hits = _project_hits(vault, db, found.key, found.repo, prefix, wanted)
    hits.sort(key=lambda h: (-h.score, h.path))
    return {
        "query": q,
        "prefix": prefix,
        "project": project,
        "count": min(len(hits), limit),
        "results": [{"path": h.path, "score": h.score, "snippets": h.snippets} for h in hits[:limit]],
    }


def _project_hits(vault: Vault, db: ReadSessionDep, key: str, repo: str | None, prefix: str, wanted: list[str]) -> list[Hit]:
    """Search only P's entries: whole files P owns alone, and in logs shared with other projects
    only the lines of P's own entries (their spans, as the log codec splits the file)."""
    entries = feed_repo.project_entries(db, key, repo, prefix=prefix)
    by_path: dict[str, list] = {}
    for entry in entries:
        by_path.setdefault(entry.vault_path, []).append(entry)
    shared = feed_repo.foreign_paths(db, list(by_path), [e.id for e in entries])
    hits = []
    for rel, own in sorted(by_path.items()):
        if not rel.endswith(SEARCH_SUFFIXES):
            continue
        try:
            text = _read(vault, rel)
        except HTTPException:
            continue
        allowed = None
        if rel in shared:
            spans = entry_line_spans(rel, text)
            allowed = {n for e in own if e.id in spans for n in range(spans[e.id][0], spans[e.id][1] + 1)}
        hit = search_text(rel, text, wanted, allowed=allowed)
        if hit:
            hits.append(hit)
    return hits


@router.get("/signal")
def get_signal(vault: VaultDep, db: ReadSessionDep) -> dict[str, Any]:
    """The active amygdala signal (the newest one not resolved)."""
    record = feed_repo.latest_signal(db)
    if record is None:
        return {"active": False, "severity": None, "title": None, "content": "", "hash": None, "last_updated": None, "vault_path": None}
    try:
        text = _read(vault, record.vault_path)
    except HTTPException:
        text = record.content
    return {
        "active": True,
        "severity": record.severity or "info",
        "title": record.title,
        "content": record.content,
        "hash": hashlib.sha256(text.encode("utf-8")).hexdigest()[:16],
        "last_updated": iso(record.occurred_at),
        "vault_path": record.vault_path,
        "project": record.project,
        "repo": record.repo,
        "scope": "fleet" if signal_is_fleet(record) else "project",
    }


def _arc_file(vault: Vault, cluster_id: str) -> tuple[str, frontmatter.Document] | None:
    """An arc's file not found through the index: a live arc written by ``brain cluster``
    before the next tick, else its ``.merged.md`` tombstone."""
    clusters = vault.path("clusters")
    if not clusters.is_dir():
        return None
    for pattern in (f"*/{cluster_id}.md", f"*/{cluster_id}.merged.md"):
        for path in sorted(clusters.glob(pattern)):
            doc = frontmatter.parse(path.read_text(encoding="utf-8", errors="replace"))
            if pattern.endswith(".merged.md") or not doc.meta.get("merged_into"):
                return vault.rel(path), doc
    return None


@router.get("/arcs/{cluster_id}")
def get_arc(cluster_id: str, vault: VaultDep, db: ReadSessionDep) -> dict[str, Any]:
    """An arc's frontmatter and body; a merged arc resolves to the arc that absorbed it.

    The index answers first (the arc's row, else the arc that records absorbing
    it); the vault is looked at only for what the index does not know yet.
    """
    if not _CLUSTER_ID.match(cluster_id):
        raise HTTPException(status_code=422, detail="cluster_id must be letters, digits, '.', '_' or '-'")
    requested, current, chain = cluster_id, cluster_id, []
    for _ in range(MAX_MERGE_HOPS):
        record = feed_repo.arc_by_cluster_id(db, current)
        found = (record.vault_path, frontmatter.parse(_read(vault, record.vault_path))) if record is not None else None
        target = ""
        if found is None:
            survivor = feed_repo.arc_absorbing(db, current)
            target = str(survivor.meta.get("cluster_id") or "") if survivor else ""
        if found is None and not target:
            found = _arc_file(vault, current)
            if found is not None and found[1].meta.get("merged_into"):
                target, found = str(found[1].meta["merged_into"]), None
        if found is not None:
            rel, doc = found
            return {
                "cluster_id": str(doc.meta.get("cluster_id") or current),
                "vault_path": rel,
                "frontmatter": doc.meta,
                "body": doc.body,
                "requested": requested,
                "merged_from": chain,
            }
        if not target or target in chain or not _CLUSTER_ID.match(target):
            break
        chain.append(current)
        current = target
    raise HTTPException(status_code=404, detail=f"arc {requested} not found")
