"""The one frontmatter codec of the kernel (pure: text in, text out).

Every vault file with YAML frontmatter (arcs, signals, decisions, feed files,
intents) is read and written through this module. Reading uses a real YAML
parser and tolerates the flat ``key: value`` frontmatter older tools wrote,
including values that are not valid YAML. Writing quotes any value that needs
it, so a title holding a colon, a newline or ``---`` cannot break the file.
``update`` changes only the keys it is given and leaves every other byte of
the file as it was; ``edit`` does the same and also gives the edited file's
``Document`` without parsing it again, when that can be derived exactly.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import yaml

# libyaml's parser when the C extension is there (about 8x faster), the pure one otherwise;
# tests/core/test_frontmatter.py holds their results equal.
_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FENCE = "---"
_KEY_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_\-\.]*)\s*:(.*)$")
# A YAML anchor (``&name``) where a node may start. No file the kernel writes has one, and aliases to
# anchors expand without bound (361 bytes took 3.5 s; a deeper bomb grew past 3 GB),
# so a block with an anchor is never handed to the YAML parser: its lines are read flat, as text.
_ANCHOR = re.compile(r"(?:^|[\s\[\{,:?-])&[^\s\[\]\{\},]")


@dataclass(frozen=True)
class Document:
    """A parsed vault file: frontmatter mapping plus the body after it."""

    meta: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    has_frontmatter: bool = False
    strict: bool = False  # the meta is what the YAML parser read of the whole block (not the flat fallback)


def _split(text: str) -> tuple[str, str, str] | None:
    """Split text into (frontmatter block, closing fence line, body) or None."""
    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return None
    first_nl = text.index("\n") + 1
    pos = first_nl
    while pos <= len(text):
        end = text.find("\n", pos)
        line = text[pos:] if end == -1 else text[pos:end]
        if line.rstrip("\r") == _FENCE:
            close_end = len(text) if end == -1 else end + 1
            return text[first_nl:pos], text[pos:close_end], text[close_end:]
        if end == -1:
            return None
        pos = end + 1
    return None


def _lenient(block: str) -> dict[str, Any]:
    """Parse flat ``key: value`` lines one by one (old files YAML rejects)."""
    meta: dict[str, Any] = {}
    for line in block.splitlines():
        match = _KEY_LINE.match(line)
        if not match:
            continue
        key, raw = match.group(1), match.group(2).strip()
        if _ANCHOR.search(raw):
            meta[key] = raw
            continue
        try:
            value = _plain(yaml.load(raw, Loader=_Loader)) if raw else None
        except (yaml.YAMLError, RecursionError):  # nested deeper than the parsers walk: kept as its text
            value = raw
        if isinstance(value, dict):  # "title: Disk: full" is one flat value, not a nested mapping
            value = raw
        meta[key] = value
    return meta


def parse(text: str) -> Document:
    """Parse a vault file; files without frontmatter give an empty mapping."""
    parts = _split(text)
    if parts is None:
        return Document(meta={}, body=text, has_frontmatter=False)
    block, _, body = parts
    try:
        loaded = yaml.load(block, Loader=_Loader) if block.strip() and not _ANCHOR.search(block) else ({} if not block.strip() else None)
        meta = {str(k): _plain(v) for k, v in loaded.items()} if isinstance(loaded, dict) else None
    except (yaml.YAMLError, RecursionError):  # a value nested deeper than the parsers walk is a bad block, as bad syntax is
        meta = None
    strict = meta is not None
    if meta is None:
        meta = _lenient(block)
    return Document(meta=meta, body=body, has_frontmatter=True, strict=strict)


def _plain(value: Any) -> Any:
    """Turn YAML dates and timestamps into ISO strings so values round-trip as text."""
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # .nan/.inf stay text: no JSON, SQL or heat arithmetic takes them
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


# A string the YAML emitter writes as it is (no quotes) and every YAML reader reads back as that string:
# a letter first (no number, date, ``.inf`` or indicator), no space, colon, ``#`` or quote, and not a
# YAML 1.1 boolean or null word (compared in any case, which only sends more words to the emitter).
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{0,127}")
_WORDS = frozenset({"yes", "no", "true", "false", "on", "off", "null"})


def _plain_text(value: Any) -> str | None:
    """``value`` as YAML writes it, when it is None or a plain string (see ``_PLAIN``); else None."""
    if value is None:
        return "null"
    if type(value) is str and _PLAIN.fullmatch(value) and value.lower() not in _WORDS:
        return value
    return None


def _fast_dump(key: str, value: Any) -> str | None:
    """``dump_value`` without the YAML emitter for the values that need none: None, plain strings and flat lists of them.

    The output is byte for byte the emitter's (tests/core/test_frontmatter.py holds the two equal), at a
    fraction of the cost: the backfill writes five such keys in every arc.
    """
    if _plain_text(key) != key:
        return None
    if isinstance(value, (list, tuple)):
        items = [_plain_text(v) for v in value]
        if any(item is None or item == "null" for item in items):
            return None
        return f"{key}: [{', '.join(items)}]\n"  # type: ignore[arg-type]
    text = _plain_text(value)
    return None if text is None else f"{key}: {text}\n"


def dump_value(key: str, value: Any) -> str:
    """Render one top-level key as YAML text (ends with a newline).

    Lists of scalars use flow style (``projects: [api, web]``) so line-oriented
    readers still see one key per line; everything else is block style.
    """
    fast = _fast_dump(key, value)
    return fast if fast is not None else _yaml_dump(key, value)


def _yaml_dump(key: str, value: Any) -> str:
    """``dump_value`` through the YAML emitter (any value)."""
    options: dict[str, Any] = {"sort_keys": False, "allow_unicode": True, "width": 1_000_000}
    if isinstance(value, (list, tuple)) and all(not isinstance(v, (list, tuple, dict)) for v in value):
        flow = yaml.safe_dump(list(value), default_flow_style=True, **options).rstrip("\n")
        if flow.endswith("\n..."):
            flow = flow[: -len("\n...")]
        return f"{yaml.safe_dump(key, **options).splitlines()[0]}: {flow}\n"
    return yaml.safe_dump({key: value}, default_flow_style=False, **options)


def dump_meta(meta: dict[str, Any]) -> str:
    """Render a frontmatter mapping, keys in the given order."""
    return "".join(dump_value(k, v) for k, v in meta.items())


def render(meta: dict[str, Any], body: str = "") -> str:
    """Render a whole file: fenced frontmatter then body."""
    return f"---\n{dump_meta(meta)}---\n{body}"


def _segments(block: str) -> list[tuple[str | None, str]]:
    """Split a frontmatter block into (top-level key or None, text) segments.

    A key owns its indented continuation lines, and the blank lines between
    them (a multi-line value may hold empty lines); blank lines and comments
    not followed by such a continuation are owned by no key.
    """
    segments: list[tuple[str | None, str]] = []
    blanks = ""  # blank lines not yet known to belong to the value above them
    for line in block.splitlines(keepends=True):
        if line.strip() == "":
            blanks += line
            continue
        match = _KEY_LINE.match(line.rstrip("\r\n"))
        continuation = line[:1].isspace() or line.startswith("-")
        if continuation and segments and segments[-1][0] is not None:
            key, text = segments[-1]
            segments[-1] = (key, text + blanks + line)
        else:
            if blanks:
                segments.append((None, blanks))
            if match and not line[:1].isspace():
                segments.append((match.group(1), line))
            elif continuation and segments:
                key, text = segments[-1]
                segments[-1] = (key, text + line)
            else:  # comments: kept as they are, owned by no key
                segments.append((None, line))
        blanks = ""
    if blanks:
        segments.append((None, blanks))
    return segments


_DELETE = object()


def update(text: str, changes: dict[str, Any], remove: tuple[str, ...] = ()) -> str:
    """Set the given keys (and drop ``remove``) touching no other byte of the file.

    Keys already present are rewritten in place; new keys go at the end of the
    frontmatter. A file without frontmatter gains one. A file with CRLF line
    ends keeps its opening fence, and the keys written get CRLF too.
    """
    return _apply(text, changes, remove)[0]


def _apply(text: str, changes: dict[str, Any], remove: tuple[str, ...]) -> tuple[str, Counter[str] | None]:
    """``update``'s result, and how many times each key stands on a line of its own in the old block (None: no block)."""
    parts = _split(text)
    if parts is None:
        return render(dict(changes), text), None
    block, fence, body = parts
    opening = text[: text.index("\n") + 1]
    newline = "\r\n" if opening.endswith("\r\n") else "\n"

    def dumped(key: str, value: Any) -> str:
        out = dump_value(key, value)
        return out.replace("\n", newline) if newline != "\n" else out

    pending = dict(changes)
    for key in remove:
        pending.setdefault(key, _DELETE)
    out: list[str] = []
    seen: Counter[str] = Counter()
    for key, seg in _segments(block):
        if key is not None:
            seen[key] += 1
        if key is not None and key in pending:
            value = pending.pop(key)
            if value is _DELETE:
                continue
            out.append(dumped(key, value))
        else:
            if out and not out[-1].endswith("\n"):
                out[-1] += newline
            out.append(seg)
    for key, value in pending.items():
        if value is _DELETE:
            continue
        if out and not out[-1].endswith("\n"):
            out[-1] += newline
        out.append(dumped(key, value))
    return opening + "".join(out) + fence + body, seen


def edit(text: str, doc: Document, changes: dict[str, Any], remove: tuple[str, ...] = ()) -> tuple[str, Document]:
    """``update(text, changes, remove)`` and the ``Document`` that ``parse`` gives of the result; ``doc`` is ``parse(text)``.

    The document is derived from ``doc`` (no second parse) when that is exact:
    the YAML parser read the whole block, every value is one ``_fast_dump``
    writes (it reads back as itself), and each key edited stands on one line
    of its own exactly when the parser saw it (a key twice, or a line that
    only looks like a key inside a quoted value, would make the two views
    differ). Otherwise the result is parsed.
    """
    new_text, seen = _apply(text, changes, remove)
    if seen is None or not (doc.has_frontmatter and doc.strict) or any(_fast_dump(k, v) is None for k, v in changes.items()):
        return new_text, parse(new_text)
    for key in (*changes, *remove):
        if seen[key] > 1 or (seen[key] == 1) != (key in doc.meta):
            return new_text, parse(new_text)
    meta = {k: v for k, v in doc.meta.items() if k not in remove or k in changes}
    meta.update((k, list(v) if isinstance(v, tuple) else v) for k, v in changes.items())
    return new_text, Document(meta=meta, body=doc.body, has_frontmatter=True, strict=True)
