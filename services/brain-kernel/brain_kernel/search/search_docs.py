"""The vault search index: ``GET /vault/search`` answered from Postgres instead of a read of every file.

Every searchable file (``.md``, ``.markdown``, ``.txt``, outside dot folders,
``.git``, ``.obsidian``, ``.trash`` and ``node_modules``: what the search's
walk reads) is a row of ``vault_documents`` (its lower-cased name and that
name's trigram codes, size, line count), and its lines are rows of
``vault_segments`` in line-aligned pieces: each entry of a shared log (its
span as the log codec splits the file), the lines between entries, and
blocks of at most ``BLOCK_LINES`` lines of any other file. A segment keeps
its lines as written and lower-cased one by one (``str.lower``, exactly as
the search lowers them), and the codes of the distinct trigrams of its
lower-cased words in a GIN-indexed ``int4[]`` (revision 0008). pg_trgm is not
in the embedded server; a token never holds whitespace, so only trigrams of
whitespace-free runs are kept. An ASCII trigram's code is its three bytes,
any other's a hash of its code points (a collision only adds a candidate,
which the exact test then drops). Since version 2 the words' bigrams and
characters are coded too, for tokens of one or two characters; version 3
leaves out the ASCII ones a first build's sample found in more than a tenth
of the segments (``sample_common``, ADR 0029), whose tokens are tested by
``strpos`` as their bitmap would cost a scan's reads anyway.

``search`` keeps upstream's semantics (``brain_core.textsearch``) exactly:
a token of three characters or more selects segments by its trigrams
(``grams @> ...``), a shorter one by ``strpos``; every candidate is then
tested exactly in SQL on the lower-cased lines (``strpos`` is a literal
substring test, whatever the database's locale), which gives each file's hit
lines, the tokens it holds and its filename hits; files are ranked by
upstream's score and path (code-point order, ``COLLATE "C"``) and only the
``limit`` best are built, with snippets from the few segments around their
first three hit lines. With a project, only P's entries count, as in
``file_scan.search_project``: whole files P alone holds, and in files
shared with other projects only the segments of P's own entries (context
stops at any other line); P's segments are read from its entries, so the
cost follows P's size, not the tokens'. Without a project, a query with a
frequent token first finds the files that must hold the answer
(``_top_candidates``: those naming a token, and the first ones in path
order that reach the score's cap) and ranks only those. Withdrawn entries
are left out (``brain_kernel.search.withdrawn``, ADR 0064): a file that is one
matches nothing, a log entry's segments match nothing and no context
reaches them.

The index follows the vault through ``upsert_documents`` and
``delete_documents`` (for the vault writes, the keeper tick and ``brain
reindex`` to call) and ``rebuild_documents`` (a walk that reads only files
whose size or mtime changed, and rewrites only texts that changed). A
search uses it only for a vault root a full rebuild has recorded in
``vault_search_state``; otherwise the route scans the files as before.
Stored text cannot hold NUL, so a NUL reads as U+FFFD in the index.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import posixpath
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from brain_core.text import storable
from brain_core.textsearch import (
    ALL_TOKENS_BONUS,
    FILENAME_WEIGHT,
    MAX_LINE_SCORE,
    MAX_SNIPPETS,
    SNIPPET_CHARS,
    Hit,
    context_snippet,
    is_searchable,
    lines_of,
    tokens,
)
from brain_core.vault.layout import LOG_KINDS, is_tombstone, kind_of_path
from brain_core.vault.logs import split_log
from brain_core.vault.records import entry_line_spans
from brain_kernel.db.engine import defer_indexes, restore_indexes, text_array
from brain_kernel.db.models import Entry
from brain_kernel.feed.feed_repo import escape_like, key_owned_sql, member
from brain_kernel.index.filestats import walk
from brain_kernel.search.file_scan import SKIP_DIRS
from brain_kernel.search.withdrawn import NOTHING, withdrawn
from brain_kernel.vault_store import Vault, unwalked

BLOCK_LINES = 64  # lines per segment of a file that is not a log of entries
BATCH_FILES = 200  # files written per statement batch
BATCH_BYTES = 8 << 20  # and at most this much text per batch of a rebuild (a year of day logs is 1.6 MB a day)


# -- what is indexed ------------------------------------------------------------------------------------------


def walked(rel: str) -> bool:
    """Whether the walk from the vault root reaches this path (no dot or skipped folder or file on the way; "" is the root)."""
    return not unwalked(rel, SKIP_DIRS)


def indexable(rel: str) -> bool:
    """Whether the search's walk reads this vault path: a searchable suffix, reached from the root, not a merge tombstone."""
    return is_searchable(rel) and walked(rel) and not is_tombstone(rel)


# Mixing constants of the code of a trigram that is not all ASCII (any fixed odd numbers would do).
_MIX = (0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D)
_TRIGRAM = re.compile(r"(?=(\S{3}))")  # every three characters without whitespace (``\S`` is ``not str.isspace``)
_MAX_CODES = 200_000  # gram codes remembered across documents (a trigram's code is cheap; the map bounds memory)


def _code(gram: str) -> int:
    """A gram's code: its one to three ASCII bytes exactly (positive), else a hash of its code points (negative).

    ASCII codes of different lengths never meet: a trigram's is at least
    0x010101, a bigram's between 0x0101 and 0xFFFF, a character's below 0x80.
    """
    points = [ord(ch) for ch in gram]
    if max(points) < 128:
        code = 0
        for point in points:
            code = (code << 8) | point
        return code
    mixed = sum(point * mix for point, mix in zip(points, _MIX, strict=False)) + (0 if len(points) == 3 else len(points))
    return ((mixed & 0xFFFFFFFF) | 0x80000000) - 0x1_0000_0000


class _CodeTexts(dict[str, str]):
    """Gram (one to three characters) -> its code in decimal, computed on first use (a lookup that hits stays in C: ``map`` over ``__getitem__``)."""

    def __missing__(self, gram: str) -> str:
        if len(self) >= _MAX_CODES:
            self.clear()
        text_ = self[gram] = str(_code(gram))
        return text_


_CODE_TEXTS = _CodeTexts()


_WORD_CHARS = 12  # words kept in the map at most this long: ids, stamps and hashes are each seen once
_MAX_WORDS = 50_000


class _WordCodes(dict[str, frozenset[str]]):
    """A whitespace-free run -> the codes (decimal) of its trigrams, bigrams and characters, computed on first use (words repeat)."""

    def __missing__(self, word: str) -> frozenset[str]:
        grams = {*_TRIGRAM.findall(word), *(word[i : i + 2] for i in range(len(word) - 1)), *word}
        codes = frozenset(map(_CODE_TEXTS.__getitem__, grams))
        if len(word) <= _WORD_CHARS:
            if len(self) >= _MAX_WORDS:
                self.clear()
            self[word] = codes
        return codes


_WORD_CODES = _WordCodes()


def _codes_of(lowered: str) -> set[str]:
    """The codes (decimal) of the distinct grams (three, two and one characters) of the whitespace-free runs of
    lower-cased text. ``str.split`` cuts at exactly the characters ``\\S`` excludes (``str.isspace``), so the
    runs' trigrams are the text's."""
    return set().union(*map(_WORD_CODES.__getitem__, set(lowered.split())))


def grams_text(lowered: str, common: frozenset[str] = frozenset()) -> str:
    """The codes of lower-cased text's grams (``_codes_of``) but the ``common`` ones, as an ``int4[]`` literal (the
    short ones serve tokens of one or two characters, index version 2; the common short ones are left out, 3)."""
    codes = _codes_of(lowered)
    if common:
        codes -= common
    return "{" + ",".join(codes) + "}"


def token_grams(token: str) -> list[int]:
    """The codes every segment holding ``token`` (no whitespace) has: its trigrams, or the token itself when shorter."""
    if len(token) < 3:
        return [_code(token)]
    return sorted({_code(token[i : i + 3]) for i in range(len(token) - 2)})


# The search index's code version: 2 adds every word's bigrams and characters (revision 0011); 3 leaves out the
# ASCII ones that a first build's sample found in most segments (``common_codes``, revision 0013).
CODES = 3
SHORT_CODES = 2  # the first version whose segments carry short codes
COMMON_SHARE = 0.1  # a short code held by more of the sampled segments is common: its bitmap would cost a scan's reads
COMMON_MIN_BYTES = 64 << 20  # a vault of less searchable text keeps every code (its index is small)
SAMPLE_FILES = 64  # files read for the sample, at evenly spaced points of the vault's text
SAMPLE_SEGMENTS = 160  # segments taken from each, evenly spaced
SAMPLE_BYTES = 128 << 10  # of each file's text, at most: its first lines, cut at a line's end (a day log's entries all look alike)
SAMPLE_MIN = 2_000  # segments a sample needs before any code is called common


def common_codes(segments: Iterable[str]) -> dict[int, float]:
    """The ASCII short codes (characters, bigrams) more than ``COMMON_SHARE`` of these lower-cased segments hold,
    with the share that holds each. An ASCII code is exactly its gram, so its share is its token's."""
    counts: Counter[str] = Counter()
    n = 0
    for lowered in segments:
        n += 1
        counts.update(_codes_of(lowered))
    return {code: k / n for c, k in counts.items() if 0 <= (code := int(c)) <= 0xFFFF and k > COMMON_SHARE * n}


def sample_common(vault: Vault, listing: Iterable[tuple[str, int]]) -> dict[int, float]:
    """``common_codes`` of a sample of the segments of the searchable files ``listing`` gives (path, size), for a
    first build to leave out; none for a vault of less than ``COMMON_MIN_BYTES`` of text or a sample too small.

    The files are those at ``SAMPLE_FILES`` evenly spaced points of the
    listing's text (so a file is read as likely as its text is large, as
    segments are), each giving ``SAMPLE_SEGMENTS`` of the segments of its
    first ``SAMPLE_BYTES`` at most: the whole of a large day log is split into
    entries only by the rebuild's own pass, not before it starts.
    """
    files = list(listing)
    total = sum(size for _, size in files)
    if total < COMMON_MIN_BYTES:
        return {}
    step = total / SAMPLE_FILES
    picks: list[str] = []
    point, upto = step / 2, 0
    for path, size in files:
        upto += size
        if point < upto:
            picks.append(path)
            while point < upto:
                point += step
    segments: list[str] = []
    for path in picks:
        try:
            body = vault.read_listed(path)
        except (OSError, UnicodeDecodeError):
            continue
        if len(body) > SAMPLE_BYTES:
            body = body[: body.rfind("\n", 0, SAMPLE_BYTES) + 1] or body[:SAMPLE_BYTES]
        lowered = [seg.lowered for seg in segments_of(path, storable(body))]
        segments += lowered[:: max(1, len(lowered) // SAMPLE_SEGMENTS)][:SAMPLE_SEGMENTS]
    return common_codes(segments) if len(segments) >= SAMPLE_MIN else {}


@dataclass(frozen=True)
class IndexCodes:
    """What the indexed roots' segments carry: the lowest code version among them (0: none indexed) and the common
    short codes they leave out (code -> share of the sampled segments that held it)."""

    version: int
    common: Mapping[int, float]

    @property
    def left_out(self) -> frozenset[str]:
        """The common codes in decimal, as ``grams_text`` leaves them out."""
        return frozenset(map(str, self.common))


def index_codes(session: Session) -> IndexCodes:
    """The codes the index's segments carry, read in the caller's transaction (a writer leaves out these, a search
    asks the GIN index only for the others)."""
    rows = session.execute(text("SELECT codes, common FROM vault_search_state")).all()
    common: dict[int, float] = {}
    for _, held in rows:
        common.update((int(code), share) for code, share in held.items())
    return IndexCodes(min((codes for codes, _ in rows), default=0), common)


@dataclass(frozen=True)
class Segment:
    """Consecutive lines of a document: 1-based first and last line, the log entry they are (if any), the text."""

    first_line: int
    last_line: int
    entry_id: str | None
    content: str
    lowered: str


Spans = Mapping[str, tuple[int, int]]  # a log's entry id -> its first and last line (``records.entry_line_spans``)


def segments_of(path: str, body: str, spans: Spans | None = None) -> list[Segment]:
    """A document's lines in line-aligned pieces: each log entry's span, the lines between, blocks of other files.

    ``spans``: the log's entry spans, when the caller split it already.
    """
    lines = lines_of(body)
    owner: list[str | None] = [None] * len(lines)
    for entry_id, (first, last) in sorted((entry_line_spans(path, body) if spans is None else spans).items(), key=lambda item: item[1]):
        for n in range(max(first, 1), min(last, len(lines)) + 1):
            if owner[n - 1] is None:
                owner[n - 1] = entry_id
    out = []
    i = 0
    while i < len(lines):
        who, j = owner[i], i + 1
        while j < len(lines) and owner[j] == who and (who is not None or j - i < BLOCK_LINES):
            j += 1
        chunk = lines[i:j]
        out.append(Segment(i + 1, j, who, "\n".join(chunk), "\n".join(line.lower() for line in chunk)))
        i = j
    return out


# -- keeping the index current --------------------------------------------------------------------------------


def batches(items: Iterable[Any], size: int, weight: Callable[[Any], int] | None = None, max_weight: int = 0) -> Iterator[list[Any]]:
    """Lists of at most ``size`` items and (with ``weight``) of at most ``max_weight`` in all, one item at least."""
    batch: list[Any] = []
    held = 0
    for item in items:
        w = weight(item) if weight is not None else 0
        if batch and weight is not None and held + w > max_weight:
            yield batch
            batch, held = [], 0
        batch.append(item)
        held += w
        if len(batch) >= size:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


_UPSERT_DOCUMENTS = """INSERT INTO vault_documents (path, name_lower, name_grams, size, mtime_ns, lines, digest)
SELECT path, name, g::int4[], size, mtime_ns, lines, digest
  FROM unnest(%(paths)s::text[], %(names)s::text[], %(name_grams)s::text[], %(sizes)s::bigint[], %(mtimes)s::bigint[], %(lines)s::int[], %(digests)s::text[])
    AS d(path, name, g, size, mtime_ns, lines, digest)
ON CONFLICT (path) DO UPDATE SET name_lower = excluded.name_lower, name_grams = excluded.name_grams, size = excluded.size,
    mtime_ns = excluded.mtime_ns, lines = excluded.lines, digest = excluded.digest, updated_at = clock_timestamp()"""
_RESTAMP = """UPDATE vault_documents d SET mtime_ns = s.mtime_ns, updated_at = clock_timestamp()
  FROM unnest(%(paths)s::text[], %(mtimes)s::bigint[]) AS s(path, mtime_ns) WHERE d.path = s.path AND d.mtime_ns IS DISTINCT FROM s.mtime_ns"""
_INDEXED = "SELECT path, digest, mtime_ns FROM vault_documents WHERE path = ANY(%(paths)s::text[])"  # read, not locked
# Text format, the codes as an array literal: psycopg dumps an int list for a binary COPY in Python, a third of
# a rebuild's time; a joined string is written (and escaped) by its C code.
_COPY_SEGMENTS = "COPY vault_segments (path, first_line, last_line, entry_id, content, lowered, grams) FROM STDIN"


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


_NULL = "\\N"
Prepared = tuple[str, int, bytes]  # a document's digest (of its stored text), line count and ``segment_rows``


def _copy_text(value: str) -> str:
    """A value as a field of COPY's text format (the stored text holds no NUL)."""
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def segment_rows(path: str, pieces: Sequence[Segment], common: frozenset[str] = frozenset()) -> bytes:
    """Segments of ``path`` as rows of ``_COPY_SEGMENTS`` in COPY's text format, with their gram codes (``grams_text``
    but the ``common`` ones)."""
    head = _copy_text(path)
    return "".join(
        f"{head}\t{seg.first_line}\t{seg.last_line}\t{_NULL if seg.entry_id is None else _copy_text(seg.entry_id)}"
        f"\t{_copy_text(seg.content)}\t{_copy_text(seg.lowered)}\t{grams_text(seg.lowered, common)}\n"
        for seg in pieces
    ).encode("utf-8", "surrogatepass")


def prepare(path: str, raw: bytes, spans: Spans | None = None, common: frozenset[str] = frozenset()) -> Prepared:
    """What a document's rows are, from its stored text alone (no database: a worker process may run it), its
    segments' codes but the ``common`` ones."""
    pieces = segments_of(path, raw.decode("utf-8", "surrogatepass"), spans)
    return _digest(raw), (pieces[-1].last_line if pieces else 0), segment_rows(path, pieces, common)


def peek_connection(session: Session) -> Any:
    """A connection of its own beside ``session``'s transaction, for ``not_indexed``: autocommit, and never waiting
    on a lock for more than a moment."""
    conn = session.get_bind().engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    conn.exec_driver_sql("SET lock_timeout = '1s'")
    return conn


def not_indexed(conn: Any, docs: Sequence[tuple[str, str, Spans | None]]) -> list[tuple[str, str, Spans | None]]:
    """The (path, text as read, its spans) among ``docs`` whose text the index does not hold, as ``conn`` reads it.

    A hint that spares a rerun's worker the segments of unchanged documents:
    ``_write`` tests every document again under its row lock. A read that
    cannot be made (a table locked) gives every document.
    """
    try:
        held = {path: digest for path, digest, _ in conn.exec_driver_sql(_INDEXED, {"paths": [path for path, _, _ in docs]})}
    except DBAPIError:
        return list(docs)
    return [doc for doc in docs if held.get(doc[0]) != _digest(_stored(doc[1]))]


def prepare_texts(docs: Sequence[tuple[str, str, Spans | None]], common: frozenset[str] = frozenset()) -> dict[str, Prepared]:
    """``prepare`` for (path, text as read, its spans) of the searchable files among ``docs``."""
    return {path: prepare(path, _stored(text_), spans, common) for path, text_, spans in docs if indexable(path)}


Stamp = tuple[int, int]  # a file's size and mtime in nanoseconds, as the walk saw them

# Rows for the batch's new paths first (so every writer of a path, even a new one, waits on one row
# lock), then the rows locked in path order: two writers of one file take turns, two one-batch writers never deadlock.
_CLAIM = """INSERT INTO vault_documents (path, name_lower, size, lines, digest) SELECT p, '', -1, 0, '' FROM unnest(%(paths)s::text[]) AS p
ON CONFLICT (path) DO NOTHING"""
_HELD = "SELECT path, digest, size, lines FROM vault_documents WHERE path = ANY(%(paths)s::text[]) ORDER BY path FOR UPDATE"
# A writer of many batches in one transaction (a rebuild, a tick's catch-up) takes its documents' rows batch
# after batch, in no single path order (ADR 0034), so it writes alone: before its first row lock it takes the
# table in this mode, which conflicts with itself and with every other writer's ROW EXCLUSIVE, not with reads.
# A follow then waits before it holds any row, never while holding one the rebuild needs.
_WRITE_ALONE = "LOCK TABLE vault_documents IN SHARE ROW EXCLUSIVE MODE"


def _appended(path: str, raw: bytes, held: tuple[str, int, int]) -> list[Segment] | None:
    """The segments of what was appended to a log the index holds (its earlier bytes unchanged), else None.

    Only whole entries with their own ids, after a newline: then the earlier
    segments are exactly what a full split would give, so a marker appended to
    a day's log of thousands of entries writes one segment, not the log.
    """
    digest, size, lines = held
    if kind_of_path(path) not in LOG_KINDS or size <= 0 or len(raw) <= size or raw[size - 1 : size] != b"\n" or _digest(raw[:size]) != digest:
        return None
    tail = raw[size:].decode("utf-8", "surrogatepass")
    entries = split_log(tail)
    if not tail.startswith("## ") or not entries or not all(e.meta.get("id") for e in entries):
        return None
    return [Segment(seg.first_line + lines, seg.last_line + lines, seg.entry_id, seg.content, seg.lowered) for seg in segments_of(path, tail)]


def _stored(text_: str) -> bytes:
    return storable(text_).encode("utf-8")  # NULs and lone surrogates as U+FFFD, as every index row


def _write(
    session: Session,
    batch: list[tuple[str, str]],
    stamps: dict[str, Stamp] | None = None,
    reread: Vault | None = None,
    spans: Mapping[str, Spans] | None = None,
    prepared: Mapping[str, Prepared] | None = None,
    rewrite: bool = False,
    loading: bool = False,
    common: frozenset[str] | None = None,
    alone: bool = False,
) -> int:
    """One batch: changed documents written (appended to, or their segments replaced), in path order under row locks.

    A document whose text is what the index holds is not rewritten (only its
    stamp, when the walk gives one that moved), nor locked when its stamp is
    the index's too; returns how many were written. With
    ``reread`` each file is read again once its row is locked: a text read
    before the lock can be older than what another writer indexed meanwhile
    (two markers appending to one day's log), and would replace the newer
    segments with the whole older log. ``spans``: logs' entry spans of the
    texts given, as their caller split them; ``prepared``: documents'
    ``prepare`` made already (a worker process's); neither is used with
    ``reread``, and a prepared document whose digest is not the text's is
    prepared again. ``rewrite``: every document is written whole, even an
    unchanged one (an index of older codes). ``loading``: the tables are a
    first load's, locked by this transaction (``db.defer_indexes``), so no
    other writer needs a row to wait on and a new document is inserted once.
    ``common``: the codes the segments leave out (else the index's, ``index_codes``).
    ``alone``: the caller writes many batches in its transaction, so it takes
    the table for itself (``_WRITE_ALONE``) before it locks its first row.
    """
    latest = {p: _stored(t) for p, t in batch}  # a path given twice: its last text
    stamps = stamps or {}
    conn = session.connection()
    order = sorted(latest)
    digests = {p: _digest(raw) for p, raw in latest.items()}
    if reread is None and not rewrite:
        # A document the index holds as it is (text and stamp) is neither locked nor written: a rerun of a rebuild
        # writes no row and takes no lock, and a marker's follow never waits on a rebuild that changed nothing.
        rows_now = conn.exec_driver_sql(_INDEXED, {"paths": order})
        unchanged = {p for p, digest, mtime in rows_now if digest == digests[p] and (p not in stamps or stamps[p][1] == mtime)}
        order = [p for p in order if p not in unchanged]
    if order and not loading:  # a first load holds the tables already (``db.defer_indexes``)
        if alone:
            conn.exec_driver_sql(_WRITE_ALONE)
        conn.exec_driver_sql(_CLAIM, {"paths": order})
    held = dict.fromkeys(order, ("", -1, 0))  # a new document (a first load claims none)
    held.update((path, (digest, size, lines)) for path, digest, size, lines in conn.exec_driver_sql(_HELD, {"paths": order}))
    if reread is not None:
        for path in order:
            with contextlib.suppress(OSError, UnicodeDecodeError):  # gone or unreadable now: the text the caller read stands
                latest[path] = _stored(reread.read_text(path))
        digests = {p: _digest(raw) for p, raw in latest.items()}
    paths = [p for p in order if rewrite or held[p][0] != digests[p]]
    same = [p for p in order if not rewrite and held[p][0] == digests[p] and p in stamps]
    if same:  # the text a write hook indexed: keep its stamp (where it moved), so the next walk need not read it
        conn.exec_driver_sql(_RESTAMP, {"paths": same, "mtimes": [stamps[p][1] for p in same]})
    if not paths:
        return 0
    if common is None:
        common = index_codes(session).left_out
    docs: dict[str, list[Any]] = {"paths": [], "names": [], "name_grams": [], "sizes": [], "mtimes": [], "lines": [], "digests": []}
    rows: list[bytes] = []
    replaced: list[str] = []
    for path in paths:
        raw = latest[path]
        pieces = None if rewrite else _appended(path, raw, held[path])
        if pieces is not None:
            total, payload = pieces[-1].last_line, segment_rows(path, pieces, common)
        else:
            replaced.append(path)
            given = prepared.get(path) if prepared is not None and reread is None else None
            if given is None or given[0] != digests[path]:
                given = prepare(path, raw, None if spans is None or reread is not None else spans.get(path), common)
            _, total, payload = given
        name = posixpath.basename(path).lower()
        docs["paths"].append(path)
        docs["names"].append(name)
        docs["name_grams"].append(grams_text(name))
        docs["sizes"].append(len(raw))
        docs["mtimes"].append(stamps[path][1] if path in stamps else None)
        docs["lines"].append(total)
        docs["digests"].append(digests[path])
        rows.append(payload)
    conn.exec_driver_sql(_UPSERT_DOCUMENTS, docs)  # one statement per batch, the name codes as array literals
    if replaced:
        conn.exec_driver_sql("DELETE FROM vault_segments WHERE path = ANY(%(paths)s::text[])", {"paths": replaced})
    if any(rows):
        cursor = conn.connection.driver_connection.cursor()  # the session's own connection and transaction
        with cursor.copy(_COPY_SEGMENTS) as copy:
            for payload in rows:
                copy.write(payload)
    return len(paths)


def upsert_documents(session: Session, docs: Iterable[tuple[str, str]], *, reread: Vault | None = None) -> int:
    """Index (vault path, text) pairs, replacing what the index held for those paths; paths the search never reads are ignored.

    Runs in the caller's transaction, in batches of ``BATCH_FILES``; a
    document whose text the index already holds (same digest) is not
    rewritten, and entries appended to a log the index holds add only their
    own segments (a marker's append costs one entry, not its day's log).
    ``reread``: the vault, when the texts were read from it just now and may
    be overtaken by a concurrent writer (they are read again under the lock).
    Returns how many documents were written.
    """
    return sum(_write(session, batch, reread=reread) for batch in batches(((p, t) for p, t in docs if indexable(p)), BATCH_FILES))


def delete_documents(session: Session, paths: Iterable[str]) -> int:
    """Drop these vault paths (and their segments) from the index; returns how many were there."""
    removed = 0
    conn = session.connection()
    for batch in batches(paths, 5000):
        removed += conn.exec_driver_sql("DELETE FROM vault_documents WHERE path = ANY(%(paths)s::text[])", {"paths": batch}).rowcount
    return removed


@dataclass(frozen=True)
class RebuildSummary:
    """What ``rebuild_documents`` did: files read, documents written (new or changed), documents the vault no longer holds."""

    files: int
    documents: int
    removed: int


def searchable_files(vault: Vault) -> Iterator[tuple[str, Stamp]]:
    """(vault path, stamp) of every file the index holds: what the search's walk reads."""
    for rel, info in walk(str(vault.root), "", ("",), SKIP_DIRS):  # indexable() tests the suffix, case-insensitively
        if indexable(rel):
            yield rel, (info.st_size, info.st_mtime_ns)


def _changed(session: Session, vault: Vault, batch: list[tuple[str, Stamp]], *, every: bool = False) -> Iterator[tuple[str, str]]:
    """The batch's files whose size or mtime differ from the index's (``every``: all of them), with their text."""
    rows = session.connection().exec_driver_sql(
        "SELECT path, size, mtime_ns FROM vault_documents WHERE path = ANY(%(paths)s::text[])", {"paths": [p for p, _ in batch]}
    )
    held = {path: (size, mtime) for path, size, mtime in rows}
    for rel, stamp in batch:
        if every or held.get(rel) != stamp:
            try:
                yield rel, vault.read_listed(rel)  # a path the walk listed
            except OSError:
                continue


class DocumentsBuild:
    """A full build of the search index in steps: ``add`` the files a caller has read anyway, ``finish`` the rest.

    Opening it takes the pass's start (the database clock) and, into an
    empty index, drops the secondary indexes for the load (``db.defer_indexes``:
    a GIN index built once from sorted entries costs a fraction of the same
    entries inserted row by row); ``add`` writes a
    batch of (path, text) with the stamps they were read at (so ``finish``'s
    walk does not read them again); ``finish`` walks the vault for every
    other searchable file, builds the indexes again after a first load,
    drops documents the vault no longer holds and records the vault root.
    From its first document to change it writes alone (``_WRITE_ALONE``):
    its batches lock rows in no single path order, so follows wait for its
    commit before they take a row (ADR 0034).

    The common short codes the segments leave out are chosen from a sample
    of ``listing`` (the searchable files' paths and sizes; else a walk) when
    no segment can lack others: into an empty index (its tables locked), or
    when every document is written again over codes that leave none out.
    Otherwise the index's stand: a search may skip the GIN index only for
    codes no writer stored.
    """

    def __init__(self, session: Session, vault: Vault, listing: Iterable[tuple[str, int]] | None = None) -> None:
        self.session = session
        self.scan_point: dt.datetime = session.execute(text("SELECT clock_timestamp()")).scalar_one()
        self.deferred = defer_indexes(session, "vault_documents", "vault_segments")
        held = index_codes(session)
        # An index of older codes is written again whole (every document, whatever its digest or stamp).
        self.recode = 0 < held.version < CODES
        self.renew = self.deferred is not None or (self.recode and not held.common)
        common = held.common
        if self.renew:  # no segment can lack other codes: choose them from the vault
            common = sample_common(vault, listing if listing is not None else ((p, stamp[0]) for p, stamp in searchable_files(vault)))
        self.codes = IndexCodes(CODES, common)
        self.left_out = self.codes.left_out
        self.written = 0

    def add(
        self,
        docs: Sequence[tuple[str, str]],
        stamps: dict[str, Stamp],
        spans: Mapping[str, Spans] | None = None,
        prepared: Mapping[str, Prepared] | None = None,
    ) -> None:
        wanted = [(p, t) for p, t in docs if indexable(p)]
        for batch in batches(wanted, BATCH_FILES, lambda doc: len(doc[1]), BATCH_BYTES):
            self.written += _write(
                self.session,
                batch,
                {p: stamps[p] for p, _ in batch if p in stamps},
                spans=spans,
                prepared=prepared,
                rewrite=self.recode,
                loading=self.deferred is not None,
                common=self.left_out,
                alone=True,
            )

    def finish(self, vault: Vault) -> RebuildSummary:
        session = self.session
        seen: list[str] = []
        for batch in batches(searchable_files(vault), BATCH_FILES, lambda item: item[1][0], BATCH_BYTES):
            seen.extend(p for p, _ in batch)
            self.written += _write(
                session,
                list(_changed(session, vault, batch, every=self.recode)),
                dict(batch),
                rewrite=self.recode,
                loading=self.deferred is not None,
                common=self.left_out,
                alone=True,
            )
        restore_indexes(session, self.deferred or [])
        # Documents of files gone, read without a lock: a pass that changed nothing takes none; deleting locks rows, alone.
        gone = session.scalars(
            text("SELECT path FROM vault_documents WHERE updated_at < :t AND NOT (path = ANY(:seen))"), {"t": self.scan_point, "seen": seen}
        ).all()
        removed = 0
        if gone:
            if self.deferred is None:
                session.execute(text(_WRITE_ALONE))
            removed = session.execute(
                text("DELETE FROM vault_documents WHERE path = ANY(:gone) AND updated_at < :t"), {"t": self.scan_point, "gone": list(gone)}
            ).rowcount
        common = json.dumps({str(code): share for code, share in sorted(self.codes.common.items())})
        if self.renew:  # every root's segments are written with these now
            session.execute(text("UPDATE vault_search_state SET common = CAST(:common AS jsonb)"), {"common": common})
        session.execute(
            text(
                "INSERT INTO vault_search_state (vault_root, codes, common) VALUES (:root, :v, CAST(:common AS jsonb)) "
                "ON CONFLICT (vault_root) DO UPDATE SET rebuilt_at = clock_timestamp(), codes = excluded.codes, common = excluded.common"
            ),
            {"root": str(vault.root), "v": CODES, "common": common},
        )
        return RebuildSummary(len(seen), self.written, removed)


def rebuild_documents(session: Session, vault: Vault) -> RebuildSummary:
    """Index every searchable file of ``vault`` (streamed in batches) and drop documents it no longer holds.

    A file whose size and mtime are the index's is not read; one read whose
    text is unchanged is not rewritten. Documents written
    while the pass runs (a vault write's ``upsert_documents``) are kept: only
    rows stamped before the pass began, of files it did not find, are
    deleted (the rule of ``brain reindex``, ADR 0011). The vault root is then
    recorded in ``vault_search_state``, so searches use the index. Into an
    empty index the secondary indexes are built after the load (that first
    build holds the tables' lock until it commits).
    """
    return DocumentsBuild(session, vault).finish(vault)


def indexed(session: Session, vault: Vault) -> bool:
    """Whether a full rebuild indexed this vault root (else a search must scan the files)."""
    return bool(session.execute(text("SELECT EXISTS (SELECT 1 FROM vault_search_state WHERE vault_root = :root)"), {"root": str(vault.root)}).scalar())


# -- search ---------------------------------------------------------------------------------------------------


class _Lines(Sequence[str]):
    """The lines of a document the search did not load whole: its length, and the lines around some hits."""

    def __init__(self, count: int, known: dict[int, str]) -> None:
        self._count, self._known = count, known

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self._known[i + 1] for i in range(*index.indices(self._count))]
        return self._known[index + 1]


def _token_tests(wanted: list[str], params: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Per token, the SQL that selects a segment holding it (``s``) and a document naming it (``d``): through the
    codes' GIN index when the token has codes there (``g<i>`` for segments, ``n<i>`` for names: a name keeps
    its common codes), else by ``strpos`` alone."""
    seg_any, name_any = [], []
    for i in range(len(wanted)):
        found = f"strpos(s.lowered, %(t{i})s) > 0"
        in_name = f"strpos(d.name_lower, %(t{i})s) > 0"
        seg_any.append(f"(s.grams @> %(g{i})s::int4[] AND {found})" if f"g{i}" in params else found)
        name_any.append(f"(d.name_grams @> %(n{i})s::int4[] AND {in_name})" if f"n{i}" in params else in_name)
    return seg_any, name_any


def _live(params: Mapping[str, Any], segments: bool = True) -> str:
    """SQL conjuncts (`` AND ...``) leaving out the withdrawn: files (``d``, ``s``) and, of segments, log entries.

    The sets are the search's one read of the withdrawn rows, bound as array literals
    (``text_array``: a list costs psycopg per element, in every statement) and unnested into a
    hashed subplan: a bound ``<> ALL`` list costs the planner per element (thousands of ids cost more
    than the search), and a subquery over ``entries`` would read the rows again in every statement and
    in every file the walk tests. Empty when nothing is withdrawn: the statements are the ones they were.
    """
    col = "s.path" if segments else "d.path"
    out = f" AND {col} NOT IN (SELECT unnest(%(gone_files)s::text[]))" if params.get("gone_files") else ""
    if segments and params.get("gone_ids"):
        out += " AND (s.entry_id IS NULL OR s.entry_id NOT IN (SELECT unnest(%(gone_ids)s::text[])))"
    return out


def _under(col: str, prefix: bool) -> str:
    """A folder's files, or the one file it names (a folder and a file never share a path)."""
    return f"({col} = %(under)s OR starts_with({col}, %(under)s || '/'))" if prefix else "true"


def _statement(
    wanted: list[str],
    params: dict[str, Any],
    project: bool,
    prefix: bool,
    member_sql: str,
    *,
    by_project: bool = True,
    only: bool = False,
    by_codes: bool = False,
) -> str:
    """The ranking statement: candidate segments tested exactly, summed per file, scored, the best ``limit`` files.

    With a project, P's segments are those of its own entries (any file) and
    every other segment of the files P holds alone. ``by_project``: read them
    from P's entries (a cost bounded by P, whatever the tokens), else from the
    tokens' trigrams, filtered to P (for a project too large to read whole).
    ``only``: only the files ``%(only)s`` (the candidates ``_top_candidates`` proved enough), whose
    segments are read by path unless ``by_codes`` (tokens few enough that their codes' bitmap costs less
    than reading those files whole: the big day logs).
    """
    seg_any, name_any = _token_tests(wanted, params)
    present = [f"strpos(s.lowered, %(t{i})s) > 0 AS h{i}" for i in range(len(wanted))]
    hit_line = [f"strpos(l, %(t{i})s) > 0" for i in range(len(wanted))]
    agg = ", ".join(f"bool_or(h{i}) AS h{i}" for i in range(len(wanted)))
    held = ", ".join(f"coalesce(a.h{i}, false) AS h{i}" for i in range(len(wanted)))
    fname = " + ".join(f"(strpos(d.name_lower, %(t{i})s) > 0)::int" for i in range(len(wanted)))
    every = " AND ".join(f"coalesce(a.h{i}, false)" for i in range(len(wanted)))
    if project:
        # ``shared``: the file holds entries that are not P's (NOT IN over P's ids: one hashed set).
        scope = f"""m AS MATERIALIZED ({member_sql}),
p AS MATERIALIZED (SELECT DISTINCT m.vault_path AS path FROM m),
sh AS MATERIALIZED (SELECT p.path, EXISTS (SELECT 1 FROM entries y WHERE y.vault_path = p.path AND y.id NOT IN (SELECT id FROM m)) AS shared FROM p),
"""
        if by_project:
            # One index read per entry of P and per file P holds alone (OFFSET 0 keeps each LATERAL
            # a loop of index reads: joined, the planner would scan every segment for a few files).
            scope += """own AS MATERIALIZED (
  SELECT s.path, s.first_line, s.entry_id, s.lowered FROM m CROSS JOIN LATERAL (SELECT * FROM vault_segments s WHERE s.entry_id = m.id OFFSET 0) s
  UNION ALL
  SELECT s.path, s.first_line, s.entry_id, s.lowered FROM sh CROSS JOIN LATERAL (SELECT * FROM vault_segments s WHERE s.path = sh.path OFFSET 0) s
   WHERE NOT sh.shared AND (s.entry_id IS NULL OR s.entry_id NOT IN (SELECT id FROM m))),
"""
            segments = f"own s WHERE true{_live(params)} AND"
            seg_any = [f"strpos(s.lowered, %(t{i})s) > 0" for i in range(len(wanted))]
        else:
            segments = f"vault_segments s WHERE (s.entry_id IN (SELECT id FROM m) OR s.path IN (SELECT path FROM sh WHERE NOT shared)){_live(params)} AND"
        names = f"vault_documents d JOIN sh ON sh.path = d.path WHERE true{_live(params, segments=False)} AND"
        shared = "coalesce(sh.shared, false)"
        join_sh = "LEFT JOIN sh ON sh.path = d.path"
    else:
        scope, shared, join_sh = "", "false", ""
        within = " AND s.path = ANY(%(only)s::text[])" if only else ""
        if only and not by_codes:  # a few files: their segments by path, not a frequent token's trigram bitmap over every file
            seg_any, _ = _token_tests(wanted, {})
        segments = f"vault_segments s WHERE {_under('s.path', prefix)}{within}{_live(params)} AND"
        names = f"vault_documents d WHERE {_under('d.path', prefix)}{within.replace('s.path', 'd.path')}{_live(params, segments=False)} AND"
    return f"""WITH {scope}c AS MATERIALIZED (
  SELECT s.path, s.first_line, (SELECT count(*) FROM unnest(string_to_array(s.lowered, E'\\n')) AS x(l) WHERE {" OR ".join(hit_line)}) AS hits, {", ".join(present)}
    FROM {segments} ({" OR ".join(seg_any)})),
a AS (SELECT path, sum(hits)::int AS hits, (array_agg(first_line ORDER BY first_line))[1:{MAX_SNIPPETS}] AS firsts, {agg} FROM c GROUP BY path),
cand AS (SELECT path FROM a UNION SELECT d.path FROM {names} ({" OR ".join(name_any)})),
r AS (SELECT d.path, d.lines, coalesce(a.hits, 0) AS hits, a.firsts, {fname} AS f, {every} AS every, {shared} AS shared, {held}
        FROM cand JOIN vault_documents d ON d.path = cand.path LEFT JOIN a ON a.path = d.path {join_sh})
SELECT * FROM r ORDER BY least(hits, {MAX_LINE_SCORE}) + {FILENAME_WEIGHT} * f + CASE WHEN every THEN {ALL_TOKENS_BONUS} ELSE 0 END DESC, path COLLATE "C" LIMIT %(limit)s"""


_SEGMENTS_AT = """SELECT s.path, s.first_line, s.entry_id, s.content, s.lowered
  FROM unnest(%(paths)s::text[], %(firsts)s::int[]) AS w(path, first_line) JOIN vault_segments s ON s.path = w.path AND s.first_line = w.first_line"""
_SEGMENTS_AROUND = """SELECT s.path, s.first_line, s.entry_id, s.content, s.lowered
  FROM unnest(%(paths)s::text[], %(los)s::int[], %(his)s::int[]) AS w(path, lo, hi)
  JOIN LATERAL (SELECT * FROM vault_segments z WHERE z.path = w.path AND z.first_line <= w.hi
                   AND z.first_line >= coalesce((SELECT max(y.first_line) FROM vault_segments y WHERE y.path = w.path AND y.first_line <= w.lo), 1)) s ON true"""


PROJECT_READ_LIMIT = 20_000  # a project of more entries is searched from the tokens' trigrams, not read whole
MANY_CANDIDATES = 2_000  # a token's candidate segments beyond which it is frequent: a search first looks for the files that cap the score
WALK_LINES = 400_000  # lines of files short of the cap the saturation walk may read before it gives up the shortcut
WALK_CANDIDATES = 30_000  # candidate segments (the tokens', about) below which ranking them all costs less than a walk
ONLY_BY_CODES = 100_000  # and below which the walk's few files are ranked through the codes' index, not read whole
WALK_BATCH = 64  # long files tested per statement of the walk, at most
NAMED_LIMIT = 1_000  # files naming a token beyond which the shortcut is not tried


def _top_candidates(conn: Any, wanted: list[str], params: dict[str, Any], prefix: bool, limit: int) -> list[str] | None:
    """Files that hold the best ``limit`` of a query with a frequent token, or None (then every candidate is ranked).

    A file that names no token scores at most ``MAX_LINE_SCORE + ALL_TOKENS_BONUS``
    when it holds every token, else at most ``MAX_LINE_SCORE``, reached
    exactly with ``MAX_LINE_SCORE`` hit lines or more. So, besides the files
    naming a token whose most (a hit on each of their lines, up to the cap,
    and the bonus) reaches what the walk's files score (``named``):

    - every token frequent: the first ``limit`` files in path order (C) with
      that many hit lines and every token score the most; any other file
      scores less, or as much with a later path;
    - some token rare: the files holding the rarest token (few), then the
      first ``limit`` files in path order with that many hit lines; any
      other file lacks that token, so it scores at most ``MAX_LINE_SCORE``,
      and less, or as much with a later path.

    Only files of ``MAX_LINE_SCORE`` lines or more are walked, each tested
    with reads that split only the segments holding a token into lines and
    stop at its ``MAX_LINE_SCORE``-th hit line (and at each token's first
    occurrence): a file short of the cap costs one pass over its segments'
    text, one that reaches it less. Returns None when the walk ends, or tests
    more than ``WALK_LINES`` lines of files short of the cap first, or when every token is rare.
    """
    seg_any, name_any = _token_tests(wanted, params)
    under_s = _under("s.path", prefix) + _live(params)
    counts = _candidates(conn, wanted, params, [f"{under_s} AND {test}" for test in seg_any])
    if min(counts) >= MANY_CANDIDATES:
        holding: list[str] = []
        presence = " AND " + " AND ".join(
            f"EXISTS (SELECT 1 FROM vault_segments s WHERE s.path = w.path{_live(params)} AND strpos(s.lowered, %(t{i})s) > 0)" for i in range(len(wanted))
        )
        floor, bonus = MAX_LINE_SCORE + ALL_TOKENS_BONUS, ALL_TOKENS_BONUS
    elif max(counts) >= MANY_CANDIDATES:
        rarest = seg_any[counts.index(min(counts))]
        holding = [r[0] for r in conn.exec_driver_sql(f"SELECT DISTINCT s.path FROM vault_segments s WHERE {under_s} AND {rarest}", params)]
        presence = ""
        floor, bonus = MAX_LINE_SCORE, 0  # a file without the rarest token misses the bonus
    else:
        return None  # few candidates: ranking them all is cheap
    if sum(_estimates(conn, wanted, params)) < WALK_CANDIDATES:
        return None  # a few thousand (a project's key): ranking them costs less than a walk that may not find the cap
    # The walk's files all score ``floor`` or more; a file naming a token can pass them only if its
    # most (every line a hit, and the bonus) reaches that.
    fname = " + ".join(f"(strpos(d.name_lower, %(t{i})s) > 0)::int" for i in range(len(wanted)))
    named = [
        r[0]
        for r in conn.exec_driver_sql(
            f"""SELECT d.path FROM vault_documents d WHERE {_under("d.path", prefix)}{_live(params, segments=False)} AND ({" OR ".join(name_any)})
                  AND {FILENAME_WEIGHT} * ({fname}) + least(d.lines, {MAX_LINE_SCORE}) + {bonus} >= {floor} LIMIT {NAMED_LIMIT + 1}""",
            params,
        )
    ]
    if len(named) > NAMED_LIMIT:
        return None
    line_hit = " OR ".join(f"strpos(l, %(t{i})s) > 0" for i in range(len(wanted)))
    seg_hit = " OR ".join(_token_tests(wanted, {})[0])  # by strpos alone: within one file's segments
    test = f"""SELECT w.path, (SELECT count(*) FROM (SELECT 1 FROM vault_segments s CROSS JOIN LATERAL unnest(string_to_array(s.lowered, E'\\n')) AS x(l)
                                     WHERE s.path = w.path{_live(params)} AND ({seg_hit}) AND ({line_hit}) LIMIT {MAX_LINE_SCORE}) z) >= {MAX_LINE_SCORE}{presence}
  FROM unnest(%(batch)s::text[]) WITH ORDINALITY AS w(path, n) ORDER BY w.n"""
    walk = f"""SELECT d.path, d.lines FROM vault_documents d WHERE d.lines >= {MAX_LINE_SCORE} AND {_under("d.path", prefix)}{_live(params, segments=False)} AND d.path COLLATE "C" > %(after)s
  ORDER BY d.path COLLATE "C" LIMIT %(batch_size)s"""
    found: list[str] = []
    after, lines, size, known = "", 0, limit + 4, set(named) | set(holding)
    while len(found) < limit:
        if lines > WALK_LINES:
            return None  # files reaching the cap are too far apart: rank every candidate
        batch = conn.exec_driver_sql(walk, {**params, "after": after, "batch_size": size}).all()
        if not batch:
            return None  # fewer such files than asked for: rank every candidate
        after, todo = batch[-1][0], {p: n for p, n in batch if p not in known}
        if todo:
            tested = conn.exec_driver_sql(test, {**params, "batch": list(todo)}).all()
            found += [p for p, full in tested if full]
            lines += sum(todo[p] for p, full in tested if not full)  # a miss was read whole; a hit stopped at the cap
        size = min(WALK_BATCH, max(size * 2, limit - len(found) + 4))  # misses: widen the next batch
    return sorted(known | set(found[:limit]))


def _all_rare(conn: Any, wanted: list[str], params: dict[str, Any]) -> bool:
    """Whether the query's tokens have fewer than ``MANY_CANDIDATES`` candidate segments in all."""
    seg_any, _ = _token_tests(wanted, params)
    return sum(_candidates(conn, wanted, params, seg_any)) < MANY_CANDIDATES


_STATS_TTL_S = 300.0
_stats: dict[str, Any] = {"at": -_STATS_TTL_S, "key": None, "value": None}


def _gram_frequencies(conn: Any) -> tuple[dict[int, float], float, float] | None:
    """The planner's statistics of ``vault_segments.grams`` (codes -> fraction of rows holding them, the
    smallest fraction listed, the row count), read at most every few minutes per database; None before
    any ANALYZE."""
    key = conn.engine.url.render_as_string(hide_password=True)
    if _stats["key"] == key and time.monotonic() - _stats["at"] < _STATS_TTL_S:
        return _stats["value"]
    row = conn.exec_driver_sql(
        "SELECT most_common_elems::text, most_common_elem_freqs, (SELECT reltuples FROM pg_class WHERE oid = 'vault_segments'::regclass) "
        "FROM pg_stats WHERE schemaname = current_schema() AND tablename = 'vault_segments' AND attname = 'grams'"
    ).first()
    value = None
    if row is not None and row[0] and row[1] and row[2] and row[2] > 0:
        codes = [int(c) for c in row[0].strip("{}").split(",") if c]
        freqs = list(row[1])[: len(codes)]  # then the smallest and largest frequency and the null fraction
        value = (dict(zip(codes, freqs, strict=True)), min(freqs), float(row[2]))
    _stats.update(at=time.monotonic(), key=key, value=value)
    return value


def _candidates(conn: Any, wanted: list[str], params: dict[str, Any], tests: list[str]) -> list[float]:
    """Each token's candidate segments, about, and at most ``MANY_CANDIDATES``.

    A token is no more frequent than its rarest trigram: when the statistics
    list every trigram of a token, their smallest frequency answers without
    a read (counting builds the token's whole bitmap: tens of milliseconds
    for a frequent one); a token with a trigram they do not list, or one too
    short for trigrams, is counted (cheap when it is rare, which the first is).
    """
    out: list[float] = []
    for i, (bound, exact) in enumerate(_bounds(conn, wanted, params)):
        if exact:
            out.append(min(bound, float(MANY_CANDIDATES)))
        else:
            probe = f"SELECT count(*) FROM (SELECT 1 FROM vault_segments s WHERE {tests[i]} LIMIT {MANY_CANDIDATES}) x"
            out.append(float(conn.exec_driver_sql(probe, params).scalar_one()))
    return out


def _bounds(conn: Any, wanted: list[str], params: dict[str, Any]) -> list[tuple[float, bool]]:
    """Each token's candidate segments as the statistics bound them (its rarest code's rows; a code they do not
    list has fewer than the rarest they do), and whether they list every code; infinite for a token without
    codes, or before any ANALYZE. A common short code left out of the segments (``common``: token -> share)
    gives its share of the rows its sample found, which is its token's."""
    stats = _gram_frequencies(conn)
    common = params.get("common", {})
    out = []
    for i in range(len(wanted)):
        if stats is not None and i in common:
            out.append((common[i] * stats[2], True))
            continue
        if stats is None or f"g{i}" not in params:
            out.append((float("inf"), False))
            continue
        freqs, smallest, rows = stats
        codes = params[f"g{i}"]
        out.append((min(freqs.get(g, smallest) for g in codes) * rows, all(g in freqs for g in codes)))
    return out


def _estimates(conn: Any, wanted: list[str], params: dict[str, Any]) -> list[float]:
    """Each token's candidate segments as the statistics bound them (``_bounds``)."""
    return [bound for bound, _ in _bounds(conn, wanted, params)]


def _project_size(session: Session, key: str, repo: str | None) -> int:
    """At most how many entries project (key, repo) has: the entries listing its key, from the counts
    ``GET /projects`` reads (a few rows, not a count of the entries)."""
    return int(session.execute(text("SELECT coalesce(sum(n), 0) FROM project_counts WHERE member_key = :key"), {"key": key}).scalar_one())


def search(
    session: Session,
    q: str,
    prefix: str = "",
    limit: int = 20,
    context_lines: int = 2,
    project: tuple[str, str | None] | None = None,
    *,
    include_withdrawn: bool = False,
) -> list[Hit]:
    """The best ``limit`` files for query ``q``, as ``file_scan.search_vault`` (or ``search_project``) ranks them.

    ``prefix``: without a project, a vault folder (or file) as the route
    resolves it ("" for the whole vault); with one, a prefix of entry paths,
    as ``feed_repo.project_entries`` reads it. ``project``: (key, repo) of a
    project the caller resolved. ``include_withdrawn``: superseded and
    retracted entries count too (an operator's look; ADR 0064).
    """
    wanted = tokens(q)
    if not wanted:
        return []
    params: dict[str, Any] = {"limit": limit, "common": {}}  # common: read by ``_bounds``, not by the statements
    hidden = NOTHING if include_withdrawn else withdrawn(session)
    gone = hidden.entry_ids
    if hidden.files:
        params["gone_files"] = text_array(sorted(hidden.files))
    if gone:
        params["gone_ids"] = text_array(gone)
    codes = index_codes(session) if any(len(token) < 3 for token in wanted) else None
    for i, token in enumerate(wanted):
        params[f"t{i}"] = token
        if len(token) >= 3 or (codes is not None and codes.version >= SHORT_CODES):
            params[f"n{i}"] = grams = token_grams(token)
            share = codes.common.get(grams[0]) if len(token) < 3 and codes is not None else None
            if share is None:
                params[f"g{i}"] = grams
            else:
                params["common"][i] = share  # left out of the segments: tested by strpos
    member_sql = ""
    if project is not None:
        key, repo = project
        stmt = select(Entry.id, Entry.vault_path).where(member(key, repo, key_owned_sql(key, repo)))
        if prefix:
            stmt = stmt.where(Entry.vault_path.like(escape_like(prefix.strip("/")) + "%"))
        compiled = stmt.compile(dialect=session.connection().dialect)
        member_sql = str(compiled)
        params.update({f"m_{k}": v for k, v in compiled.params.items()})
        for name in compiled.params:
            member_sql = member_sql.replace(f"%({name})s", f"%(m_{name})s")
    elif prefix.strip("/"):
        params["under"] = prefix.strip("/")
    conn = session.connection()
    only = None if project is not None else _top_candidates(conn, wanted, params, "under" in params, limit)
    if only is not None:
        params["only"] = only
    # A project's segments are read from its entries, unless it is too large for that or every token is
    # rare (then the tokens' few candidates, filtered to the project, cost less than the project).
    by_project = project is None or (_project_size(session, *project) <= PROJECT_READ_LIMIT and not _all_rare(conn, wanted, params))
    by_codes = only is not None and sum(_estimates(conn, wanted, params)) < ONLY_BY_CODES
    sql = _statement(wanted, params, project is not None, "under" in params, member_sql, by_project=by_project, only=only is not None, by_codes=by_codes)
    ranked = conn.exec_driver_sql(sql, params).mappings().all()
    return _hits(session, wanted, ranked, context_lines, project, frozenset(gone))


def _hits(
    session: Session, wanted: list[str], ranked: Sequence[Any], context_lines: int, project: tuple[str, str | None] | None, gone: frozenset[str] = frozenset()
) -> list[Hit]:
    """The result items of the ranked files: first three hit lines and their context, read from the segments around them."""
    if not ranked:
        return []
    conn = session.connection()
    first_rows = [(r["path"], f) for r in ranked for f in (r["firsts"] or ())]
    loaded: dict[str, dict[int, tuple[str | None, str, str]]] = {}  # path -> first line -> (entry id, content, lowered)

    def load(rows: Iterable[Any]) -> None:
        for path, first, entry_id, content, lowered in rows:
            loaded.setdefault(path, {})[first] = (entry_id, content, lowered)

    if first_rows:
        load(conn.exec_driver_sql(_SEGMENTS_AT, {"paths": [p for p, _ in first_rows], "firsts": [f for _, f in first_rows]}))
    hit_lines: dict[str, list[int]] = {}
    for r in ranked:
        found: list[int] = []
        for first in r["firsts"] or ():
            _, _, lowered = loaded[r["path"]][first]
            for offset, line in enumerate(lowered.split("\n")):
                if len(found) < MAX_SNIPPETS and any(t in line for t in wanted):
                    found.append(first + offset)
        hit_lines[r["path"]] = found
    around = [(r["path"], max(1, n - context_lines), min(r["lines"], n + context_lines)) for r in ranked for n in hit_lines[r["path"]]]
    if around and context_lines:
        load(conn.exec_driver_sql(_SEGMENTS_AROUND, {"paths": [a[0] for a in around], "los": [a[1] for a in around], "his": [a[2] for a in around]}))
    own: set[str] = set()
    if project is not None and any(r["shared"] for r in ranked):
        ids = {seg[0] for r in ranked if r["shared"] for seg in loaded.get(r["path"], {}).values() if seg[0]}
        key, repo = project
        own = set(session.scalars(select(Entry.id).where(Entry.id.in_(sorted(ids)), member(key, repo, key_owned_sql(key, repo))))) if ids else set()
    out = []
    for r in ranked:
        path = r["path"]
        lines: dict[int, str] = {}
        segments = loaded.get(path, {})
        # Context stops at another project's entry (a shared log) and at a withdrawn entry (ADR 0064).
        keep: set[int] | None = set() if r["shared"] or any(seg[0] in gone for seg in segments.values()) else None
        for first, (entry_id, content, _) in segments.items():
            shown = (entry_id in own if r["shared"] else True) and entry_id not in gone
            for offset, line in enumerate(content.split("\n")):
                lines[first + offset] = line
                if keep is not None and shown:
                    keep.add(first + offset)
        doc = _Lines(r["lines"], lines)
        snippets: list[dict[str, object]] = [
            {"line": n, "snippet": context_snippet(doc, n - 1, context_lines, keep), "text": lines[n].strip()[:SNIPPET_CHARS]} for n in hit_lines[path]
        ]
        matched = sum(1 for i in range(len(wanted)) if r[f"h{i}"])
        hits = int(r["hits"])
        score = min(hits, MAX_LINE_SCORE) + FILENAME_WEIGHT * int(r["f"]) + (ALL_TOKENS_BONUS if matched == len(wanted) else 0)
        out.append(
            Hit(
                path=path,
                score=score,
                match_count=hits,
                tokens_matched=matched,
                tokens_total=len(wanted),
                filename_match=int(r["f"]) > 0,
                title=posixpath.splitext(posixpath.basename(path))[0],
                snippets=snippets,
            )
        )
    return out
