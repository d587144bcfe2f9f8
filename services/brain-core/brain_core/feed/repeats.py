"""Repeated lessons (pure): the same lesson written again, in the same or other words, is one feed line with a count.

Agents repeat themselves and upstream's client re-posts, so a project's
recent lessons hold the same fact several times. Two lessons are one when
their text is the same after normalising (case, punctuation, spacing), or
when their vectors are near (the caller passes the pairs at or above
``NEAR_DUPLICATE``, measured by bench/bench_duplicates.py: on the retrieval
evaluation's corpus no pair of different facts of a project reached 0.63,
ADR 0048) and they name the same identifiers, paths and codes: vectors read
``Bump tk1a to 2.0`` and ``Bump tk2b to 2.0`` as one sentence, but two
lessons about different things are two lessons. Groups are transitive; each
shows as its newest lesson.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from brain_core.entries import EntryRecord

NEAR_DUPLICATE = 0.68  # cosine of two lessons' vectors; the highest pair of different facts measured was 0.625
_NOT_WORD = re.compile(r"[\W_]+")
_TOKEN = re.compile(r"\w+(?:[./:\-]+\w+)*")
_CODE = re.compile(r"\w[_./:]\w|[a-z][A-Z]|\d")  # an identifier, a path, a version or an error code; not a hyphenated word


def normalised(record: EntryRecord) -> str:
    """A lesson's text for exact comparison: its title and content, lowercased, punctuation and spacing folded."""
    text = f"{record.title}\n{record.content}" if record.title and not record.content.startswith(record.title) else record.content
    return _NOT_WORD.sub(" ", text.lower()).strip()


def named(record: EntryRecord) -> frozenset[str]:
    """The identifiers, paths and codes a lesson names (lowercased)."""
    return frozenset(t.lower() for t in _TOKEN.findall(f"{record.title} {record.content}") if _CODE.search(t))


def repeat_of(records: Sequence[EntryRecord], near: Iterable[tuple[str, str]] = ()) -> dict[str, str]:
    """Each repeated lesson's id mapped to the id of its group's newest (``records`` come newest first)."""
    order = {r.id: n for n, r in enumerate(records)}
    parent = {r.id: r.id for r in records}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def join(a: str, b: str) -> None:
        ra, rb = root(a), root(b)
        if ra != rb:  # the newer one stays the root
            first, second = (ra, rb) if order[ra] < order[rb] else (rb, ra)
            parent[second] = first

    seen: dict[str, str] = {}
    for r in records:
        key = normalised(r)
        if key in seen:
            join(seen[key], r.id)
        else:
            seen[key] = r.id
    by_id = {r.id: r for r in records}
    for a, b in near:
        if a in by_id and b in by_id and named(by_id[a]) == named(by_id[b]):
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
