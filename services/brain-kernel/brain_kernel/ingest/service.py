"""Ingest a message (and uploaded files) into the vault's inbox: ``POST /ingest``, ``/ingest_with_files``, MCP ``brain_ingest``.

Upstream's flow (UPSTREAM.md 1.9): uploaded files become notes first; the
message is classified by the OpenAI-compatible endpoint (the regex fallback
when none is configured, it fails or its answer is unusable); its
extractables are fetched concurrently, each an inbox note; then the
message's own note links them. What upstream lacked:

- **The write rule first.** The note's project is the request's ``project``,
  else a scoped token's only project (``Scope.write_project``, ADR 0033),
  else none; a refusal (403, 422, 409) comes before anything is classified,
  fetched or written.
- **Secrets never travel.** The message is scrubbed before the classifier
  sees it or a URL in it is fetched; every note's title and body is
  scrubbed again before it is written, and so is the answer.
- **A failed fetch is a line in ``errors``**, never a failed request: every
  fetch is bounded (``brain_kernel.ingest.fetch``), and a note the vault
  refuses is an error line too.
- **One path to the stores.** Notes are created through ``VaultWrites``
  (ADR 0039, never over an existing file) and indexed by ``sync_changes``
  (ADR 0038) in a unit of work opened only for that, so no connection is
  held while pages load.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from brain_core import ingest as rules
from brain_core.ingest import Classified, Extractable, Note
from brain_core.redact import scrub
from brain_core.text import slugify
from brain_core.vault import frontmatter
from brain_core.vault.layout import INBOX_DIR
from brain_kernel.auth import Principal
from brain_kernel.index.changes import sync_changes
from brain_kernel.ingest.fetch import FetchError, clone, fetch_url, read_local
from brain_kernel.scope import Scope
from brain_kernel.settings import Settings
from brain_kernel.ticks.llm import LLMError, chat_completion
from brain_kernel.vault_store import Vault
from brain_kernel.vault_writes import VaultWrites

log = logging.getLogger("brain.ingest")

UnitOfWork = Callable[[], AbstractContextManager[Session]]
Owner = tuple[str, str | None]
MAX_MESSAGE_CHARS = 500_000
MAX_FILES = 20
MAX_FETCHERS = 8
NAME_CLAIM_ATTEMPTS = 8
CLASSIFY_TEMPERATURE = 0.1
CLASSIFY_MAX_TOKENS = 2048


@dataclass(frozen=True)
class Upload:
    """A file sent with ``/ingest_with_files``: its name and bytes."""

    name: str
    data: bytes


def classify(settings: Settings, message: str, *, transport: httpx.BaseTransport | None = None) -> Classified:
    """The message classified by the chat endpoint, else by the regex fallback (no endpoint, a failure, an unusable answer)."""
    if not settings.llm_base_url:
        return rules.regex_classification(message)
    chat = [{"role": "system", "content": rules.CLASSIFY_PROMPT}, {"role": "user", "content": message}]
    try:
        reply = chat_completion(
            settings,
            chat,
            model=settings.classify_model,
            timeout_s=settings.classify_timeout_s,
            transport=transport,
            temperature=CLASSIFY_TEMPERATURE,
            max_tokens=CLASSIFY_MAX_TOKENS,
            response_format={"type": "json_object"},
        )
    except LLMError as exc:
        log.warning("ingest: classification failed, the regex fallback decides: %s", exc)
        return rules.regex_classification(message)
    return rules.parse_classification(reply) or rules.regex_classification(message)


def _label(item: Extractable) -> str:
    """An extracted note's title: slug(hint or source), upstream's fallback word when nothing survives."""
    slug = slugify(item.hint or item.value)
    return rules.NOTE_FALLBACK if slug == "untitled" and slugify(f"{item.hint or item.value} x") == "x" else slug


def fetch(item: Extractable, settings: Settings, fetched_at: str, *, transport: httpx.BaseTransport | None = None) -> Note:
    """One extractable fetched into its note (fetched text made inert: ``defuse_markers``); FetchError when it fails."""
    label = _label(item)
    tags = list(rules.TAGS.get(item.type, ()))
    if item.type == "url":
        text = rules.defuse_markers(fetch_url(item.value, settings, transport=transport))
        return Note(label, rules.fetched_body("URL", item.hint or label, item.value, fetched_at, text), tags)
    if item.type == "repo":
        repo = clone(item.value, settings)
        return Note(label, rules.defuse_markers(rules.repo_body(item.hint or label, item.value, fetched_at, repo.readme, repo.files, repo.more)), tags)
    if item.type == "local_path":
        name, text = read_local(item.value, settings)
        return Note(label, rules.fetched_body("Local File", item.hint or name, item.value, fetched_at, rules.defuse_markers(text)), tags)
    if item.type == "youtube":
        raise FetchError("YouTube transcripts are not fetched by this kernel")
    raise FetchError(f"unknown extractable type {item.type[:40]!r}")


def _inbox_text(note: Note, owner: Owner | None, now: dt.datetime) -> str:
    meta: dict[str, Any] = {"title": scrub(note.title), "created": now.isoformat(timespec="microseconds")}
    if note.tags:
        meta["tags"] = list(dict.fromkeys(note.tags))
    if owner is not None:
        meta["project"] = owner[0]
        if owner[1] is not None:
            meta["repo"] = owner[1]
    body = scrub(note.body)
    return frontmatter.render(meta, body if body.endswith("\n") else body + "\n")


def write_note(writes: VaultWrites, note: Note, owner: Owner | None, now: dt.datetime) -> str:
    """Create ``raw/inbox/<date>-<slug(title)>.md`` (a taken name gets ``-<6 hex>``): its vault path."""
    text = _inbox_text(note, owner, now)
    slug = slugify(scrub(note.title))
    stem = f"{INBOX_DIR}/{now.date().isoformat()}-{rules.NOTE_FALLBACK if slug == 'untitled' else slug}"
    rel = f"{stem}.md"
    for _ in range(NAME_CLAIM_ATTEMPTS):
        try:
            writes.create(rel, text)
            return rel
        except FileExistsError:
            if not writes.vault.path(rel).parent.is_dir():
                raise  # the inbox folder itself is a file: a broken vault, not a name clash
            rel = f"{stem}-{secrets.token_hex(3)}.md"
    raise OSError("no free inbox file name")


def _stem(rel: str) -> str:
    return rel.rsplit("/", 1)[-1].removesuffix(".md")


def _upload_note(upload: Upload) -> Note:
    stem = upload.name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    base = stem.rsplit(".", 1)[0] if "." in stem.strip(".") else stem
    slug = slugify(base)
    text = upload.data.decode("utf-8", errors="replace")[: rules.MAX_UPLOAD_CHARS]
    return Note(rules.NOTE_FALLBACK if slug == "untitled" else slug, rules.upload_body(stem, text), list(rules.UPLOAD_TAGS))


def ingest(
    settings: Settings,
    vault: Vault,
    uow: UnitOfWork,
    message: str,
    *,
    principal: Principal,
    now: dt.datetime,
    project: str | None = None,
    uploads: Sequence[Upload] = (),
    llm_transport: httpx.BaseTransport | None = None,
    fetch_transport: httpx.BaseTransport | None = None,
) -> dict[str, Any]:
    """Ingest ``message`` (after ``uploads``) as ``principal``: upstream's answer plus ``project`` and ``classified_by``.

    Raises the scope's refusals (OutOfScope, ProjectRequired, InvalidKey,
    AmbiguousProject) before any work; every later failure is a line in
    ``errors``.
    """
    owner: Owner | None = None
    if principal.restricted or (project is not None and project.strip()):
        with uow() as db:
            owner = Scope(db, principal).note_owner(project)
    now = now.astimezone(dt.timezone.utc)
    batch_id = secrets.token_hex(6)
    writes = VaultWrites(vault)
    paths: list[str] = []
    errors: list[str] = []

    def put(note: Note) -> str | None:
        try:
            rel = write_note(writes, note, owner, now)
        except OSError as exc:
            errors.append(f"vault write failed for {scrub(note.title)[:80]}: {exc.strerror or exc}")
            return None
        paths.append(rel)
        return rel

    for upload in uploads[:MAX_FILES]:
        put(_upload_note(upload))
    if len(uploads) > MAX_FILES:
        errors.append(f"{len(uploads) - MAX_FILES} files past the first {MAX_FILES} were not ingested")

    clean = scrub(message)  # the classifier and the fetchers see no secret
    classified = classify(settings, clean, transport=llm_transport)
    if classified.dropped:
        errors.append(f"{classified.dropped} references past the first {rules.MAX_EXTRACTABLES} were not fetched")
    fetched_at = now.isoformat(timespec="seconds")
    items = list(classified.extractables)
    outcomes: list[Note | str] = []
    if items:
        with ThreadPoolExecutor(max_workers=min(MAX_FETCHERS, len(items)), thread_name_prefix="brain-ingest") as pool:
            futures = [pool.submit(fetch, item, settings, fetched_at, transport=fetch_transport) for item in items]
            for item, future in zip(items, futures, strict=True):
                try:
                    outcomes.append(future.result())
                except FetchError as exc:
                    outcomes.append(scrub(f"{item.type} {item.value[:300]}: {exc}"))
                except Exception as exc:  # a fetcher's bug is this reference's error, never the request's 500
                    log.exception("ingest: fetching %s failed", item.type)
                    outcomes.append(scrub(f"{item.type} {item.value[:300]}: {type(exc).__name__}"))
    related: list[str] = []
    for outcome in outcomes:
        if isinstance(outcome, str):
            errors.append(outcome)
            continue
        rel = put(outcome)
        if rel is not None:
            related.append(_stem(rel))

    title = scrub(classified.title or " ".join(classified.semantic_text.split())[: rules.MAX_TITLE_CHARS]).strip() or rules.NOTE_FALLBACK
    tags = [scrub(t) for t in classified.tags]
    main: str | None = None
    if classified.semantic_text.strip() or related:
        body = rules.main_body(classified.semantic_text, batch_id, clean, related)
        main = put(Note(title, body, [*tags, rules.MAIN_TAG]))

    if writes.touched:
        try:
            with uow() as db:
                sync_changes(db, vault, writes.changes(writes.touched))
        except DBAPIError as exc:  # the notes are written: a database outage only delays their index entries to the next tick
            log.warning("ingest: notes written, index not updated: %s", str(exc.orig or exc).splitlines()[0])
    return {
        "batch_id": batch_id,
        "obsidian_path": main,
        "vault_paths": paths,
        "semantic_text_preview": scrub(classified.semantic_text[: rules.PREVIEW_CHARS]),
        "errors": errors,
        "title": title,
        "tags": tags,
        "project": None if owner is None else owner[1] or owner[0],
        "classified_by": classified.by,
    }
