"""Repairs of vault damage left by upstream's defects (UPSTREAM.md 5.8), as text in, text out (pure).

Each function returns a ``Repaired`` (the new text and one ``Fix`` per
change, what it was and what it became) or None when the text shows no such
damage, so a second run finds nothing to do. Only the damaged spans change:
every other byte of the file, line ends included, is kept.

- ``clean_title``: a frontmatter ``title`` polluted by a merge's rationale
  (upstream kept the model's "— because ..." text, and backticks): cut at the
  first dash separator followed by 12 or more words holding a ``,`` or ``;``,
  backticks removed; a title is never blanked.
- ``dedupe_edges``: one ``@edge`` marker per target, the strongest type kept
  (parent > child > sibling > unblocks > supersedes > related > any other),
  self-loops dropped; a marker alone on its line goes with its line end.
- ``drop_repeated_merges``: a second ``## Merged from <B>`` section (an
  answer applied twice) goes: what repeats the first one's body, never a
  section written after it (``## Edges``), up to the next ``## Merged from``.
- ``requote_signals``: ``@signal`` openings whose quoting upstream's
  tombstone script lost (``verify=curl -s url``), so the marker no longer
  parsed and the signal vanished, get their multi-word values quoted again.
- ``merge_chains``: files of one folder named ``<id>.merged.merged....md``
  (upstream renamed a tombstone again at every merge) collapse to the one
  tombstone name ``<id>.merged.md``, holding the longest of their texts
  (upstream's cleanup kept the longest, as the most complete); the raw
  ``<id>.md`` beside them is not part of the chain and is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from brain_core.ai_output import EDGE_TYPES
from brain_core.vault import frontmatter
from brain_core.vault.inline import parse_attrs
from brain_core.vault.layout import TOMBSTONE_SUFFIX
from brain_core.vault.regions import canonical_id

TITLE, EDGE, MERGED_SECTION, SIGNAL, CHAIN = "title", "edge", "merged-section", "signal-quoting", "merge-chain"
REPAIRS = (CHAIN, TITLE, EDGE, MERGED_SECTION, SIGNAL)
RATIONALE_WORDS = 12  # upstream's repair_arc_titles: a separator followed by this many words or more

# A dash separator as upstream's merge cut reads it: an em or en dash or "--" followed by whitespace, or " - ".
_SEPARATOR = re.compile(r"\s*(?:—|–|--)\s+|\s+-\s+")
_ATTR = r"[A-Za-z_][\w-]*=(?:\"[^\"]*\"|[^\s>\"]+)"
_EDGE = re.compile(r"<!--\s*@edge(?P<attrs>(?:\s+" + _ATTR + r")*)\s*-->")
_SIGNAL_OPEN = re.compile(r"<!--\s*@signal(?P<inner>(?:(?!-->)[^\n])*?)\s*-->")
_STRICT_ATTRS = re.compile(r"(?:\s+" + _ATTR + r")*")
_ATTR_START = re.compile(r"^[A-Za-z_][\w-]*=")
_MERGED_HEADING = re.compile(r"^## Merged from (?P<id>\S.*?)[ \t]*\r?$", re.M)
_HEADING = re.compile(r"^(#{1,2} .*?)\r?$", re.M)  # a section heading's text: what a merged body may hold of its own


@dataclass(frozen=True)
class Fix:
    """One change: which repair, what the span was and what it became (None: removed)."""

    what: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class Repaired:
    """A file's new text and the changes that made it."""

    text: str
    fixes: tuple[Fix, ...]


def cleaned_title(title: str) -> str | None:
    """The title without a merge's rationale and backticks; None when it is clean (or cleaning would blank it)."""
    new = title
    for match in _SEPARATOR.finditer(title):
        tail = title[match.end() :]
        if len(tail.split()) >= RATIONALE_WORDS and ("," in tail or ";" in tail):
            head = title[: match.start()].strip()
            if head.replace("`", "").strip():
                new = head
                break
    new = new.replace("`", "").strip()
    return new if new and new != title else None


def clean_title(text: str) -> Repaired | None:
    """``text`` with its frontmatter title cleaned (``cleaned_title``); None when there is nothing to clean."""
    doc = frontmatter.parse(text)
    title = doc.meta.get("title") if doc.has_frontmatter else None
    if not isinstance(title, str):
        return None
    new = cleaned_title(title)
    if new is None:
        return None
    return Repaired(frontmatter.update(text, {"title": new}), (Fix(TITLE, title, new),))


def _strength(edge_type: str) -> int:
    return EDGE_TYPES.index(edge_type) if edge_type in EDGE_TYPES else len(EDGE_TYPES)


def _span_with_line(text: str, start: int, end: int) -> tuple[int, int]:
    """A marker's span, widened to its whole line (line end included) when nothing else is on that line."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    if text[line_start:start].strip() or text[end:line_end].strip():
        return start, end
    return line_start, min(line_end + 1, len(text))


def _removed(text: str, spans: Iterable[tuple[int, int]]) -> str:
    out, pos = [], 0
    for start, end in sorted(spans):
        out.append(text[pos:start])
        pos = end
    return "".join(out) + text[pos:]


def dedupe_edges(text: str, own_ids: Iterable[str]) -> Repaired | None:
    """One edge per target, the strongest type kept, no edge to ``own_ids`` (the arc itself); None when already so."""
    own = {i for i in own_ids if i}
    best: dict[str, tuple[int, int]] = {}  # target -> (strength, index of the kept marker)
    markers = []
    for index, match in enumerate(_EDGE.finditer(text)):
        attrs = parse_attrs(match.group("attrs") or "")
        target = attrs.get("target", "")
        markers.append((match, target))
        if not target or target in own:
            continue
        rank = _strength(attrs.get("type", ""))
        if target not in best or rank < best[target][0]:
            best[target] = (rank, index)
    spans, fixes = [], []
    for index, (match, target) in enumerate(markers):
        if not target:
            continue
        if target in own or best[target][1] != index:
            spans.append(_span_with_line(text, match.start(), match.end()))
            kept = None if target in own else markers[best[target][1]][0].group(0)
            fixes.append(Fix(EDGE, match.group(0), kept))
    if not spans:
        return None
    return Repaired(_removed(text, spans), tuple(fixes))


def drop_repeated_merges(text: str) -> Repaired | None:
    """``text`` without the second and later ``## Merged from <B>`` sections of one B; None when none repeats.

    A merge appended ``## Merged from <B>`` and B's body (UPSTREAM.md 5.4), so
    a repeat holds what the first one holds: it ends where its copy of the first
    section's body ends, or else at the first ``## `` heading that body does not
    have (a section written after the merges, ``## Edges``), or the next
    ``## Merged from``; never past them.
    """
    headings = list(_MERGED_HEADING.finditer(text))
    first: dict[str, str] = {}
    spans, fixes = [], []
    for n, match in enumerate(headings):
        merged = match.group("id").strip()
        limit = headings[n + 1].start() if n + 1 < len(headings) else len(text)
        if merged not in first:
            first[merged] = text[match.end() : limit]
            continue
        body = first[merged]
        after = text[match.end() : limit]
        if body and after.startswith(body):
            end = match.end() + len(body)
        else:
            own = set(_HEADING.findall(body))
            stop = next((m for m in _HEADING.finditer(after) if m.group(1) not in own), None)
            end = match.end() + stop.start() if stop is not None else limit
        spans.append((match.start(), end))
        fixes.append(Fix(MERGED_SECTION, text[match.start() : end], None))
    if not spans:
        return None
    return Repaired(_removed(text, spans), tuple(fixes))


def _requoted(inner: str) -> str | None:
    """A signal opening's attributes with multi-word values quoted again; None when they cannot be read as such."""
    pairs: list[list[str]] = []
    for token in inner.split():
        if _ATTR_START.match(token):
            key, _, value = token.partition("=")
            pairs.append([key, value])
        elif pairs:
            pairs[-1][1] += " " + token
        else:
            return None
    out = []
    for key, value in pairs:
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if '"' in value:
            return None  # a quote inside a value: no quoting says it again
        out.append(f"{key}={value}" if value and re.fullmatch(r"[^\s>\"]+", value) else f'{key}="{value}"')
    return " " + " ".join(out) if out else None


def requote_signals(text: str) -> Repaired | None:
    """``text`` with every ``@signal`` opening that lost its quoting readable again; None when all read."""
    out, fixes, pos = [], [], 0
    for match in _SIGNAL_OPEN.finditer(text):
        inner = match.group("inner")
        if _STRICT_ATTRS.fullmatch(inner):
            continue
        attrs = _requoted(inner)
        if attrs is None:
            continue
        opening = f"<!-- @signal{attrs} -->"
        out.append(text[pos : match.start()] + opening)
        pos = match.end()
        fixes.append(Fix(SIGNAL, match.group(0), opening))
    if not fixes:
        return None
    return Repaired("".join(out) + text[pos:], tuple(fixes))


def repair_arc(text: str, own_ids: Iterable[str]) -> Repaired | None:
    """Every per-file repair of an arc (title, edges, repeated merges, signals) in turn; None when none applies."""
    fixes: list[Fix] = []
    for repair in (clean_title, lambda t: dedupe_edges(t, own_ids), drop_repeated_merges, requote_signals):
        done = repair(text)
        if done is not None:
            text = done.text
            fixes.extend(done.fixes)
    return Repaired(text, tuple(fixes)) if fixes else None


def merged_levels(vault_path: str) -> int:
    """How many ``.merged`` a file name carries before ``.md``."""
    name = vault_path.rsplit("/", 1)[-1].removesuffix(".md")
    levels = 0
    while name.endswith(".merged"):
        name, levels = name[: -len(".merged")], levels + 1
    return levels


@dataclass(frozen=True)
class Chain:
    """Files of one folder and one canonical id renamed more than once: ``keep``'s text goes to ``target``, ``drop`` go."""

    target: str
    keep: str
    drop: tuple[str, ...]


def merge_chains(sizes: Mapping[str, int]) -> list[Chain]:
    """The chains among ``sizes`` (vault path -> length of its text), each with the file whose text is kept (module docstring)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for path in sizes:
        if merged_levels(path) >= 1:
            folder = path.rsplit("/", 1)[0] if "/" in path else ""
            groups.setdefault((folder, canonical_id(path)), []).append(path)
    chains = []
    for (folder, cid), members in sorted(groups.items()):
        if max(merged_levels(p) for p in members) < 2:
            continue
        keep = min(members, key=lambda p: (-sizes[p], merged_levels(p), p))
        target = f"{folder}/{cid}{TOMBSTONE_SUFFIX}" if folder else f"{cid}{TOMBSTONE_SUFFIX}"
        chains.append(Chain(target, keep, tuple(sorted(p for p in members if p != target))))
    return chains
