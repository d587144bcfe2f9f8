"""Repeated lessons (pure): the same lesson written again, in the same or other words, is one feed line with a count.

Agents repeat themselves and upstream's client re-posts, so a project's
recent lessons hold the same fact several times. Two lessons are one when
their text is the same after normalising (case, punctuation, spacing), or
when their vectors are near (the caller passes the pairs at or above
``NEAR_DUPLICATE``, measured by bench/bench_duplicates.py: on the retrieval
evaluation's corpus no pair of different facts of a project reached 0.63,
ADR 0048), they name the same identifiers, paths, codes and numbers (vectors
read ``Bump tk1a to 2.0`` and ``Bump tk2b to 2.0`` as one sentence), and neither
is the other with a word changed (``edited``: vectors read "the session
cookie name must be X" and "the session cookie domain must be X" as one
sentence too, ADR 0065). Groups are transitive but never hold two lessons
that are one edit apart; each shows as its newest lesson.
"""

from __future__ import annotations

import collections
import difflib
import functools
import re
from collections.abc import Iterable, Mapping, Sequence

from brain_core.entries import EntryRecord
from brain_core.text import title_repeats

NEAR_DUPLICATE = 0.68  # cosine of two lessons' vectors; the highest pair of different facts measured was 0.625
_NOT_WORD = re.compile(r"[\W_]+")
_TOKEN = re.compile(r"\w+(?:[./:\-]+\w+)*")
_CODE = re.compile(r"\w[_./:]\w|[a-z][A-Z]|\d")  # an identifier, a path, a version or an error code; not a hyphenated word
# A number in words is a figure like one in digits ("kept for seven days", "thirty days"); "one" is also a pronoun.
_NUMBERS = frozenset({
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "fifteen", "twenty",
    "thirty", "forty", "fifty", "sixty", "ninety", "hundred", "thousand",
})  # fmt: skip

# An edit of at most this many content words on a side is a different fact, not a rewording (ADR 0065): every
# minimal pair of the evaluation changes one or two; at 3 the five rewordings of the feed test no longer fold.
EDITED_WORDS = 2
# ... or one that leaves this share of both in order, for long lessons where a few words are a small share
# (at 0.85 it parts no rewording pair of the evaluation that EDITED_WORDS keeps together; at 0.80 one).
EDITED_SHARE = 0.85
_WORD = re.compile(r"[^\W_]+")
_NOT = re.compile(r"n['’]t\b")  # "don't", "can't", "isn't": the word, then a negation
_NEGATION = frozenset({"not", "no", "never", "without", "nor", "none", "nothing", "neither", "cannot"})
# Words that carry grammar, not a fact: a rewording changes them freely. Prepositions of place and time that
# name a fact (before, after, up, down, out, off), quantities (all, some, only, first) and negations stay.
_FUNCTION = frozenset({
    "a", "an", "the", "this", "that", "these", "those", "it", "its", "itself", "they", "them", "themselves", "their",
    "there", "here", "he", "she", "we", "you", "i", "our", "your", "my", "me", "us", "is", "are", "was", "were", "be",
    "been", "being", "am", "do", "does", "did", "done", "has", "have", "had", "having", "will", "would", "shall",
    "should", "can", "could", "may", "might", "must", "wo", "ca", "sha", "s", "d", "ll", "re", "ve", "m", "of", "in",
    "on", "at", "to", "for", "by", "with", "from", "into", "onto", "as", "so", "than", "then", "too", "also", "just",
    "very", "already", "and", "or", "but", "if", "when", "while", "because", "since", "otherwise", "else", "which",
    "who", "whom", "what", "where", "how", "why", "each", "every", "always", "again", "about", "via", "per", "own",
    "such",
})  # fmt: skip


def _text(record: EntryRecord) -> str:
    """A lesson's text as it is shown and embedded: its title and content, the title left out when it is the content's start."""
    return record.content if title_repeats(record.title, record.content) else f"{record.title}\n{record.content}"


def normalised(record: EntryRecord) -> str:
    """A lesson's text for exact comparison: its title and content, lowercased, punctuation and spacing folded."""
    return _NOT_WORD.sub(" ", _text(record).lower()).strip()


def named(record: EntryRecord) -> frozenset[str]:
    """The identifiers, paths, codes and numbers a lesson names (lowercased)."""
    tokens = (t.lower() for t in _TOKEN.findall(f"{record.title} {record.content}"))
    return frozenset(t for t in tokens if _CODE.search(t) or t in _NUMBERS)


def _stem(word: str) -> str:
    """``word`` without a plural, tense or adverb ending, so "moves", "moving" and "moved" compare as one."""
    if len(word) > 4 and word.endswith(("ies", "ied")):
        word = word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s", "ly", "y", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> tuple[str, ...]:
    """The words of ``text`` that carry its fact, in order: stemmed, grammar words left out, every negation as ``not``."""
    words = _WORD.findall(_NOT.sub(" not", text.lower()))
    return tuple("not" if w in _NEGATION else _stem(w) for w in words if w not in _FUNCTION)


def edited(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether content words ``a`` and ``b`` are one sentence with a word substituted, added or removed (ADR 0065).

    What they share in order (difflib's matching blocks, close to their
    longest common subsequence) is kept; what either holds outside it is the
    edit. Rewordings move and replace many words;
    a different fact written the same way changes one or two. The same words
    in another order are no edit.
    """
    if a == b or collections.Counter(a) == collections.Counter(b):
        return False
    shared = sum(block.size for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
    return max(len(a), len(b)) - shared <= EDITED_WORDS or 2 * shared >= EDITED_SHARE * (len(a) + len(b))


def repeat_of(records: Sequence[EntryRecord], near: Iterable[tuple[str, str]] = ()) -> dict[str, str]:
    """Each repeated lesson's id mapped to the id of its group's newest (``records`` come newest first)."""
    order = {r.id: n for n, r in enumerate(records)}
    parent = {r.id: r.id for r in records}
    words = {r.id: content_words(_text(r)) for r in records}
    shapes = {r.id: {words[r.id]} for r in records}  # a group's distinct content words: a lesson posted 50 times is one
    names = {r.id: named(r) for r in records}
    apart = functools.cache(edited)  # a failed join is tried again for each near pair across the two groups

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def join(a: str, b: str) -> None:
        ra, rb = root(a), root(b)
        if ra == rb or any(apart(x, y) for x in shapes[ra] for y in shapes[rb]):
            return  # a lesson one edit from another is a different fact, however the group reached it
        first, second = (ra, rb) if order[ra] < order[rb] else (rb, ra)  # the newer one stays the root
        parent[second] = first
        shapes[first] |= shapes.pop(second)

    seen: dict[str, str] = {}
    for r in records:
        key = normalised(r)
        if key in seen:
            join(seen[key], r.id)
        else:
            seen[key] = r.id
    pairs = sorted((min(order[a], order[b]), max(order[a], order[b])) for a, b in near if a in order and b in order)
    for x, y in pairs:  # newest pairs first, so the grouping does not depend on the order the caller found them
        a, b = records[x].id, records[y].id
        if names[a] == names[b]:
            join(a, b)
    return {r.id: root(r.id) for r in records if root(r.id) != r.id}


def counted(records: Sequence[EntryRecord], repeats: Mapping[str, str]) -> list[tuple[EntryRecord, int]]:
    """The lessons to show, in order, each with how many lessons its line stands for."""
    sizes: dict[str, int] = {}
    for head in repeats.values():
        sizes[head] = sizes.get(head, 1) + 1
    return [(r, sizes.get(r.id, 1)) for r in records if r.id not in repeats]


def times(count: int) -> str:
    """What a line standing for several lessons says after its text."""
    return f" (recorded {count} times)" if count > 1 else ""
