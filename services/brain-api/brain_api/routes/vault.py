"""Vault routes existing clients use: ``/vault/read``, ``/vault/list``, ``/vault/search``,
``POST /vault/write_inbox``, ``/signal`` and ``/arcs/{cluster_id}``.

Paths are vault-relative with a leading ``/`` stripped, as upstream resolves
them; anything that resolves outside the vault is a 400 ``path escapes vault
root`` (``VaultPathError``, handled in ``create_app``), a missing file a 404.
Walks skip dot folders and files, symlinks and ``node_modules``. These routes
read files (the vault is the truth for what a file says); the index only
chooses which file: the active signal, the live arc of a cluster id, the
entries of a project for a filtered search. ``write_inbox`` claims its file
name with an exclusive create, so two notes never share one.
"""

from __future__ import annotations

import codecs
import datetime as dt
import re
import secrets
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, HTTPException, Query, Request
from pydantic import Field
from sqlalchemy.exc import DBAPIError

from brain_api.deps import AuthDep, ClockDep, PrincipalDep, ReadSessionDep, SessionDep, SettingsDep, VaultDep
from brain_api.responses import Answer, AnsweredRoute, errors
from brain_core.feed.alert import alert_state
from brain_core.markers import has_lone_surrogate
from brain_core.redact import scrub
from brain_core.text import slugify
from brain_core.vault import frontmatter
from brain_core.vault.layout import INBOX_DIR
from brain_kernel.feed import feed_repo
from brain_kernel.identity.projects import EXACT
from brain_kernel.index.changes import sync_changes
from brain_kernel.scope import Scope
from brain_kernel.search import vault_text
from brain_kernel.search.file_scan import SKIP_DIRS
from brain_kernel.vault_store import Vault, VaultPathError, unwalked

router = APIRouter(tags=["vault"], dependencies=[AuthDep], route_class=AnsweredRoute)

MAX_FILE_BYTES = 5 * 1024 * 1024
DEFAULT_EXTENSIONS = ".md,.markdown,.txt"
MAX_TITLE_CHARS = 200
MAX_INBOX_CONTENT_CHARS = 200_000
NAME_CLAIM_ATTEMPTS = 8
_CLUSTER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,199}$")
MAX_MERGE_HOPS = 16


class VaultFile(Answer):
    """Answer of ``GET /vault/read``."""

    path: str
    size_bytes: int = Field(description="The whole file's size.")
    content: str = Field(description="UTF-8 text, invalid bytes as U+FFFD, at most max_bytes.")
    truncated: bool


class VaultListing(Answer):
    """Answer of ``GET /vault/list``."""

    prefix: str
    count: int
    files: list[str] = Field(description="Vault-relative paths, sorted.")
    truncated: bool = Field(description="More files than limit.")


class Snippet(Answer):
    """One hit line of a search result."""

    line: int = Field(description="1-based.")
    snippet: str = Field(description="The line with its context lines.")
    text: str = Field(description="The hit line alone.")


class VaultHit(Answer):
    """One matching file (``brain_core.textsearch.Hit``)."""

    path: str
    score: int
    match_count: int
    tokens_matched: int
    tokens_total: int
    filename_match: bool
    snippets: list[Snippet]
    title: str
    state: Literal["live", "expired", "superseded", "retracted"] | None = Field(
        description="For a file that is one entry (a decision, a signal): its curation state (ADR 0048); an expired one is "
        "still searched, a superseded or retracted one only with include_withdrawn (ADR 0064). Null for any other file."
    )


class VaultSearch(Answer):
    """Answer of ``GET /vault/search``."""

    query: str
    prefix: str
    project: str | None
    count: int
    results: list[VaultHit] = Field(description="Best first.")


class InboxNote(Answer):
    """Answer of ``POST /vault/write_inbox``."""

    path: str = Field(description="raw/inbox/YYYY-MM-DD-<slug>.md")
    size_bytes: int
    artifact_refs: list[str]
    tags: list[str]


class Signal(Answer):
    """Answer of ``GET /signal``: the amygdala alert file (upstream's shape); all null but ``vault_path`` when absent."""

    active: bool = Field(description="False when absent or resolved.")
    severity: str | None
    title: str | None
    content: str | None
    hash: str | None
    last_updated: str | None
    vault_path: str
    scope: str | None = Field(None, description="fleet, when the file is present.")


class ArcFile(Answer):
    """Answer of ``GET /arcs/{cluster_id}``."""

    cluster_id: str = Field(description="The arc answered: the one that absorbed the requested arc, after a merge.")
    vault_path: str
    frontmatter: dict[str, Any]
    body: str
    requested: str
    merged_from: list[str] = Field(description="The merged arcs followed to reach it, in order.")


ESCAPES = {400: "The path is empty, not a file, or escapes the vault."}


def _rel(path: str) -> str:
    """A request path as upstream resolves it: vault-relative, a leading ``/`` stripped."""
    return path.lstrip("/")


def _read(vault: Vault, rel: str) -> str:
    try:
        path = vault.path(rel)
    except VaultPathError:  # an indexed file replaced by a link out of the vault: gone, as far as a reader knows
        raise HTTPException(status_code=404, detail=f"{rel} not found in the vault") from None
    if not path.is_file():
        raise HTTPException(status_code=404, detail=f"{rel} not found in the vault")
    return path.read_text(encoding="utf-8", errors="replace")


@router.get("/vault/read", response_model=VaultFile, responses=errors(described={**ESCAPES, 404: "No such file (or the token may not read it)."}))
def vault_read(
    vault: VaultDep,
    db: ReadSessionDep,
    principal: PrincipalDep,
    path: Annotated[str, Query(max_length=1000, description="Vault-relative path of a file.")],
    max_bytes: Annotated[int, Query(ge=1, le=MAX_FILE_BYTES, description="Largest content returned, in bytes.")] = MAX_FILE_BYTES,
) -> dict[str, Any]:
    """One file's content (truncated at ``max_bytes``); a token bound to projects reads only its projects' files (else 404)."""
    if not path.strip():
        raise HTTPException(status_code=400, detail="path is required")
    target = vault.path(_rel(path))
    # .git/config, .env: never served, as list and search hide them
    if not target.exists() or (target != vault.root and unwalked(vault.rel(target))):
        raise HTTPException(status_code=404, detail="not found")
    if Scope(db, principal).hides_path(vault.rel(target)):  # another project's file reads as a missing one (ADR 0033)
        raise HTTPException(status_code=404, detail="not found")
    if not target.is_file():
        raise HTTPException(status_code=400, detail="path is not a file")
    try:
        size = target.stat().st_size
        with target.open("rb") as handle:
            data = handle.read(max_bytes)
    except OSError as exc:
        raise HTTPException(status_code=503, detail=f"vault read failed: {exc.strerror or exc}") from None
    truncated = size > len(data)
    # Invalid bytes become U+FFFD; a character cut in half by max_bytes is dropped, not replaced.
    content = codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=not truncated)
    return {"path": vault.rel(target), "size_bytes": size, "content": content, "truncated": truncated}


def _extensions(value: str) -> frozenset[str]:
    """The requested suffixes, trimmed, lower-cased and dotted; empty means every file."""
    wanted = set()
    for entry in value.split(","):
        entry = entry.strip().lower()  # trimmed before the dot is added: ".md, .txt" is {.md, .txt}
        if entry:
            wanted.add(entry if entry.startswith(".") else f".{entry}")
    return frozenset(wanted)


@router.get("/vault/list", response_model=VaultListing, responses=errors(described={400: "The prefix escapes the vault."}))
def vault_list(
    vault: VaultDep,
    db: ReadSessionDep,
    principal: PrincipalDep,
    prefix: Annotated[str, Query(max_length=1000, description="Vault-relative folder (or file) to list; empty = whole vault.")] = "",
    extensions: Annotated[
        str, Query(max_length=1000, description="Comma list of suffixes (dot optional, case-insensitive); empty = every file.")
    ] = DEFAULT_EXTENSIONS,
    limit: Annotated[int, Query(ge=1, le=5000, description="Most files returned.")] = 500,
) -> dict[str, Any]:
    """Files under ``prefix`` (recursive; dot files, symlinks and skipped folders left out), sorted."""
    wanted = _extensions(extensions)
    base = _rel(prefix).rstrip("/")
    target = vault.path(base) if base else vault.root
    scope = Scope(db, principal)
    # A token bound to projects lists its projects' files only (the ones it may read).
    admitted = scope.admitted_paths(None, prefix=vault.rel(target) if target != vault.root else "") if scope.restricted else None
    if target.is_file():
        rel = vault.rel(target)
        shown = admitted is None or rel in admitted
        files = [rel] if shown and not unwalked(rel) and not target.is_symlink() else []
        return {"prefix": prefix, "count": len(files), "files": files, "truncated": False}
    files: list[str] = []
    truncated = False
    for path in vault.iter_files(base, ("",), skip_dirs=SKIP_DIRS):
        if admitted is not None and vault.rel(path) not in admitted:
            continue
        if wanted and path.suffix.lower() not in wanted:
            continue
        if len(files) >= limit:
            truncated = True
            break
        files.append(vault.rel(path))
    files.sort()
    return {"prefix": prefix, "count": len(files), "files": files, "truncated": truncated}


@router.get("/vault/search", response_model=VaultSearch, responses=errors(403, 409, described={400: "The prefix escapes the vault."}))
def vault_search(
    request: Request,
    vault: VaultDep,
    db: ReadSessionDep,
    principal: PrincipalDep,
    clock: ClockDep,
    q: Annotated[str, Query(min_length=1, max_length=500, description="Tokens (case-insensitive substrings); a line with any is a hit.")],
    prefix: Annotated[str, Query(max_length=1000, description="Vault-relative folder (or file) to search under.")] = "",
    limit: Annotated[int, Query(ge=1, le=200, description="Most files returned.")] = 20,
    context_lines: Annotated[int, Query(ge=0, le=10, description="Lines of context either side of a hit line.")] = 2,
    project: Annotated[str | None, Query(max_length=300, description="Only this project's entries (short key or owner/name).")] = None,
    include_withdrawn: Annotated[
        bool, Query(description="Search superseded and retracted entries too (left out by default, as POST /search leaves them; ADR 0064).")
    ] = False,
) -> dict[str, Any]:
    """Token search over .md/.markdown/.txt files with line snippets, optionally restricted to one project.

    ``brain_kernel.search.vault_text`` answers it, as it answers ``kb_search``:
    from the search index or the files, a token bound to projects searching
    only theirs. Superseded and retracted entries are left out unless
    ``include_withdrawn``: a file that is one entry whole, a log entry its own
    lines (ADR 0064).
    """
    follower = getattr(request.app.state, "search_follower", None)
    if follower is not None:
        follower.flush()  # markers this process acknowledged are searchable (another process may lag one pass)
    base = _rel(prefix).rstrip("/")
    scope = Scope(db, principal)
    resolved = None
    if project is not None:
        if base:
            vault.path(base)  # an escaping prefix is a 400 here too, not an empty answer
        found = scope.check(project)  # malformed: 422, ambiguous: 409, out of scope: 403 (the app's error handlers)
        resolved = (found.key, found.repo) if found.status == EXACT else None
    results = []
    if project is None or resolved is not None:
        # An escaping prefix raises VaultPathError: a 400 (the app's error handler).
        results = vault_text.search(
            scope, vault, q, now=clock(), project=resolved, prefix=base, limit=limit, context_lines=context_lines, include_withdrawn=include_withdrawn
        )
    return {
        "query": q,
        "prefix": prefix,
        "project": project,
        "count": len(results),
        "results": results,
    }


def _comma_list(value: str | None) -> list[str]:
    """A comma-separated form field as its trimmed, non-empty items."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _inbox_slug(title: str) -> str:
    """The file-name slug of a title, ``note`` when nothing of it survives (upstream's fallback word)."""
    slug = slugify(title)
    # slugify never answers empty: its own fallback is "untitled". Whether that came from an
    # empty slug or a title that says "untitled" shows in a longer text that keeps a letter.
    if slug == "untitled" and slugify(f"{title} x") == "x":
        return "note"
    return slug


@router.post(
    "/vault/write_inbox",
    response_model=InboxNote,
    responses=errors(403, 409, described={400: "The body cannot be parsed, or a field is empty, too long or not valid text."}),
)
def write_inbox(
    vault: VaultDep,
    clock: ClockDep,
    db: SessionDep,
    title: Annotated[str, Form(description="The note's title (at most 200 characters).")],
    content: Annotated[str, Form(description="The note's markdown (at most 200 000 characters).")],
    principal: PrincipalDep,
    tags: Annotated[str | None, Form(description="Comma list of tags.")] = None,
    artifact_refs: Annotated[str | None, Form(description="Comma list of artifact references.")] = None,
    project: Annotated[
        str | None,
        Form(max_length=300, description="The note's project (short key or owner/name); a token bound to several projects must name one."),
    ] = None,
) -> dict[str, Any]:
    """Write a note to ``raw/inbox/YYYY-MM-DD-<slug>.md`` with its frontmatter; the name is never reused.

    A note naming a project (or written by a token bound to projects: always
    its project's, ADR 0033) carries ``project``/``repo`` in its frontmatter,
    so the inline markers it holds speak for that project only.
    """
    title = title.strip()
    if not title:
        raise HTTPException(status_code=400, detail="title is required")
    if len(title) > MAX_TITLE_CHARS:
        raise HTTPException(status_code=400, detail=f"title is longer than {MAX_TITLE_CHARS} characters")
    if not content.strip():
        raise HTTPException(status_code=400, detail="content is required")
    if len(content) > MAX_INBOX_CONTENT_CHARS:
        raise HTTPException(status_code=400, detail=f"content is longer than {MAX_INBOX_CONTENT_CHARS} characters")
    if has_lone_surrogate([title, content, tags, artifact_refs]):
        raise HTTPException(status_code=400, detail="the note holds a lone surrogate (not valid Unicode text)")
    owner = Scope(db, principal).note_owner(project)
    title, content = scrub(title), scrub(content)  # secrets never reach the vault (ADR 0021)
    tag_list, ref_list = [scrub(t) for t in _comma_list(tags)], [scrub(r) for r in _comma_list(artifact_refs)]
    now = clock().astimezone(dt.timezone.utc)  # the file's date and `created` are both UTC
    meta: dict[str, Any] = {"title": title, "created": now.isoformat(timespec="microseconds")}
    if tag_list:
        meta["tags"] = tag_list
    if ref_list:
        meta["artifact_refs"] = ref_list
    if owner is not None:
        meta["project"], meta["repo"] = owner
        if owner[1] is None:
            del meta["repo"]
    text = frontmatter.render(meta, content if content.endswith("\n") else content + "\n")
    stem = f"{INBOX_DIR}/{now.date().isoformat()}-{_inbox_slug(title)}"
    rel = f"{stem}.md"
    try:
        for _ in range(NAME_CLAIM_ATTEMPTS):
            try:
                size = vault.create_exclusive(rel, text)
                break
            except FileExistsError:
                if not vault.path(rel).parent.is_dir():
                    raise  # the inbox folder itself is a file: a broken vault, not a name clash
                rel = f"{stem}-{secrets.token_hex(3)}.md"
        else:
            raise HTTPException(status_code=503, detail="vault write failed: no free inbox file name")
    except OSError as exc:
        raise HTTPException(status_code=503, detail=f"vault write failed: {exc.strerror or exc}") from None
    try:  # the note is written: a database outage only delays its search entry to the next tick
        sync_changes(db, vault, [rel])
    except DBAPIError:
        db.rollback()
    return {"path": rel, "size_bytes": size, "artifact_refs": ref_list, "tags": tag_list}


@router.get("/signal", response_model=Signal)
def get_signal(vault: VaultDep, settings: SettingsDep) -> dict[str, Any]:
    """The amygdala alert file, exactly as upstream reports it (absent file: all clear)."""
    rel = settings.amygdala_signal_path.lstrip("/")
    try:
        path = vault.path(rel)
        text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
        modified = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc) if text is not None else None
    except OSError:
        text, modified = None, None
    return alert_state(text, modified, rel)


def _arc_file(vault: Vault, cluster_id: str) -> tuple[str, frontmatter.Document] | None:
    """An arc's file not found through the index: a live arc written by ``brain cluster``
    before the next tick, else its ``.merged.md`` tombstone."""
    clusters = vault.path("clusters")
    if not clusters.is_dir():
        return None
    for pattern in (f"*/{cluster_id}.md", f"*/{cluster_id}.merged.md"):
        for path in sorted(clusters.glob(pattern)):
            if path.is_symlink() or not vault.contains(path) or not path.is_file():  # a hand-made folder of that name is no arc
                continue
            doc = frontmatter.parse(path.read_text(encoding="utf-8", errors="replace"))
            if pattern.endswith(".merged.md") or not doc.meta.get("merged_into"):
                return vault.rel(path), doc
    return None


@router.get("/arcs/{cluster_id}", response_model=ArcFile, responses=errors(described={404: "No arc has this id (or the token may not read it)."}))
def get_arc(cluster_id: str, vault: VaultDep, db: ReadSessionDep, principal: PrincipalDep) -> dict[str, Any]:
    """An arc's frontmatter and body; a merged arc resolves to the arc that absorbed it.

    The index answers first (the arc's row, else the arc that records absorbing
    it); the vault is looked at only for what the index does not know yet. A
    token bound to projects reads only its projects' arcs (another's answers
    404 as an unknown id does).
    """
    if not _CLUSTER_ID.match(cluster_id):
        raise HTTPException(status_code=422, detail="cluster_id must be letters, digits, '.', '_' or '-'")
    scope = Scope(db, principal)
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
            if scope.hides_path(rel):  # another project's arc reads as a missing one (ADR 0033)
                break
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
