"""``brain reindex``: every derived store made anew from the whole vault (entries, file stats, search documents).

Why a rebuild never drops an acknowledged write (ADR 0011): the pass reads
the database clock before it reads the first file (``scan_point``), and
every upsert stamps its rows with the database clock at the moment it runs
(``clock_timestamp()``), which for a marker is after its vault write. A row
stamped before the scan began was written to the vault before the scan
began, so the scan saw it and rewrote it unless its file no longer holds it;
a row stamped after is kept. Writes between rebuilds go through
``brain_kernel.index.changes`` (ADR 0038).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing import get_context
from typing import Any

from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.heat import arc_facts
from brain_core.progress import SILENT, Progress
from brain_core.vault import frontmatter
from brain_core.vault.layout import is_arc, is_tombstone, kind_of_path
from brain_core.vault.records import (
    ActivityTally,
    KeptKey,
    entry_line_spans,
    kept_keys,
    parsed_document,
    parsed_records,
    records_for,
    skipped_entries,
)
from brain_core.vault.regions import live_paths
from brain_kernel import idempotency
from brain_kernel.db.engine import defer_indexes, restore_indexes
from brain_kernel.feed.snapshots import collect
from brain_kernel.index.entries import ReindexSummary, drop_paths_not_in, record_activity, scan_point, write_file_records
from brain_kernel.index.filestats import StatRow, digest, forget, known_paths, save, stat_files
from brain_kernel.index.mitigation import apply_mitigation
from brain_kernel.search import search_docs
from brain_kernel.vault_store import Vault

ARC_CAPABLE_KINDS = ("arc", "region", "signal")


def live_vault_files(listed: Iterable[str]) -> list[str]:
    """The files that can hold entries (``filestats.stat_files``'s paths) as the keeper scans them: tombstoned
    raw files and second copies of an arc left out (``regions.live_paths`` decides, in its own order), so a
    full rebuild indexes the documents a tick reads."""
    paths = list(listed)
    return list(live_paths(paths, [p for p in paths if kind_of_path(p) in ARC_CAPABLE_KINDS]).live)


REBUILD_BATCH = 500  # files per batch: memory stays bounded by the batch, not the vault
REBUILD_BYTES = 4 << 20  # and text per batch (a day's log of a busy year is 1.6 MB; its search rows are seven times that)
PREPARE_APART_BYTES = 64 << 20  # a vault of this much text has its search segments made by a worker process


def rebuild(session: Session, vault: Vault, *, progress: Progress = SILENT, key_ttl_seconds: int | None = None) -> ReindexSummary:
    """Make the index what the vault holds now, keeping writes acknowledged meanwhile (no commit).

    Files are read, parsed and written in batches (memory bounded by a batch,
    not by the vault); unchanged rows are not rewritten; rows of files no
    longer live are deleted; the mitigation set is applied once at the end.
    The file stats are refreshed too, so the next tick reads only what
    changes after this. Into an empty index (a first build) the tables'
    secondary indexes are built once after the load (``db.defer_indexes``),
    and the tables stay locked until the caller commits. Each batch is
    written on a writer thread while the next one is read and parsed.

    ``key_ttl_seconds``: the idempotency keys the markers' text keeps, of
    writes younger than that, are remembered again (``idempotency.restore``,
    one statement a batch; a key the table holds is left as it is), so a
    client replaying its markers after the database was lost writes nothing
    (ADR 0035).
    """
    summary = ReindexSummary()
    started = scan_point(session)
    deferred = defer_indexes(session, "entries")  # a first build into an empty index: its indexes built once, after the load
    stats = stat_files(vault)
    files = live_vault_files(stats)  # one walk of the vault lists and stats its files
    known = known_paths(session)  # the files the file stats knew, for the rows of those gone
    tally = ActivityTally()
    fresh = deferred is not None

    live = set(files)
    # The searchable files that hold no entries (day dashboards, feed files, notes) are read in the same batches,
    # for their search segments only: a large vault's are all made by the worker, and ``finish`` reads nothing again.
    others = {rel: stamp for rel, stamp in search_docs.searchable_files(vault) if rel not in live}

    def stamp_of(rel: str) -> search_docs.Stamp | None:
        stat = stats.get(rel)
        return (stat.size, stat.mtime_ns) if stat is not None else others.get(rel)

    size_of = lambda rel: (stamp_of(rel) or (0, 0))[0]  # noqa: E731
    keys_since = started - dt.timedelta(seconds=key_ttl_seconds) if key_ttl_seconds else None
    paths = [*files, *others]
    # Fed the texts read here (each file is read once); a first build samples the listing for its common codes.
    documents = search_docs.DocumentsBuild(session, vault, ((rel, size_of(rel)) for rel in paths if search_docs.indexable(rel)))

    def write(
        batch: list[str],
        records: list[EntryRecord],
        entries: list[StatRow],
        texts: list[tuple[str, str]],
        spans: dict[str, search_docs.Spans],
        prepared: Future[dict[str, search_docs.Prepared]] | None,
        kept: list[KeptKey],
    ) -> None:
        part = write_file_records(session, batch, records, before=started, tally=tally, fresh=fresh)
        if kept and key_ttl_seconds:
            summary.keys_restored += idempotency.restore(session, kept, ttl_seconds=key_ttl_seconds)
        summary.entries += part.entries
        summary.removed += part.removed
        for kind, n in part.by_kind.items():
            summary.by_kind[kind] = summary.by_kind.get(kind, 0) + n
        save(session, entries)
        stamps = {rel: stamp for rel, _ in texts if (stamp := stamp_of(rel)) is not None}
        documents.add(texts, stamps, spans, prepared.result() if prepared is not None else None)
        summary.files += len(batch)

    done = 0
    # One batch is written on the writer's thread while the next is read and parsed here (which touches no
    # row: the session is the writer's until its batch is done); the database's work overlaps the parsing.
    # A large vault's search segments (splitting, lowering, gram codes) are made by a worker process
    # beside this one: the interpreter's lock held here no longer bounds the pass.
    helper = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) if sum(map(size_of, paths)) >= PREPARE_APART_BYTES else None
    # A rerun's worker makes only the segments of documents the index does not hold as read: a hint read on a
    # connection of its own (the writer's connection is busy), which ``_write`` tests again under the row locks.
    # Not into an empty index: its tables are locked by this transaction until it commits.
    hint = helper is not None and documents.deferred is None and not documents.recode
    peek = search_docs.peek_connection(session) if hint else None
    with (
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="reindex-write") as writer,
        helper or contextlib.nullcontext(),
        peek or contextlib.nullcontext(),
    ):
        inflight: Future[None] | None = None
        legacy: list[EntryRecord] = []  # records a legacy ``project:`` names: resolved against the known projects
        for batch in search_docs.batches(paths, REBUILD_BATCH, size_of, REBUILD_BYTES):
            records: list[EntryRecord] = []
            entries: list[StatRow] = []
            texts: list[tuple[str, str]] = []
            spans: dict[str, search_docs.Spans] = {}  # each log split once: its records' entries give the search segments
            kept: list[KeptKey] = []
            for rel in batch:
                text_ = _read(vault, rel, summary)
                done += 1
                progress.step(done, len(paths))  # files read, of all
                if text_ is None:
                    continue
                texts.append((rel, text_))
                if rel not in live:
                    continue  # searched, holds no entry
                found, doc = file_records(rel, text_, summary.skipped)
                meta = doc.meta if doc is not None else None
                records.extend(found)
                legacy.extend(r for r in found if r.project is None and r.meta.get("legacy_project"))
                spans[rel] = entry_line_spans(rel, text_)  # the split file_records just made (kept by the parser)
                if keys_since is not None:
                    kept.extend(kept_keys(rel, text_, found, since=keys_since))
                stat = stats.get(rel)
                if stat is not None:
                    entries.append(StatRow(rel, stat.size, stat.mtime_ns, digest(text_), kind_of_path(rel), arc_facts_of(rel, text_, stat.mtime_ns, meta=meta)))
            prepared = None
            if helper is not None:
                todo = [(rel, t, spans.get(rel)) for rel, t in texts]
                todo = todo if peek is None else search_docs.not_indexed(peek, todo)
                prepared = helper.submit(search_docs.prepare_texts, todo, documents.left_out)
            if inflight is not None:
                inflight.result()  # the batch before, written (its error raised here)
            inflight = writer.submit(write, [rel for rel in batch if rel in live], records, entries, texts, spans, prepared, kept)
        if inflight is not None:
            inflight.result()
    restore_indexes(session, deferred or [])
    summary.removed += drop_paths_not_in(session, files, before=started)
    forget(session, [p for p in known if p not in live])
    apply_mitigation(session)
    summary.projects = record_activity(session, tally.result())
    if legacy:
        # Written before the projects that name them were known (a rebuild into an empty database records them
        # last): resolved again now, so a first rebuild gives the rows a second one would.
        write_file_records(session, sorted({r.vault_path for r in legacy}), legacy, before=started)
    documents.finish(vault)  # GET /vault/search is served from it from now on
    collect(session)
    return summary


def _read(vault: Vault, rel: str, summary: ReindexSummary) -> str | None:
    try:
        return vault.read_listed(rel)  # a path the walk listed
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        summary.skipped.append(f"{rel}: {getattr(exc, 'strerror', None) or exc}")
        return None


def file_records(rel: str, text_: str, skipped: list[str], *, doc: frontmatter.Document | None = None) -> tuple[list[EntryRecord], frontmatter.Document | None]:
    """A file's rows, and its parsed document when its kind's rows come from one (``doc``: already parsed).

    The one per-file reader of a rebuild and of ``changes.sync_changes``; what the
    file held but could not give (a bad file, a log entry's bad stamp) goes to ``skipped``.
    """
    try:
        if doc is None:
            doc = parsed_document(rel, text_)
        records = parsed_records(rel, doc) if doc is not None else records_for(rel, text_)
    except Exception as exc:  # one bad file must not stop a rebuild of the whole vault, or its writer
        skipped.append(f"{rel}: {type(exc).__name__}: {exc}")
        return [], doc
    skipped.extend(f"{rel}: {problem}" for problem in skipped_entries(rel, text_))
    return records, doc


def arc_facts_of(rel: str, text_: str, mtime_ns: int, *, meta: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The facts the file stats keep of a file that is an arc (None for any other file); ``meta``: its frontmatter, already parsed."""
    kind = kind_of_path(rel)
    if kind not in ARC_CAPABLE_KINDS:
        return None
    if meta is None:
        meta = frontmatter.parse(text_).meta
    if not is_arc(kind, meta) or is_tombstone(rel) or meta.get("merged_into"):
        return None
    return arc_facts(meta, mtime=file_time(mtime_ns))


def file_time(mtime_ns: int) -> dt.datetime:
    """A file's mtime (nanoseconds) as an aware time: what an arc's facts in the file stats hold as ``mtime``."""
    return dt.datetime.fromtimestamp(mtime_ns / 1e9, tz=dt.timezone.utc)
