"""The word side of search (ADR 0044): the words of a chunk as a ``tsvector``, and of a query as a ``tsquery``.

Postgres's default text-search parser reads code badly for this use: it
splits ``parse_frontmatter`` into two words and never keeps the whole, keeps
``src/app/db.py`` whole so ``db.py`` never matches it, and folds
``ConnectionResetError`` into one word that ``connection reset`` never
finds. So the words are made here, once, by one rule that serves both the
stored chunk and the query (a rule applied on one side only would never
match the other):

- every token (letters, digits and ``_``, joined by ``. / : -``) is
  lowercased;
- a token that looks like code (it holds ``_ . / : -``, an inner capital or
  a digit) is kept whole at weight A, and also split into its pieces
  (on the punctuation and on camelCase: ``ConnectionResetError`` gives
  ``connection``, ``reset``, ``error``), and a path gives each of its tails
  (``app/db.py``, ``db.py``), all at weight D;
- a plain word is kept at weight D unless it is a common English word, with
  a plural ``s`` taken off (``tests`` matches ``test``); no other stemming,
  so an identifier's pieces are never mangled.

The chunk's ``tsvector`` is sent to Postgres in its binary form inside the
store's binary COPY (``WordsDumper``), so a write stays one COPY; the query
is a ``tsquery`` of its words joined by OR and ranked with ``ts_rank``, whose
weights make a whole identifier count ten times a piece.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator

from psycopg.adapt import Dumper
from psycopg.pq import Format

TSVECTOR_OID = 3614  # Postgres's built-in type oid
_MAX_POS = 16383  # a tsvector position is 14 bits
_MAX_POSITIONS = 256  # positions kept per lexeme
_MAX_LEXEME_BYTES = 2046  # a lexeme is at most 2 kB
_MAX_VECTOR_BYTES = 512 * 1024  # well under tsvector's 1 MB
_WEIGHT_A = 3 << 14

_TOKEN = re.compile(r"\w+(?:[./:\-]+\w+)*")
_PIECE = re.compile(r"[^\W_]+")  # letters and digits between underscores and punctuation
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_CODE = re.compile(r"[_./:\-]|[a-z][A-Z]|[A-Z]{2}[a-z]|\d")
_COMMON = (  # common English words: no evidence of what a text is about
    "a about above after again all also am an and any are as at be because been before being below between both but by can could did do does doing "
    "done down during each few for from further had has have having he her here hers him his how i if in into is it its itself just me more most my "
    "no nor not now of off on once only or other our ours out over own same she should so some such than that the their theirs them then there "
    "these they this those through to too under until up very was we were what when where which while who whom why will with would you your yours"
)
_STOP = frozenset(_COMMON.split())


def _plain(word: str) -> str | None:
    """A plain word's lexeme: lowercased, a plural ``s`` off; None for a common word or a single letter."""
    word = word.lower()
    if word in _STOP or len(word) < 2:
        return None
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    return word


def _lexemes(text: str) -> Iterator[tuple[str, bool]]:
    """Each (lexeme, whole code token?) of ``text`` in order; one token may give several lexemes.

    A lexeme over Postgres's 2 kB limit (a run of base64, a long line of one
    character) is left out: a ``tsvector`` holding one refuses the whole store.
    """
    for lexeme, whole in _token_lexemes(text):
        if len(lexeme.encode()) <= _MAX_LEXEME_BYTES:
            yield lexeme, whole


def _token_lexemes(text: str) -> Iterator[tuple[str, bool]]:
    for match in _TOKEN.finditer(text):
        token = match.group()
        if not _CODE.search(token):
            word = _plain(token)
            if word:
                yield word, False
            continue
        whole = token.lower()
        yield whole, True
        extra: list[str | None] = []
        for part in _PIECE.findall(token):
            extra.append(_plain(part))  # the part itself (``frontmatter``, ``e1234``)
            camel = _CAMEL.findall(part)
            if len(camel) > 1:
                extra.extend(_plain(piece) for piece in camel)
        if "/" in whole:
            segments = [s for s in whole.split("/") if s]
            extra.extend("/".join(segments[n:]) for n in range(1, len(segments)))
        for word in dict.fromkeys(extra):
            if word and word != whole:
                yield word, False


def query_lexemes(text: str) -> list[str]:
    """The distinct lexemes of a query, in order of first appearance."""
    return list(dict.fromkeys(lexeme for lexeme, _ in _lexemes(text)))


def tsquery_of(lexemes: list[str]) -> str:
    """Lexemes as ``tsquery`` text, joined by OR (each quoted, so no lexeme is read as an operator)."""
    return " | ".join("'" + w.replace("\\", "\\\\").replace("'", "''") + "'" for w in lexemes)


def tsvector_binary(text: str) -> bytes:
    """The words of ``text`` in ``tsvector``'s binary wire form (lexemes sorted and distinct, positions rising)."""
    positions: dict[bytes, list[int]] = {}
    size = 0
    for pos, (lexeme, whole) in enumerate(_lexemes(text), start=1):
        raw = lexeme.encode()
        kept = positions.get(raw)
        if kept is None:
            size += len(raw) + 4
            if size > _MAX_VECTOR_BYTES:
                break
            kept = positions[raw] = []
        if len(kept) < _MAX_POSITIONS and pos <= _MAX_POS:
            kept.append(min(pos, _MAX_POS) | (_WEIGHT_A if whole else 0))
    out = [struct.pack("!i", len(positions))]
    for raw in sorted(positions):
        kept = positions[raw]
        out.append(raw + b"\x00" + struct.pack(f"!H{len(kept)}H", len(kept), *kept))
    return b"".join(out)


class Words(bytes):
    """A chunk's ``tsvector`` in binary form (``tsvector_binary``), for ``WordsDumper``."""


class WordsDumper(Dumper):
    """Dumps ``Words`` as a binary ``tsvector`` (psycopg has no binary adapter for the type)."""

    format = Format.BINARY
    oid = TSVECTOR_OID

    def dump(self, obj: Words) -> bytes:
        return bytes(obj)
